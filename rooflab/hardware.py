"""GPU datasheet table, lenient lookup, detection and custom spec files. Standard library only.

Every number carries its source. Peaks are dense (no 2:4 sparsity figures), in FLOP/s; tensor-core
matmul rates with fp32 accumulate where the datasheet distinguishes accumulate precision; fp64 is
the FP64 Tensor Core figure where the part has one, since that is what a fp64 GEMM runs on.
"""
from __future__ import annotations

import difflib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace

from rooflab.cost import dtype_name
from rooflab.errors import RooflabError

T = 1e12
GB = 1e9
MiB = 1 << 20


class HardwareError(RooflabError, ValueError):
    """Unknown GPU name, missing dtype peak or a malformed spec file."""


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops_per_s: dict[str, float]  # dtype -> dense peak FLOP/s
    mem_bandwidth_bytes_per_s: float
    mem_bytes: int | None = None
    l2_bytes: int | None = None
    sm_count: int | None = None
    source: str = ""
    kind: str = "gpu"  # "gpu" | "cpu"
    measured: bool = False  # True when the ceilings were measured on this machine
    aliases: tuple[str, ...] = field(default=(), compare=False)
    # GPU-to-GPU bandwidth of one GPU, both directions together, as datasheets state it
    link_bytes_per_s: float | None = None
    link_source: str = ""

    def peak(self, dtype: str) -> float:
        d = dtype_name(dtype)
        if d not in self.peak_flops_per_s:
            have = ", ".join(self.peak_flops_per_s) or "none"
            raise HardwareError(f"{self.name} has no {d} peak (has: {have})")
        return self.peak_flops_per_s[d]

    def ridge(self, dtype: str) -> float:
        """FLOPs per byte above which a kernel is compute-bound."""
        return self.peak(dtype) / self.mem_bandwidth_bytes_per_s

    def as_dict(self) -> dict:
        return {
            "name": self.name, "kind": self.kind, "measured": self.measured,
            "peak_flops_per_s": dict(self.peak_flops_per_s),
            "mem_bandwidth_bytes_per_s": self.mem_bandwidth_bytes_per_s,
            "mem_bytes": self.mem_bytes, "l2_bytes": self.l2_bytes, "sm_count": self.sm_count,
            "source": self.source, "link_bytes_per_s": self.link_bytes_per_s,
            "link_source": self.link_source,
        }


def _hw(name, peaks_tflops, bw_gbps, mem_gb, l2_mib, sms, source, aliases=()):
    return Hardware(
        name=name, peak_flops_per_s={k: v * T for k, v in peaks_tflops.items()},
        mem_bandwidth_bytes_per_s=bw_gbps * GB, mem_bytes=int(mem_gb * GB) if mem_gb else None,
        l2_bytes=int(l2_mib * MiB) if l2_mib else None, sm_count=sms, source=source,
        aliases=tuple(aliases),
    )


_HOPPER_SXM = {"fp64": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5,
               "fp8": 1979, "int8": 1979}

PRESETS: dict[str, Hardware] = {h.name: h for h in [
    _hw("T4", {"fp32": 8.1, "fp16": 65, "int8": 130}, 320, 16, 4, 40,
        "NVIDIA T4 Tensor Core GPU datasheet (fp16/fp32 mixed 65 TFLOPS, INT8 130 TOPS); "
        "SMs and L2 from the Turing architecture whitepaper", ["Tesla T4"]),
    _hw("L4", {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5, "int8": 242.5},
        300, 24, 48, 58, "NVIDIA L4 datasheet (tensor figures halved from the 'with sparsity' "
        "column); SMs and L2 from the Ada Lovelace architecture whitepaper"),
    _hw("A10G", {"fp32": 35, "tf32": 35, "bf16": 70, "fp16": 70, "int8": 140}, 600, 24, 6, 80,
        "AWS G5 A10G figures as tabulated by Baseten, 'NVIDIA A10 vs A10G for ML model "
        "inference' (NVIDIA publishes no A10G datasheet); 600 GB/s GDDR6"),
    _hw("A100-40GB", {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312,
                      "int8": 624}, 1555, 40, 40, 108,
        "NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB; dense column); SMs and L2 from the "
        "Ampere GA100 whitepaper", ["A100-SXM4-40GB", "A100 40GB", "A100-PCIE-40GB"]),
    _hw("A100-80GB", {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312,
                      "int8": 624}, 2039, 80, 40, 108,
        "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB, 2,039 GB/s; dense column)",
        ["A100-SXM4-80GB", "A100 80GB", "A100"]),
    _hw("RTX A6000", {"fp32": 38.7, "tf32": 77.4, "bf16": 154.8, "fp16": 154.8, "int8": 309.7},
        768, 48, 6, 84, "NVIDIA RTX A6000 datasheet (tensor 309.7 TFLOPS is the sparse figure; "
        "dense = half); SMs and L2 from the Ampere GA102 whitepaper", ["A6000"]),
    _hw("L40S", {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733,
                 "int8": 733}, 864, 48, 96, 142,
        "NVIDIA L40S datasheet (tensor figures halved from the 'with sparsity' column)"),
    _hw("RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3,
                     "int8": 660.6}, 1008, 24, 72, 128,
        "NVIDIA Ada Lovelace GPU architecture whitepaper, appendix table (GeForce RTX 4090; "
        "FP16/BF16/FP8 tensor with FP32 accumulate, dense)", ["GeForce RTX 4090"]),
    _hw("H100-SXM", _HOPPER_SXM, 3350, 80, 50, 132,
        "NVIDIA H100 Tensor Core GPU datasheet (SXM column, sparse figures halved); SMs and L2 "
        "from the Hopper architecture whitepaper", ["H100 80GB HBM3", "H100", "H100-SXM5-80GB"]),
    _hw("H100-PCIe", {"fp64": 51, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513,
                      "int8": 1513}, 2000, 80, 50, 114,
        "NVIDIA H100 Tensor Core GPU datasheet (PCIe column, sparse figures halved)",
        ["H100 PCIe"]),
    _hw("H200", _HOPPER_SXM, 4800, 141, 50, 132,
        "NVIDIA H200 Tensor Core GPU datasheet (SXM column: 141 GB HBM3e, 4.8 TB/s; compute as "
        "H100 SXM, sparse figures halved)", ["H200-SXM", "H200 SXM 141GB"]),
    _hw("B200", {"fp64": 40, "fp32": 80, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500,
                 "int8": 4500}, 7700, 180, None, 148,
        "NVIDIA HGX B200 datasheet, per GPU (8-GPU totals / 8; sparse figures halved); "
        "L2 not published"),
    _hw("MI300X", {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4,
                   "fp8": 2614.9, "int8": 2614.9}, 5300, 192, 32, 304,
        "AMD Instinct MI300X datasheet (matrix figures without sparsity); sm_count = compute "
        "units; L2 = 8 XCDs x 4 MB (CDNA 3 whitepaper)", ["AMD Instinct MI300X"]),
]}


# GPU-to-GPU links (GB/s, both directions together), each from the datasheet named with it.
# A GPU without NVLink talks over PCIe: its datasheet's PCIe figure.
LINKS_GBPS = {
    "T4": (32, "T4 datasheet: PCIe Gen3 x16, 32 GB/s"),
    "L4": (64, "L4 datasheet: PCIe Gen4 x16, 64 GB/s"),
    "A10G": (64, "PCIe Gen4 x16, 64 GB/s (the A10 datasheet's figure)"),
    "A100-40GB": (600, "A100 datasheet: NVLink 600 GB/s (SXM)"),
    "A100-80GB": (600, "A100 datasheet: NVLink 600 GB/s (SXM)"),
    "RTX A6000": (112.5, "RTX A6000 datasheet: NVLink bridge, 112.5 GB/s bidirectional"),
    "L40S": (64, "L40S datasheet: PCIe Gen4 x16, 64 GB/s bidirectional"),
    "RTX 4090": (64, "PCIe Gen4 x16, 64 GB/s (no NVLink on the RTX 4090)"),
    "H100-SXM": (900, "H100 datasheet: NVLink 900 GB/s (SXM)"),
    "H100-PCIe": (600, "H100 datasheet: NVLink bridge 600 GB/s (PCIe)"),
    "H200": (900, "H200 datasheet: NVLink 900 GB/s (SXM)"),
    "B200": (1800, "HGX B200 datasheet: NVLink 1.8 TB/s per GPU"),
    "MI300X": (896, "MI300X datasheet: 7 Infinity Fabric links, 896 GB/s peak aggregate"),
}
PRESETS = {n: replace(h, link_bytes_per_s=LINKS_GBPS[n][0] * GB, link_source=LINKS_GBPS[n][1])
           if n in LINKS_GBPS else h for n, h in PRESETS.items()}


def _tokens(name: str) -> tuple[str, ...]:
    words = re.split(r"[^a-z0-9]+", name.lower())
    return tuple(w for w in words if w and w not in ("nvidia", "amd"))


def _key(name: str) -> str:
    return "".join(_tokens(name))


def _index() -> dict[str, Hardware]:
    index = {}
    for hw in PRESETS.values():
        for n in (hw.name, *hw.aliases):
            index[_key(n)] = hw
    return index


def lookup(name: str) -> Hardware:
    """Preset by name, leniently: case, dashes, spaces and the 'NVIDIA ' prefix don't matter,
    and the names torch.cuda.get_device_name() returns resolve ('NVIDIA A100-SXM4-80GB')."""
    if isinstance(name, Hardware):
        return name
    index = _index()
    key = _key(str(name))
    if key in index:
        return index[key]
    # "NVIDIA H100 80GB HBM3 MIG 1g.10gb" and the like: the longest name whose words begin it
    words = _tokens(str(name))
    prefixes = [n for hw in PRESETS.values() for n in (hw.name, *hw.aliases)
                if words[:len(_tokens(n))] == _tokens(n)]
    if prefixes:
        return index[_key(max(prefixes, key=lambda n: len(_tokens(n))))]
    close = difflib.get_close_matches(key, list(index), n=3, cutoff=0.5)
    names = sorted({index[c].name for c in close})
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    raise HardwareError(f"unknown GPU {name!r}{hint} (see `rooflab specs`)")


def names() -> list[str]:
    return list(PRESETS)


def smi_query(field_name: str) -> str | None:
    """One field of the first GPU from nvidia-smi (name, driver_version...), or None."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, f"--query-gpu={field_name}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def gpu_name_from_smi() -> str | None:
    """The first GPU's name as nvidia-smi reports it, or None where there is none."""
    return smi_query("name")


def _torch_gpu_name() -> str | None:
    """The GPU's name from torch, if the caller already imported it (this module never does)."""
    torch = sys.modules.get("torch")
    try:
        return torch.cuda.get_device_name() if torch and torch.cuda.is_available() else None
    except RuntimeError:
        return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_record() -> Hardware:
    """This machine's CPU, with no datasheet peaks: its roof comes from measured ceilings."""
    return Hardware(name=f"CPU: {cpu_name()} ({os.cpu_count()} threads)", peak_flops_per_s={},
                    mem_bandwidth_bytes_per_s=0.0, kind="cpu",
                    source="no datasheet; measure with `rooflab ceilings --device cpu`")


def cpu_cache_bytes() -> int | None:
    """The largest CPU cache Linux reports for core 0 (e.g. L3), or None."""
    sizes = []
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in (d for d in os.listdir(root) if d.startswith("index")):
            with open(os.path.join(root, d, "size")) as f:
                text = f.read().strip()
            unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * unit)
    except (OSError, ValueError):
        return None
    return max(sizes) if sizes else None


def detect(device_name: str | None = None) -> Hardware:
    """The preset for the GPU present (or named), else a CPU record.

    A GPU that is present but not in the table comes back as a record with no peaks, named as
    the driver names it, so measured ceilings can fill it in.
    """
    name = device_name or gpu_name_from_smi() or _torch_gpu_name()
    if not name:
        return cpu_record()
    try:
        return lookup(name)
    except HardwareError:
        return Hardware(name=name, peak_flops_per_s={}, mem_bandwidth_bytes_per_s=0.0,
                        source="not in rooflab's table; use measured ceilings or --spec")


def with_measured(hw: Hardware, peak_flops_per_s: dict[str, float],
                  mem_bandwidth_bytes_per_s: float, source: str) -> Hardware:
    """The same device with measured ceilings in place of the datasheet's."""
    return replace(hw, name=f"{hw.name} (measured)", peak_flops_per_s=dict(peak_flops_per_s),
                   mem_bandwidth_bytes_per_s=mem_bandwidth_bytes_per_s, measured=True,
                   source=source)


_REQUIRED = ("name", "peak_flops_per_s", "mem_bandwidth_bytes_per_s")


def from_dict(data: dict, origin: str = "spec") -> Hardware:
    """Validate a custom spec: {name, peak_flops_per_s: {dtype: FLOP/s}, mem_bandwidth_bytes_per_s,
    optional mem_bytes, l2_bytes, sm_count, source}."""
    if not isinstance(data, dict):
        raise HardwareError(f"{origin}: expected a table of fields, got {type(data).__name__}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise HardwareError(f"{origin}: missing field(s) {', '.join(missing)}")
    peaks = data["peak_flops_per_s"]
    if not isinstance(peaks, dict) or not peaks:
        raise HardwareError(f"{origin}: peak_flops_per_s must map dtypes to FLOP/s")
    clean = {}
    for dtype, value in peaks.items():
        try:
            d = dtype_name(dtype)
        except ValueError as e:
            raise HardwareError(f"{origin}: {e}") from None
        clean[d] = _positive(value, f"peak_flops_per_s.{dtype}", origin)
    optional = {k: _positive(data[k], k, origin, integer=True)
                for k in ("mem_bytes", "l2_bytes", "sm_count") if data.get(k) is not None}
    if data.get("link_bytes_per_s") is not None:
        optional["link_bytes_per_s"] = _positive(data["link_bytes_per_s"], "link_bytes_per_s",
                                                 origin)
    return Hardware(
        name=str(data["name"]), peak_flops_per_s=clean,
        mem_bandwidth_bytes_per_s=_positive(data["mem_bandwidth_bytes_per_s"],
                                            "mem_bandwidth_bytes_per_s", origin),
        source=str(data.get("source", f"custom spec {origin}")), **optional,
    )


def _positive(value, field_name: str, origin: str, integer: bool = False):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if ok and integer and not float(value).is_integer():
        ok = False
    if not ok:
        kind = "a positive integer" if integer else "a positive number"
        raise HardwareError(f"{origin}: {field_name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


def load_spec(path: str) -> Hardware:
    """A custom Hardware from a .json or .toml file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise HardwareError(f"cannot read spec file {path}: {e.strerror}") from None
    try:
        if str(path).endswith(".toml"):
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(raw.decode())
        else:
            data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise HardwareError(f"spec file {path} is malformed: {str(e).splitlines()[0]}") from None
    return from_dict(data, origin=str(path))


def resolve(name_or_path: str | None) -> Hardware:
    """A preset name, a spec file path, or None for the detected device."""
    if name_or_path is None:
        return detect()
    if str(name_or_path).endswith((".json", ".toml")):
        return load_spec(name_or_path)
    return lookup(name_or_path)
