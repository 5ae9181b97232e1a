"""Measured ceilings: the empirical roofline of the device present.

GPU: device-to-device copy bandwidth (bytes read + bytes written) and matmul FLOP/s per dtype on
random data at sizes that fill the chip. CPU: a STREAM-like copy and an fp32 (and fp64) matmul,
so the lab has a roof without a GPU.

A roof is the best *sustained* rate: each figure is the median of a timed run (sustained, not one
lucky call), taken over several sizes and rounds, and the best stable run wins (load from other
processes only ever slows a run down). A run whose CV is above the timer's threshold is unstable;
when every run of a figure is unstable the figure is kept for this run, marked unstable, and not
cached, so the next run measures again. Results are cached per device, driver and versions,
dated, with each figure's CV and size.

A cache is believed only after a check: a short probe of each figure (the same copy and matmuls
at their smallest size) must not beat it by more than PROBE_TOLERANCE, it must be under
STALE_DAYS old, and on a CPU fp64 must not be above fp32. A cache that fails is measured again
(a roof taken under load is low, and load only ever slows a run), and dropped when the new
measurement cannot be cached.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from rooflab import hardware as H
from rooflab.measure.dtypes import TORCH_DTYPES
from rooflab.measure.timer import device_of, time_call
from rooflab.units import si

FORMAT = 2  # caches of an older format (no stability record) are measured again
PROBE_TOLERANCE = 0.10  # a probe this far above a cached figure shows the cache was taken slow
STALE_DAYS = 30
Note = Callable[[str], None]  # told each step of a measurement, for progress lines


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
    stability: dict = field(default_factory=dict)  # figure -> {"cv", "stable", "size"}
    format: int = FORMAT

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def stable(self) -> bool:
        return all(s["stable"] for s in self.stability.values())

    @property
    def cache_bytes(self) -> int | None:
        """The last on-chip cache of the device measured (L2 of a GPU, L3 of a CPU)."""
        return (H.detect(self.device_name).l2_bytes if self.device == "cuda"
                else H.cpu_cache_bytes())

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
    t = time_call(dst.copy_, src, warmup=3, budget_s=budget_s, device=device, name="copy", wall=False)
    return {"size": f"{nbytes >> 20} MiB", "bytes_moved": 2 * n * 4, "timing": t.as_dict(),
            "value": 2 * n * 4 / t.device_s, "cv": t.cv, "stable": not t.unstable}


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
        t = time_call(fn, warmup=3, budget_s=budget_s, device=device, name=f"matmul {dtype}",
                      wall=False)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    # the figure is the median (sustained) rate; the fastest run shows the burst clock's rate
    return {"size": f"n={n}", "n": n, "timing": t.as_dict(), "value": 2 * n**3 / t.device_s,
            "best_run_flops_per_s": 2 * n**3 / t.min_s, "cv": t.cv, "stable": not t.unstable}


def best_stable(runs: list[dict]) -> dict:
    """The fastest stable run, or the fastest of all (marked unstable) when none is stable."""
    stable = [r for r in runs if r["stable"]]
    best = max(stable or runs, key=lambda r: r["value"])
    return {**best, "stable": bool(stable), "runs": [
        {k: r[k] for k in ("size", "value", "cv", "stable")} for r in runs]}


def gpu_dtypes() -> list[str]:
    major, minor = torch.cuda.get_device_capability()
    dts = ["fp32"]
    if major >= 8:
        dts += ["tf32", "bf16"]
    dts.append("fp16")
    if (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        dts.append("fp8")
    return dts


def plan(device: str, quick: bool) -> tuple[list[int], dict[str, list[int]], int]:
    """Copy sizes (bytes), matmul sizes per dtype, rounds: sizes that fill the device."""
    if device == "cuda":
        mm = {dt: [4096] if quick else [4096, 8192] if dt in ("fp32", "tf32") else
              [4096, 8192, 16384] for dt in gpu_dtypes()}
        return ([256 << 20] if quick else [256 << 20, 1 << 30, 2 << 30]), mm, 1 if quick else 2
    mm = {"fp32": [512] if quick else [512, 1024], "fp64": [384] if quick else [384, 768]}
    return ([64 << 20] if quick else [64 << 20, 256 << 20]), mm, 2 if quick else 3


def measure_ceilings(device: str | None = None, quick: bool = False, note: Note | None = None) -> Ceilings:
    dev = device_of(device)
    note = note or (lambda msg: None)
    copy_sizes, mm_sizes, rounds = plan(dev, quick)
    budget = 0.3 if dev == "cuda" else (0.15 if quick else 0.3)
    details: dict = {}
    note(f"copy bandwidth ({', '.join(f'{b >> 20} MiB' for b in copy_sizes)}, {rounds} rounds)")
    bw = best_stable([copy_bandwidth(dev, nb, budget) for _ in range(rounds) for nb in copy_sizes])
    details["copy"] = bw
    peaks = {}
    for dt, sizes in mm_sizes.items():
        note(f"matmul {dt} (n = {', '.join(map(str, sizes))}, {rounds} rounds)")
        try:
            runs = [matmul_rate(dev, dt, n, budget) for _ in range(rounds) for n in sizes]
        except (RuntimeError, TypeError) as e:  # e.g. fp8 unsupported by this build
            details[f"matmul_{dt}"] = {"error": str(e).splitlines()[0][:200]}
            continue
        details[f"matmul_{dt}"] = best_stable(runs)
        peaks[dt] = details[f"matmul_{dt}"]["value"]
    return Ceilings(dev, device_name(dev), bw["value"], peaks, details, versions(dev),
                    _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    stability=stability(details))


def probe(c: Ceilings, quick: bool = False, budget_s: float = 0.05) -> dict[str, float]:
    """Each cached figure run again briefly, at the smallest size of its kind."""
    copy_sizes, mm_sizes, _ = plan(c.device, quick)
    out = {"copy": copy_bandwidth(c.device, copy_sizes[0], budget_s)["value"]}
    for dt in c.peak_flops_per_s:
        if dt in mm_sizes:
            out[dt] = matmul_rate(c.device, dt, mm_sizes[dt][0], budget_s)["value"]
    return out


def doubt(c: Ceilings, probed: dict[str, float], now: _dt.datetime | None = None) -> str | None:
    """Why a cached measurement cannot be believed, or None: too old, fp64 above fp32 on a CPU,
    or a figure a short probe beats."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    try:
        age = (now - _dt.datetime.fromisoformat(c.date)).days
    except (TypeError, ValueError):
        return "the cache has no readable date"
    if age > STALE_DAYS:
        return f"the cache is {age} days old (more than {STALE_DAYS})"
    p = c.peak_flops_per_s
    if c.device == "cpu" and p.get("fp64", 0) > p.get("fp32", float("inf")):
        return (f"the cached fp64 peak ({si(p['fp64'], 'FLOP/s')}) is above fp32's "
                f"({si(p['fp32'], 'FLOP/s')}): measured under load")
    cached = {"copy": c.mem_bandwidth_bytes_per_s, **p}
    for k, v in probed.items():
        if k in cached and v > cached[k] * (1 + PROBE_TOLERANCE):
            unit = "B/s" if k == "copy" else "FLOP/s"
            return (f"a short probe of {k} reached {si(v, unit)}, {v / cached[k]:.2f}x the "
                    f"cached {si(cached[k], unit)}: the cache was measured under load")
    return None


def stability(details: dict) -> dict:
    """Each figure's CV, stability and size, by the name `rooflab ceilings` shows."""
    return {("copy" if k == "copy" else k.removeprefix("matmul_")):
            {"cv": v["cv"], "stable": v["stable"], "size": v["size"]}
            for k, v in details.items() if "value" in v}


def cache_path(device: str, quick: bool = False) -> str:
    root = os.environ.get("ROOFLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rooflab")
    v = versions(device)
    key = "-".join(str(x) for x in (device_name(device), v.get("driver"), v["torch"], v.get("cuda")))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in key)
    return os.path.join(root, f"ceilings-{safe}{'-quick' if quick else ''}.json")


def _load(path: str) -> Ceilings | None:
    try:
        with open(path) as f:
            c = Ceilings(**{**json.load(f), "cached": True})
    except (OSError, ValueError, TypeError):
        return None  # absent, damaged or of an old layout: measured again
    c.details.pop("remeasured", None)  # an older cache may hold a run's reason: not a figure
    return c if c.format == FORMAT and c.stable else None


def get(device: str | None = None, refresh: bool = False, quick: bool = False,
        attempts: int = 2, note: Note | None = None) -> Ceilings:
    """Cached ceilings for this device, driver and versions once a probe confirms them; measured
    when absent, refreshed, of an older format or doubted (``doubt``: the reason is kept in
    details["remeasured"]). An unstable measurement is taken again (up to ``attempts`` times,
    keeping the best of each figure) and never cached."""
    dev = device_of(device)
    note = note or (lambda msg: None)
    path = cache_path(dev, quick)  # quick (small-size) figures never stand in for full ones
    cached = None if refresh else _load(path)
    why = None
    if cached is not None:
        note(f"checking the cached ceilings of {cached.date} with a short probe")
        why = doubt(cached, probe(cached, quick))
        if why is None:
            return cached
        note(f"measuring again: {why}")
    c = measure_ceilings(dev, quick=quick, note=note)
    for _ in range(attempts - 1):
        if c.stable:
            break
        note("some figures were unstable: measuring them again")
        c = merge(c, measure_ceilings(dev, quick=quick, note=note))
    if c.stable:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(c.as_dict(), f, indent=2)
        os.replace(tmp, path)
    elif cached is not None or (refresh and (old := _load(path)) is not None and
                                doubt(old, {"copy": c.mem_bandwidth_bytes_per_s,
                                            **c.peak_flops_per_s})):
        os.remove(path)  # shown wrong, and nothing better to keep: the next run measures
    if why:  # this run's reason, not the figures': kept out of the cache a later run confirms
        c.details["remeasured"] = why
    return c


def forget(device: str, quick: bool = False) -> bool:
    """Drop the cached ceilings (a run's own points beat them): the next run measures again."""
    path = cache_path(device_of(device), quick)
    if os.path.exists(path):
        os.remove(path)
        return True
    return False


def merge(a: Ceilings, b: Ceilings) -> Ceilings:
    """Figure by figure, the better of two measurements (stable first, then faster)."""
    details = {}
    for k in a.details.keys() | b.details.keys():
        da, db = a.details.get(k, {}), b.details.get(k, {})
        cands = [d for d in (da, db) if "value" in d]
        details[k] = max(cands, key=lambda d: (d["stable"], d["value"])) if cands else (da or db)
    peaks = {k.removeprefix("matmul_"): v["value"] for k, v in details.items()
             if k.startswith("matmul_") and "value" in v}
    return Ceilings(a.device, a.device_name, details["copy"]["value"], peaks, details, a.versions,
                    b.date, stability=stability(details))
