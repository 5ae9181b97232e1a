"""The roofline model: ridge, attainable FLOP/s, bound, time floor, crossover. Standard library only.

A roof is (peak FLOP/s, bandwidth bytes/s). For a kernel of intensity I = FLOPs / bytes:
attainable = min(peak, bandwidth * I); it is memory-bound left of the ridge (I < peak / bandwidth)
and compute-bound at or right of it; its time floor is max(FLOPs / peak, bytes / bandwidth).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from rooflab import cost as C
from rooflab.hardware import Hardware


@dataclass(frozen=True)
class Roof:
    """One roof: a dtype's peak on one device, with its memory bandwidth."""

    label: str
    peak_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    dtype: str = ""
    measured: bool = False
    device: str = ""  # the hardware's own name, without the dtype the label adds

    @classmethod
    def of(cls, hw: Hardware, dtype: str) -> "Roof":
        d = C.dtype_name(dtype)
        return cls(f"{hw.name} {d}", hw.peak(d), hw.mem_bandwidth_bytes_per_s, d, hw.measured,
                   hw.name)

    @classmethod
    def from_ceilings(cls, ceilings, dtype: str) -> "Roof":
        """This device's measured roof for ``dtype`` (``ceilings``: a measure.ceilings.Ceilings,
        or anything with its device, device_name, peak_flops_per_s and hardware()), named as
        the device measured: its matmul peak measured in that dtype, else measured_dtype's."""
        base = None
        if ceilings.device == "cuda":  # a GPU of the table keeps the table's name
            from rooflab.hardware import detect
            base = detect(ceilings.device_name)
        hw = ceilings.hardware(base)
        return cls.of(hw, measured_dtype(hw.peak_flops_per_s, dtype))

    @property
    def ridge(self) -> float:
        return ridge(self.peak_flops_per_s, self.mem_bandwidth_bytes_per_s)


def measured_dtype(peaks: dict, dtype: str) -> str:
    """The dtype whose measured peak stands for ``dtype``'s: itself where it was measured, else
    bf16 where that was, else fp32 (a CPU measures no fp8 matmul; a GPU's ceilings no fp64).
    The one fallback of every measured roof."""
    d = C.dtype_name(dtype)
    return d if d in peaks else "bf16" if "bf16" in peaks else "fp32"


def intensity(flops: int, nbytes: int) -> float:
    """Arithmetic intensity, FLOPs per byte."""
    return flops / nbytes if nbytes else math.inf


def ridge(peak_flops_per_s: float, mem_bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) where the memory slope meets the compute roof."""
    return peak_flops_per_s / mem_bandwidth_bytes_per_s


def attainable(roof: Roof, intensity_flops_per_byte: float) -> float:
    """min(peak, bandwidth * intensity), FLOP/s."""
    return min(roof.peak_flops_per_s, roof.mem_bandwidth_bytes_per_s * intensity_flops_per_byte)


def bound(roof: Roof, intensity_flops_per_byte: float) -> str:
    return "compute" if intensity_flops_per_byte >= roof.ridge else "memory"


def time_floor_s(roof: Roof, flops: int, nbytes: int) -> float:
    """max(FLOPs / peak, bytes / bandwidth): no kernel can be faster."""
    return max(flops / roof.peak_flops_per_s, nbytes / roof.mem_bandwidth_bytes_per_s)


@dataclass(frozen=True)
class Point:
    """A cost placed under a roof: predicted figures (and measured ones, if given)."""

    name: str
    flops: int
    bytes: int
    intensity: float
    attainable_flops_per_s: float
    bound: str
    time_floor_s: float
    measured_time_s: float | None = None

    @property
    def achieved_flops_per_s(self) -> float | None:
        return self.flops / self.measured_time_s if self.measured_time_s else None

    def as_dict(self) -> dict:
        return {"name": self.name, "flops": self.flops, "bytes": self.bytes,
                "intensity": self.intensity, "attainable_flops_per_s": self.attainable_flops_per_s,
                "bound": self.bound, "time_floor_s": self.time_floor_s,
                "measured_time_s": self.measured_time_s,
                "achieved_flops_per_s": self.achieved_flops_per_s}


def place(roof: Roof, c: C.Cost, fused: bool = False, measured_time_s: float | None = None) -> Point:
    nbytes = c.bytes_fused if fused else c.bytes
    i = intensity(c.flops, nbytes)
    return Point(c.name, c.flops, nbytes, i, attainable(roof, i), bound(roof, i),
                 time_floor_s(roof, c.flops, nbytes), measured_time_s)


FAMILIES: dict[str, Callable[[int, str], C.Cost]] = {
    "gemm": lambda n, dtype: C.gemm(n, n, n, dtype),
    "gemv": lambda n, dtype: C.gemv(n, n, dtype),
}


def crossover(roof: Roof, family: Callable[[int], C.Cost], n_max: int = 1 << 40) -> int | None:
    """Smallest integer n >= 1 whose cost is compute-bound on ``roof``, or None below n_max.

    Assumes intensity grows with n (true for GEMM, GEMV and attention). Exponential search for a
    compute-bound n, then bisection.
    """
    def ok(n: int) -> bool:
        c = family(n)
        return intensity(c.flops, c.bytes) >= roof.ridge

    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > n_max:
            return None
    lo = hi // 2  # not compute-bound (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Sweep:
    family: str
    roof: Roof
    crossover_n: int | None
    points: list[Point]

    def as_dict(self) -> dict:
        rows = [{"n": int(p.name.split("=")[1]), **p.as_dict()} for p in self.points]
        return {"family": self.family, "gpu": self.roof.device or self.roof.label,
                "dtype": self.roof.dtype,
                "peak_flops_per_s": self.roof.peak_flops_per_s,
                "mem_bandwidth_bytes_per_s": self.roof.mem_bandwidth_bytes_per_s,
                "ridge": self.roof.ridge, "crossover_n": self.crossover_n, "rows": rows}


def sweep(family: str, roof: Roof, sizes) -> Sweep:
    """GEMM (M=N=K=n) or GEMV (M=K=n) at each size, placed under ``roof``."""
    fn = FAMILIES[family]
    points = [place(roof, fn(n, roof.dtype).named(f"n={n}")) for n in sizes]
    return Sweep(family, roof, crossover(roof, lambda n: fn(n, roof.dtype)), points)


ABOVE_ROOF_TOLERANCE = 0.03  # a measured point this far above its roof is not noise


def hold(roof: Roof, points: list[tuple[str, float, float, int]], cache_bytes: int | None = None,
         tolerance: float = ABOVE_ROOF_TOLERANCE) -> tuple[Roof, list[str], dict[str, str]]:
    """The roof that this run's measured points ``(name, intensity, FLOP/s, bytes)`` respect.

    A point more than ``tolerance`` above a measured roof raises it (the ceiling run was slower
    than this one: clocks, load), unless it is memory-bound with a working set that fits in the
    on-chip cache of ``cache_bytes``: it did not read the memory the copy test measured, so it
    stays above the roof with that reason. A point above by no more than ``tolerance`` leaves the
    roof where it is, with that reason. Returns the roof, one note per raise, and the reason for
    each point left above (every one: no figure over 100% of its roof goes unexplained)."""
    peak, bw, notes, why = roof.peak_flops_per_s, roof.mem_bandwidth_bytes_per_s, [], {}
    for name, i, fps, nbytes in sorted(points, key=lambda p: -p[2]):
        for _ in range(2):  # a raised peak moves the ridge right: the point may now beat the slope
            roof_at = min(peak, bw * i)
            if fps <= roof_at:
                break
            cached = cache_bytes and nbytes <= cache_bytes and i < peak / bw
            if fps <= roof_at * (1 + tolerance) and not cached:  # above, but by no more than noise
                why[name] = (f"it is {fps / roof_at - 1:.1%} over, no more than two runs of the "
                             f"same measurement differ by ({tolerance:.0%}), so the roof stands")
                break
            if i >= peak / bw:
                notes.append(f"{name} reached {fps / 1e12:.3g} TFLOP/s, {fps / peak - 1:.0%} "
                             f"above the measured peak of {peak / 1e12:.3g}: the ceiling run was "
                             "slower (clocks or load), so this run's roof is raised to it")
                peak = fps
            elif cached:
                why[name] = (f"its {nbytes / 2**20:.3g} MiB fit in the on-chip cache "
                             f"({cache_bytes / 2**20:.3g} MiB), faster than the memory the copy "
                             "test measured")
                break
            else:
                notes.append(f"{name} moved {fps / i / 1e9:.3g} GB/s, {fps / i / bw - 1:.0%} above "
                             f"the measured copy bandwidth of {bw / 1e9:.3g}: the ceiling run was "
                             "slower, so this run's roof is raised to it")
                bw = fps / i
    return Roof(roof.label, peak, bw, roof.dtype, roof.measured), notes, why
