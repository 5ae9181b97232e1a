"""Kernel categories by tested rules, the trace analysis, and the Chrome trace export."""
import json
import pathlib

import pytest
import torch

from rooflab.measure import profile as P

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name,cat", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("ampere_sgemm_128x64_tn", "gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>", "gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4>", "gemm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "memcpy/memset"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>", "reduction/norm"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "reduction/norm"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "attention"),
    ("Memcpy DtoD (Device -> Device)", "memcpy/memset"),
    ("triton_poi_fused_add_mul_tanh_0", "elementwise"),
    ("triton_per_fused_mean_pow_1", "reduction/norm"),
    ("_fwd_kernel_flash", "attention"),
    ("gelu_kernel", "elementwise"),
    ("aten::mm", "gemm"),
    ("some_custom_kernel", "other"),
])
def test_categories(name, cat):
    assert P.categorize(name) == cat


def test_cpu_profile_and_trace(tmp_path):
    x = torch.randn(256, 256)

    def f():
        return torch.nn.functional.gelu(x @ x, approximate="tanh")

    path = tmp_path / "t.json"
    r = P.profile(f, iters=2, trace_path=str(path), device="cpu")
    names = {k.name for k in r.kernels}
    assert {"aten::mm", "aten::gelu"} <= names
    assert "aten::mm" in r.op_kernels["aten::matmul"]
    assert r.iters == 2 and r.launches >= 4 and r.trace_path == str(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::mm" for e in events)


def test_annotated_modules_on_cpu():
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU())
    x = torch.randn(32, 64)
    with P.annotate_modules(m, {"0": "proj", "1": "act"}):
        r = P.profile(m, x, iters=2, device="cpu")
    assert set(r.by_annotation_us) >= {"proj", "act"}


def test_what_runs_between_profiled_calls_is_left_out():
    """An L2 flush before each call (``between``) runs under the UNTIMED range: its ops are in
    the trace, not in the kernels, the launches or the device time."""
    x, buf = torch.randn(256, 256), torch.randn(1 << 20)
    plain = P.profile(lambda: x @ x, iters=2, device="cpu")
    r = P.profile(lambda: x @ x, iters=2, device="cpu", between=lambda: buf.cumsum(0))
    assert {k.name for k in r.kernels} == {k.name for k in plain.kernels}
    assert "aten::cumsum" not in {k.name for k in r.kernels} and r.launches == plain.launches
    both = P.profile(lambda: (buf.cumsum(0), x @ x), iters=2, device="cpu")  # in the call: timed
    assert "aten::cumsum" in {k.name for k in both.kernels}


def _synthetic_cuda_trace():
    """Two ops on the CPU thread, each launching one kernel (correlation ids 1, 2)."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 5, "dur": 40},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 10,
         "dur": 5, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::gelu", "tid": 1, "ts": 60, "dur": 20},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 65,
         "dur": 5, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "tid": 7, "ts": 100,
         "dur": 30, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel<gelu>", "tid": 7,
         "ts": 140, "dur": 10, "args": {"correlation": 2}},
    ]


def test_an_untimed_kernel_is_neither_counted_nor_idle_time():
    """A flush launched under the UNTIMED range between two calls: out of the kernels and the
    launches, and its 40 us neither busy nor idle in the timeline (the gaps either side stay)."""
    trace = _synthetic_cuda_trace() + [
        {"ph": "X", "cat": "user_annotation", "name": P.UNTIMED, "tid": 1, "ts": 85, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 88,
         "dur": 5, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "reduce_kernel<sum>", "tid": 7, "ts": 155,
         "dur": 40, "args": {"correlation": 3}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::gelu", "tid": 1, "ts": 100, "dur": 20},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 105,
         "dur": 5, "args": {"correlation": 4}},
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel<gelu>", "tid": 7,
         "ts": 200, "dur": 10, "args": {"correlation": 4}}]
    r = P.analyze_trace(trace, "cuda")
    assert "reduce_kernel<sum>" not in {k.name for k in r.kernels} and r.launches == 3
    assert r.timeline["busy_us"] == 50 and r.timeline["span_us"] == 110 - 40
    assert r.timeline["idle_us"] == 10 + 5 + 5  # 130-140, and 150-155, 195-200 by the flush


def test_trace_analysis_maps_ops_to_kernels_and_gaps():
    r = P.analyze_trace(_synthetic_cuda_trace(), "cuda")
    assert r.op_kernels == {"aten::matmul": ["ampere_sgemm_128x64_tn"],
                            "aten::gelu": ["vectorized_elementwise_kernel<gelu>"]}
    assert r.by_category_us == {"gemm": 30.0, "elementwise": 10.0}
    assert r.timeline == {"span_us": 50.0, "busy_us": 40.0, "idle_us": 10.0, "gaps": 1,
                          "largest_gap_us": 10.0}
    assert r.kernels[0].share == pytest.approx(0.75)


def test_real_gpu_trace_if_present():
    traces = sorted(DATA.glob("*.trace.json*"))
    if not traces:
        pytest.skip("no GPU trace under tests/data")
    for t in traces:
        r = P.analyze_trace(P.load_trace(str(t)), "cuda")
        assert r.launches > 0 and r.kernels
        assert all(k.category in {"gemm", "elementwise", "reduction/norm", "attention",
                                  "memcpy/memset", "other"} for k in r.kernels)
        assert r.op_kernels  # every real trace attributes kernels to aten ops


def test_real_h200_trace_attribution():
    """A trace taken on the H200 (benchmarks/measurement.py): the unfused GeLU, F.gelu, a matmul."""
    r = P.analyze_trace(P.load_trace(str(DATA / "h200_small.trace.json.gz")), "cuda", iters=2)
    assert any(P.categorize(k) == "gemm" for k in r.op_kernels["aten::matmul"])  # cuBLAS
    assert [P.categorize(k) for k in r.op_kernels["aten::gelu"]] == ["elementwise"]
    assert r.launches_per_iter == 12  # unfused 9 + F.gelu 1 + matmul 2 (GEMM + split-K)
    assert r.timeline["gaps"] > 0 and r.timeline["idle_us"] > r.timeline["busy_us"]
    # per op and shapes, every level of dispatch: the matmul's kernels are also aten::mm's
    assert r.by_op_us["matmul(256x256,256x256)"] == r.by_op_us["mm(256x256,256x256)"] > 0
    assert sum(us for k, us in r.by_op_us.items() if k.startswith("matmul(")) < r.device_time_us
    # and its launches: the one matmul a call is two kernels (what a one-kernel model misses)
    assert r.by_op_launches["mm(256x256,256x256)"] == 2 * 2
    assert r.by_op_launches["gelu(65536)"] == 1 * 2


def test_op_key_leaves_out_scalars():
    assert P.op_key("aten::add", [[8, 640], [8, 640], []]) == "add(8x640,8x640)"
    assert P.op_key("mm", [(16, 640), (640, 1024)]) == "mm(16x640,640x1024)"
    assert P.op_key("aten::cat", [[[1, 63, 8], [1, 1, 8]], []]) == "cat(1x63x8,1x1x8)"


def test_augment_trace(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _synthetic_cuda_trace()}))
    P.augment_trace(str(path), {"sgemm": {"flops": 2_000_000, "bytes": 30_000}})
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if "sgemm" in e["name"]][0]
    assert ev["args"]["rooflab flops"] == 2_000_000
    assert ev["args"]["achieved TFLOP/s"] == pytest.approx(2e6 / 30e-6 / 1e12, abs=1e-3)


def test_augment_trace_keeps_gzip_under_a_gz_name(tmp_path):
    import gzip
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": _synthetic_cuda_trace()}, f)
    P.augment_trace(str(path), {"sgemm": {"flops": 2_000_000, "bytes": 30_000}})
    events = P.load_trace(str(path))  # still gzip: load_trace opens it
    assert any("rooflab flops" in e.get("args", {}) for e in events)


def test_enclosing_ranges_walk_the_nesting_and_equal_a_scan_of_every_range():
    """_Enclosing.chain (a walk up the nesting) against a scan of every range, on random nested
    ranges of two threads, at every start, end and midpoint; a range that only overlaps another
    is not taken for its parent."""
    import random

    rng = random.Random(0)
    ranges = []

    def nest(tid, start, end, depth):
        t = start
        while depth and t < end - 2:
            a = rng.uniform(t, end - 2)
            b = rng.uniform(a + 1, min(end, a + 30))
            ranges.append({"tid": tid, "ts": a, "dur": b - a, "name": f"r{len(ranges)}"})
            nest(tid, a, b, depth - 1)
            t = b + rng.uniform(0, 3)

    for tid in (1, 2):
        nest(tid, 0.0, 500.0, 4)
    ranges.append({"tid": 1, "ts": 490.0, "dur": 30.0, "name": "overlapping"})
    enc = P._Enclosing(ranges)
    points = [p for r in ranges for p in (r["ts"], r["ts"] + r["dur"] / 2, r["ts"] + r["dur"])]
    for tid in (1, 2, 3):
        for ts in points:
            scan = sorted((r for r in ranges if r["tid"] == tid
                           and r["ts"] <= ts <= r["ts"] + r["dur"]),
                          key=lambda r: (r["ts"], -r["dur"]))
            assert [r["name"] for r in enc.chain(tid, ts)] == [r["name"] for r in scan]


@torch.library.custom_op("rooflab_test::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x @ x + x @ x


def test_a_custom_ops_time_goes_to_its_key_without_the_namespace():
    """rooflab's attention runs as custom ops (rooflab::flash_decoding): the profiler names them
    with their namespace, the counter without, and both give one key."""
    assert P.op_key("rooflab::flash_decoding", [[8, 32, 1, 128], [], [8, 1056]]) == \
        "flash_decoding(8x32x1x128,8x1056)"
    x = torch.randn(64, 64)
    r = P.profile(lambda: torch.ops.rooflab_test.twice(x), iters=2, device="cpu")
    assert 0 < r.by_op_us["twice(64x64)"] <= r.device_time_us * (1 + 1e-9)  # sums in any order
    assert r.by_op_us["twice(64x64)"] >= r.by_op_us["mm(64x64,64x64)"] > 0
