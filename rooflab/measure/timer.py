"""The one timer: every latency in rooflab goes through ``time`` (or ``cold_series``; a GPU
call's launch alone, ``launch_s``).

Two figures per call, named so everywhere:

- ``device_s``: the device's own time for the call. On CUDA, a pair of events around each call
  only measures the GPU when the call's work is already queued when the start event runs;
  otherwise the GPU sits idle at the start event while Python launches the call, and the launch
  latency is counted (a 7 us kernel reads 16 us). So each timed call is preceded by a GPU spin
  (``torch.cuda._sleep``) longer than the host needs to issue the call: while the GPU spins, the
  host queues start event, call and end event, and the events then bracket back-to-back GPU work
  only. This keeps per-call samples (quantiles, CV) and works for any callable, unlike CUDA-graph
  capture (not every call can be captured) or one pair of events around a batch (no spread).
  A call that synchronizes inside waits out the spin and counts its host time again.
  A pair of events still carries the front end's own cost (on an H200: 4.9 us for a kernel that
  CUPTI times at 2.0 us, 8.4 us for one of 5.5 us), which only fades above ~100 us. So a call
  whose event time is under ``CUPTI_BELOW_S`` is timed again by CUPTI through the profiler: each
  call runs in its own profiler range, and its sample is the time the device was busy with
  kernels inside that range, the GPU's own time with no launch or event cost.
- ``wall_s``: what a caller waits for one call on an idle device: the host clock from issuing
  the call to the end of its work (launch, Python, synchronize included). The lab uses it where
  the lesson is overhead and device time where it compares kernels.

On the CPU the device is the host: both are the host clock around the call. Warm-up runs first
unless asked otherwise; an optional L2 flush (reading a buffer larger than L2) before every call
makes a run "cold" instead of "warm".
"""
from __future__ import annotations

import bisect
import math
import statistics
import time as _time
from dataclasses import dataclass, field

import torch

from rooflab.errors import RooflabError
from rooflab.units import CV_UNSTABLE
FLUSH_BYTES = 256 << 20  # larger than any L2 in the table
CUPTI_BELOW_S = 100e-6  # event pairs are a few us off below this: CUPTI times such calls


class MeasureError(RooflabError, RuntimeError):
    """A measured callable failed; the message names it and the original error."""


@dataclass
class Timing:
    samples_s: list[float]  # device time of each timed call
    device: str
    label: str  # "warm" | "cold" (L2 flushed before each call) | "graph" (CUDA-graph replay)
    warmup: int
    cv_threshold: float = CV_UNSTABLE
    name: str = ""
    extra: dict = field(default_factory=dict)
    wall_samples_s: list[float] = field(default_factory=list)  # wall time of each call

    @property
    def device_s(self) -> float:
        """Median device time per call (the GPU's own time; on a CPU, the host's)."""
        return statistics.median(self.samples_s)

    @property
    def wall_s(self) -> float | None:
        """Median wall time per call on an idle device; None if it was not measured."""
        return statistics.median(self.wall_samples_s) if self.wall_samples_s else None

    median_s = device_s  # the figure every comparison of kernels uses

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    def quantile_s(self, q: float) -> float:
        s = sorted(self.samples_s)
        pos = q * (len(s) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    @property
    def p20_s(self) -> float:
        return self.quantile_s(0.2)

    @property
    def p80_s(self) -> float:
        return self.quantile_s(0.8)

    @property
    def cv(self) -> float:
        """Robust coefficient of variation of the device samples: 1.4826 * MAD / median (the
        standard deviation over the mean for normal samples, but a few stray samples, a context
        switch or a clock step, do not make a tight distribution look unstable; the median, the
        reported figure, is just as robust). ``cv_stdev`` is the plain one."""
        if len(self.samples_s) < 2 or self.median_s == 0:
            return 0.0
        mad = statistics.median(abs(x - self.median_s) for x in self.samples_s)
        return 1.4826 * mad / self.median_s

    @property
    def cv_stdev(self) -> float:
        if len(self.samples_s) < 2 or self.mean_s == 0:
            return 0.0
        return statistics.stdev(self.samples_s) / self.mean_s

    @property
    def unstable(self) -> bool:
        return self.cv > self.cv_threshold

    def as_dict(self) -> dict:
        return {
            "name": self.name, "device": self.device, "label": self.label, "warmup": self.warmup,
            "reps": len(self.samples_s), "device_s": self.device_s, "wall_s": self.wall_s,
            "median_s": self.median_s, "mean_s": self.mean_s, "min_s": self.min_s,
            "p20_s": self.p20_s, "p80_s": self.p80_s, "cv": self.cv, "cv_stdev": self.cv_stdev,
            "unstable": self.unstable,
            **self.extra,
        }


def device_of(device: str | torch.device | None = None) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    d = str(device).split(":")[0]
    if d == "cuda" and not torch.cuda.is_available():
        raise MeasureError("CUDA was asked for but is not available here")
    return d


def _check(fn) -> None:
    if not callable(fn):
        raise MeasureError(f"expected a callable to time, got {type(fn).__name__}")


def _call(fn, args, kwargs, name):
    try:
        return fn(*args, **kwargs)
    except torch.OutOfMemoryError:
        raise
    except Exception as e:
        raise MeasureError(f"{name or getattr(fn, '__name__', 'callable')} raised "
                           f"{type(e).__name__}: {e}") from e


_SLEEP_CYCLES_PER_S: float | None = None


def _cycles_per_s() -> float:
    """The GPU clock torch.cuda._sleep spins on, measured once per process."""
    global _SLEEP_CYCLES_PER_S
    if _SLEEP_CYCLES_PER_S is None:
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # warm the spin kernel up
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        _SLEEP_CYCLES_PER_S = cycles / (a.elapsed_time(b) / 1e3)
    return _SLEEP_CYCLES_PER_S


def _busy_queue(issue_s: float):
    """A GPU spin that outlasts the host's issue time of one call (x2 + 20 us, at most 50 ms),
    so the call is queued whole before its start event runs."""
    cycles = int(min(2 * issue_s + 20e-6, 0.05) * _cycles_per_s())
    return lambda: torch.cuda._sleep(cycles)


def _event_samples(call, args, kwargs, name, reps, flush, issue_s: float) -> list[float]:
    """Device time of each call on CUDA: events behind a busy queue (see the module docstring)."""
    spin = _busy_queue(issue_s)
    pairs = []
    for _ in range(reps):
        flush()
        spin()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        _call(call, args, kwargs, name)
        b.record()
        pairs.append((a, b))
    torch.cuda.synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in pairs]


def _cupti_samples(call, args, kwargs, name, reps, flush) -> list[float] | None:
    """Per call, the device's busy time CUPTI recorded inside the call's range; None where the
    profiler cannot run here (another one is active) or saw no range for a call."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    tag = "rooflab.timed_call."
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(reps):
                flush()  # outside the call's range: not counted
                with record_function(f"{tag}{i}"):
                    _call(call, args, kwargs, name)
            torch.cuda.synchronize()
        events = prof.events()
    except RuntimeError:
        return None

    # Per call, the device's busy time inside the call's range on the device: the union of the
    # kernels (and copies) that ran there, so overlaps and idle gaps are not counted. The range
    # itself is on the device timeline too (record_function mirrors it as a GPU annotation).
    # Kernels are found by time, not through the CPU event that launched them: kernels launched
    # by cuLaunchKernelEx (Triton's) are not attached to it, and reading those as missing made
    # the timer fall back to event pairs (a 2.1 us Triton kernel read 4.9 us).
    device = [e for e in events if e.device_type != DeviceType.CPU]
    ranges = {e.name: e.time_range for e in device if e.name.startswith(tag)}
    work = sorted((e.time_range.start, e.time_range.end) for e in device
                  if not e.name.startswith(tag) and not getattr(e, "is_user_annotation", False))
    samples = []
    for i in range(reps):
        r = ranges.get(f"{tag}{i}")
        if r is None:
            return None
        samples.append((busy_us(work, r.start, r.end) or r.end - r.start) / 1e6)
    return samples if all(samples) else None


def busy_us(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of the sorted (start, end) spans, cut to [start, end]."""
    busy, until = 0.0, start
    first = max(bisect.bisect_left(spans, (start,)) - 1, 0)  # one may begin just before
    for s, e in spans[first:bisect.bisect_right(spans, (end,))]:
        s, e = max(s, until), min(e, end)
        if e > s:
            busy, until = busy + e - s, e
    return busy


def _wall_samples(call, args, kwargs, name, reps, flush, device) -> list[float]:
    """Host time from issuing one call on an idle device to the end of its work."""
    out = []
    for _ in range(reps):
        flush()
        _sync(device)
        t0 = _time.perf_counter_ns()
        _call(call, args, kwargs, name)
        _sync(device)
        out.append((_time.perf_counter_ns() - t0) / 1e9)
    return out


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def l2_flusher(device: str, flush_l2: bool):
    """Evict L2 by reading a buffer larger than it. Reading, not writing: a write (zeroing the
    buffer) leaves L2 full of dirty lines, and the timed call then pays for writing them back
    to HBM. On the H200 that added 8 us to a 134 MB read (44.5 us against 36.4 us; 50 MB of
    write-back at 4.25 TB/s is 12 us), the same for every kernel timed cold."""
    if not flush_l2:
        return lambda: None
    # float32: a CPU sums 256 MB of int32 18x slower than of float32 (0.55 s against 0.03 s)
    buf = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    return lambda: buf.sum()


def capture_graph(fn, args=(), kwargs=None, warmup: int = 2):
    """Capture fn in a CUDA graph (after warm-up on a side stream); returns its replay."""
    kwargs = kwargs or {}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(max(warmup, 1)):
            fn(*args, **kwargs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*args, **kwargs)
    return g.replay


def time_call(fn, *args, warmup: int = 3, reps: int | None = None, budget_s: float = 0.2,
              flush_l2: bool = False, cuda_graph: bool = False, device: str | None = None,
              max_reps: int = 1000, cv_threshold: float = CV_UNSTABLE, name: str = "",
              wall: bool = True, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``reps`` timed calls, or as many
    as fit in ``budget_s`` (at least 5, at most ``max_reps``) when reps is None. On CUDA, ``wall``
    also measures wall time per call on an idle GPU (as many calls again)."""
    _check(fn)
    dev = device_of(device)
    if cuda_graph:
        if dev != "cuda":
            raise MeasureError("CUDA-graph replay needs CUDA")
        replay = capture_graph(fn, args, kwargs, warmup)
        call, args, kwargs = (lambda: replay()), (), {}
    else:
        call = fn
    flush = l2_flusher(dev, flush_l2)
    for _ in range(warmup):
        _call(call, args, kwargs, name)
    issue_s = 1e-3  # the host's time to issue one call (no synchronize), probed when warm
    if warmup or reps is None:
        _sync(dev)
        t0 = _time.perf_counter()
        _call(call, args, kwargs, name)
        issue_s = _time.perf_counter() - t0
        _sync(dev)
        one = max(_time.perf_counter() - t0, 1e-7)
        reps = reps or int(min(max_reps, max(5, budget_s / one)))
    _sync(dev)
    label = "graph" if cuda_graph else ("cold" if flush_l2 else "warm")
    if dev != "cuda":  # the device is the host: one clock for both figures
        walls = _wall_samples(call, args, kwargs, name, reps, flush, dev)
        return Timing(walls, dev, label, warmup, cv_threshold, name, {"method": "host clock"},
                      wall_samples_s=walls)
    samples = _event_samples(call, args, kwargs, name, reps, flush, issue_s)
    method = "CUDA events behind a busy queue"
    if statistics.median(samples) < CUPTI_BELOW_S:
        cupti = _cupti_samples(call, args, kwargs, name, min(reps, 300), flush)
        if cupti:
            samples, method = cupti, "CUPTI kernel durations (short call)"
    walls = _wall_samples(call, args, kwargs, name, reps, flush, dev) if wall else []
    return Timing(samples, dev, label, warmup, cv_threshold, name, {"method": method},
                  wall_samples_s=walls)


def launch_s(fn, *args, device: str | None = None, calls: int = 100) -> float | None:
    """The host's time to launch one call of fn(*args) on a GPU: back-to-back calls with no
    synchronisation between them, fewer than the launch queue holds, the fastest of three
    rounds. A loop of calls runs at this rate where it is longer than the kernel. None on a
    CPU, where a call returns when its work is done."""
    if device_of(device) != "cuda":
        return None
    rounds = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = _time.perf_counter()
        for _ in range(calls):
            fn(*args)
        rounds.append((_time.perf_counter() - t0) / calls)
    torch.cuda.synchronize()
    return min(rounds)


def overhead(wall_s: float | None, kernel_s: float | None) -> dict:
    """Wall time per call minus the profiled kernel time: launches, guards, Python. Never shown
    negative: wall below kernel time means the two were measured under different conditions
    (clocks, load), which is flagged instead."""
    if wall_s is None or kernel_s is None:
        return {"overhead_s": None}
    if wall_s < kernel_s:
        return {"overhead_s": None, "overhead_flag": f"wall {wall_s * 1e6:.0f} us below kernel "
                f"time {kernel_s * 1e6:.0f} us: measured under different load; not subtracted"}
    return {"overhead_s": wall_s - kernel_s}


def cold_series(fn, *args, n: int = 5, device: str | None = None, name: str = "",
                **kwargs) -> Timing:
    """n calls with no warm-up at all, each timed on the wall clock (issue to end of work: the
    first call's cost is mostly host work, lazy init, handle creation, autotuning, page faults);
    the first sample shows it, the rest the settled level."""
    _check(fn)
    dev = device_of(device)
    walls = _wall_samples(fn, args, kwargs, name, n, lambda: None, dev)
    return Timing(walls, dev, "first calls", 0, CV_UNSTABLE, name, wall_samples_s=walls)
