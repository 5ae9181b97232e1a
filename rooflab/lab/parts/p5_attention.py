"""Part 5: attention's memory and time, standard against every fused implementation."""
from __future__ import annotations

from rooflab import roofline as R
from rooflab.studies import attention as ATT
from rooflab.lab.answers import answer, names, speed, times
from rooflab.lab.context import Context, hold_roofline, pt, result, roof_spec, table
from rooflab.measure.dtypes import runnable
from rooflab.units import noise, secs

TITLE = "Attention and FlashAttention"


def run(ctx: Context) -> dict:
    cuda = ctx.device == "cuda"
    if cuda:
        # 5.1: 512 .. 32768; 5.2: 256 .. 8192
        seqs = [256] + [512 << i for i in range(5 if ctx.quick else 7)]
        kw = dict(batch=1, heads=16, head_dim=128, dtype="fp16")
    else:
        seqs = [256, 512, 1024] if ctx.quick else [256, 512, 1024, 2048]
        kw = dict(batch=1, heads=4, head_dim=64, dtype="fp32")
    tick = ctx.progress("part 5: attention sweep", len(seqs) * len(ATT.IMPLS))
    sw = ATT.sweep(seqs, ATT.IMPLS, device=ctx.device, progress=tick, **kw)
    view = ATT.profile_view(4096 if cuda else 512, ctx.device, trace_dir=ctx.trace_dir, **kw)
    # decode: one new token per sequence against a cache (the shape: 8 x 32 heads, GQA 4:1)
    kv_lens = [512 << i for i in range(0, 7, 2 if ctx.quick else 1)] if cuda else [256, 1024]
    dkw = (dict(batch=8, heads=32, kv_heads=8, head_dim=128, dtype=runnable("bf16", "cuda"))
           if cuda else dict(batch=2, heads=4, kv_heads=2, head_dim=64, dtype="fp32"))
    tick = ctx.progress("part 5: decode attention", len(kv_lens) * len(ATT.DECODE_IMPLS))
    dec = ATT.decode_sweep(kv_lens, device=ctx.device, progress=tick,
                           bandwidth_bytes_per_s=ctx.ceilings.mem_bandwidth_bytes_per_s, **dkw)
    roof = ctx.measured_roof(kw["dtype"])
    plots = attention_plots(sw, roof, dec)
    answers = questions(sw, view, kw, ctx.beaten(hold_roofline(plots[-1], ctx.cache_bytes)))
    answers["B.flash_decoding"] = decode_answer(dec, roof)
    oom = sw["analysis"]["oom_seq"].get("standard")
    headline = (f"standard attention: no room at {oom:,} tokens" if oom else
                f"standard attention fit up to {sw['seqs'][-1]:,} tokens") + \
        f"; memory slope {sw['analysis']['memory_slope'].get('standard') or 0:.2f}"
    return result(headline, {"sweep": sw, "profile_view": view, "decode": dec}, plots, answers,
                  [f"{k}: {why}" for k, why in {**sw["skipped"], **dec["skipped"]}.items()],
                  tables=[table("p5_sweep", "Attention sweep", sw["rows"],
                                ["impl", "seq", "status", "extra_peak_bytes", "device_s", "cv",
                                 "tflops_per_s", "error"]),
                          table("p5_decode", "Decode attention (one query per head)",
                                dec["rows"], ["impl", "kv_len", "status", "device_s", "cv",
                                              "bandwidth_bytes_per_s", "fraction_of_copy_bw",
                                              "above_roof", "error"])])


def attention_plots(sw: dict, roof: R.Roof, dec: dict) -> list[dict]:
    """Memory and latency against length (OOM marked), decode bandwidth against cache length, and
    the roofline view: eager bytes (the N x N round trips) against fused bytes, each with its
    measured point, decode's at the longest cache beside them."""
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
    dok = [r for r in dec["rows"] if r["status"] == "ok"]
    for r in (r for r in dok if r["kv_len"] == max(x["kv_len"] for x in dok)):
        i = r["flops"] / r["bytes_fused"]
        rpts.append(pt(f"decode {r['impl']} kv={r['kv_len']}", i, r["flops"] / r["device_s"],
                       "measured", "decode", measured_s=r["device_s"], flops=r["flops"],
                       bytes=r["bytes_fused"],
                       **({"above_roof": r["above_roof"]} if r.get("above_roof") else {})))
    dimpls = sorted({r["impl"] for r in dok})
    return [
        {"kind": "lines", "name": "p5_memory", "title": "Extra peak memory of one attention call",
         "xlabel": "sequence length", "ylabel": "MiB", "logx": True, "logy": True,
         "series": series("extra_peak_bytes", 2**-20), "marks": marks},
        {"kind": "lines", "name": "p5_time", "title": "Device time of one attention call",
         "xlabel": "sequence length", "ylabel": "device time", "yunit": "s", "logx": True,
         "logy": True, "series": series("device_s", 1), "marks": marks},
        {"kind": "lines", "name": "p5_decode", "title": "Decode attention: bandwidth reached on "
         "the bytes it must move (B={batch}, H={heads}, Hkv={kv_heads})".format(**dec),
         "xlabel": "KV cache length", "ylabel": "fraction of measured copy bandwidth",
         "logx": True, "series": {i: [[r["kv_len"], r.get("fraction_of_copy_bw")] for r in dok
                                      if r["impl"] == i] for i in dimpls}},
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
    lab_lengths = {n for n in std if 256 <= n <= 8192} or set(std)  # 5.2's lengths
    lines, speedups = against_standard(std, ok, fused, lab_lengths)
    stand_in = ("flash_attn_func" if "flash_attn" in fused else
                "flash-attn is not installed; standing in: " + ", ".join(fused)
                if fused else "no fused implementation ran here")
    claim = claim_text(speedups)
    out["5.2"] = answer(
        f"{stand_in}. Against standard attention: " + ("; ".join(lines) or "-") +
        f". The speed-up is {claim}." + "".join(f" {n}." for n in roof_notes)
        + noise([r for r in ok if r["impl"] in fused or r["impl"] == "standard"],
                lambda r: f"{r['impl']} at {r['seq']:,}"),
        speedups=speedups, fused=fused)
    out["B.flash_vs_sdpa"] = flash_vs_sdpa(sw)
    prof = [v for v in view if "kernels" in v]
    out["B.flash_analysis"] = answer(
        ("Kernels" if sw["device"] == "cuda" else "Ops (a CPU runs no CUDA kernels)") +
        " per call at one length: " + "; ".join(
            f"{v['impl']} at N={v['seq']:,}: {v['kernels_per_call']:.0f} "
            f"({names(v['kernels'], 4)})" for v in prof) + "".join(
            f"; {v['impl']} not profiled: {v['skipped']}" for v in view if "skipped" in v)
        + ". The fused kernels never write the "
        "N x N matrix: they stream K and V blocks through on-chip memory with an online softmax, "
        "which is why their memory slope is " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(slope.items()) if k in fused and v is not None)
        + ".", **{f"{v['impl']}_kernels": v["kernels_per_call"] for v in prof})
    return out


def against_standard(std: dict, ok: list[dict], fused: list[str],
                     lengths: set[int]) -> tuple[list[str], list[float]]:
    """Each fused implementation against standard attention (``std``: its rows by length): the
    first one length by length (speed and extra memory), the others as their range of speeds;
    and every speed-up, for the lab's claim."""
    ratios = {}  # implementation -> [(length, speed-up, memory ratio)]
    for i in fused:
        for n, s in sorted(std.items()):
            r = next((r for r in ok if r["impl"] == i and r["seq"] == n), None)
            if r and n in lengths:
                ratios.setdefault(i, []).append((n, s["device_s"] / r["device_s"], s[
                    "extra_peak_bytes"] / max(r["extra_peak_bytes"], 1)))
    lines = []
    for k, (i, rows) in enumerate(ratios.items()):
        if k == 0:
            lines += [f"{i} at {n:,}: {speed(x)}" + (
                f", {times(m)} less extra memory" if m >= 1 else
                f", {times(1 / m)} more extra memory" if m > 0 else "") for n, x, m in rows]
        else:
            lo, hi = min(rows, key=lambda t: t[1]), max(rows, key=lambda t: t[1])
            lines.append(f"{i} at {lo[0]:,}: {speed(lo[1])}" if len(rows) == 1 else
                         f"{i} from {speed(lo[1])} at {lo[0]:,} to {speed(hi[1])} at {hi[0]:,}")
    return lines, [x for rows in ratios.values() for _, x, _ in rows]


def flash_vs_sdpa(sw: dict) -> dict:
    """rooflab's Triton kernel beside SDPA's fused backends, or why it has no figures here."""
    ok = [r for r in sw["rows"] if r["status"] == "ok"]
    tri = {r["seq"]: r for r in ok if r["impl"] == "triton"}
    peers = [i for i in ("flash", "cudnn", "efficient") if any(r["impl"] == i for r in ok)]
    failed = [r for r in sw["rows"] if r["impl"] == "triton" and r.get("error")]
    if tri:
        return answer(
            "rooflab's Triton FlashAttention against SDPA's fused backends (TFLOP/s): " + "; ".join(
                f"N={n:,} triton {r['tflops_per_s']:.0f}, " + ", ".join(
                    f"{p} {q['tflops_per_s']:.0f}" for p in peers
                    for q in ok if q["impl"] == p and q["seq"] == n)
                for n, r in sorted(tri.items())) + ".",
            **{f"triton_N{n}_tflops_per_s": r["tflops_per_s"] for n, r in tri.items()})
    if "triton" in sw["skipped"]:
        return answer(f"Not run here: {sw['skipped']['triton']}.")
    if failed:
        return answer(f"rooflab's Triton kernel failed here at N={failed[0]['seq']:,}: "
                      f"{failed[0]['error']}.")
    return answer("Not run here: no length was swept.")


def claim_text(speedups: list[float], lo_claim: float = 2, hi_claim: float = 4) -> str:
    """The lab's "2-4x faster" against this run's ratios: how many fall inside it."""
    if not speedups:
        return "not testable here"
    inside = sum(lo_claim <= s <= hi_claim for s in speedups)
    span = f"{min(speedups):.1f}-{max(speedups):.1f}x here"
    if inside == len(speedups):
        return f"within the lab's {lo_claim:g}-{hi_claim:g}x at every length ({span})"
    if inside == 0:
        return f"outside the lab's {lo_claim:g}-{hi_claim:g}x at every length ({span})"
    return (f"within the lab's {lo_claim:g}-{hi_claim:g}x at {inside} of {len(speedups)} "
            f"comparisons ({span})")


def decode_answer(dec: dict, roof: R.Roof) -> dict:
    """rooflab's flash-decoding against the others, from the decode sweep."""
    ok = [r for r in dec["rows"] if r["status"] == "ok" and r.get("fraction_of_copy_bw")]
    if not ok:
        return answer("Decode attention did not run here.")
    longest = max(r["kv_len"] for r in ok)
    at = sorted((r for r in ok if r["kv_len"] == longest), key=lambda r: r["device_s"])
    mine = {r["kv_len"]: r for r in ok if r["impl"] == "triton_decode"}
    intensity = at[0]["flops"] / at[0]["bytes_fused"]
    fastest = ", ".join(f"{r['impl']} {secs(r['device_s'])} ({r['fraction_of_copy_bw']:.0%} of "
                        "copy bandwidth)" for r in at)
    text = (f"One new token per sequence (B={dec['batch']}, H={dec['heads']}, "
            f"Hkv={dec['kv_heads']}, d={dec['head_dim']}, {dec['dtype']}) reads the whole cache "
            f"once for {intensity:.1f} FLOP per byte, {R.bound(roof, intensity)}-bound against "
            f"the ridge of {roof.ridge:.0f} here; the figure that counts is the bandwidth "
            f"reached. At {longest:,} cached tokens, fastest first: {fastest}.")
    if mine:
        reached = ", ".join(f"{n:,} tokens {r['fraction_of_copy_bw']:.0%}"
                            for n, r in sorted(mine.items()))
        text += (" rooflab's flash-decoding kernel lays every sequence's cache end to end, gives "
                 "each program an equal run of it (a whole number of runs a head, or of heads "
                 "a run), then merges the partial softmaxes: a head's last program merges them "
                 "where the head has two runs, a second kernel where it has more; where every "
                 "head can have a program of its own in one wave, and the heads fill the SMs or "
                 "each cache is short, each program takes a whole head and nothing is merged: "
                 f"{reached} of copy bandwidth.")
    else:
        why = dec["skipped"].get("triton_decode")
        text += f" rooflab's flash-decoding kernel: {why}." if why else ""
    if any(r["fraction_of_copy_bw"] > 1 for r in ok):
        text += (" Above 100%: the ceiling is a copy, half reads and half writes, and a stream "
                 "of reads alone runs a few percent faster than that mix.")
    text += noise(ok, lambda r: f"{r['impl']} at {r['kv_len']:,}")
    return answer(text, **{f"{r['impl']}_kv{r['kv_len']}_fraction_of_copy_bw":
                           r["fraction_of_copy_bw"] for r in ok})
