"""The lab's questions, answered by their numbers from this run's figures.

Each function takes what a part measured and computed and returns ``{question id: answer}``,
an answer being ``{"text": ..., "figures": {...}}``: the sentence and the numbers it was derived
from. No verdict is fixed in advance: "memory-bound", "compute-bound", "fits", "2-4x" are
decided by the figures of the run. Ids follow the lab's numbering (1.1 ... 5.2) and its bonus
items (B.*).
"""
from __future__ import annotations

from rooflab.units import secs, si
from rooflab.roofline import ABOVE_ROOF_TOLERANCE as TOLERANCE


IDS = ("1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "3.3", "3.4.1", "3.4.2", "3.4.3", "4.1", "4.2",
       "4.3", "4.4", "4.4.2", "5.1", "5.2", "B.attention_macs", "B.attention_io",
       "B.decode_profile", "B.cuda_graph_profile", "B.flash_vs_sdpa", "B.flash_analysis")


def answer(text: str, **figures) -> dict:
    return {"text": text, "figures": figures}


def collect(parts: dict) -> dict:
    """Every finished part's answers, in the lab's order, keyed by question id."""
    found = {q: a for p in parts.values() for q, a in
             ((p.get("result") or {}).get("answers") or {}).items()}
    return {q: found[q] for q in IDS if q in found}


# --- part 1 -----------------------------------------------------------------------------------
def part1(d: dict, device: str) -> dict:
    big = d["naive_vs_torch"][-1]
    cw, naive = d["cold_vs_warm"], d["naive_cold_series_s"]
    warm = cw["warm"]
    spread = (max(naive) - min(naive)) / min(naive)
    first = cw["first_over_settled"]
    causes = [f"the first torch.matmul (n = {cw['n']}) took {secs(cw['first_call_s'])} against "
              f"a settled {secs(cw['settled_s'])} ({first:.1f}x): " + (
                  "the first call pays one-time set-up (library load, handle creation, "
                  "allocation)" if first > 1.5 else
                  "little one-time cost was left to pay, as earlier calls in this process had "
                  "already initialised the library")]
    causes.append(f"the pure-Python triple loop, itself run {len(naive)} times back to back, "
                  f"spread by {spread:.0%} between its fastest and slowest run (the interpreter, "
                  "the allocator and other processes)")
    causes.append(f"after warm-up, torch.matmul's runs still vary by CV {warm['cv']:.1%} "
                  f"(20th to 80th percentile {secs(warm['p20_s'])} to {secs(warm['p80_s'])})")
    return {
        "1.1": answer(
            f"At n = {big['n']} the GEMM is {big['macs']:,} MACs ({big['flops']:,} FLOPs) over "
            f"{big['bytes']:,} bytes of fp32 I/O, intensity {big['intensity']:.1f} FLOP/byte. The "
            f"pure-Python triple loop took {secs(big['naive_median_s'])}; torch.matmul on the "
            f"{device} took {secs(big['torch_median_s'])} (device time): "
            f"{big['speedup']:,.0f}x faster ({si(big['naive_flops_per_s'], 'FLOP/s')} vs "
            f"{si(big['torch_flops_per_s'], 'FLOP/s')}).",
            n=big["n"], macs=big["macs"], flops=big["flops"], bytes=big["bytes"],
            naive_s=big["naive_median_s"], torch_s=big["torch_median_s"],
            speedup=big["speedup"]),
        "1.2": answer(
            "Timed run after run with no warm-up (wall time), the numbers move for three reasons "
            "this run shows: " + "; ".join(causes) + ". A latency is only worth quoting after "
            "warm-up, over many runs, with its spread.",
            first_call_s=cw["first_call_s"], settled_s=cw["settled_s"], first_over_settled=first,
            naive_runs_s=naive, naive_spread=spread, warm_cv=warm["cv"]),
    }


# --- part 2 -----------------------------------------------------------------------------------
def part2(gpu: str, gemm: dict, gemv: dict, achieved: list[dict], table: list[dict],
          roof_notes: list[str]) -> dict:
    best = max((p for p in achieved if p["family"] == "GEMM"), key=lambda p: p["n"])
    gv = max((p for p in achieved if p["family"] == "GEMV"), key=lambda p: p["n"])
    fp32 = [r for r in table if r["dtype"] == "fp32"]
    low = min(fp32, key=lambda r: r["ridge"])
    gemv_i = gemv["rows"][-1]["intensity"]
    everywhere = gemv_i < low["ridge"]
    frac = best["fraction_of_roof"]
    measured = (f" Measured here: GEMM n = {best['n']} reached "
                f"{si(best['achieved_flops_per_s'], 'FLOP/s')}, " + (
                    f"{frac:.0%} of the measured roof at its intensity." if frac <= 1 else
                    f"at the measured roof ({frac:.0%}: within the {TOLERANCE:.0%} that separate "
                    "two runs of the same matmul, so the roof stands)."))
    return {
        "2.1": answer(
            f"On {gpu} in fp32 the ridge is {gemm['ridge']:.1f} FLOP/byte; GEMM with M = N = K = n "
            f"has intensity n/6 (2n^3 FLOPs over 12n^2 bytes), so it turns compute-bound at "
            f"n >= {gemm['crossover_n']}." + measured + "".join(
                f" The measured roof was raised for this run: {n}." for n in roof_notes),
            gpu=gpu, ridge=gemm["ridge"], crossover_n=gemm["crossover_n"],
            measured_gemm_flops_per_s=best["achieved_flops_per_s"],
            fraction_of_roof=best["fraction_of_roof"]),
        "2.2": answer(
            f"GEMV's intensity stays near {gemv_i:.2f} FLOP/byte at every size (each weight is "
            "read once and used once), " + (
                f"below the lowest fp32 ridge in the table ({low['ridge']:.1f} on {low['gpu']}): "
                "memory-bound on every GPU listed, and it never crosses." if everywhere else
                f"above the lowest fp32 ridge in the table ({low['ridge']:.1f} on {low['gpu']}).")
            + " Decode, one token at a time, is a GEMV. Measured here: GEMV n = "
            f"{gv['n']} moved {si(gv['achieved_bandwidth_bytes_per_s'], 'B/s')} "
            f"({gv['fraction_of_roof']:.0%} of the roof)" + (
                f": above the roof because {gv['above_roof']}." if gv.get("above_roof") else "."),
            gemv_intensity=gemv_i, lowest_fp32_ridge=low["ridge"], lowest_ridge_gpu=low["gpu"],
            measured_gemv_bandwidth_bytes_per_s=gv["achieved_bandwidth_bytes_per_s"]),
    }


# --- part 3 -----------------------------------------------------------------------------------
def _comp(analysis: dict, name: str) -> dict:
    return next(c for c in analysis["components"] if c["name"] == name)


def part3_analytic(cfg_name: str, roof: dict, dec: dict, pre: dict, sweeps: list[dict],
                   measured_ridge: float | None, mlp_fused_bytes: int) -> dict:
    """3.1, 3.2, 3.4.x and the whole-attention bonus, from the per-component costs."""
    out = {}
    for ph, a in (("decode", dec), ("prefill", pre)):
        core = _comp(a, "attn.core")
        out.setdefault("3.1", []).append(
            f"{ph} B={a['batch']} {'kv' if ph == 'decode' else 'L'}="
            f"{a['kv_len'] if ph == 'decode' else a['seq']}: QK^T and PV {core['macs']:,} MACs "
            f"dense ({a['causal']['macs']:,} with the causal mask), softmax and the scale "
            f"{core['flops'] - 2 * core['macs']:,} FLOPs")
        out.setdefault("3.2", []).append(
            f"{ph}: {core['bytes']:,} bytes eager (the score matrix written, read five times by "
            f"softmax, read again by PV) against {core['bytes_fused']:,} fused-ideal (Q, K, V, O "
            f"once): {core['bytes'] / core['bytes_fused']:.1f}x")
    res = {
        "3.1": answer("Attention core of one layer of " + cfg_name + ", under cost.py's "
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
    res.update(_shape_answers(roof, dec, pre, sweeps, measured_ridge, mlp_fused_bytes))
    return res


def _shape_answers(roof: dict, dec: dict, pre: dict, sweeps: list[dict],
                   measured_ridge: float | None, mlp_fused_bytes: int) -> dict:
    ridge = roof["ridge"]
    mlp = {s["label"]: s for s in sweeps if s["what"] == "mlp"}
    layer = {s["label"]: s for s in sweeps if s["what"] == "layer"}
    d1, d64 = mlp["decode B=1"], mlp["decode B=64"]
    pre_mlp = pre["groups"]["mlp"]
    gate = _comp(pre, "mlp.gate_proj")
    fused_i = pre_mlp["flops"] / mlp_fused_bytes  # the MLP as one kernel: x, 3 weights, y

    def side(i: float, r: float) -> str:
        return "compute-bound" if i >= r else "memory-bound"

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
            f"feeds B*L = {pre['batch'] * pre['seq']:,} rows, a GEMM: the projections alone reach "
            f"{gate['intensity']:.0f} FLOP/byte and the whole MLP {pre_mlp['intensity']:.0f} with "
            f"eager bytes (its activation and product round-trip memory at under 2 FLOP/byte) or "
            f"{fused_i:.0f} with fused-ideal bytes (the MLP as one kernel). Against {ridges}, prefill's MLP is "
            + " and ".join(verdicts) + f"; decode's is {side(d1['intensity'], ridge)}. Whether "
            "prefill is compute-bound thus depends on the byte convention and the ridge used; "
            "the projections, where the time goes, are " + side(gate["intensity"], ridge) + ".",
            decode_mlp_intensity=d1["intensity"], prefill_mlp_intensity=pre_mlp["intensity"],
            prefill_mlp_intensity_fused=fused_i, projection_intensity=gate["intensity"],
            datasheet_ridge=ridge, measured_ridge=measured_ridge),
        "3.4.2": answer(
            "Decode batch 1 -> 64 moves the MLP right, about linearly (the weights are read once "
            "for all the batch's tokens): " + ", ".join(
                f"B={s['batch']} {s['intensity']:.1f}" for s in decode_rows) + " FLOP/byte; " + (
                f"it turns compute-bound at B={crossing}." if crossing else
                f"still memory-bound at B=64 (ridge {ridge:.0f}): batching helps, but not to the "
                "ridge; this is why weight-only quantisation (W4A16) pays for single-user decode "
                "while W8A8 suits batched serving."),
            **{f"decode_B{s['batch']}_intensity": s["intensity"] for s in decode_rows}),
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


def part3_measured(measured: list[dict], not_measured: list[str], device: str) -> dict:
    """3.3 and the decode-profile bonuses from the real transformers layer."""
    if not measured:
        why = "; ".join(not_measured) or "not measured"
        return {k: answer(f"Not run here: {why}.") for k in
                ("3.3", "B.decode_profile", "B.cuda_graph_profile")}
    lines = []
    for m in measured:
        lines.append(
            f"{m['phase']} B={m['batch']} {m['mode']}: wall {secs(m['wall_s'])}, device "
            f"{secs(m['device_s'])}, kernels {secs(m['kernel_s'])}, predicted "
            f"{secs(m['predicted_s'])} ({m['predicted_over_kernel']:.2f} of measured; the plain "
            f"roofline alone {m['roofline_s'] / m['kernel_s']:.2f})")
    out = {"3.3": answer("The real layer, measured: " + "; ".join(lines) + ".",
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
        out["B.decode_profile"] = answer(
            f"Decode B={eager['batch']} kv={eager['kv_len']}, eager: {eager['launches_per_iter']:.0f}"
            f" {unit} per step, {secs(eager['kernel_s'])} in them of {secs(eager['wall_s'])} "
            f"wall; the timeline is busy {tl['busy_us']:.0f} us of {tl['span_us']:.0f} "
            f"({tl['gaps']} gaps, the largest {tl['largest_gap_us']:.0f} us)" + (
                ": the device mostly waits for the host to launch the next one. " if idle else
                ". ") + "Slowest components: " + ", ".join(
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


# --- part 4 -----------------------------------------------------------------------------------
def _names(kernels: list, n: int = 3) -> str:
    return ", ".join(k[:60] for k in kernels[:n]) or "none"


def part4(mm: dict, g: dict, m: dict, device: str, roof_notes: list[str]) -> dict:
    kernels = "kernels" if device == "cuda" else "ops (a CPU runs no CUDA kernels)"
    rows = {r["variant"]: r for r in g["rows"] if "device_s" in r}
    modes = {r["mode"]: r for r in m["rows"] if "device_s" in r}
    eager = modes.get("eager")
    out = {"4.1": answer(
        f"One torch.matmul ({mm['n']} x {mm['n']}, {mm['dtype']}) on the {device}: "
        + (f"{mm['launches']:.0f} kernel launch(es) per call, {_names(mm['kernels'])}, "
           f"{secs(mm['kernel_s'])} of kernel time." if device == "cuda" else
           f"no CUDA kernels here; the profiler shows the ops it ran: {_names(mm['kernels'])}, "
           f"{secs(mm['kernel_s'])} per call."),
        n=mm["n"], launches=mm["launches"], kernels=mm["kernels"], kernel_s=mm["kernel_s"])}
    if eager:
        out["4.2"] = answer(
            f"The MLP ({m['hidden']} -> {m['intermediate']}, {m['tokens']} tokens, {m['dtype']}) "
            f"launches {eager['kernels_per_call']:.0f} {kernels} per call: "
            + _names([k["name"] for k in eager["kernels"]], 6) + ". Its Chrome trace: "
            f"{eager.get('trace') or 'not written'} (open it in Perfetto for the timeline).",
            kernels_per_call=eager["kernels_per_call"], trace=eager.get("trace"))
    out["4.3"] = answer(" ".join([g["explanation"], *(f"{n}." for n in roof_notes)]),
                        **{f"{k}_device_s": r["device_s"] for k, r in rows.items()})
    comp = rows.get("torch.compile(unfused)")
    nog = modes.get("max-autotune-no-cudagraphs")
    text = []
    if comp:
        text.append(f"torch.compile turned the unfused GeLU's 9 ops into "
                    f"{comp['kernels_per_call']:.0f} kernel(s) ({_names(comp['kernel_names'])}), "
                    f"{secs(comp['device_s'])} against {secs(rows['unfused (basic ops)']['device_s'])}"
                    " unfused")
    if nog and eager:
        text.append(
            f"the MLP under max-autotune-no-cudagraphs launches {nog['kernels_per_call']:.0f} "
            f"kernels ({_names([k['name'] for k in nog['kernels']], 4)}) against eager's "
            f"{eager['kernels_per_call']:.0f}; device time {secs(nog['device_s'])} against "
            f"{secs(eager['device_s'])} eager" + (
                f": the fused kernels' time {'rose' if nog['kernel_s'] > eager['kernel_s'] else 'fell'}"
                f" from {secs(eager['kernel_s'])} to {secs(nog['kernel_s'])}"
                if nog.get("kernel_s") and eager.get("kernel_s") else ""))
    out["4.4"] = answer("; ".join(text) + "." if text else
                        "torch.compile did not run here: " + "; ".join(
                            f"{r['mode']}: {r.get('error')}" for r in m["rows"] if "error" in r),
                        **{f"{k}_kernels": r["kernels_per_call"] for k, r in modes.items()})
    graphs = modes.get("max-autotune")
    if graphs and eager:
        out["4.4.2"] = answer(
            f"max-autotune adds CUDA graphs (they replay under torch.no_grad): wall time per call "
            f"{secs(graphs['wall_s'])} against {secs(eager['wall_s'])} eager and "
            f"{secs(nog['wall_s']) if nog else '-'} without graphs; kernel time "
            f"{secs(graphs.get('kernel_s'))} ({graphs['kernels_per_call']:.0f} kernels, the "
            "graph's input copy included). A graph removes launch gaps, not kernel time: it pays "
            "where launches dominate, as in the decode step (B.cuda_graph_profile).",
            eager_wall_s=eager["wall_s"], graph_wall_s=graphs["wall_s"],
            graph_kernel_s=graphs.get("kernel_s"))
    else:
        out["4.4.2"] = answer("Not run here: " + next(
            (r["error"] for r in m["rows"] if r["mode"] == "max-autotune" and "error" in r),
            "max-autotune needs a GPU") + ".")
    return out


# --- part 5 -----------------------------------------------------------------------------------
SCORE_BYTES = {"fp16": "S in fp16 (2 bytes), S cast to fp32 (4) and softmax's fp32 output (4)",
               "bf16": "S in bf16 (2 bytes), S cast to fp32 (4) and softmax's fp32 output (4)",
               "fp32": "S (4 bytes) and softmax's output (4); the fp32 cast is a no-op"}


def part5(sw: dict, view: list[dict], kw: dict, roof_notes: list[str]) -> dict:
    a, slope = sw["analysis"], sw["analysis"]["memory_slope"]
    ok = [r for r in sw["rows"] if r["status"] == "ok"]
    std = {r["seq"]: r for r in ok if r["impl"] == "standard"}
    oom = a["oom_seq"].get("standard")
    oom_row = next((r for r in sw["rows"] if r["impl"] == "standard" and r["seq"] == oom), {})
    if not oom:
        where = f"it did not run out of memory up to {sw['seqs'][-1]:,} tokens here"
    elif oom_row.get("attempted") is False:
        where = (f"it does not fit at {oom:,} tokens here ("
                 f"{oom_row['error'].removeprefix('would not fit: ')})")
    else:
        where = f"it ran out of memory at {oom:,} tokens here"
    per = a.get("standard_bytes_per_score")
    predicted = a.get("predicted_standard_oom_seq", {})
    out = {"5.1": answer(f"Standard attention: {where}; too few measured lengths for its "
                         "memory slope and bytes per score.", oom_seq=oom)}
    if per:
        out["5.1"] = answer(
            f"Standard attention's extra memory grows with log-log slope "
            f"{slope['standard']:.2f}: O(N^2), it materialises the N x N scores. Measured "
            f"{per:.1f} bytes per score in {kw['dtype']}: {SCORE_BYTES[kw['dtype']]}. "
            f"{where[0].upper() + where[1:]}; "
            f"at B={kw['batch']}, H={kw['heads']} it would run out near " + ", ".join(
                f"{k} {v:,}" for k, v in list(predicted.items())[:6]) + " tokens. Long-context "
            "prefill (and training) is where it hurts.",
            memory_slope=slope["standard"], bytes_per_score=per, oom_seq=oom,
            predicted_oom_seq=predicted)
    fused = [i for i in ("flash_attn", "flash", "triton", "cudnn", "efficient")
             if any(r["impl"] == i for r in ok)]
    lines, speedups = [], []
    for i in fused:
        for n, s in sorted(std.items()):
            r = next((r for r in ok if r["impl"] == i and r["seq"] == n), None)
            if r:
                speedups.append(s["device_s"] / r["device_s"])
                lines.append(f"{i} at {n:,}: {s['device_s'] / r['device_s']:.1f}x faster, "
                             f"{s['extra_peak_bytes'] / max(r['extra_peak_bytes'], 1):.0f}x less "
                             "extra memory")
    stand_in = ("flash_attn_func" if "flash_attn" in fused else
                "flash-attn is not installed; standing in: " + ", ".join(fused)
                if fused else "no fused implementation ran here")
    if speedups:
        lo, hi = min(speedups), max(speedups)
        claim = ("within" if lo >= 2 and hi <= 4 else "outside") + f" the lab's 2-4x ({lo:.1f}-" \
            f"{hi:.1f}x here)"
    else:
        claim = "not testable here"
    out["5.2"] = answer(
        f"{stand_in}. Against standard attention: " + ("; ".join(lines[:8]) or "-") +
        f". The speed-up is {claim}." + "".join(f" {n}." for n in roof_notes),
        speedups=speedups, fused=fused)
    tri = {r["seq"]: r for r in ok if r["impl"] == "triton"}
    peers = [i for i in ("flash", "cudnn", "efficient") if any(r["impl"] == i for r in ok)]
    if tri:
        out["B.flash_vs_sdpa"] = answer(
            "rooflab's Triton FlashAttention against SDPA's fused backends (TFLOP/s): " + "; ".join(
                f"N={n:,} triton {r['tflops_per_s']:.0f}, " + ", ".join(
                    f"{p} {q['tflops_per_s']:.0f}" for p in peers
                    for q in ok if q["impl"] == p and q["seq"] == n)
                for n, r in sorted(tri.items())) + ".",
            **{f"triton_N{n}_tflops_per_s": r["tflops_per_s"] for n, r in tri.items()})
    else:
        out["B.flash_vs_sdpa"] = answer("Not run here: " + sw["skipped"].get(
            "triton", "rooflab's Triton kernel did not run") + ".")
    prof = [v for v in view if "kernels" in v]
    out["B.flash_analysis"] = answer(
        ("Kernels" if sw["device"] == "cuda" else "Ops (a CPU runs no CUDA kernels)") +
        " per call at one length: " + "; ".join(
            f"{v['impl']} at N={v['seq']:,}: {v['kernels_per_call']:.0f} "
            f"({_names(v['kernels'], 4)})" for v in prof) + ". The fused kernels never write the "
        "N x N matrix: they stream K and V blocks through on-chip memory with an online softmax, "
        "which is why their memory slope is " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(slope.items()) if k in fused and v is not None)
        + ".", **{f"{v['impl']}_kernels": v["kernels_per_call"] for v in prof})
    return out
