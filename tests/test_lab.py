"""`rooflab lab` on the CPU: every part, written as it goes, resumable, one failure contained."""
import json
import re

import pytest

from rooflab.cli import main
from rooflab.lab import parts as LP
from rooflab.lab import run as LR


def test_all_parts_ok_and_outputs_written(cpu_report):
    out, res = cpu_report
    assert {k: v["status"] for k, v in res["parts"].items()} == {
        **{str(n): "ok" for n in range(1, 6)}, "6": "skipped"}  # part 6 needs two GPUs
    assert res["parts"]["6"]["reason"] == "not run: no GPU (tensor parallelism needs 2)"
    assert res["answers"]["B.tensor_parallel"]["text"].startswith("Not run: no GPU")
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["parts"]["3"]["result"]["headline"] == res["parts"]["3"]["result"]["headline"]
    assert (out / "index.html").stat().st_size > 10_000
    pngs = {p.name for p in (out / "figures").iterdir()}
    assert {"p2_gemm_gemv.png", "p3_sweeps.png", "p3_measured.png", "p5_memory.png"} <= pngs
    assert (out / "tables" / "p1_gemm.csv").read_text().startswith("n,macs,flops")
    assert any((out / "traces").iterdir())  # Chrome traces of the fusion and attention parts


def test_answers_come_from_the_numbers(cpu_report):
    _, res = cpu_report
    p2 = res["parts"]["2"]["result"]
    crossover = p2["data"]["gemm"]["crossover_n"]
    assert f"n >= {crossover}" in p2["answers"]["2.1.2"]["text"]
    assert p2["answers"]["2.1.2"]["figures"]["crossover_n"] == crossover
    p5 = res["parts"]["5"]["result"]
    slope = p5["data"]["sweep"]["analysis"]["memory_slope"]["standard"]
    assert 1.7 < slope < 2.3  # standard attention's memory is O(N^2), measured
    assert f"{slope:.2f}" in p5["answers"]["5.1"]["text"]
    assert any("needs a GPU" in s for s in p5["not_measured"])  # said plainly, not hidden


def test_every_question_answered_by_its_id(cpu_report):
    from rooflab.lab.answers import IDS
    out, res = cpu_report
    on_disk = json.loads((out / "results.json").read_text())["answers"]
    assert list(on_disk) == list(IDS)  # the lab's order, every id
    assert all(a["text"] and isinstance(a["figures"], dict) for a in on_disk.values())
    page = (out / "index.html").read_text()
    assert all(f"id='q{q}'" in page for q in IDS)


def test_the_warm_timing_is_checked_against_an_independent_clock(cpu_report):
    _, res = cpu_report
    a = res["answers"]["1.2"]
    ratio = a["figures"]["timer_over_independent"]
    assert ratio == pytest.approx(a["figures"]["warm_s"] / a["figures"]["independent_s"])
    assert f"a ratio of {ratio:.2f}" in a["text"] and "independent clock" in a["text"]
    assert a["figures"]["launch_s"] is None and not a["figures"]["launch_bound"]  # a CPU's call
    assert "to launch one call" not in a["text"]                                  # is its work
    # whether the two agree is a timing comparison: benchmarks/timer_agreement.py holds it


def test_prefill_sweep_answers_follow_the_numbers(cpu_report):
    _, res = cpu_report
    a = res["answers"]["3.4.3"]
    f = a["figures"]
    # batch 32, as the lab sweeps it: the MLP point moves right with the length...
    assert f["prefill_L64_mlp_intensity"] < f["prefill_L4096_mlp_intensity"]
    # ...while gemma's layer point turns back left once the L^2 score matrix dominates
    assert f["prefill_L4096_layer_intensity"] < f["prefill_L1024_layer_intensity"]
    assert "moves left" in a["text"] and "L^2" in a["text"]
    d = res["answers"]["3.4.2"]["figures"]
    assert d["decode_B64_intensity"] > 40 * d["decode_B1_intensity"]  # about linear in B
    lab_roof = res["answers"]["3.4.1"]["text"].split("The projections")[0]
    assert "prefill is compute-bound and decode memory-bound" in lab_roof  # the lab's verdict


def test_the_lab_speedup_claim_is_tested_not_repeated(cpu_report):
    _, res = cpu_report
    a = res["answers"]["5.2"]
    s = a["figures"]["speedups"]
    inside = sum(2 <= x <= 4 for x in s)
    span = f"{min(s):.1f}-{max(s):.1f}x here"
    assert (f"at every length ({span})" if inside in (0, len(s)) else
            f"at {inside} of {len(s)} comparisons ({span})") in a["text"]
    # each length's ratio in words: "3.3x slower", never "0.3x faster"
    assert not re.search(r"\b0\.\d+x faster", a["text"])
    assert sum(w in a["text"] for w in ("x faster", "x slower", "as fast")) >= 1


def test_resume_skips_finished_parts(cpu_report, tmp_path):
    out, _ = cpu_report
    seen = []
    LR.run_lab("cpu", quick=True, out_dir=str(out), resume=True,
           on_part=lambda n, e: seen.append((n, e.get("resumed", False))))
    # finished parts are kept; a skipped one (6: no second GPU) is looked at again
    assert seen == [(n, True) for n in range(1, 6)] + [(6, False)]


@pytest.mark.slow
def test_each_figure_is_drawn_once_and_a_resume_redraws_what_is_gone(tmp_path, monkeypatch):
    from rooflab.report import plots
    drawn = []
    real = plots.render_png
    monkeypatch.setattr(plots, "render_png", lambda spec, path: (drawn.append(spec["name"]),
                                                                 real(spec, path))[1])
    LR.run_lab("cpu", parts=(1, 2), quick=True, out_dir=str(tmp_path))
    # part 1 draws its two, part 2 its two: none again when part 2 or the run ends
    assert sorted(drawn) == ["p1_cold", "p1_latency", "p2_gemm_gemv", "p2_measured"]
    (tmp_path / "figures" / "p1_latency.png").unlink()
    drawn.clear()
    LR.run_lab("cpu", parts=(1, 2), quick=True, out_dir=str(tmp_path), resume=True)
    assert sorted(drawn) == ["p1_cold", "p1_latency", "p2_gemm_gemv", "p2_measured"]
    assert (tmp_path / "figures" / "p1_latency.png").exists()


@pytest.mark.slow
def test_a_failing_part_leaves_the_others(tmp_path, monkeypatch):
    def boom(ctx):
        raise RuntimeError("simulated crash in part 2")

    monkeypatch.setitem(LP.PARTS, 2, ("Roofline", boom))
    res = LR.run_lab("cpu", parts=(1, 2), quick=True, out_dir=str(tmp_path))
    assert res["parts"]["1"]["status"] == "ok"
    assert res["parts"]["2"]["status"] == "failed"
    assert "simulated crash" in res["parts"]["2"]["error"]
    page = (tmp_path / "index.html").read_text()
    assert "simulated crash in part 2" in page and 'id="part1"' in page


@pytest.mark.parametrize("argv,needle", [
    (["lab", "--parts", "9"], "--parts"),
    (["lab", "--parts", "x"], "--parts"),
    (["lab", "--device", "tpu"], "--device"),
    (["lab", "--gpu", "H2000"], "unknown GPU"),
    (["lab", "--dtype", "fp7"], "unknown dtype"),
    (["lab", "--dtype", "fp8"], "--dtype"),
])
def test_lab_bad_input(capsys, argv, needle):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1


def test_lab_cuda_without_gpu_is_one_line(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["lab", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_the_measured_roof_is_named_after_the_device_measured():
    from rooflab import hardware as H
    from rooflab.lab.context import Context
    from rooflab.measure.ceilings import Ceilings

    def ctx(name, gpu):
        c = Ceilings("cuda", name, 4e12, {"bf16": 7e14}, {}, {}, "today")
        return Context("cuda", H.lookup(gpu), c, "/tmp")

    assert ctx("NVIDIA H200", "A100-80GB").measured.name == "H200 (measured)"  # not the A100
    assert ctx("NVIDIA H200", "A100-80GB").cache_bytes == H.lookup("H200").l2_bytes
    odd = ctx("NVIDIA Mystery GPU", "RTX A6000").measured  # not in the table: its own name
    assert odd.name == "NVIDIA Mystery GPU (measured)"


def test_explain_uses_the_measured_ridge():
    from rooflab.studies.layer_measure import explain
    from rooflab.measure import op_classes as OC
    from rooflab.measure.ceilings import Ceilings

    ceil = Ceilings("cuda", "H200", 4e12, {"bf16": 8e14}, {}, {}, "today")  # ridge 200
    d = {"cache_copy_bytes": 0, "ops": ["mul"], "floors_s": 0.0, "predicted_s": 1e-5,
         "kernels": 1, "generic": [], "flops": 100 * 10**6, "bytes": 10**6}  # 100 FLOP/B
    costs = OC.OpCosts("cuda", {"elementwise": 1e-6}, {4: 3e11})
    why = explain("mlp.mul", d, costs, 1024, 2e-5, ceil, "bf16")
    assert "of the measured copy bandwidth" in why  # memory-bound: 100 < 200, though > 50


def unexplained_above_roof(res: dict, tolerance: float = 0.0) -> list[str]:
    """Every measured figure in a report that is above its roof without a stated reason."""
    from rooflab import roofline as R
    bad = []
    for num, p in res["parts"].items():
        r = p.get("result") or {}
        for spec in r.get("plots", []):
            if spec["kind"] != "roofline" or not spec["roofs"][0]["measured"]:
                continue
            roof = spec["roofs"][0]
            rf = R.Roof("", roof["peak_flops_per_s"], roof["mem_bandwidth_bytes_per_s"])
            for pt in spec["points"]:
                if pt["kind"] == "measured" and pt["intensity"] > 0 and pt["flops_per_s"] > \
                        R.attainable(rf, pt["intensity"]) * (1 + tolerance) and \
                        "above_roof" not in pt["hover"]:
                    bad.append(f"part {num} {spec['name']}: {pt['label'] or pt['group']}")
        for t in r.get("tables", []):
            for col in ("fraction_of_roof", "fraction_of_copy_bw"):
                if col in t["columns"]:
                    i = t["columns"].index(col)
                    why = t["columns"].index("above_roof") if "above_roof" in t["columns"] \
                        else None
                    bad += [f"part {num} {t['name']}: {row[0]}" for row in t["rows"]
                            if row[i] and row[i] > 1 + tolerance and (why is None or not row[why])]
    return bad


def test_no_unexplained_point_above_a_roof(cpu_report):
    _, res = cpu_report
    assert unexplained_above_roof(res) == []


def test_a_point_above_a_measured_roof_raises_it(tmp_path):
    from rooflab.lab.context import hold_roofline
    spec = {"name": "p", "kind": "roofline",
            "roofs": [{"label": "cpu (measured) fp32", "peak_flops_per_s": 100e9,
                                    "mem_bandwidth_bytes_per_s": 10e9, "ridge": 10.0,
                                    "measured": True}],
            "points": [{"label": "GEMM", "intensity": 50.0, "flops_per_s": 120e9,
                        "kind": "measured", "group": "g", "hover": {"bytes": 1 << 30}},
                       {"label": "GEMV", "intensity": 0.5, "flops_per_s": 20e9,
                        "kind": "measured", "group": "g", "hover": {"bytes": 1 << 20}}]}
    notes = hold_roofline(spec, cache_bytes=32 << 20)
    assert spec["roofs"][0]["peak_flops_per_s"] == 120e9 and spec["roofs"][0]["ridge"] == 12.0
    assert notes[0].startswith("p: the measured roof was raised for this run: GEMM reached 0.12")
    assert "on-chip cache" in spec["points"][1]["hover"]["above_roof"]  # 1 MiB: the cache's
    assert spec["roofs"][0]["mem_bandwidth_bytes_per_s"] == 10e9
    res = {"parts": {"2": {"result": {"plots": [spec], "tables": []}}}}
    assert unexplained_above_roof(res) == []


def test_decode_answer_explains_a_point_above_the_copy_ceiling():
    from rooflab import roofline as R
    from rooflab.lab.parts import p5_attention as P5

    def row(impl, s, frac):
        return {"impl": impl, "kv_len": 4096, "status": "ok", "device_s": s, "flops": 1e8,
                "bytes_fused": 1.3e8, "fraction_of_copy_bw": frac}

    dec = {"batch": 64, "heads": 32, "kv_heads": 8, "head_dim": 128, "dtype": "bf16",
           "rows": [row("cudnn", 243e-6, 1.03), row("triton_decode", 257e-6, 0.98)],
           "skipped": {}}
    text = P5.decode_answer(dec, R.Roof("H200", 7.6e14, 4.25e12))["text"]
    assert "cudnn 243 us (103% of copy bandwidth)" in text and "4,096 tokens 98%" in text
    assert "Above 100%: the ceiling is a copy" in text
    dec["rows"][0]["fraction_of_copy_bw"] = 0.97
    assert "Above 100%" not in P5.decode_answer(dec, R.Roof("H200", 7.6e14, 4.25e12))["text"]


def test_a_decode_row_above_the_copy_ceiling_says_why_in_its_row_and_point():
    """A decode measured faster than the copy ceiling carries the reason in its table row and
    its roofline point, whose roof then stays where the copy test put it."""
    from rooflab import roofline as R
    from rooflab.studies import attention as ATT
    from rooflab.lab.context import hold_roofline
    from rooflab.lab.parts import p5_attention as P5

    fn = ATT.implementation("standard", "cpu")[0]
    fast, slow = (ATT.decode_point("standard", fn, 256, 2, 4, 2, 64, "fp32", "cpu", bw)
                  for bw in (1e6, 1e15))  # a ceiling far below / far above what it reaches
    assert fast["fraction_of_copy_bw"] > 1 and fast["above_roof"] == ATT.READS_ONLY
    assert slow["fraction_of_copy_bw"] < 1 and "above_roof" not in slow
    dec = {"batch": 2, "heads": 4, "kv_heads": 2, "rows": [fast]}
    sw = {"rows": [], "analysis": {"oom_seq": {}}}
    roof = R.Roof("cpu (measured) fp32", 1e15, 1e6, "fp32", True)
    spec = P5.attention_plots(sw, roof, dec)[-1]
    assert spec["points"][0]["hover"]["above_roof"] == ATT.READS_ONLY
    assert hold_roofline(spec, cache_bytes=None) == []  # not raised: the reason is stated
    assert spec["roofs"][0]["mem_bandwidth_bytes_per_s"] == 1e6


def test_part3_says_when_the_profiled_ops_outlast_the_call():
    """On a CPU the ops' profiled times can sum to more than the unprofiled call: 3.3 says so
    rather than show kernels longer than the call without a word, and holds the prediction
    against the timed call too."""
    from rooflab.lab.parts.p3_layer import questions_measured
    m = {"phase": "decode", "batch": 1, "kv_len": 512, "mode": "eager", "wall_s": 1.31e-3,
         "device_s": 1.31e-3, "kernel_s": 1.52e-3, "predicted_s": 5.36e-4,
         "predicted_over_kernel": 5.36e-4 / 1.52e-3,
         "roofline_s": 3.8e-4, "device_unstable": False, "device_cv": 0.02,
         "timeline": {"busy_us": 1000, "span_us": 1500, "gaps": 3, "largest_gap_us": 50},
         "components": [], "launches_per_iter": 60}
    text = questions_measured([m], [], "cpu")["3.3"]["text"]
    assert "kernels 1.52 ms (1.16x the call timed without the profiler" in text
    assert "predicted 536 us (0.35 of measured, 0.41 of the call timed without it;" in text
    m["kernel_s"] = 1.2e-3
    assert "without the profiler" not in questions_measured([m], [], "cpu")["3.3"]["text"]
    assert "timed without it" not in questions_measured([m], [], "cpu")["3.3"]["text"]
    profile = questions_measured([m], [], "cpu")["B.decode_profile"]["text"]  # ops under wall:
    assert "1.2 ms in them of 1.31 ms wall; " in profile                     # nothing to explain
    slowed = questions_measured([{**m, "kernel_s": 1.52e-3}], [], "cpu")["B.decode_profile"]
    assert "1.31 ms wall timed without the profiler (under it the same ops ran slower)" in \
        slowed["text"]
    assert "L2 flushed" not in questions_measured([m], [], "cpu")["3.3"]["text"]  # not flushed
    assert "started with L2 flushed" in questions_measured(
        [{**m, "l2_flushed": True}], [], "cuda")["3.3"]["text"]


def test_part3_names_every_measured_rate(cpu_report):
    """Answer 3.3 shows what the roofline misses from the run's own op costs: floors, the
    generic and roll rates, and each kind of attention kernel's rate (here the CPU's)."""
    from rooflab.lab.parts.p3_layer import op_costs_text
    _, res = cpu_report
    p3 = res["parts"]["3"]["result"]
    oc = p3["data"]["measured"][-1]["op_costs"]
    text = p3["answers"]["3.3"]["text"]
    assert op_costs_text(oc) in text and "torch.roll" in text
    kinds = [k for k, a in oc["attention"].items() if "bound" in a]
    assert kinds and all(k in text for k in kinds)
    one = {"floor_s": {"matmul": 2e-6}, "generic_elements_per_s": {2: 4e11},
           "attention": {"cudnn d256 16-bit mask prefill": {"bound": "compute",
                                                            "flops_per_s": 2.71e14},
                         "cudnn d256 16-bit mask decode": {"bound": "memory",
                                                           "bytes_per_s": 3.5e12},
                         "efficient d96 16-bit none decode": {"error": "CUDA out of memory"}}}
    t = op_costs_text(one)
    assert "matmul 2.0 us" in t and "400 G elements/s at 2 bytes" in t and "roll" not in t
    assert "mask prefill 271 TFLOP/s" in t and "mask decode 3.5 TB/s" in t
    assert "d96 16-bit none decode not measured (CUDA out of memory): on the roofline" in t


def test_part3_names_the_sliding_window_and_no_idle_device_on_a_cpu(cpu_report):
    """gemma's default layer is a sliding-window one: 3.1 says so, and counts a decode over the
    window's keys; on a CPU nothing waits for a launch, so the decode profile says where the
    time outside the ops goes instead."""
    from rooflab import models as M
    _, res = cpu_report
    p3 = res["parts"]["3"]["result"]
    text = p3["answers"]["3.1"]["text"]
    cfg = M.load("gemma-3-270m-it")
    assert f"one sliding-window layer (window {cfg.sliding_window})" in text
    dec = p3["data"]["decode"]
    keys = min(dec["kv_len"], cfg.sliding_window)
    core = next(c for c in dec["components"] if c["name"] == "attn.core")
    assert f"(its last {keys:,} keys)" in text
    assert core["macs"] == 2 * cfg.heads * cfg.head_dim * keys * dec["batch"]  # QK^T and PV
    assert "with the causal sliding-window mask" in text
    profile = res["answers"]["B.decode_profile"]["text"]
    assert "waits for the host" not in profile and "the interpreter between ops" in profile


def test_the_run_counts_its_unstable_timings_and_says_so(cpu_report):
    from rooflab.lab.answers import unstable_text, unstable_timings
    out, res = cpu_report
    counts = res["meta"]["unstable_timings"]
    assert counts == unstable_timings(res["parts"])
    flagged = sum(r.get("unstable") is True for r in res["parts"]["5"]["result"]["data"]["sweep"]
                  ["rows"] + res["parts"]["5"]["result"]["data"]["decode"]["rows"])
    assert counts.get("5", 0) >= flagged  # part 5's rows are among its flagged timings
    note = res["meta"]["unstable_note"]
    assert note == unstable_text(counts) and (note == "") == (not counts)
    if note:
        assert note in (out / "index.html").read_text().replace("&#x27;", "'")
    parts = {"1": {"result": {"data": {"rows": [{"unstable": True}, {"torch_unstable": True},
                                                {"unstable": False}]}}},
             "2": {"result": {"data": {"x": 1}}}, "6": {"status": "skipped"}}
    assert unstable_timings(parts) == {"1": 2}
    assert unstable_text({"1": 2, "5": 3}).startswith("5 timings were unstable")


def test_an_interrupt_between_a_parts_writes_leaves_it_unrecorded(tmp_path, monkeypatch):
    """Ctrl-C after a part's first figure and before its last file: results.json does not say
    the part is done (its files are not all there), and --resume runs it again, whole."""
    from rooflab.report import plots
    drawn, real = [], plots.render_png

    def interrupted(spec, path):
        if drawn:
            raise KeyboardInterrupt
        drawn.append(spec["name"])
        return real(spec, path)

    monkeypatch.setattr(plots, "render_png", interrupted)
    with pytest.raises(KeyboardInterrupt):
        LR.run_lab("cpu", parts=(2,), quick=True, out_dir=str(tmp_path))
    assert drawn and not (tmp_path / "results.json").exists()
    assert not [p.name for p in (tmp_path / "figures").iterdir() if ".tmp" in p.name]
    monkeypatch.setattr(plots, "render_png", real)
    res = LR.run_lab("cpu", parts=(2,), quick=True, out_dir=str(tmp_path), resume=True)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["parts"]["2"]["status"] == "ok" and res["parts"]["2"].get("resumed") is None
    assert {f"{s['name']}.png" for s in on_disk["parts"]["2"]["result"]["plots"]} <= {
        p.name for p in (tmp_path / "figures").iterdir()}




def test_the_run_resolves_its_dtypes_once():
    from rooflab.lab.context import Dtypes
    from rooflab.measure.ceilings import Ceilings

    gpu = Ceilings("cuda", "g", 1e12, {"fp32": 1e13, "bf16": 1e14})
    cpu = Ceilings("cpu", "c", 1e10, {"fp32": 1e11})
    assert Dtypes.resolve("cpu", cpu, "bf16") == Dtypes("bf16", "fp32", "fp32")
    assert Dtypes.resolve("cpu", cpu, "fp32") == Dtypes("fp32", "fp32", "fp32")
    assert Dtypes.resolve("cuda", gpu, "fp16").roof == "bf16"


@pytest.mark.slow
def test_lab_dtype_reaches_the_layer_analytic_and_measured(tmp_path):
    """`rooflab lab --dtype fp16`: part 3's analytic layer in fp16, its measured layer in what
    this device runs (fp32 on a CPU), both recorded; resume recomputes under another dtype."""
    res = LR.run_lab("cpu", parts=[3], quick=True, out_dir=str(tmp_path), dtype="fp16")
    part = res["parts"]["3"]
    assert part["options"]["dtype"] == "fp16" and res["meta"]["dtypes"]["layer"] == "fp16"
    data = part["result"]["data"]
    assert data["model"]["dtype"] == "fp16" and data["decode"]["dtype"] == "fp16"
    assert {m["dtype"] for m in data["measured"]} == {"fp32"}
    again = LR.run_lab("cpu", parts=[3], quick=True, out_dir=str(tmp_path), resume=True)
    assert "dtype='fp16'" in again["parts"]["3"].get("recomputed", "")


def test_an_implementation_not_profiled_says_why(cpu_report):
    _, res = cpu_report
    assert "triton not profiled: rooflab's Triton kernel needs a GPU" in \
        res["answers"]["B.flash_analysis"]["text"]
