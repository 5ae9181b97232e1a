"""Peak memory of a call, and out-of-memory as a result rather than a crash.

CUDA: torch.cuda's allocator statistics (max_memory_allocated after reset_peak_memory_stats):
extra peak = peak - allocated before the call (the inputs), absolute peak = peak.
CPU: torch's CPU allocator as seen by the profiler (profile_memory=True): the running sum of every
allocation and free the call made, whose maximum is the extra peak; absolute peak adds the bytes
the process already held according to the kernel's resident-set size (an OS figure, so it also
counts Python and library memory).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass

import torch

from rooflab.measure.timer import MeasureError, _call, _check, device_of


@dataclass
class MemoryResult:
    device: str
    extra_peak_bytes: int | None
    abs_peak_bytes: int | None
    method: str
    oom: bool = False
    error: str = ""

    def as_dict(self) -> dict:
        return {"device": self.device, "extra_peak_bytes": self.extra_peak_bytes,
                "abs_peak_bytes": self.abs_peak_bytes, "method": self.method, "oom": self.oom,
                "error": self.error}


OOM_MESSAGES = ("out of memory", "can't allocate memory", "not enough memory")


def is_oom(e: BaseException) -> bool:
    if isinstance(e, torch.OutOfMemoryError):
        return True
    if isinstance(e, MeasureError) and e.__cause__ is not None:
        return is_oom(e.__cause__)
    return isinstance(e, (RuntimeError, MemoryError)) and (
        isinstance(e, MemoryError) or any(m in str(e).lower() for m in OOM_MESSAGES))


def release(device: str) -> None:
    """Drop what a failed call left behind so the caller can go on."""
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            import os
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _cpu_peak(fn, args, kwargs, name) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _call(fn, args, kwargs, name)
    # allocations are attributed to the op that made them (self), frees are "[memory]" events
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    live = peak = 0
    for e in events:
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


def peak_memory(fn, *args, device: str | None = None, name: str = "", **kwargs) -> MemoryResult:
    """Extra and absolute peak memory of one call. OOM is returned (oom=True), not raised."""
    _check(fn)
    dev = device_of(device)
    try:
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            _call(fn, args, kwargs, name)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            return MemoryResult(dev, peak - before, peak, "torch.cuda.max_memory_allocated")
        rss = _rss_bytes()
        extra = _cpu_peak(fn, args, kwargs, name)
        return MemoryResult(dev, extra, rss + extra if rss is not None else None,
                            "torch profiler CPU allocations (extra) + /proc RSS before (absolute)")
    except Exception as e:  # noqa: BLE001 - only OOM is turned into a result
        if not is_oom(e):
            raise
        release(dev)
        return MemoryResult(dev, None, None, "", oom=True, error=str(e).splitlines()[0][:200])


def free_bytes(device: str) -> int | None:
    """Memory a new allocation can still take: the CUDA driver's free figure (what the caching
    allocator holds but does not use counts as free too), or the kernel's MemAvailable on a CPU;
    None where neither can be read."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
