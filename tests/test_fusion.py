"""Part 4 on the CPU: GeLU four ways (what the CPU can run), the explanation from the numbers."""
from rooflab.studies import fusion


def test_gelu_study_on_cpu():
    g = fusion.gelu_study(1 << 12, "fp32", "cpu", copy_bw=3e10)
    rows = {r["variant"]: r for r in g["rows"]}
    unfused = rows["unfused (basic ops)"]
    assert unfused["kernels_per_call"] == 9  # mul x6, add x2, tanh: one op per line of the chain
    assert unfused["bytes_predicted"] == 4 * 4096 * (12 + 9)  # 344064: x * x reads x once
    assert rows["F.gelu (PyTorch fused)"]["kernels_per_call"] == 1
    assert all(r["max_abs_err"] < 1e-5 for r in rows.values() if "max_abs_err" in r)
    assert g["skipped"][0]["variant"] == "rooflab Triton kernel"


def _rows(frac):
    return [{"variant": "unfused (basic ops)", "kernels_per_call": 9, "bytes_predicted": 22e6,
             "bytes_per_kernel": 22e6 / 9, "device_s": 10e-6},
            {"variant": "F.gelu (PyTorch fused)", "kernels_per_call": 1, "bytes_predicted": 2e6,
             "bytes_per_kernel": 2e6, "device_s": 1e-6, "fraction_of_copy_bw": frac}]


def test_explanation_follows_the_numbers():
    mem = fusion.explain_gelu(_rows(0.95))
    assert "Traffic ratio 11.0x" in mem and "time ratio 10.0x" in mem and "memory-bound" in mem
    arith = fusion.explain_gelu(_rows(0.25))
    assert "only 25% of the measured copy bandwidth" in arith and "memory-bound" not in arith
    assert fusion.explain_gelu(_rows(0.9)[:1]).startswith("Not enough")


def test_mlp_study_rows_on_the_cpu():
    from rooflab.studies import fusion as FU

    m = FU.mlp_study(64, 128, 8, "fp32", "cpu", ("eager",))
    (r,) = m["rows"]
    assert r["mode"] == "eager" and r["device_s"] > 0 and r["first_call_s"] > 0
    assert r["kernel_s"] is None and r["overhead_s"] is None  # no device kernels on a CPU
    ops = {k["name"] for k in r["kernels"]}
    assert {"aten::mm", "aten::gelu", "aten::mul"} <= ops  # gate/up/down, act, product


def test_compile_verdict_names_cpu_overhead():
    from rooflab.lab.parts.p4_fusion import compile_verdict

    rows = [{"mode": "eager", "wall_s": 90e-6, "kernel_s": 41e-6},
            {"mode": "default", "wall_s": 129e-6, "kernel_s": 36e-6},
            {"mode": "fast", "wall_s": 60e-6, "kernel_s": 30e-6},
            {"mode": "broken", "error": "no compiler"}]
    (v,) = compile_verdict(rows)
    assert v.startswith("default is slower per call than eager (wall 129 vs 90 us)")
    assert compile_verdict([{"mode": "eager", "wall_s": 1.0, "kernel_s": None}]) == []


def test_quiet_autotune_restores_what_it_silenced():
    import logging

    from torch._inductor import select_algorithm as sa

    from rooflab.studies.fusion import quiet_autotune
    before = (sa.PRINT_AUTOTUNE, logging.getLogger(sa.__name__).level)
    with quiet_autotune():
        assert sa.PRINT_AUTOTUNE is False
        assert logging.getLogger(sa.__name__).level == logging.CRITICAL
    assert (sa.PRINT_AUTOTUNE, logging.getLogger(sa.__name__).level) == before


def test_why_the_compiled_kernel_time_moved():
    """4.4's explanation: the kernel time by kind of kernel, eager against compiled."""
    from rooflab.lab.parts import p4_fusion as F
    eager = {"kernels": [{"name": "sm90_gemm", "category": "gemm", "us_per_call": 30.0},
                         {"name": "gelu", "category": "elementwise", "us_per_call": 11.0}]}
    comp = {"kernels": [{"name": "triton_tem_fused_addmm_gelu", "category": "gemm",
                         "us_per_call": 52.0},
                        {"name": "triton_poi_fused_mul", "category": "elementwise",
                         "us_per_call": 3.0}]}
    text = F.why_kernel_time(eager, comp)
    assert "gemm 30 us -> 52 us" in text and "elementwise 11 us -> 3 us" in text
    assert "largest change is in gemm" in text and "triton_tem_fused_addmm_gelu" in text
    assert F.why_kernel_time({"kernels": []}, comp) == ""
