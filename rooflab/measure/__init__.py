"""Measurement: one timer, peak memory, the profiler recipe, empirical ceilings, achieved points."""
import os

# Kineto prints a "profiler_start/stop" line for every profile on some builds; rooflab profiles
# often (peak memory on CPU too), so its log is off unless the user sets the level themselves.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
from rooflab.measure.memory import MemoryResult, is_oom, peak_memory
from rooflab.measure.timer import MeasureError, Timing, cold_series, time_call

__all__ = ["MeasureError", "MemoryResult", "Timing", "cold_series", "is_oom", "peak_memory", "time_call"]
