"""The one timer: every latency in rooflab goes through ``time`` (or ``cold_series``).

CUDA: a pair of CUDA events around each call, read after one synchronize (as triton's do_bench).
CPU: time.perf_counter_ns around each call. Warm-up runs first unless asked otherwise; an optional
L2 flush (zeroing a buffer larger than L2) before every call makes a run "cold" instead of "warm".
"""
from __future__ import annotations

import math
import statistics
import time as _time
from dataclasses import dataclass, field

import torch

from rooflab.errors import RooflabError

CV_UNSTABLE = 0.05  # coefficient of variation above which a timing is flagged
FLUSH_BYTES = 256 << 20  # larger than any L2 in the table


class MeasureError(RooflabError, RuntimeError):
    """A measured callable failed; the message names it and the original error."""


@dataclass
class Timing:
    samples_s: list[float]
    device: str
    label: str  # "warm" | "cold" (L2 flushed before each call) | "graph" (CUDA-graph replay)
    warmup: int
    cv_threshold: float = CV_UNSTABLE
    name: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

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
    def cv(self) -> float:
        if len(self.samples_s) < 2 or self.mean_s == 0:
            return 0.0
        return statistics.stdev(self.samples_s) / self.mean_s

    @property
    def unstable(self) -> bool:
        return self.cv > self.cv_threshold

    def as_dict(self) -> dict:
        return {
            "name": self.name, "device": self.device, "label": self.label, "warmup": self.warmup,
            "reps": len(self.samples_s), "median_s": self.median_s, "mean_s": self.mean_s,
            "min_s": self.min_s, "p20_s": self.quantile_s(0.2), "p80_s": self.quantile_s(0.8),
            "cv": self.cv, "unstable": self.unstable, **self.extra,
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


class _Clock:
    """Start/stop around one call on a device; read() returns seconds for every pair."""

    def __init__(self, device: str):
        self.device = device
        self.pairs: list = []

    def start(self):
        if self.device == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return _time.perf_counter_ns()

    def stop(self, started):
        if self.device == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.pairs.append((started, ev))
        else:
            self.pairs.append((started, _time.perf_counter_ns()))

    def read(self) -> list[float]:
        if self.device == "cuda":
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in self.pairs]
        return [(b - a) / 1e9 for a, b in self.pairs]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _flusher(device: str, flush_l2: bool):
    if not flush_l2:
        return lambda: None
    buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    return buf.zero_


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


def time(fn, *args, warmup: int = 3, reps: int | None = None, budget_s: float = 0.2,
         flush_l2: bool = False, cuda_graph: bool = False, device: str | None = None,
         max_reps: int = 1000, cv_threshold: float = CV_UNSTABLE, name: str = "",
         **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``reps`` timed calls, or as many
    as fit in ``budget_s`` (at least 5, at most ``max_reps``) when reps is None."""
    _check(fn)
    dev = device_of(device)
    if cuda_graph:
        if dev != "cuda":
            raise MeasureError("CUDA-graph replay needs CUDA")
        replay = capture_graph(fn, args, kwargs, warmup)
        call, args, kwargs = (lambda: replay()), (), {}
    else:
        call = fn
    flush = _flusher(dev, flush_l2)
    for _ in range(warmup):
        _call(call, args, kwargs, name)
    _sync(dev)
    if reps is None:
        t0 = _time.perf_counter()
        _call(call, args, kwargs, name)
        _sync(dev)
        one = max(_time.perf_counter() - t0, 1e-7)
        reps = int(min(max_reps, max(5, budget_s / one)))
    clock = _Clock(dev)
    for _ in range(reps):
        flush()
        started = clock.start()
        _call(call, args, kwargs, name)
        clock.stop(started)
    label = "graph" if cuda_graph else ("cold" if flush_l2 else "warm")
    return Timing(clock.read(), dev, label, warmup, cv_threshold, name)


def cold_series(fn, *args, n: int = 5, device: str | None = None, name: str = "",
                **kwargs) -> Timing:
    """n timed calls with no warm-up at all: the first shows first-call cost (lazy init, handle
    creation, autotuning, page faults), the rest the settled level."""
    return time(fn, *args, warmup=0, reps=n, device=device, name=name, **kwargs)
