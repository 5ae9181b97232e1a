"""Timer statistics, cold/warm labels, peak memory, OOM as a result, ceilings, achieved points."""
import dataclasses
import json
import os

import pytest
import torch

from rooflab import cost as C
from rooflab import roofline as R
from rooflab.measure import MeasureError, Timing, cold_series, is_oom, peak_memory, time_call
from rooflab.measure import achieved, ceilings


def test_stats_exact():
    t = Timing([1.0, 2.0, 3.0, 4.0, 10.0], "cpu", "warm", 0)
    assert t.median_s == 3.0 and t.mean_s == 4.0 and t.min_s == 1.0
    assert t.quantile_s(0.2) == pytest.approx(1.8)  # 1 + 0.8 * (2 - 1)
    assert t.quantile_s(0.8) == pytest.approx(5.2)  # 4 + 0.2 * (10 - 4)
    assert t.cv_stdev == pytest.approx(3.5355 / 4.0, rel=1e-3)  # stdev 3.5355
    assert t.cv == pytest.approx(1.4826 * 1 / 3)  # MAD: median of |x - 3| = (2,1,0,1,7) -> 1
    assert t.unstable
    tight = Timing([1.0] * 20 + [1.01] * 20 + [9.0], "cuda", "warm", 0)  # one stray sample
    assert tight.cv < 0.02 and tight.cv_stdev > 0.5 and not tight.unstable
    d = t.as_dict()
    assert {"median_s", "mean_s", "min_s", "p20_s", "p80_s", "cv", "unstable", "reps"} <= set(d)


def test_device_and_wall_named_apart():
    t = Timing([1.0, 2.0, 3.0], "cuda", "warm", 0, wall_samples_s=[5.0, 6.0, 9.0])
    assert (t.device_s, t.wall_s, t.median_s) == (2.0, 6.0, 2.0)  # median_s is device time
    assert (t.p20_s, t.p80_s) == pytest.approx((1.4, 2.6))  # the README's attributes exist
    d = t.as_dict()
    assert (d["device_s"], d["wall_s"]) == (2.0, 6.0)
    assert Timing([1.0], "cuda", "warm", 0).wall_s is None  # not measured, not made up


def test_overhead_never_negative():
    from rooflab.measure.timer import overhead
    assert overhead(10e-6, 4e-6)["overhead_s"] == pytest.approx(6e-6)
    bad = overhead(4e-6, 10e-6)
    assert bad["overhead_s"] is None and "below kernel time" in bad["overhead_flag"]
    assert overhead(None, 1.0) == {"overhead_s": None}


def test_time_counts_and_labels():
    calls = []
    t = time_call(lambda: calls.append(1), warmup=2, reps=7, device="cpu")
    # 2 warm-up calls, 1 probe of the host's issue time, 7 timed
    assert len(calls) == 10 and len(t.samples_s) == 7 and t.label == "warm"
    assert t.wall_samples_s == t.samples_s  # on a CPU the device is the host
    cold = cold_series(lambda: calls.append(1), n=4, device="cpu")
    assert cold.warmup == 0 and len(cold.samples_s) == 4 and len(calls) == 14
    flushed = time_call(lambda: None, warmup=0, reps=3, flush_l2=True, device="cpu")
    assert flushed.label == "cold"


def test_the_cpu_timer_reads_seconds_per_call():
    """A unit slip, a per-batch figure read as per-call or a warm-up counted shows on a call of
    known length: a 20 ms sleep. Load can only lengthen a sleep, so the lower bound holds on a
    busy machine; the upper one is 50x. (Against an independent clock, a timing comparison:
    benchmarks/timer_agreement.py.)"""
    import time as stdlib_time

    t = time_call(lambda: stdlib_time.sleep(0.02), warmup=1, reps=3, device="cpu")
    assert 0.02 <= t.device_s < 1.0 and 0.02 <= t.min_s


def test_the_l2_flush_reads_and_leaves_nothing_dirty(monkeypatch):
    """A flush that writes leaves dirty lines in L2 for the timed call to write back."""
    from rooflab.measure import timer as T

    seen = []
    real_zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: seen.append(real_zeros(*a, **k)) or
                        seen[-1])
    flush = T.l2_flusher("cpu", True)
    (buf,) = seen
    assert buf.numel() * buf.element_size() >= T.FLUSH_BYTES
    buf[0] = 7
    version = buf._version  # bumped by every in-place write
    flush()
    assert buf._version == version and buf[0] == 7


def test_time_budget_bounds_reps():
    t = time_call(lambda: sum(range(1000)), budget_s=0.02, device="cpu", max_reps=50)
    assert 5 <= len(t.samples_s) <= 50


def test_bad_callables():
    with pytest.raises(MeasureError, match="callable"):
        time_call(42)

    def boom():
        raise ValueError("bad shape")

    with pytest.raises(MeasureError, match="boom raised ValueError: bad shape"):
        time_call(boom, device="cpu")
    with pytest.raises(MeasureError, match="CUDA"):
        if torch.cuda.is_available():
            raise MeasureError("CUDA present: nothing to check")
        time_call(lambda: None, device="cuda")


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
    stable = {"copy": dict(value=2e10, cv=0.01, stable=True, size="64 MiB")}
    monkeypatch.setattr(ceilings, "copy_bandwidth", lambda *a: stable["copy"])
    c = ceilings.get("cpu", quick=True)
    assert c.mem_bandwidth_bytes_per_s == 2e10 and c.peak_flops_per_s["fp32"] > 1e8
    assert not c.cached and c.date and c.versions["torch"]
    if not c.stable:  # this machine's matmul was noisy: measured again next time, never cached
        assert not list(tmp_path.iterdir())
        return
    # a probe that reads what was cached confirms it (a faster one: test_a_beaten_cache_...)
    monkeypatch.setattr(ceilings, "probe", lambda c, quick=False: {
        "copy": c.mem_bandwidth_bytes_per_s, **c.peak_flops_per_s})
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
    p = achieved.measure_point(torch.matmul, None, R.Roof("r", 1e12, 1e11), a, b, device="cpu",
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


def test_a_roof_is_the_best_stable_run():
    runs = [dict(size="a", value=10.0, cv=0.01, stable=True),
            dict(size="b", value=30.0, cv=0.2, stable=False),  # faster but noisy: not the roof
            dict(size="c", value=12.0, cv=0.02, stable=True)]
    best = ceilings.best_stable(runs)
    assert (best["value"], best["size"], best["stable"]) == (12.0, "c", True)
    assert len(best["runs"]) == 3
    only_noisy = ceilings.best_stable(runs[1:2])
    assert only_noisy["value"] == 30.0 and not only_noisy["stable"]


def test_unstable_ceilings_are_measured_again_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path))
    seen = []

    def fake(device, quick=False, note=None):
        seen.append(1)
        ok = len(seen) > 1  # the second attempt is quiet
        fig = dict(value=1e9 * len(seen), cv=0.01 if ok else 0.13, stable=ok, size="n=8")
        return ceilings.Ceilings("cpu", "test cpu", fig["value"], {"fp32": fig["value"]},
                                 {"copy": fig, "matmul_fp32": fig}, {}, "today",
                                 stability={"copy": {"cv": fig["cv"], "stable": ok, "size": "x"},
                                            "fp32": {"cv": fig["cv"], "stable": ok, "size": "x"}})

    monkeypatch.setattr(ceilings, "measure_ceilings", fake)
    c = ceilings.get("cpu", attempts=2)
    assert len(seen) == 2 and c.stable and c.peak_flops_per_s == {"fp32": 2e9}
    assert len(list(tmp_path.iterdir())) == 1  # cached once stable
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda d, quick=False, note=None: _noisy(ceilings))
    c = ceilings.get("cpu", refresh=True, attempts=3, quick=True)
    assert not c.stable and not (tmp_path / os.path.basename(ceilings.cache_path("cpu", True))).exists()


def _cache(tmp_path, monkeypatch, copy=8e9, fp32=3e10, fp64=1.4e10, date=None):
    """A stable cached measurement with the figures given, as `rooflab ceilings` writes it."""
    import datetime as dt
    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path))
    fig = lambda v: dict(value=v, cv=0.01, stable=True, size="x")  # noqa: E731
    c = ceilings.Ceilings("cpu", ceilings.device_name("cpu"), copy, {"fp32": fp32, "fp64": fp64},
                          {"copy": fig(copy), "matmul_fp32": fig(fp32), "matmul_fp64": fig(fp64)},
                          {}, date or dt.datetime.now(dt.timezone.utc).isoformat())
    c.stability = ceilings.stability(c.details)
    path = ceilings.cache_path("cpu", True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(c.as_dict(), f)
    return c


def test_a_cache_measured_under_load_is_measured_again(tmp_path, monkeypatch):
    """The busy machine's case: 4.36 GB/s, 8.36 GFLOP/s fp32 and 3.15 fp64 cached while another
    job ran; the probe now reads more, so the cache is measured again, and the reason kept."""
    _cache(tmp_path, monkeypatch, copy=1e6, fp32=1e6, fp64=1e6)  # far below any real CPU
    lines = []
    c = ceilings.get("cpu", quick=True, note=lines.append)
    assert not c.cached and c.mem_bandwidth_bytes_per_s > 1e8 and c.peak_flops_per_s["fp32"] > 1e8
    assert "measured under load" in c.details["remeasured"]
    assert any(line.startswith("measuring again") for line in lines)  # said, while it works
    if c.stable:  # the new figures replace the beaten ones
        on_disk = json.loads(open(ceilings.cache_path("cpu", True)).read())
        assert on_disk["mem_bandwidth_bytes_per_s"] == c.mem_bandwidth_bytes_per_s
        assert "remeasured" not in on_disk["details"]  # a later run confirming it says nothing
    else:  # nothing better to keep: the beaten cache is gone, not believed next time
        assert not os.path.exists(ceilings.cache_path("cpu", True))


def test_the_reason_to_measure_again_is_the_runs_not_the_caches(tmp_path, monkeypatch):
    """A measurement taken because the cache was doubted says why, but the cache it writes does
    not: a later run that a probe confirms shows no "measured again"."""
    _cache(tmp_path, monkeypatch, copy=1e6, fp32=1e6, fp64=1e6)
    fresh = _cache(tmp_path / "fresh", monkeypatch)  # stable figures, as a measurement gives
    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda *a, **k: fresh)
    c = ceilings.get("cpu", quick=True)
    assert "measured under load" in c.details["remeasured"]
    on_disk = json.loads(open(ceilings.cache_path("cpu", True)).read())
    assert "remeasured" not in on_disk["details"]


def test_a_cache_is_doubted_when_old_inverted_or_beaten():
    import datetime as dt
    now = dt.datetime(2026, 12, 3, tzinfo=dt.timezone.utc)
    c = ceilings.Ceilings("cpu", "cpu", 8e9, {"fp32": 3e10, "fp64": 1.4e10},
                          date="2026-12-01T00:00:00+00:00")
    same = {"copy": 8e9, "fp32": 3e10, "fp64": 1.4e10}
    assert ceilings.doubt(c, same, now) is None
    assert ceilings.doubt(c, {**same, "fp32": 3.2e10}, now) is None  # within the tolerance
    assert "probe of fp32" in ceilings.doubt(c, {**same, "fp32": 4e10}, now)
    assert "probe of copy" in ceilings.doubt(c, {**same, "copy": 2e10}, now)
    assert "days old" in ceilings.doubt(c, same, now + dt.timedelta(days=40))
    inverted = ceilings.Ceilings("cpu", "cpu", 8e9, {"fp32": 8.36e9, "fp64": 1.68e10},
                                 date="2026-12-01T00:00:00+00:00")
    assert "fp64 peak" in ceilings.doubt(inverted, {"copy": 8e9}, now)


def _noisy(ceilings):
    fig = dict(value=5e8, cv=0.13, stable=False, size="n=8")
    return ceilings.Ceilings("cpu", "test cpu", 5e8, {"fp32": 5e8}, {"copy": fig,
                             "matmul_fp32": fig}, {}, "today",
                             stability={"copy": {"cv": 0.13, "stable": False, "size": "x"}})


def test_points_above_the_roof_raise_it_or_say_why():
    roof = R.Roof("cpu (measured) fp32", 100e9, 10e9, "fp32", True)
    gemm = achieved.point(Timing([1e-3], "cpu", "warm", 0), C.gemm(256, 256, 256, "fp32"), roof)
    gemv_small = achieved.point(Timing([1e-5], "cpu", "warm", 0), C.gemv(256, 256, "fp32"), roof)
    assert gemm["fraction_of_roof"] < 1
    fast_gemm = achieved.point(Timing([2.8e-4], "cpu", "warm", 0),  # 120 GFLOP/s > 100
                               C.gemm(256, 256, 256, "fp32").named("GEMM n=256"), roof)
    new, pts, notes = achieved.hold(roof, [fast_gemm, gemv_small], cache_bytes=32 << 20)
    assert new.peak_flops_per_s == pytest.approx(2 * 256**3 / 2.8e-4)  # raised to the point
    assert pts[0]["fraction_of_roof"] == pytest.approx(1.0) and "raised" in notes[0]
    # the GEMV's 263 KB sit in the cache: flagged with the reason, the bandwidth roof stays
    assert new.mem_bandwidth_bytes_per_s == 10e9 and "on-chip cache" in pts[1]["above_roof"]
    _, pts, notes = achieved.hold(roof, [gemv_small], cache_bytes=None)
    assert pts[0]["fraction_of_roof"] == pytest.approx(1.0) and "copy bandwidth" in notes[0]
    # 2% above, out of any cache: noise, said so; the roof stays
    near = achieved.point(Timing([2 * 256**3 / 102e9], "cpu", "warm", 0),
                          C.gemm(256, 256, 256, "fp32").named("GEMM near"), roof)
    new, pts, notes = achieved.hold(roof, [near], cache_bytes=32 << 20)
    assert new.peak_flops_per_s == 100e9 and notes == []
    assert pts[0]["fraction_of_roof"] == pytest.approx(1.02)
    assert pts[0]["above_roof"].startswith("it is 2.0% over, no more than two runs")


@pytest.mark.gpu
def test_device_time_leaves_launch_overhead_out():
    """A ~5 us kernel: device time (busy queue) is below the wall time of a lone call and close
    to the profiler's own kernel time (CUPTI); loose bounds, the benchmark has the tight ones."""
    from rooflab.measure import profile as P
    s = torch.rand(1 << 20, device="cuda")
    t = time_call(lambda: s * 2, warmup=10, reps=200, device="cuda")
    prof = P.profile(lambda: s * 2, iters=50, warmup=5, device="cuda")
    kernel_s = prof.device_time_us / 50 / 1e6
    assert t.device_s < t.wall_s
    assert 0.75 < t.device_s / kernel_s < 1.33, (t.device_s, kernel_s)


@pytest.mark.gpu
def test_a_loop_of_short_calls_runs_no_faster_than_their_launches():
    """Part 1.2's check at a small size: a 64 x 64 matmul's kernel is shorter than its launch,
    and the independent clock's loop cannot outrun the host launching it (loose: 0.5x)."""
    from rooflab.measure.timer import launch_s
    from rooflab.studies import metrics as M
    a = torch.rand(64, 64, device="cuda")
    launch = launch_s(torch.matmul, a, a, device="cuda")
    assert 0 < launch < 1e-3 and launch_s(torch.matmul, a, a, device="cpu") is None  # a CPU's
    assert M.independent_s(torch.matmul, a, a, device="cuda") > 0.5 * launch


def test_beaten_ceilings_are_forgotten(tmp_path, monkeypatch):
    """A lab run whose points beat the cached roof drops the cache: measured again next time."""
    from rooflab.lab import run as LR
    from rooflab.lab.parts import PARTS
    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path / "cache"))
    real = ceilings.measure_ceilings(device="cpu", quick=True)
    steady = dataclasses.replace(real, stability={k: {**v, "stable": True}  # as if quiet: cached
                                                  for k, v in real.stability.items()})
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda *a, **k: steady)
    ceilings.get("cpu", quick=True)
    cache = tmp_path / "cache"
    assert list(cache.iterdir())  # a stable measurement is cached (an unstable one never is)

    def beats(ctx):
        ctx.beaten(["GEMM n=8 reached more than the measured peak"])
        return PARTS[1][1](ctx)

    monkeypatch.setitem(PARTS, 1, (PARTS[1][0], beats))
    res = LR.run_lab("cpu", parts=(1,), quick=True, out_dir=str(tmp_path / "out"))
    assert res["meta"]["ceilings_forgotten"] and not list(cache.iterdir())


def test_busy_time_is_the_union_of_kernels_inside_the_range():
    """CUPTI's per-call figure: overlapping kernels count once, idle gaps and work outside the
    call's range not at all."""
    from rooflab.measure.timer import busy_us
    spans = [(0.0, 2.0), (3.0, 5.0), (4.0, 6.0), (6.5, 7.0), (10.0, 11.0)]
    assert busy_us(spans, 2.5, 8.0) == 3.0 + 0.5      # [3, 6] and [6.5, 7]
    assert busy_us(spans, 1.0, 3.5) == 1.0 + 0.5      # cut at both ends
    assert busy_us(spans, 7.5, 9.0) == 0.0


def test_a_dtype_runs_as_the_device_runs_it(monkeypatch):
    """bf16 on a GPU without it natively (a T4) is measured in fp16, half dtypes on a CPU in
    fp32 (its measured roof); everything else as asked."""
    from rooflab.measure.dtypes import runnable
    assert runnable("bf16", "cpu") == runnable("fp16", "cpu") == "fp32"
    assert runnable("fp32", "cpu") == "fp32" and runnable("bfloat16", "cpu") == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert runnable("bf16", "cuda") == "fp16" and runnable("fp32", "cuda") == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert runnable("bf16", "cuda") == "bf16"


def test_the_t4_path_shows_a_t4_to_all_but_the_compilers(monkeypatch):
    """scripts/t4_path (gpu_check.sh notebook_t4) makes rooflab and the notebook take a T4's
    path on any GPU, while torch's and Triton's compilers, asking from inside, still build for
    the GPU it runs on (a T4's kernels do not load on an H100)."""
    import runpy
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "scripts", "t4_path",
                                "sitecustomize.py"))
    from rooflab.measure.dtypes import runnable
    assert torch.cuda.get_device_capability() == (7, 5) and runnable("bf16", "cuda") == "fp16"
    inside_torch = {"__name__": "torch._inductor.codecache", "torch": torch}
    exec("cap = torch.cuda.get_device_capability(); bf16 = torch.cuda.is_bf16_supported()",
         inside_torch)
    assert (inside_torch["cap"], inside_torch["bf16"]) == ((9, 0), True)
    # Triton's driver keeps torch's function and calls it from its own module
    inside_triton = {"__name__": "triton.backends.nvidia.driver",
                     "ask": torch.cuda.get_device_capability}
    exec("cap = ask(0)", inside_triton)
    assert inside_triton["cap"] == (9, 0)


def test_an_unstable_refresh_that_beats_the_cache_drops_it(tmp_path, monkeypatch):
    """The busy machine's --refresh: faster than the cache but unstable. It is not cached, and
    the beaten cache is not kept to be believed either."""
    _cache(tmp_path, monkeypatch, copy=1e6, fp32=1e6, fp64=1e6)
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda d, quick=False, note=None: _noisy(ceilings))
    c = ceilings.get("cpu", refresh=True, attempts=1, quick=True)
    assert not c.stable and not os.path.exists(ceilings.cache_path("cpu", True))
