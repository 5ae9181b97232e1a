"""The five parts of the lab as functions of a context, each returning plain data: the numbers,
plot specifications (data, drawn by report/), answers written from this run's numbers, and what
was not measured here and why."""
from __future__ import annotations

import torch

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import models as M
from rooflab import roofline as R
from rooflab.lab import attention as ATT
from rooflab.lab import answers as A
from rooflab.lab import decoder, fusion, metrics
from rooflab.lab.context import Context, hold_roofline, pt, result, roof_spec, table
from rooflab.measure.achieved import hold
from rooflab.measure.achieved import measure as measure_point
from rooflab.measure.dtypes import torch_dtype


# --- part 1 -----------------------------------------------------------------------------------
def part1(ctx: Context) -> dict:
    d = metrics.run(ctx.device, ctx.quick)
    rows = d["naive_vs_torch"]
    big = rows[-1]
    cw = d["cold_vs_warm"]
    plots = [
        {"kind": "lines", "name": "p1_latency", "title": "Triple-loop GEMM vs torch.matmul",
         "xlabel": "n (M = K = N)", "ylabel": "median device time", "yunit": "s", "logx": True,
         "logy": True,
         "series": {"pure-Python triple loop": [[r["n"], r["naive_median_s"]] for r in rows],
                    f"torch.matmul ({ctx.device})": [[r["n"], r["torch_median_s"]] for r in rows]}},
        {"kind": "bars", "name": "p1_cold", "title": f"torch.matmul n={cw['n']}, run after run "
         "with no warm-up (wall time: the first call is host work)", "ylabel": "wall time",
         "yunit": "s",
         "labels": [f"run {i + 1}" for i in range(len(cw["cold_samples_s"]))],
         "values": cw["cold_samples_s"]},
    ]
    answers = A.part1(d, ctx.device)
    tables = [table("p1_gemm", "Triple loop vs torch.matmul", rows,
                    ["n", "macs", "flops", "bytes", "intensity", "naive_median_s",
                     "torch_median_s", "speedup", "torch_cv"])]
    return result(f"torch.matmul {big['speedup']:,.0f}x faster than the triple loop at "
                  f"n={big['n']}", d, plots, answers, tables=tables)


# --- part 2 -----------------------------------------------------------------------------------
def crossover_table() -> list[dict]:
    rows = []
    for hw in H.PRESETS.values():
        for dt in ("fp32", "tf32", "bf16", "fp16", "fp8"):
            if dt in hw.peak_flops_per_s:
                roof = R.Roof.of(hw, dt)
                rows.append({"gpu": hw.name, "dtype": dt, "ridge": roof.ridge,
                             "gemm_crossover_n": R.crossover(
                                 roof, lambda n, dt=dt: C.gemm(n, n, n, dt))})
    return rows


def part2(ctx: Context) -> dict:
    gpu_roof = R.Roof.of(ctx.gpu, "fp32")
    sizes = [1024, 2048, 4096, 8192]
    gemm, gemv = R.sweep("gemm", gpu_roof, sizes), R.sweep("gemv", gpu_roof, sizes)
    mdt = ctx.measured_dtype
    m_roof = R.Roof.of(ctx.measured, mdt)
    tdt = torch_dtype(mdt)
    m_sizes = [256, 512, 1024] if ctx.device == "cpu" else [512, 1024, 2048, 4096, 8192]
    if ctx.quick:
        m_sizes = m_sizes[:3]
    achieved = []
    tick = ctx.progress("part 2: measured GEMM/GEMV", 2 * len(m_sizes))
    for n in m_sizes:
        a = torch.randn(n, n, device=ctx.device, dtype=tdt)
        x = torch.randn(n, 1, device=ctx.device, dtype=tdt)
        for fam, c, args in (("GEMM", C.gemm(n, n, n, mdt), (a, a)), ("GEMV", C.gemv(n, n, mdt), (a, x))):
            p = measure_point(torch.matmul, c.named(f"{fam} n={n}"), m_roof, *args,
                              device=ctx.device, budget_s=0.1)
            achieved.append({"family": fam, "n": n, **p})
            tick()
    m_roof, achieved, roof_notes = hold(m_roof, achieved, ctx.cache_bytes)
    plots = [
        {"kind": "roofline", "name": "p2_gemm_gemv", "title": f"GEMM and GEMV, fp32, on "
         f"{ctx.gpu.name} (datasheet)", "roofs": [roof_spec(gpu_roof)],
         "points": [pt(f"GEMM n={r.name[2:]}", r.intensity, r.attainable_flops_per_s,
                       group="GEMM", flops=r.flops, bytes=r.bytes, time_floor_s=r.time_floor_s)
                    for r in gemm.points] +
                   [pt(f"GEMV n={r.name[2:]}", r.intensity, r.attainable_flops_per_s,
                       group="GEMV", flops=r.flops, bytes=r.bytes, time_floor_s=r.time_floor_s)
                    for r in gemv.points]},
        {"kind": "roofline", "name": "p2_measured", "title": f"Measured matmuls on this "
         f"{ctx.device} ({ctx.ceilings.device_name}), {mdt}", "roofs": [roof_spec(m_roof)],
         "points": [pt(p["name"], p["intensity"], p["attainable_flops_per_s"], "predicted",
                       p["family"], flops=p["flops"], bytes=p["bytes"],
                       predicted_s=p["time_floor_s"]) for p in achieved] +
                   [pt(p["name"], p["intensity"], p["achieved_flops_per_s"], "measured",
                       p["family"], flops=p["flops"], bytes=p["bytes"],
                       predicted_s=p["time_floor_s"], measured_s=p["measured_s"],
                       **({"above_roof": p["above_roof"]} if "above_roof" in p else {}))
                    for p in achieved]},
    ]
    answers = A.part2(ctx.gpu.name, gemm.as_dict(), gemv.as_dict(), achieved, crossover_table(),
                      roof_notes)
    return result(f"fp32 GEMM compute-bound from n = {gemm.crossover_n} on {ctx.gpu.name}",
                  {"gemm": gemm.as_dict(), "gemv": gemv.as_dict(), "achieved": achieved,
                   "crossover_table": crossover_table(),
                   "measured_roof": roof_spec(m_roof)}, plots, answers,
                  tables=[table("p2_achieved", f"Measured on {ctx.ceilings.device_name}", achieved,
                                ["name", "flops", "bytes", "intensity", "measured_s",
                                 "time_floor_s", "achieved_flops_per_s",
                                 "achieved_bandwidth_bytes_per_s", "fraction_of_roof", "bound",
                                 "above_roof"]),
                          table("p2_crossover", "GEMM (M=N=K=n) turns compute-bound at n >= "
                                "crossover, per GPU and dtype (datasheet)", crossover_table(),
                                ["gpu", "dtype", "ridge", "gemm_crossover_n"])])


LAYER_COLUMNS = ["name", "macs", "flops", "bytes", "bytes_fused", "intensity", "bound",
                 "time_floor_s"]


# --- part 3 -----------------------------------------------------------------------------------
PREFILL_BATCH = 1  # the lab's prefill sweep: one sequence, length 64 -> 4096


def part3(ctx: Context) -> dict:
    cfg = M.load("gemma-3-270m-it")
    roof = R.Roof.of(ctx.gpu, cfg.dtype) if cfg.dtype in ctx.gpu.peak_flops_per_s else \
        R.Roof.of(ctx.gpu, "fp32")
    sw = decoder.sweeps(cfg, roof, kv_len=1024, prefill_batch=PREFILL_BATCH)
    dec = decoder.analyze(cfg, M.Phase.decode(1, 1024), "sliding", roof)
    pre = decoder.analyze(cfg, M.Phase.prefill(PREFILL_BATCH, 1024), "sliding", roof)
    measured, not_measured = measure_layers(ctx, cfg)
    pts = [pt(s["label"], s["intensity"], s["attainable_flops_per_s"], group=s["what"],
              flops=s["flops"], bytes=s["bytes"], time_floor_s=s["time_floor_s"]) for s in sw]
    plots = [{"kind": "roofline", "name": "p3_sweeps", "title": f"{cfg.name} layer and MLP "
              f"on {roof.label}: decode B=1..64, prefill L=64..4096 (B={PREFILL_BATCH})",
              "roofs": [roof_spec(roof)], "points": pts}]
    if measured:
        plots.append(measured_layer_plot(ctx, measured))
        roof_notes = hold_roofline(plots[-1], ctx.cache_bytes)
    else:
        roof_notes = []
    d1 = next(s for s in sw if s["label"] == "decode B=1" and s["what"] == "mlp")
    p4k = next(s for s in sw if s["label"] == "prefill L=4096" and s["what"] == "mlp")
    m_dt = cfg.dtype if cfg.dtype in ctx.ceilings.peak_flops_per_s else None
    tokens = PREFILL_BATCH * 1024
    mlp_fused = C.elem_bytes(cfg.dtype) * (2 * tokens * cfg.hidden + 3 * cfg.hidden *
                                           cfg.intermediate)
    answers = {**A.part3_analytic(cfg.name, roof_spec(roof), dec, pre, sw,
                                  R.Roof.of(ctx.measured, m_dt).ridge if m_dt else None,
                                  mlp_fused),
               **A.part3_measured(measured, not_measured, ctx.device)}
    if measured:
        oc = measured[0]["op_costs"]
        answers["3.3"]["text"] += (
            " What the plain roofline misses, measured on this device: the floor of one tiny "
            "kernel (" + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in oc["floor_s"].items())
            + ") and the element rate of PyTorch's generic elementwise loop, taken by broadcast, "
            "transposed and widening ops (" + ", ".join(
                f"{v / 1e9:.0f} G elements/s at {k} bytes"
                for k, v in sorted(oc["generic_elements_per_s"].items())) + ")." +
            "".join(f" {n}." for n in roof_notes))
    return result(f"decode B=1 MLP at {d1['intensity']:.2f} FLOP/B ({d1['bound']}-bound); "
                  f"prefill L=4096 at {p4k['intensity']:.0f} ({p4k['bound']}-bound)", {"model": cfg.as_dict(), "decode": dec,
                  "prefill": pre, "sweeps": sw, "measured": measured}, plots, answers, not_measured,
                  tables=[table("p3_decode", f"One sliding layer, decode B=1 kv=1024, on "
                                f"{roof.label}", dec["components"] + list(dec["groups"].values())
                                + [dec["total"]], LAYER_COLUMNS),
                          table("p3_prefill", f"One sliding layer, prefill B={PREFILL_BATCH} "
                                f"L=1024, on "
                                f"{roof.label}", pre["components"] + list(pre["groups"].values())
                                + [pre["total"]], LAYER_COLUMNS),
                          table("p3_measured", "The real layer: wall time, kernel time and the "
                                "roofline prediction", measured,
                                ["phase", "batch", "seq", "kv_len", "mode", "dtype", "wall_s",
                                 "device_s", "kernel_s", "predicted_s", "predicted_over_kernel",
                                 "roofline_s", "overhead_s", "launches_per_iter"])]
                  + [table(f"p3_components_{i}", f"Per component: {m['phase']} {m['mode']}",
                           m["components"], ["component", "kernels_counted", "generic_ops",
                                             "flops", "bytes", "predicted_s", "kernel_s", "why"])
                     for i, m in enumerate(measured[:2])]
                  + [table(f"p3_ops_{i}", f"Per op and shapes (the 20 slowest): {m['phase']} "
                           f"B={m['batch']}, eager; op costs from the measured floors and the "
                           "generic loop's rate", m["ops"][:20],
                           ["op", "class", "path", "calls", "bytes", "elements", "predicted_s",
                            "kernel_s"])
                     for i, m in enumerate(measured) if m["mode"] == "eager"])


def compile_verdict(rows: list[dict]) -> list[str]:
    """Where a compiled MLP is slower per call than eager although its kernels are not: the
    time went to the CPU side of the call (guards, wrapper, launches)."""
    eager = next((r for r in rows if r["mode"] == "eager" and r.get("kernel_s")), None)
    out = []
    for r in rows:
        if eager is None or r is eager or not r.get("kernel_s"):
            continue
        if r["wall_s"] > eager["wall_s"] and r["kernel_s"] <= 1.1 * eager["kernel_s"]:
            out.append(f"{r['mode']} is slower per call than eager (wall {r['wall_s'] * 1e6:.0f} "
                       f"vs {eager['wall_s'] * 1e6:.0f} us) although its kernels take "
                       f"{r['kernel_s'] * 1e6:.0f} us against eager's "
                       f"{eager['kernel_s'] * 1e6:.0f}: at this size the CPU side of the "
                       "compiled call (guards, wrapper, launches) decides, not the GPU.")
    return out


def measure_layers(ctx: Context, cfg: M.ModelConfig) -> tuple[list[dict], list[str]]:
    """The real transformers layer in decode and prefill (eager, and in a CUDA graph on a GPU;
    bf16 on a GPU, fp32 at small sizes on a CPU), or why it could not be measured."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return [], ["the real transformers layer: transformers is not installed "
                    "(pip install 'rooflab[hf]'); the analytic half above needs no install"]
    from rooflab.lab import layer_measure as LM
    from rooflab.measure import op_classes as OC

    cuda = ctx.device == "cuda"
    phases = [M.Phase.decode(1, 4096 if cuda else 256),
              M.Phase.prefill(8 if cuda else 1, 2048 if cuda else 128)]
    modes = (False, True) if cuda else (False,)
    tick = ctx.progress("part 3: measured layer", len(phases) * len(modes))
    costs = OC.measure(ctx.device)
    measured = []
    for ph in phases:
        for graph in modes:
            measured.append(LM.measure(cfg, ph, "full", ctx.ceilings, ctx.device, graph=graph,
                                       costs=costs, dtype=cfg.dtype if cuda else "fp32"))
            tick()
    return measured, [] if cuda else ["bf16 layer timing and CUDA graphs: no GPU here "
                                      "(fp32 on the CPU)"]


def measured_layer_plot(ctx: Context, measured: list[dict]) -> dict:
    """Each measured layer (and its components) at its counted intensity: hollow at FLOPs over
    the predicted time (the roof plus the measured op costs), filled at FLOPs over the profiled
    kernel time. The dashed roof itself is the plain roofline's prediction."""
    dt = measured[0]["dtype"] if measured[0]["dtype"] in ctx.ceilings.peak_flops_per_s \
        else ctx.measured_dtype
    roof = R.Roof.of(ctx.measured, dt)
    pts = []
    for m in measured:
        flops = sum(c["flops"] for c in m["components"])
        nbytes = sum(c["bytes"] for c in m["components"])
        common = dict(flops=flops, bytes=nbytes, predicted_s=m["predicted_s"],
                      measured_s=m["kernel_s"])
        if m["mode"] != "eager":  # beside its eager twin: measured only, unlabelled
            pts.append(pt("", flops / nbytes, flops / m["kernel_s"], "measured",
                          "layer, CUDA graph", **common))
            continue
        label = f"{m['phase']} B={m['batch']}"
        pts.append(pt(label, flops / nbytes, flops / m["predicted_s"], "predicted", "layer",
                      **common))
        pts.append(pt(label, flops / nbytes, flops / m["kernel_s"], "measured", "layer", **common))
        for c in m["components"]:  # attributed only outside CUDA graphs
            if c["kernel_s"] and c["flops"]:
                pts.append(pt(f"{m['phase']} {c['component']}", c["flops"] / c["bytes"],
                              c["flops"] / c["kernel_s"], "measured", f"{m['phase']} components",
                              flops=c["flops"], bytes=c["bytes"],
                              predicted_s=c["predicted_s"], measured_s=c["kernel_s"]))
    return {"kind": "roofline", "name": "p3_measured", "title": "The real layer on the measured "
            f"roof ({dt}): predicted with op costs (hollow), profiled kernel time (filled)",
            "roofs": [roof_spec(roof)], "points": pts}


# --- part 4 -----------------------------------------------------------------------------------
def part4(ctx: Context) -> dict:
    cuda = ctx.device == "cuda"
    numel = (1 << 26 if not ctx.quick else 1 << 24) if cuda else 1 << 20
    # bf16 where the GPU has it natively (a T4 does not: fp16 there)
    dtype = ("bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16") \
        if cuda else "fp32"
    tick = ctx.progress("part 4: fusion", 2)
    g = fusion.gelu_study(numel, dtype, ctx.device, ctx.ceilings.mem_bandwidth_bytes_per_s,
                          ctx.trace_dir)
    tick()
    modes = fusion.MLP_MODES if cuda else ("eager", "default")
    tokens = 2048 if cuda else 64
    m = fusion.mlp_study(640, 2048, tokens, dtype, ctx.device, modes, ctx.trace_dir)
    tick()
    roof_notes = hold_copy_bandwidth(g["rows"], ctx)
    ok = [r for r in g["rows"] if "device_s" in r]
    plots = [{"kind": "bars", "name": "p4_gelu", "title": f"GeLU-tanh over {numel:,} {dtype} "
              "elements: device time per call (bandwidth in the table)", "ylabel": "device time",
              "yunit": "s", "labels": [r["variant"] for r in ok],
              "values": [r["device_s"] for r in ok]},
             {"kind": "bars", "name": "p4_mlp", "title": f"Gemma MLP, {tokens} tokens: wall time "
              "per call by compile mode (launches included)", "ylabel": "wall time",
              "yunit": "s", "labels": [r["mode"] for r in m["rows"] if "wall_s" in r],
              "values": [r["wall_s"] for r in m["rows"] if "wall_s" in r]}]
    answers = A.part4(matmul_profile(ctx, dtype), g, m, ctx.device, roof_notes)
    per_mode = []
    for r in m["rows"]:
        if "device_s" not in r:
            continue
        if r["kernel_s"] is None:  # a CPU: the device is the host
            split = f"{r['kernels_per_call']:.0f} ops"
        elif r["overhead_s"] is None:
            split = (f"{r['kernel_s'] * 1e6:.0f} us in {r['kernels_per_call']:.0f} kernels "
                     f"({r['overhead_flag']})")
        else:
            split = (f"{r['kernel_s'] * 1e6:.0f} us of it in {r['kernels_per_call']:.0f} kernels "
                     f"and {r['overhead_s'] * 1e6:.0f} us around them (launches, guards, Python)")
        per_mode.append(f"{r['mode']}: wall {r['wall_s'] * 1e6:.0f} us per call (device time "
                        f"{r['device_s'] * 1e6:.0f} us), {split}; first call "
                        f"{r['first_call_s']:.2f} s")
    answers["4.4"]["text"] += " Per mode: " + "; ".join(per_mode) + "." + "".join(
        f" {n}" for n in m["notes"] + compile_verdict(m["rows"]))
    not_measured = [f"{s['variant']}: {s['reason']}" for s in g["skipped"]]
    if not cuda:
        not_measured.append("max-autotune (CUDA graphs) and the decode step in a CUDA graph: "
                            "need a GPU")
    fastest = min(ok, key=lambda r: r["device_s"])
    return result(f"fastest GeLU: {fastest['variant']} at "
                  f"{fastest['achieved_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s",
                  {"gelu": g, "mlp": m}, plots, answers, not_measured,
                  tables=[table("p4_gelu", "GeLU four ways", g["rows"],
                                ["variant", "device_s", "kernels_per_call", "bytes_predicted",
                                 "achieved_bandwidth_bytes_per_s", "fraction_of_copy_bw",
                                 "above_roof", "max_abs_err", "first_call_s", "error"]),
                          table("p4_mlp", "MLP by compile mode", m["rows"],
                                ["mode", "device_s", "wall_s", "kernel_s", "overhead_s",
                                 "kernels_per_call",
                                 "first_call_s", "error"])])


def hold_copy_bandwidth(rows: list[dict], ctx: Context) -> list[str]:
    """GeLU variants against the copy bandwidth, held as any measured roof (``R.hold``): a
    variant faster than the copy test raises it for this run or says why (cache)."""
    dt = ctx.measured_dtype
    roof = R.Roof("copy", ctx.ceilings.peak_flops_per_s[dt], ctx.ceilings.mem_bandwidth_bytes_per_s,
                  dt, True)
    ok = [r for r in rows if "device_s" in r]
    new, notes, why = R.hold(roof, [(r["variant"], r["flops"] / r["bytes_predicted"],
                                     r["flops"] / r["device_s"], r["bytes_predicted"])
                                    for r in ok], ctx.cache_bytes)
    for r in ok:
        r["fraction_of_copy_bw"] = r["achieved_bandwidth_bytes_per_s"] / \
            new.mem_bandwidth_bytes_per_s
        if r["variant"] in why:
            r["above_roof"] = why[r["variant"]]
    return [f"The copy bandwidth was raised for this run: {n}" for n in notes]


def matmul_profile(ctx: Context, dtype: str) -> dict:
    """Question 4.1: the kernels one torch.matmul launches, their count and time."""
    from rooflab.measure import profile as P

    n = 4096 if ctx.device == "cuda" else 256
    dt = dtype if ctx.device == "cuda" else "fp32"
    a = torch.randn(n, n, device=ctx.device, dtype=torch_dtype(dt))
    prof = P.profile(torch.matmul, a, a, iters=3, warmup=2, device=ctx.device,
                     trace_path=f"{ctx.trace_dir}/matmul_{n}.json")
    return {"n": n, "dtype": dt, "launches": prof.launches_per_iter,
            "kernels": [k.name for k in prof.kernels],
            "kernel_s": prof.device_time_us / prof.iters / 1e6, "trace": prof.trace_path}


# --- part 5 -----------------------------------------------------------------------------------
def part5(ctx: Context) -> dict:
    cuda = ctx.device == "cuda"
    if cuda:
        seqs = [512 << i for i in range(5 if ctx.quick else 7)]  # 512 .. 32768
        kw = dict(batch=1, heads=16, head_dim=128, dtype="fp16")
    else:
        seqs = [256, 512, 1024] if ctx.quick else [256, 512, 1024, 2048]
        kw = dict(batch=1, heads=4, head_dim=64, dtype="fp32")
    tick = ctx.progress("part 5: attention sweep", len(seqs) * len(ATT.IMPLS))
    sw = ATT.sweep(seqs, ATT.IMPLS, device=ctx.device, progress=tick, **kw)
    view = ATT.profile_view(4096 if cuda else 512, ctx.device, trace_dir=ctx.trace_dir, **kw)
    roof_dt = kw["dtype"] if kw["dtype"] in ctx.ceilings.peak_flops_per_s else ctx.measured_dtype
    plots = attention_plots(sw, R.Roof.of(ctx.measured, roof_dt))
    answers = A.part5(sw, view, kw, hold_roofline(plots[-1], ctx.cache_bytes))
    oom = sw["analysis"]["oom_seq"].get("standard")
    headline = (f"standard attention: no room at {oom:,} tokens" if oom else
                f"standard attention fit up to {sw['seqs'][-1]:,} tokens") + \
        f"; memory slope {sw['analysis']['memory_slope'].get('standard') or 0:.2f}"
    return result(headline, {"sweep": sw, "profile_view": view}, plots, answers,
                  [f"{k}: {why}" for k, why in sw["skipped"].items()],
                  tables=[table("p5_sweep", "Attention sweep", sw["rows"],
                                ["impl", "seq", "status", "extra_peak_bytes", "device_s",
                                 "tflops_per_s", "error"])])


def attention_plots(sw: dict, roof: R.Roof) -> list[dict]:
    """Memory and latency against length (OOM marked), and the roofline view: eager bytes (the
    N x N round trips) against fused bytes, each with its measured point."""
    ok = [r for r in sw["rows"] if r["status"] == "ok"]
    impls = sorted({r["impl"] for r in ok})
    marks = {i: [[n, "OOM"]] for i, n in sw["analysis"]["oom_seq"].items() if n}
    series = lambda key, scale: {i: [[r["seq"], r[key] * scale] for r in ok if r["impl"] == i]  # noqa: E731
                                 for i in impls}
    rpts = []
    for r in ok:
        if r["impl"] not in ("standard", "triton", "flash"):
            continue
        group = "eager" if r["impl"] == "standard" else "fused"
        nb = r["bytes_eager"] if group == "eager" else r["bytes_fused"]
        i, label = r["flops"] / nb, f"{r['impl']} N={r['seq']}"
        hover = dict(flops=r["flops"], bytes=nb, predicted_s=R.time_floor_s(roof, r["flops"], nb))
        rpts.append(pt(label, i, R.attainable(roof, i), "predicted", group, **hover))
        rpts.append(pt(label, i, r["flops"] / r["device_s"], "measured", group,
                       measured_s=r["device_s"], **hover))
    return [
        {"kind": "lines", "name": "p5_memory", "title": "Extra peak memory of one attention call",
         "xlabel": "sequence length", "ylabel": "MiB", "logx": True, "logy": True,
         "series": series("extra_peak_bytes", 2**-20), "marks": marks},
        {"kind": "lines", "name": "p5_time", "title": "Device time of one attention call",
         "xlabel": "sequence length", "ylabel": "device time", "yunit": "s", "logx": True,
         "logy": True, "series": series("device_s", 1), "marks": marks},
        {"kind": "roofline", "name": "p5_roofline", "title": "Attention on the measured roof: "
         "eager bytes (N x N round trips) vs fused bytes", "roofs": [roof_spec(roof)],
         "points": rpts},
    ]


PARTS = {1: ("Metrics: latency, MACs, I/O", part1), 2: ("Roofline", part2),
         3: ("A real decoder layer", part3), 4: ("Profiler and kernel fusion", part4),
         5: ("Attention and FlashAttention", part5)}
