"""Measured ceilings: the empirical roofline of the device present.

GPU: device-to-device copy bandwidth (bytes read + bytes written) and matmul FLOP/s per dtype on
random data at sizes that fill the chip. CPU: a STREAM-like copy and an fp32 (and fp64) matmul,
so the lab has a roof without a GPU. Results are cached per device, driver and versions, dated.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import asdict, dataclass, field

import torch

from rooflab import hardware as H
from rooflab.measure.dtypes import TORCH_DTYPES
from rooflab.measure.timer import device_of, time



@dataclass
class Ceilings:
    device: str  # "cuda" | "cpu"
    device_name: str
    mem_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float]
    details: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    date: str = ""
    cached: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    def hardware(self, base: H.Hardware | None = None) -> H.Hardware:
        """The device as a Hardware record whose roof is these measurements."""
        base = base or H.Hardware(self.device_name, {}, 0.0, kind="cpu" if self.device == "cpu" else "gpu")
        return H.with_measured(base, self.peak_flops_per_s, self.mem_bandwidth_bytes_per_s,
                               f"measured by rooflab on {self.date}")


def versions(device: str) -> dict:
    v = {"torch": torch.__version__, "python": platform.python_version()}
    if device == "cuda":
        v["cuda"] = torch.version.cuda
        v["driver"] = H.smi_query("driver_version")
    return v


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else H.cpu_record().name


def copy_bandwidth(device: str, nbytes: int, budget_s: float = 0.3) -> dict:
    """dst.copy_(src) over nbytes: bandwidth counts the read and the write (2 * nbytes)."""
    n = nbytes // 4
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    t = time(dst.copy_, src, warmup=3, budget_s=budget_s, device=device, name="copy")
    return {"bytes_moved": 2 * n * 4, "timing": t.as_dict(),
            "bandwidth_bytes_per_s": 2 * n * 4 / t.median_s}


def matmul_rate(device: str, dtype: str, n: int, budget_s: float = 0.3) -> dict:
    """FLOP/s of an n x n x n matmul on random data (2 n^3 FLOPs)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        if dtype == "fp8":
            a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=device)
            fn = lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            a = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
            b = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
            fn = lambda: a @ b  # noqa: E731
        t = time(fn, warmup=3, budget_s=budget_s, device=device, name=f"matmul {dtype}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    # the ceiling is the median (sustained) rate; the fastest run shows the burst clock's rate
    return {"n": n, "timing": t.as_dict(), "flops_per_s": 2 * n**3 / t.median_s,
            "best_run_flops_per_s": 2 * n**3 / t.min_s}


def gpu_dtypes() -> list[str]:
    major, minor = torch.cuda.get_device_capability()
    dts = ["fp32"]
    if major >= 8:
        dts += ["tf32", "bf16"]
    dts.append("fp16")
    if (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        dts.append("fp8")
    return dts


def measure(device: str | None = None, quick: bool = False) -> Ceilings:
    dev = device_of(device)
    details: dict = {}
    if dev == "cuda":
        bw = copy_bandwidth(dev, (256 << 20) if quick else (2 << 30))
        peaks = {}
        for dt in gpu_dtypes():
            # the ceiling is the best sustained rate over sizes that fill the chip (clocks and
            # tile fit differ by size); every size's figure is kept
            sizes = (4096,) if quick else (4096, 8192) if dt in ("fp32", "tf32") else \
                (4096, 8192, 16384)
            try:
                runs = [matmul_rate(dev, dt, n) for n in sizes]
            except (RuntimeError, TypeError) as e:  # e.g. fp8 unsupported by this build
                details[f"matmul_{dt}"] = {"error": str(e).splitlines()[0][:200]}
                continue
            best = max(runs, key=lambda r: r["flops_per_s"])
            details[f"matmul_{dt}"] = {**best, "by_size": runs}
            peaks[dt] = best["flops_per_s"]
    else:
        bw = copy_bandwidth(dev, (64 << 20) if quick else (256 << 20))
        peaks = {}
        for dt, n in (("fp32", 512 if quick else 1024), ("fp64", 384 if quick else 768)):
            r = matmul_rate(dev, dt, n, budget_s=0.2 if quick else 0.5)
            details[f"matmul_{dt}"] = r
            peaks[dt] = r["flops_per_s"]
    details["copy"] = bw
    return Ceilings(dev, device_name(dev), bw["bandwidth_bytes_per_s"], peaks, details,
                    versions(dev), _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


def cache_path(device: str, quick: bool = False) -> str:
    root = os.environ.get("ROOFLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rooflab")
    v = versions(device)
    key = "-".join(str(x) for x in (device_name(device), v.get("driver"), v["torch"], v.get("cuda")))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in key)
    return os.path.join(root, f"ceilings-{safe}{'-quick' if quick else ''}.json")


def get(device: str | None = None, refresh: bool = False, quick: bool = False) -> Ceilings:
    """Cached ceilings for this device, driver and versions; measured when absent or refreshed."""
    dev = device_of(device)
    path = cache_path(dev, quick)  # quick (small-size) figures never stand in for full ones
    if not refresh and os.path.exists(path):
        try:
            with open(path) as f:
                return Ceilings(**{**json.load(f), "cached": True})
        except (ValueError, TypeError):
            pass  # a damaged cache is re-measured
    c = measure(dev, quick=quick)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(c.as_dict(), f, indent=2)
    os.replace(tmp, path)
    return c
