"""Part 3: a real decoder layer: per-component costs, the sweeps, the measured transformers layer."""
from __future__ import annotations

from dataclasses import replace

from rooflab import models as M
from rooflab import roofline as R
from rooflab.studies import decoder
from rooflab.lab.answers import answer
from rooflab.lab.context import LAB_MODEL, Context, hold_roofline, pt, result, roof_spec, table
from rooflab.units import noise, secs

TITLE = "A real decoder layer"


LAYER_COLUMNS = ["name", "macs", "flops", "bytes", "bytes_fused", "intensity", "bound",
                 "time_floor_s"]



# The lab's settings: 3.4 at B=8 (prefill L=2048, decode one token against a 1024-token cache),
# 3.4.2 decode B 1-64, 3.4.3 prefill B=32 with L 64-4096.
BATCH, PREFILL_SEQ, KV_LEN = 8, 2048, 1024
PREFILL_BATCH = 32


def run(ctx: Context) -> dict:
    cfg = replace(M.load(LAB_MODEL), dtype=ctx.dtypes.layer)  # --dtype, else the config's
    roof = R.Roof.of(ctx.gpu, cfg.dtype) if cfg.dtype in ctx.gpu.peak_flops_per_s else \
        R.Roof.of(ctx.gpu, "fp32")
    lab_roof = R.Roof.of(ctx.lab_card, "fp32")  # the lab plots 3.4 on Part 2's fp32 peaks
    sw = decoder.sweeps(cfg, roof, kv_len=KV_LEN, prefill_batch=PREFILL_BATCH)
    dec = decoder.analyze(cfg, M.Phase.decode(BATCH, KV_LEN), "sliding", roof)
    pre = decoder.analyze(cfg, M.Phase.prefill(BATCH, PREFILL_SEQ), "sliding", roof)
    measured, not_measured = measure_layers(ctx, cfg)
    pts = [pt(s["label"], s["intensity"], s["attainable_flops_per_s"], group=s["what"],
              flops=s["flops"], bytes=s["bytes"], time_floor_s=s["time_floor_s"]) for s in sw]
    plots = [{"kind": "roofline", "name": "p3_sweeps", "title": f"{cfg.name} layer and MLP "
              f"on {roof.label}: decode B=1..64, prefill L=64..4096 (B={PREFILL_BATCH})",
              "roofs": [roof_spec(roof)], "points": pts}]
    if measured:
        plots.append(measured_layer_plot(ctx, measured))
        roof_notes = ctx.beaten(hold_roofline(plots[-1], ctx.cache_bytes))
    else:
        roof_notes = []
    d1 = next(s for s in sw if s["label"] == "decode B=1" and s["what"] == "mlp")
    p4k = next(s for s in sw if s["label"] == "prefill L=4096" and s["what"] == "mlp")
    m_dt = cfg.dtype if cfg.dtype in ctx.ceilings.peak_flops_per_s else None
    tokens = BATCH * PREFILL_SEQ
    mlp_fused = M.mlp_one_kernel_bytes(cfg, tokens)
    recipes = decoder.recipes(cfg, ctx.gpu, batches=(1, 64, 512))
    answers = {**questions_analytic(cfg, roof_spec(roof), dec, pre, sw,
                                    ctx.measured_roof(m_dt).ridge if m_dt else None,
                                    mlp_fused, recipes, roof_spec(lab_roof)),
               **questions_measured(measured, not_measured, ctx.device)}
    if measured:
        answers["3.3"]["text"] += op_costs_text(measured[-1]["op_costs"]) + "".join(
            f" {n}." for n in roof_notes)
    return result(f"decode B=1 MLP at {d1['intensity']:.2f} FLOP/B ({d1['bound']}-bound); "
                  f"prefill L=4096 at {p4k['intensity']:.0f} ({p4k['bound']}-bound)", {"model": cfg.as_dict(), "decode": dec,
                  "prefill": pre, "sweeps": sw, "measured": measured}, plots, answers, not_measured,
                  tables=[table("p3_decode", f"One sliding layer, decode B={BATCH} kv={KV_LEN}, on "
                                f"{roof.label}", dec["components"] + list(dec["groups"].values())
                                + [dec["total"]], LAYER_COLUMNS),
                          table("p3_prefill", f"One sliding layer, prefill B={BATCH} "
                                f"L={PREFILL_SEQ}, on "
                                f"{roof.label}", pre["components"] + list(pre["groups"].values())
                                + [pre["total"]], LAYER_COLUMNS),
                          table("p3_measured", "The real layer: wall time, kernel time and the "
                                "roofline prediction", measured,
                                ["phase", "batch", "seq", "kv_len", "mode", "dtype", "wall_s",
                                 "device_s", "device_cv", "kernel_s", "predicted_s",
                                 "predicted_over_kernel",
                                 "roofline_s", "overhead_s", "launches_per_iter"])]
                  + [table(f"p3_components_{i}", f"Per component: {m['phase']} {m['mode']}",
                           m["components"], ["component", "kernels_counted", "generic_ops",
                                             "flops", "bytes", "predicted_s", "kernel_s", "why"])
                     for i, m in enumerate(measured[:2])]
                  + [table(f"p3_ops_{i}", f"Per op and shapes (the 20 slowest): {m['phase']} "
                           f"B={m['batch']}, eager; op costs from the measured floors, the "
                           "generic loop's rate and the attention rates", m["ops"][:20],
                           ["op", "class", "path", "calls", "bytes", "elements", "predicted_s",
                            "kernel_s"])
                     for i, m in enumerate(measured) if m["mode"] == "eager"])


def op_costs_text(oc: dict) -> str:
    """What the plain roofline misses, as measured on this device (op_classes.OpCosts)."""
    from rooflab.measure import op_classes as OC

    def rates(d: dict) -> str:
        return ", ".join(f"{v / 1e9:.0f} G elements/s at {k} bytes" for k, v in sorted(d.items()))

    text = (" What the plain roofline misses, measured on this device: the floor of one tiny "
            "kernel (" + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in oc["floor_s"].items())
            + ") and the element rate of PyTorch's generic elementwise loop, taken by broadcast, "
            f"transposed and widening ops ({rates(oc['generic_elements_per_s'])}; on a copy from "
            f"a broadcast source {rates(oc.get('generic_copy_elements_per_s', {}))}).")
    if oc.get("indexed_elements_per_s"):
        text += (" torch.roll, which a sliding-window cache runs at every step, computes each "
                 f"source index: {rates(oc['indexed_elements_per_s'])}.")
    kinds = OC.attention_summary(oc.get("attention", {}))
    if kinds:
        text += (" Each kind of attention kernel, on a reference shape of its kind (FLOP/s for "
                 f"a prefill, bytes/s for a decode): {kinds}.")
    return text


def measure_layers(ctx: Context, cfg: M.ModelConfig) -> tuple[list[dict], list[str]]:
    """The real transformers layer in decode and prefill (eager, and in a CUDA graph on a GPU;
    bf16 on a GPU, fp32 at small sizes on a CPU), or why it could not be measured."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return [], ["the real transformers layer: transformers is not installed "
                    "(pip install 'rooflab[hf]'); the analytic half above needs no install"]
    from rooflab.studies import layer_measure as LM
    from rooflab.measure import op_classes as OC

    cuda = ctx.device == "cuda"
    dtype = ctx.dtypes.layer_measured
    phases = [M.Phase.decode(1, 4096 if cuda else 256),
              M.Phase.prefill(8 if cuda else 1, 2048 if cuda else 128)]
    modes = (False, True) if cuda else (False,)
    tick = ctx.progress("part 3: measured layer", len(phases) * len(modes))
    costs = OC.measure_op_costs(ctx.device)
    measured = []
    for ph in phases:
        for graph in modes:
            measured.append(LM.measure_layer(cfg, ph, "full", ctx.ceilings, ctx.device, graph=graph,
                                       costs=costs, dtype=dtype))
            tick()
    if not cuda:
        return measured, [f"{cfg.dtype} layer timing and CUDA graphs: no GPU here ({dtype} on "
                          "the CPU)"]
    return measured, [] if dtype == cfg.dtype else [
        f"{cfg.dtype} layer timing: this GPU has no native {cfg.dtype} ({dtype} instead)"]


def measured_layer_plot(ctx: Context, measured: list[dict]) -> dict:
    """Each measured layer (and its components) at its counted intensity: hollow at FLOPs over
    the predicted time (the roof plus the measured op costs), filled at FLOPs over the profiled
    kernel time. The dashed roof itself is the plain roofline's prediction."""
    roof = ctx.measured_roof(measured[0]["dtype"])
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
            f"roof ({roof.dtype}): predicted with op costs (hollow), profiled kernel time (filled)",
            "roofs": [roof_spec(roof)], "points": pts}


# --- its questions, answered from its numbers -----------------------------------------------
def _comp(analysis: dict, name: str) -> dict:
    return next(c for c in analysis["components"] if c["name"] == name)


def questions_analytic(cfg: M.ModelConfig, roof: dict, dec: dict, pre: dict,
                       sweeps: list[dict], measured_ridge: float | None, mlp_fused_bytes: int,
                       recipes: list[dict], lab_roof: dict | None = None) -> dict:
    """3.1, 3.2, 3.4.x and the whole-attention bonus, from the per-component costs."""
    out = {}
    sliding = dec["layer_type"] == "sliding"
    layer = (f"one sliding-window layer (window {cfg.sliding_window}) of {cfg.name}" if sliding
             else f"one layer of {cfg.name}")
    for ph, a in (("decode", dec), ("prefill", pre)):
        core = _comp(a, "attn.core")
        window = (f" (its last {min(a['kv_len'], cfg.sliding_window):,} keys)"
                  if sliding and ph == "decode" else "")
        out.setdefault("3.1", []).append(
            f"{ph} B={a['batch']} {'kv' if ph == 'decode' else 'L'}="
            f"{a['kv_len'] if ph == 'decode' else a['seq']}{window}: QK^T and PV "
            f"{core['macs']:,} MACs dense ({a['causal']['macs']:,} with the causal"
            f"{' sliding-window' if sliding else ''} mask), softmax and the scale "
            f"{core['flops'] - 2 * core['macs']:,} FLOPs")
        out.setdefault("3.2", []).append(
            f"{ph}: {core['bytes']:,} bytes eager (the score matrix written, read five times by "
            f"softmax, read again by PV) against {core['bytes_fused']:,} fused-ideal (Q, K, V, O "
            f"once): {core['bytes'] / core['bytes_fused']:.1f}x")
    res = {
        "3.1": answer("Attention core of " + layer + ", under cost.py's "
                      "conventions (1 MAC = 2 FLOPs; dense unless stated): " +
                      "; ".join(out["3.1"]) + ".", decode_core_macs=_comp(dec, "attn.core")["macs"],
                      prefill_core_macs=_comp(pre, "attn.core")["macs"]),
        "3.2": answer("Its I/O: " + "; ".join(out["3.2"]) + ". Decode also reads the KV cache: "
                      f"{dec['kv_cache_read_bytes']:,} bytes.",
                      decode_core_bytes=_comp(dec, "attn.core")["bytes"],
                      prefill_core_bytes=_comp(pre, "attn.core")["bytes"],
                      kv_cache_read_bytes=dec["kv_cache_read_bytes"]),
    }
    for key, what in (("B.attention_macs", "macs"), ("B.attention_io", "bytes")):
        parts = [c for c in pre["components"] if c["name"].startswith("attn.")]
        g = pre["groups"]["attention"]
        res[key] = answer(
            f"The whole attention module at prefill B={pre['batch']} L={pre['seq']} (q/k/v/o "
            "projections, q/k norms, RoPE, core): " + ", ".join(
                f"{c['name']} {c[what]:,}" for c in parts) + f"; total {g[what]:,} "
            + ("MACs." if what == "macs" else f"bytes eager, {g['bytes_fused']:,} fused-ideal."),
            **{c["name"]: c[what] for c in parts}, total=g[what])
    res.update(_shape_answers(roof, dec, pre, sweeps, measured_ridge, mlp_fused_bytes, recipes,
                              lab_roof or roof))
    return res


def _recipes_text(recipes: list[dict]) -> str:
    """Which serving recipe gives the MLP the lowest time floor at each batch, and which term
    (the weights' bytes, the activations' bytes or the FLOPs) sets each recipe's floor there."""
    if not recipes:
        return ""
    out = []
    for b in sorted({r["batch"] for r in recipes}):
        rows = sorted((r for r in recipes if r["batch"] == b), key=lambda r: r["time_floor_s"])
        base = next((r for r in rows if r["recipe"] == "W16A16"), rows[-1])  # else the slowest
        out.append(f"B={b}: " + ", ".join(
            f"{r['recipe']} {secs(r['time_floor_s'])} ({r['decides']})" for r in rows)
            + f"; fastest {rows[0]['recipe']}, {base['time_floor_s'] / rows[0]['time_floor_s']:.1f}"
            f"x {base['recipe']}")
    return (" Quantised, the MLP's time floor on the datasheet roof of each recipe's compute "
            "dtype, with the term that sets it: " + "; ".join(out) + ".")


def _prefill_verdict(eager_i: float, fused_i: float, ridges: list[float]) -> str:
    """Whether prefill's MLP (``eager_i`` and ``fused_i`` FLOP/byte under the two byte
    conventions) is compute-bound on every ridge given, or whether that depends on which."""
    sides = {i >= r for i in (eager_i, fused_i) for r in ridges}
    if len(sides) > 1:
        return ("Whether prefill's MLP is compute-bound thus depends on the byte convention and "
                "the ridge used")
    return (f"Prefill's MLP is {'compute' if sides.pop() else 'memory'}-bound under both byte "
            f"conventions and on all {len(ridges)} ridges")


def _shape_answers(roof: dict, dec: dict, pre: dict, sweeps: list[dict],
                   measured_ridge: float | None, mlp_fused_bytes: int,
                   recipes: list[dict], lab_roof: dict) -> dict:
    ridge = roof["ridge"]
    mlp = {s["label"]: s for s in sweeps if s["what"] == "mlp"}
    layer = {s["label"]: s for s in sweeps if s["what"] == "layer"}
    d1 = dec["groups"]["mlp"]
    pre_mlp = pre["groups"]["mlp"]
    gate = _comp(pre, "mlp.gate_proj")
    fused_i = pre_mlp["flops"] / mlp_fused_bytes  # the MLP as one kernel: x, 3 weights, y

    def side(i: float, r: float) -> str:
        return "compute-bound" if i >= r else "memory-bound"

    lab_ridge = lab_roof["ridge"]
    ridges = f"the datasheet ridge of {roof['label']} ({ridge:.0f})" + (
        f" and this device's measured ridge ({measured_ridge:.0f})" if measured_ridge else "")
    verdicts = [f"{side(pre_mlp['intensity'], ridge)} against the datasheet"]
    if measured_ridge:
        verdicts.append(f"{side(pre_mlp['intensity'], measured_ridge)} against the measured one")
    decode_rows = [mlp[k] for k in mlp if k.startswith("decode")]
    crossing = next((s["batch"] for s in decode_rows if s["bound"] == "compute"), None)
    pre_rows = sorted((s for s in mlp.values() if s["phase"] == "prefill"), key=lambda s: s["seq"])
    lay_rows = sorted((s for s in layer.values() if s["phase"] == "prefill"),
                      key=lambda s: s["seq"])
    peak_l = max(lay_rows, key=lambda s: s["intensity"])
    last_l = lay_rows[-1]
    moves_left = last_l["intensity"] < peak_l["intensity"]
    return {
        "3.4.1": answer(
            f"The query's shape decides it. Decode feeds B = {dec['batch']} row(s) through each "
            f"weight matrix, a GEMV: the MLP sits at {d1['intensity']:.2f} FLOP/byte. Prefill "
            f"at B = {pre['batch']}, L = {pre['seq']} feeds B*L = {pre['batch'] * pre['seq']:,} "
            f"rows, a GEMM: the MLP at {pre_mlp['intensity']:.0f} FLOP/byte. On the lab's roof "
            f"({lab_roof['label']}, ridge {lab_ridge:.1f}) prefill is "
            f"{side(pre_mlp['intensity'], lab_ridge)} and decode "
            f"{side(d1['intensity'], lab_ridge)}. The projections alone reach "
            f"{gate['intensity']:.0f} FLOP/byte and the whole MLP {pre_mlp['intensity']:.0f} with "
            f"eager bytes (its activation and product round-trip memory at under 2 FLOP/byte) or "
            f"{fused_i:.0f} with fused-ideal bytes (the MLP as one kernel). Against {ridges}, "
            "prefill's MLP is "
            + " and ".join(verdicts) + f"; decode's is {side(d1['intensity'], ridge)}. "
            + _prefill_verdict(pre_mlp["intensity"], fused_i,
                               [r for r in (lab_ridge, ridge, measured_ridge) if r])
            + "; the projections, where the time goes, are " + side(gate["intensity"], ridge)
            + ".",
            decode_mlp_intensity=d1["intensity"], prefill_mlp_intensity=pre_mlp["intensity"],
            prefill_mlp_intensity_fused=fused_i, projection_intensity=gate["intensity"],
            lab_ridge=lab_ridge, datasheet_ridge=ridge, measured_ridge=measured_ridge),
        "3.4.2": answer(
            "Decode batch 1 -> 64 moves the MLP right, about linearly (the weights are read once "
            "for all the batch's tokens): " + ", ".join(
                f"B={s['batch']} {s['intensity']:.1f}" for s in decode_rows) + " FLOP/byte; " + (
                f"it turns compute-bound at B={crossing}." if crossing else
                f"still memory-bound at B=64 (ridge {ridge:.0f}): batching helps, but not to the "
                "ridge.") + _recipes_text(recipes),
            **{f"decode_B{s['batch']}_intensity": s["intensity"] for s in decode_rows},
            **{f"{r['recipe']}_B{r['batch']}_time_floor_s": r["time_floor_s"] for r in recipes}),
        "3.4.3": answer(
            f"Prefill at batch {pre_rows[0]['batch']}, length 64 -> 4096: the MLP point moves "
            f"right, " + ", ".join(f"L={s['seq']} {s['intensity']:.0f}" for s in pre_rows) +
            " FLOP/byte (more rows per weight read). The whole-layer point " + (
                f"rises to {peak_l['intensity']:.0f} at L={peak_l['seq']} and then moves left to "
                f"{last_l['intensity']:.0f} at L={last_l['seq']}: eager attention writes and "
                "re-reads the score matrix, which grows as L^2 while the weights grow not at "
                "all, so its low-intensity bytes take over." if moves_left else
                f"moves right too, to {last_l['intensity']:.0f} at L={last_l['seq']}: at these "
                "lengths the weights' reuse still outgrows the L^2 score matrix."),
            **{f"prefill_L{s['seq']}_mlp_intensity": s["intensity"] for s in pre_rows},
            **{f"prefill_L{s['seq']}_layer_intensity": s["intensity"] for s in lay_rows}),
    }


def questions_measured(measured: list[dict], not_measured: list[str], device: str) -> dict:
    """3.3 and the decode-profile bonuses from the real transformers layer."""
    if not measured:
        why = "; ".join(not_measured) or "not measured"
        return {k: answer(f"Not run here: {why}.") for k in
                ("3.3", "B.decode_profile", "B.cuda_graph_profile")}
    lines = []
    for m in measured:
        over = m["kernel_s"] / m["device_s"] if m["device_s"] else 0
        slowed = device != "cuda" and over > 1  # the profiler slowed a CPU's ops
        lines.append(
            f"{m['phase']} B={m['batch']} {m['mode']}: wall {secs(m['wall_s'])}, device "
            f"{secs(m['device_s'])}, kernels {secs(m['kernel_s'])}" + (
                f" ({over:.2f}x the call timed without the profiler: under it, a CPU runs the "
                "same ops slower)" if slowed else "")
            + ", predicted "
            f"{secs(m['predicted_s'])} ({m['predicted_over_kernel']:.2f} of measured" + (
                f", {m['predicted_s'] / m['device_s']:.2f} of the call timed without it"
                if slowed else "") + "; the plain "
            f"roofline alone {m['roofline_s'] / m['kernel_s']:.2f})")
    cold = (" Each call started with L2 flushed, as a layer runs in a model, whose step reads "
            "every layer in turn." if any(m.get("l2_flushed") for m in measured) else "")
    out = {"3.3": answer("The real layer, measured: " + "; ".join(lines) + "." + cold + noise(
        measured, lambda m: f"{m['phase']} {m['mode']} device time", "device_unstable",
        "device_cv"),
                         **{f"{m['phase']}_{m['mode']}_kernel_s": m["kernel_s"] for m in measured},
                         **{f"{m['phase']}_{m['mode']}_predicted_s": m["predicted_s"]
                            for m in measured})}
    eager = next((m for m in measured if m["phase"] == "decode" and m["mode"] == "eager"), None)
    graph = next((m for m in measured if m["phase"] == "decode" and m["mode"] != "eager"), None)
    if eager:
        tl = eager["timeline"]
        top = sorted((c for c in eager["components"] if c["kernel_s"]),
                     key=lambda c: -c["kernel_s"])[:3]
        unit = "kernel launches" if device == "cuda" else "ops (no CUDA kernels on a CPU)"
        idle = tl["busy_us"] < 0.5 * tl["span_us"]
        gaps = (f"the timeline is busy {secs(tl['busy_us'] / 1e6)} of "
                f"{secs(tl['span_us'] / 1e6)} ({tl['gaps']} gaps, the largest "
                f"{secs(tl['largest_gap_us'] / 1e6)})")
        if device == "cuda":
            gaps += (": the device mostly waits for the host to launch the next one. " if idle
                     else ". ")
        else:  # Python runs on the cores that run the ops: there is no device to wait
            gaps += (": on a CPU the ops run on the cores that run Python, so nothing waits for "
                     "a launch; the gaps are the interpreter between ops, widened by the "
                     "profiler's own bookkeeping. ")
        out["B.decode_profile"] = answer(
            f"Decode B={eager['batch']} kv={eager['kv_len']}, eager: {eager['launches_per_iter']:.0f}"
            f" {unit} per step, {secs(eager['kernel_s'])} in them of {secs(eager['wall_s'])} "
            "wall" + (" timed without the profiler (under it the same ops ran slower)"
                      if eager["kernel_s"] > eager["wall_s"] else "")
            + "; " + gaps + "Slowest components: " + ", ".join(
                f"{c['component']} {secs(c['kernel_s'])}" for c in top) + ".",
            launches=eager["launches_per_iter"], kernel_s=eager["kernel_s"],
            wall_s=eager["wall_s"], busy_us=tl["busy_us"], span_us=tl["span_us"])
    else:
        out["B.decode_profile"] = answer("The decode step was not measured eagerly here.")
    if eager and graph:
        out["B.cuda_graph_profile"] = answer(
            f"The same decode step in a CUDA graph: wall {secs(graph['wall_s'])} against "
            f"{secs(eager['wall_s'])} eager ({eager['wall_s'] / graph['wall_s']:.1f}x), kernels "
            f"{secs(graph['kernel_s'])} against {secs(eager['kernel_s'])}: one launch replays "
            "every kernel, so the gaps between them close while the kernels stay as they were.",
            eager_wall_s=eager["wall_s"], graph_wall_s=graph["wall_s"],
            eager_kernel_s=eager["kernel_s"], graph_kernel_s=graph["kernel_s"])
    else:
        out["B.cuda_graph_profile"] = answer("Not run here: CUDA graphs need a GPU.")
    return out
