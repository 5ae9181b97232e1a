"""Measurement: one timer, peak memory, the profiler recipe, empirical ceilings, achieved points."""
from rooflab.measure.memory import MemoryResult, is_oom, peak_memory
from rooflab.measure.timer import MeasureError, Timing, cold_series, time

__all__ = ["MeasureError", "MemoryResult", "Timing", "cold_series", "is_oom", "peak_memory", "time"]
