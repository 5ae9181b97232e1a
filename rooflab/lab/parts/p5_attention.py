"""Part 5: attention's memory and time, standard against every fused implementation."""
from __future__ import annotations

from rooflab import roofline as R
from rooflab.lab import attention as ATT
from rooflab.lab.answers import answer, names
from rooflab.lab.context import Context, hold_roofline, pt, result, roof_spec, table

TITLE = "Attention and FlashAttention"


def run(ctx: Context) -> dict:
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
    answers = questions(sw, view, kw, ctx.beaten(hold_roofline(plots[-1], ctx.cache_bytes)))
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


# --- its questions, answered from its numbers -----------------------------------------------
SCORE_BYTES = {"fp16": "S in fp16 (2 bytes), S cast to fp32 (4) and softmax's fp32 output (4)",
               "bf16": "S in bf16 (2 bytes), S cast to fp32 (4) and softmax's fp32 output (4)",
               "fp32": "S (4 bytes) and softmax's output (4); the fp32 cast is a no-op"}


def questions(sw: dict, view: list[dict], kw: dict, roof_notes: list[str]) -> dict:
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
            f"({names(v['kernels'], 4)})" for v in prof) + ". The fused kernels never write the "
        "N x N matrix: they stream K and V blocks through on-chip memory with an online softmax, "
        "which is why their memory slope is " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(slope.items()) if k in fused and v is not None)
        + ".", **{f"{v['impl']}_kernels": v["kernels_per_call"] for v in prof})
    return out
