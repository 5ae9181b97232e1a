"""Timer statistics, cold/warm labels, peak memory, OOM as a result, ceilings, achieved points."""
import json

import pytest
import torch

from rooflab import cost as C
from rooflab import roofline as R
from rooflab.measure import MeasureError, Timing, cold_series, is_oom, peak_memory, time
from rooflab.measure import achieved, ceilings


def test_stats_exact():
    t = Timing([1.0, 2.0, 3.0, 4.0, 10.0], "cpu", "warm", 0)
    assert t.median_s == 3.0 and t.mean_s == 4.0 and t.min_s == 1.0
    assert t.quantile_s(0.2) == pytest.approx(1.8)  # 1 + 0.8 * (2 - 1)
    assert t.quantile_s(0.8) == pytest.approx(5.2)  # 4 + 0.2 * (10 - 4)
    assert t.cv == pytest.approx(3.5355 / 4.0, rel=1e-3)  # stdev 3.5355
    assert t.unstable
    d = t.as_dict()
    assert {"median_s", "mean_s", "min_s", "p20_s", "p80_s", "cv", "unstable", "reps"} <= set(d)


def test_time_counts_and_labels():
    calls = []
    t = time(lambda: calls.append(1), warmup=2, reps=7, device="cpu")
    assert len(calls) == 9 and len(t.samples_s) == 7 and t.label == "warm"
    cold = cold_series(lambda: calls.append(1), n=4, device="cpu")
    assert cold.warmup == 0 and len(cold.samples_s) == 4
    flushed = time(lambda: None, warmup=0, reps=3, flush_l2=True, device="cpu")
    assert flushed.label == "cold"


def test_time_budget_bounds_reps():
    t = time(lambda: sum(range(1000)), budget_s=0.02, device="cpu", max_reps=50)
    assert 5 <= len(t.samples_s) <= 50


def test_bad_callables():
    with pytest.raises(MeasureError, match="callable"):
        time(42)

    def boom():
        raise ValueError("bad shape")

    with pytest.raises(MeasureError, match="boom raised ValueError: bad shape"):
        time(boom, device="cpu")
    with pytest.raises(MeasureError, match="CUDA"):
        if torch.cuda.is_available():
            raise MeasureError("CUDA present: nothing to check")
        time(lambda: None, device="cuda")


def test_cpu_peak_memory():
    n = 1000

    def f():
        a = torch.empty(n, n)  # 4 MB
        b = torch.empty(n, n)  # 4 MB live at once
        del a, b

    m = peak_memory(f, device="cpu")
    assert m.extra_peak_bytes == 2 * n * n * 4  # exactly two 4 MB buffers
    assert m.abs_peak_bytes >= m.extra_peak_bytes and "profiler" in m.method and not m.oom


def test_oom_is_a_result_not_a_crash():
    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")

    m = peak_memory(oom, device="cpu")
    assert m.oom and "out of memory" in m.error and m.extra_peak_bytes is None
    assert is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert not is_oom(RuntimeError("shape mismatch"))
    with pytest.raises(MeasureError):
        peak_memory(lambda: 1 / 0, device="cpu")  # other errors still surface


def test_ceilings_cpu_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path))
    c = ceilings.get("cpu", quick=True)
    assert c.mem_bandwidth_bytes_per_s > 1e8 and c.peak_flops_per_s["fp32"] > 1e8
    assert not c.cached and c.date and c.versions["torch"]
    again = ceilings.get("cpu", quick=True)
    assert again.cached and again.peak_flops_per_s == c.peak_flops_per_s
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and json.loads(files[0].read_text())["device"] == "cpu"
    assert files[0].name.endswith("-quick.json")  # a full run measures again
    hw = c.hardware()
    assert hw.measured and R.Roof.of(hw, "fp32").ridge > 0


def test_achieved_point_with_a_counted_cost():
    a = torch.randn(64, 32)
    b = torch.randn(32, 16)
    p = achieved.measure(torch.matmul, None, R.Roof("r", 1e12, 1e11), a, b, device="cpu",
                         budget_s=0.01)
    assert p["flops"] == 2 * 64 * 32 * 16  # counted: one mm, 65536 FLOPs
    assert p["bytes"] == 4 * (64 * 32 + 32 * 16 + 64 * 16)  # 14336, as cost.gemm
    assert p["achieved_flops_per_s"] > 0


def test_achieved_point():
    roof = R.Roof("r", 100e9, 10e9)
    c = C.gemm(100, 100, 100, "fp32")  # 2e6 FLOPs, 120000 bytes, intensity 16.7
    t = Timing([0.001] * 5, "cpu", "warm", 1)
    p = achieved.point(t, c, roof)
    assert p["achieved_flops_per_s"] == pytest.approx(2e9)
    assert p["attainable_flops_per_s"] == pytest.approx(100e9)  # compute-bound: the peak
    assert p["fraction_of_roof"] == pytest.approx(0.02)
    assert p["achieved_bandwidth_bytes_per_s"] == pytest.approx(1.2e8)
