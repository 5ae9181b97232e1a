"""Every answer sentence is a function of its numbers: driven here with synthetic figures on both
sides of each threshold (faster and slower, agreeing and not, graphs faster and slower, inside
and outside the lab's claim), each checked for what it says."""
import pytest

from rooflab.lab import answers as A
from rooflab.studies import fusion
from rooflab.lab.parts import p1_metrics, p3_layer, p4_fusion, p5_attention


def test_speed_says_faster_or_slower():
    assert A.speed(3.2) == "3.2x faster" and A.speed(1 / 4.8) == "4.8x slower"
    assert A.speed(0.21) == "4.76x slower"  # the 1.1 that read "0x faster"
    assert A.speed(1.01).startswith("as fast") and A.speed(1234.0) == "1,234x faster"


def test_clocks_agree_only_within_the_bound():
    assert A.agree(0.95) and not A.agree(0.20) and not A.agree(1.2)
    assert A.agree(1.2, cv=0.1) and not A.agree(0.5, cv=0.5)  # twice the CV, capped at 25%


def metrics(speedup: float, ratio: float, launch: float | None = None) -> dict:
    row = {"n": 64, "macs": 64**3, "flops": 2 * 64**3, "bytes": 12 * 64**2, "intensity": 64 / 6,
           "naive_median_s": 1e-3 * speedup, "torch_median_s": 1e-3, "speedup": speedup,
           "naive_flops_per_s": 1e9 / speedup, "torch_flops_per_s": 1e9}
    warm = {"cv": 0.01, "p20_s": 1e-3, "p80_s": 1.1e-3}
    return {"naive_vs_torch": [row], "naive_skipped": [{"n": 512, "predicted_naive_s": 99.0}],
            "naive_budget_s": 30.0, "naive_cold_series_s": [1.0, 1.1],
            "cold_vs_warm": {"n": 64, "first_call_s": 2e-3, "settled_s": 1e-3,
                             "first_over_settled": 2.0, "warm": warm, "warm_fastest_s": ratio,
                             "independent_s": 1.0, "timer_over_independent": ratio,
                             "launch_s": launch}}


@pytest.mark.parametrize("speedup,word", [(0.21, "4.76x slower"), (50.0, "50x faster")])
def test_part1_speedup_sentence(speedup, word):
    a = p1_metrics.questions(metrics(speedup, 1.0), "cpu")
    assert word in a["1.1"]["text"] and "n = 512 (predicted" in a["1.1"]["text"]


@pytest.mark.parametrize("ratio,agree", [(0.98, True), (0.20, False)])
def test_part1_clocks_sentence(ratio, agree):
    text = p1_metrics.questions(metrics(5.0, ratio), "cpu")["1.2"]["text"]
    assert ("the two clocks agree" in text) == agree
    assert ("disagree by more than 10%" in text) == (not agree)


@pytest.mark.parametrize("launch,agree", [(0.95, True), (0.5, False)])
def test_part1_clocks_sentence_where_launches_outlast_the_kernel(launch, agree):
    """A GPU kernel shorter than its launch (ratio 0.2): the independent loop times the launches,
    so the sentence holds it against the launch time; below the kernel's time, as before."""
    text = p1_metrics.questions(metrics(5.0, 0.2, launch), "cuda")["1.2"]["text"]
    assert "to launch one call, longer than the kernel runs" in text
    assert ("the two agree once the launches are counted" in text) == agree
    assert ("disagree by more than 10% even so" in text) == (not agree)
    text = p1_metrics.questions(metrics(5.0, 0.98, 0.1), "cuda")["1.2"]["text"]
    assert "the two clocks agree" in text and "to launch one call" not in text


def mlp_row(mode, wall, kernel, kernels=4):
    return {"mode": mode, "wall_s": wall, "device_s": kernel, "kernel_s": kernel,
            "kernels_per_call": kernels,
            "kernels": [{"name": "void at::native::copy_kernel", "category": "memcpy/memset",
                         "us_per_call": 15.0, "calls": 1}]}


@pytest.mark.parametrize("graph_wall,faster", [(150e-6, True), (240e-6, False)])
def test_graph_sentence_follows_wall_time(graph_wall, faster):
    eager, nog = mlp_row("eager", 189e-6, 74e-6), mlp_row("max-autotune-no-cudagraphs",
                                                          211e-6, 83e-6)
    text = p4_fusion.graph_text(eager, nog, mlp_row("max-autotune", graph_wall, 98e-6))
    assert ("faster than the same compile" in text) == faster
    assert ("Here the graph is slower" in text) == (not faster)
    if not faster:
        assert "copy_kernel" in text  # the measured reason: the input copy


@pytest.mark.parametrize("speedups,says", [
    ([2.5, 3.0], "within the lab's 2-4x at every length"),
    ([1.5, 6.0], "outside the lab's 2-4x at every length"),
    ([2.1, 4.2, 3.0, 1.9], "within the lab's 2-4x at 2 of 4 comparisons")])
def test_flash_claim_counts_the_ratios_inside(speedups, says):
    assert p5_attention.claim_text(speedups).startswith(says)


def gelu_rows(unfused_s, frac):
    u = {"variant": "unfused (basic ops)", "device_s": unfused_s, "kernels_per_call": 9,
         "bytes_predicted": 84e6, "bytes_per_kernel": 84e6 / 9}
    f = {"variant": "F.gelu (PyTorch fused)", "device_s": 1.0, "kernels_per_call": 1,
         "bytes_predicted": 8e6, "fraction_of_copy_bw": frac}
    return [u, f]


@pytest.mark.parametrize("unfused_s,frac,says", [
    (2.0, 0.34, "stays below the traffic ratio"), (15.9, 0.34, "lose more than their extra"),
    (10.0, 0.9, "the time follows the bytes")])
def test_gelu_explanation_follows_the_ratios(unfused_s, frac, says):
    assert says in fusion.explain_gelu(gelu_rows(unfused_s, frac))


def test_quantised_recipes_name_the_deciding_term():
    from rooflab import hardware as H
    from rooflab import models as M
    from rooflab.studies import decoder

    rows = decoder.recipes(M.load("gemma-3-270m-it"), H.lookup("H200"), batches=(1, 512))
    by = {(r["recipe"], r["batch"]): r["decides"] for r in rows}
    assert by[("W4A16", 1)] == "weight bytes" and by[("W4A16", 512)] == "activation bytes"
    text = p3_layer._recipes_text(rows)
    assert "B=1: W4A16" in text and "(weight bytes)" in text and "(activation bytes)" in text


@pytest.mark.parametrize("compiled_s,says", [(2.9e-3, "fewer ops, yet slower"), (1.9e-3, ""),
                                              (2.37e-3, "")])  # "as fast (within 2%)": not slower
def test_a_cpu_compile_slower_than_eager_says_what_was_measured(compiled_s, says):
    eager = {"kernels_per_call": 11, "device_s": 2.35e-3}
    text = p4_fusion.fewer_but_slower(eager, {"kernels_per_call": 4, "device_s": compiled_s})
    assert says in text and (bool(text) == bool(says))


@pytest.mark.parametrize("eager,fused,ridges,says", [
    (213.0, 2593.0, [50.4, 206.0, 181.0], "is compute-bound under both byte conventions"),
    (213.0, 2593.0, [50.4, 295.0], "depends on the byte convention and the ridge"),
    (5.0, 20.0, [50.4, 206.0], "is memory-bound under both byte conventions")])
def test_prefill_verdict_follows_the_ridges(eager, fused, ridges, says):
    text = p3_layer._prefill_verdict(eager, fused, ridges)
    assert says in text and (f"all {len(ridges)} ridges" in text) == ("under both" in says)


@pytest.mark.parametrize("name,label", [
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
     "namespace)::OpaqueType<2u>, unsigned int, 1, 128, 1>(int)", "CatArrayBatchedCopy"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl("
     "at::TensorIteratorBase&)::{lambda()#2}, std::array<char*, 2ul> >(int)",
     "vectorized_elementwise_kernel"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn>("
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn::Params)",
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn"),
    ("nvjet_sm90_tst_64x8_64x16_2x4_h_bz_NNT", "nvjet_sm90_tst_64x8_64x16_2x4_h_bz_NNT"),
    ("aten::mm", "aten::mm"), ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)")])
def test_a_kernel_is_named_by_its_function(name, label):
    """A C++ kernel by its function's name, never cut inside its namespaces."""
    assert A.kernel_label(name) == label


def test_names_counts_a_label_twice():
    both = ["void at::native::vectorized_elementwise_kernel<8, a>(int)",
            "void at::native::vectorized_elementwise_kernel<4, b>(int)", "aten::mm", "aten::add"]
    assert A.names(both) == "vectorized_elementwise_kernel (x2), aten::mm" and A.names([]) == "none"


@pytest.mark.parametrize("profiled,says", [(2.1e-6, "in line with it"),
                                           (7.5e-3, "took 375x that"),
                                           (1e-6, "holds what the profiler's kernel time")])
def test_the_profiled_matmul_is_held_against_the_timed_one(profiled, says):
    """4.1 holds the profiler's few calls against the timer's many: in line, longer (which to
    quote), shorter (what the kernel time leaves out)."""
    text = p4_fusion.against_timed(profiled, 2e-6 if profiled < 1e-3 else 2e-5, 0.01)
    assert says in text and ("the one to quote" in text) == (profiled > 1e-3)


@pytest.mark.parametrize("rows,skipped,says", [
    ([{"impl": "triton", "seq": 512, "status": "ok", "tflops_per_s": 192.0},
      {"impl": "cudnn", "seq": 512, "status": "ok", "tflops_per_s": 203.0}], {},
     "rooflab's Triton FlashAttention against SDPA's fused backends (TFLOP/s): N=512 triton 192, "
     "cudnn 203."),
    ([], {"triton": "rooflab's Triton kernel needs a GPU"}, "Not run here: rooflab's Triton kernel "
     "needs a GPU."),
    ([{"impl": "triton", "seq": 256, "status": "unsupported", "error": "out of resource"},
      {"impl": "cudnn", "seq": 256, "status": "ok", "tflops_per_s": 70.0}], {},
     "rooflab's Triton kernel failed here at N=256: out of resource.")])
def test_flash_vs_sdpa_says_the_figures_or_why_there_are_none(rows, skipped, says):
    assert p5_attention.flash_vs_sdpa({"rows": rows, "skipped": skipped})["text"] == says


def test_against_standard_lists_the_first_and_ranges_the_others():
    std = {n: {"device_s": t, "extra_peak_bytes": 100.0} for n, t in ((256, 1.0), (512, 4.0))}
    ok = [{"impl": "flash", "seq": 256, "device_s": 0.5, "extra_peak_bytes": 50.0},
          {"impl": "flash", "seq": 512, "device_s": 1.0, "extra_peak_bytes": 25.0},
          {"impl": "triton", "seq": 256, "device_s": 2.0, "extra_peak_bytes": 1.0},  # slower
          {"impl": "triton", "seq": 512, "device_s": 0.5, "extra_peak_bytes": 1.0},
          {"impl": "cudnn", "seq": 512, "device_s": 2.0, "extra_peak_bytes": 1.0}]
    lines, speedups = p5_attention.against_standard(std, ok, ["flash", "triton", "cudnn"],
                                                    {256, 512})
    assert lines == ["flash at 256: 2x faster, 2x less extra memory",
                     "flash at 512: 4x faster, 4x less extra memory",
                     "triton from 2x slower at 256 to 8x faster at 512", "cudnn at 512: 2x faster"]
    assert sorted(speedups) == [0.5, 2.0, 2.0, 4.0, 8.0]
    more = [{**ok[0], "extra_peak_bytes": 250.0}]  # a fused call that took more memory
    assert p5_attention.against_standard(std, more, ["flash"], {256})[0] == [
        "flash at 256: 2x faster, 2.5x more extra memory"]
    none = {256: {**std[256], "extra_peak_bytes": 0.0}}  # standard measured no extra memory
    assert p5_attention.against_standard(none, ok, ["flash"], {256})[0] == [
        "flash at 256: 2x faster"]
