"""Part 4: the profiler and kernel fusion: one matmul's kernels, GeLU four ways, the MLP compiled."""
from __future__ import annotations

import torch

from rooflab import roofline as R
from rooflab.studies import fusion
from rooflab.lab.answers import agree, answer, kernel_label, names, speed, times
from rooflab.lab.context import Context, result, table
from rooflab.measure import time_call
from rooflab.measure.dtypes import runnable, torch_dtype
from rooflab.units import noise, secs

TITLE = "Profiler and kernel fusion"


# The lab's settings: 4.3 GeLU on 1,000,000 fp32 elements; 4.2 and 4.4 the MLP at B=4, L=1024
# (a CPU takes L=128: the compile modes and profiles of 4096 rows would take minutes there).
GELU_NUMEL, BATCH, SEQ, CPU_SEQ = 1_000_000, 4, 1024, 128


def run(ctx: Context) -> dict:
    cuda = ctx.device == "cuda"
    numel = (1 << 26 if not ctx.quick else 1 << 24) if cuda else GELU_NUMEL
    dtype = runnable("bf16", ctx.device)  # fp16 where the GPU has no native bf16 (a T4)
    tick = ctx.progress("part 4: fusion", 3)
    bw = ctx.ceilings.mem_bandwidth_bytes_per_s
    g_lab = fusion.gelu_study(GELU_NUMEL, "fp32", ctx.device, bw, ctx.trace_dir)
    tick()
    # on a GPU, also at a size where bandwidth, not the launch, sets the time
    g = fusion.gelu_study(numel, dtype, ctx.device, bw, ctx.trace_dir) if cuda else g_lab
    tick()
    modes = fusion.MLP_MODES if cuda else ("eager", "default")
    tokens = BATCH * (SEQ if cuda else CPU_SEQ // (8 if ctx.quick else 1))
    m = fusion.mlp_study(640, 2048, tokens, dtype, ctx.device, modes, ctx.trace_dir)
    tick()
    roof_notes = ctx.beaten(hold_copy_bandwidth(g["rows"], ctx))
    if g is not g_lab:
        hold_copy_bandwidth(g_lab["rows"], ctx)
    ok = [r for r in g["rows"] if "device_s" in r]
    plots = [{"kind": "bars", "name": "p4_gelu", "title": f"GeLU-tanh over {numel:,} {dtype} "
              "elements: device time per call (bandwidth in the table)", "ylabel": "device time",
              "yunit": "s", "labels": [r["variant"] for r in ok],
              "values": [r["device_s"] for r in ok]},
             {"kind": "bars", "name": "p4_mlp", "title": f"Gemma MLP, {tokens} tokens: wall time "
              "per call by compile mode (launches included)", "ylabel": "wall time",
              "yunit": "s", "labels": [r["mode"] for r in m["rows"] if "wall_s" in r],
              "values": [r["wall_s"] for r in m["rows"] if "wall_s" in r]}]
    answers = questions(matmul_profile(ctx, dtype), g_lab, g, m, ctx.device, roof_notes)
    per_mode = []
    for r in m["rows"]:
        if "device_s" not in r:
            continue
        if r["kernel_s"] is None:  # a CPU: the device is the host
            split = f"{r['kernels_per_call']:.0f} ops"
        elif r["overhead_s"] is None:
            split = (f"{secs(r['kernel_s'])} in {r['kernels_per_call']:.0f} kernels "
                     f"({r['overhead_flag']})")
        else:
            split = (f"{secs(r['kernel_s'])} of it in {r['kernels_per_call']:.0f} kernels "
                     f"and {secs(r['overhead_s'])} around them (launches, guards, Python)")
        per_mode.append(f"{r['mode']}: wall {secs(r['wall_s'])} per call (device time "
                        f"{secs(r['device_s'])}), {split}; first call {secs(r['first_call_s'])}")
    answers["4.4.1"]["text"] += " Per mode: " + "; ".join(per_mode) + "." + "".join(
        f" {n}" for n in m["notes"] + compile_verdict(m["rows"])) + noise(
        m["rows"], lambda r: r["mode"])
    not_measured = [f"{s['variant']}: {s['reason']}" for s in g["skipped"]]
    if not cuda:
        not_measured.append("max-autotune (CUDA graphs) and the decode step in a CUDA graph: "
                            "need a GPU")
    fastest = min(ok, key=lambda r: r["device_s"])
    return result(f"fastest GeLU: {fastest['variant']} at "
                  f"{fastest['achieved_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s",
                  {"gelu_lab": g_lab, "gelu": g, "mlp": m}, plots, answers, not_measured,
                  tables=[table("p4_gelu_lab", f"GeLU four ways, {GELU_NUMEL:,} fp32 (the "
                                "lab's size)", g_lab["rows"],
                                ["variant", "device_s", "cv", "kernels_per_call",
                                 "bytes_predicted", "achieved_bandwidth_bytes_per_s",
                                 "max_abs_err", "first_call_s", "error"]),
                          table("p4_gelu", f"GeLU four ways, {numel:,} {dtype}", g["rows"],
                                ["variant", "device_s", "cv", "kernels_per_call",
                                 "bytes_predicted",
                                 "achieved_bandwidth_bytes_per_s", "fraction_of_copy_bw",
                                 "above_roof", "max_abs_err", "first_call_s", "error"]),
                          table("p4_mlp", "MLP by compile mode", m["rows"],
                                ["mode", "device_s", "cv", "wall_s", "kernel_s", "overhead_s",
                                 "kernels_per_call",
                                 "first_call_s", "error"])])


def by_category_s(row: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in row["kernels"]:
        if k.get("us_per_call") is not None:
            out[k["category"]] = out.get(k["category"], 0.0) + k["us_per_call"] / 1e6
    return out


def why_kernel_time(eager: dict, compiled: dict) -> str:
    """Where the kernel time moved between eager and compiled, by kernel category: the change
    that decides, and the kernels that now do that work."""
    a, b = by_category_s(eager), by_category_s(compiled)
    if not a or not b:
        return ""
    moves = sorted(((b.get(c, 0.0) - a.get(c, 0.0), c) for c in set(a) | set(b)),
                   key=lambda m: -abs(m[0]))
    parts = [f"{c} {secs(a.get(c, 0.0))} -> {secs(b.get(c, 0.0))}" for _, c in moves]
    top = moves[0][1]
    doing = [k["name"] for k in compiled["kernels"] if k["category"] == top]
    return (f" (by kind of kernel: {', '.join(parts)}; the largest change is in {top}, done "
            f"after compiling by {names(doing, 3)})")


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

    n = 128  # the lab's 4.1: a 128 x 128 bf16 matmul (fp32 on a CPU)
    dt = dtype if ctx.device == "cuda" else "fp32"
    a = torch.randn(n, n, device=ctx.device, dtype=torch_dtype(dt))
    prof = P.profile(torch.matmul, a, a, iters=3, warmup=2, device=ctx.device,
                     trace_path=f"{ctx.trace_dir}/matmul_{n}.json")
    timed = time_call(torch.matmul, a, a, device=ctx.device, name=f"matmul n={n}")
    return {"n": n, "dtype": dt, "launches": prof.launches_per_iter,
            "kernels": [k.name for k in prof.kernels],
            "kernel_s": prof.device_time_us / prof.iters / 1e6, "trace": prof.trace_path,
            "timed_s": timed.device_s, "timed_cv": timed.cv}


def against_timed(profiled_s: float, timed_s: float, cv: float) -> str:
    """The profiler's few calls held against the timer's many (4.1)."""
    r = profiled_s / timed_s
    text = f" Timed without the profiler, the median of many calls: {secs(timed_s)}"
    if agree(r, cv):
        return text + ", in line with it."
    return text + f"; the profiled calls took {times(r)} that: " + (
        "the profiler's own cost on each op, or other work on the machine while its few calls "
        "ran; the timed figure is the one to quote." if r > 1 else
        "the timed figure holds what the profiler's kernel time leaves out (the gaps between "
        "kernels, the timer's own synchronisation).")


# --- its questions, answered from its numbers -----------------------------------------------
UNFUSED, FUSED, COMPILED = "unfused (basic ops)", "F.gelu (PyTorch fused)", "torch.compile(unfused)"


def _count(n: float, device: str) -> str:
    what = "kernel" if device == "cuda" else "op"
    return f"{n:.0f} {what}{'' if round(n) == 1 else 's'}"


def questions(mm: dict, g_lab: dict, g: dict, m: dict, device: str,
              roof_notes: list[str]) -> dict:
    """``g_lab``: the GeLU study at the lab's size; ``g``: at the large size (the same on a CPU)."""
    rows = {r["variant"]: r for r in g_lab["rows"] if "device_s" in r}
    big = {r["variant"]: r for r in g["rows"] if "device_s" in r}
    modes = {r["mode"]: r for r in m["rows"] if "device_s" in r}
    eager = modes.get("eager")
    kind = "kernels" if device == "cuda" else "ops (a CPU runs no CUDA kernels)"
    out = {"4.1": answer(
        f"One torch.matmul ({mm['n']} x {mm['n']}, {mm['dtype']}) on this "
        f"{'GPU' if device == 'cuda' else 'CPU'}: "
        + (f"{_count(mm['launches'], device)} per call, {names(mm['kernels'])}, "
           f"{secs(mm['kernel_s'])} of kernel time." if device == "cuda" else
           f"no CUDA kernels here; the profiler shows the ops it ran: {names(mm['kernels'])}, "
           f"{secs(mm['kernel_s'])} per call.")
        + against_timed(mm["kernel_s"], mm["timed_s"], mm["timed_cv"]),
        n=mm["n"], launches=mm["launches"], kernels=mm["kernels"], kernel_s=mm["kernel_s"],
        timed_s=mm["timed_s"])}
    if eager:
        out["4.2"] = answer(
            f"The MLP ({m['hidden']} -> {m['intermediate']}, {m['tokens']} tokens, {m['dtype']}) "
            f"launches {eager['kernels_per_call']:.0f} {kind} per call: "
            + names([k["name"] for k in eager["kernels"]], 6) + ". Its Chrome trace: "
            f"{eager.get('trace') or 'not written'} (open it in Perfetto for the timeline).",
            kernels_per_call=eager["kernels_per_call"], trace=eager.get("trace"))
    u, f = rows.get(UNFUSED), rows.get(FUSED)
    if u and f:
        ratio = u["device_s"] / f["device_s"]
        out["4.3.1"] = answer(
            f"GeLU-tanh from basic torch ops against F.gelu(approximate='tanh') on "
            f"{g_lab['numel']:,} {g_lab['dtype']} elements: largest difference "
            f"{u['max_abs_err']:.1e} (F.gelu's own against float64: {f['max_abs_err']:.1e}).",
            max_abs_err=u["max_abs_err"], fused_max_abs_err=f["max_abs_err"])
        out["4.3.2"] = answer(
            f"Device time per call at {g_lab['numel']:,} {g_lab['dtype']} elements: basic ops "
            f"{secs(u['device_s'])}, F.gelu {secs(f['device_s'])}: F.gelu is {speed(ratio)}.",
            unfused_s=u["device_s"], fused_s=f["device_s"], unfused_over_fused=ratio)
        found = [f"at the lab's size the basic ops take {ratio:.1f}x F.gelu's time"]
        bu, bf = big.get(UNFUSED), big.get(FUSED)
        if g is not g_lab and bu and bf:
            found.append(f"at {g['numel']:,} {g['dtype']} elements {bu['device_s'] / bf['device_s']:.1f}x, "
                         f"F.gelu there at {bf['achieved_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s"
                         + (f" ({bf['fraction_of_copy_bw']:.0%} of the copy ceiling)"
                            if bf.get("fraction_of_copy_bw") else ""))
        out["4.3.3"] = answer(
            "Findings: " + "; ".join(found) + ". The formula is the same; what differs is how "
            "many times the data crosses memory (4.3.4).", ratios=[ratio])
        out["4.3.4"] = answer(" ".join([g_lab["explanation"], *(f"{n}." for n in roof_notes)]),
                              unfused_kernels=u["kernels_per_call"],
                              fused_kernels=f["kernels_per_call"])
    comp = rows.get(COMPILED)
    if comp and u:
        out["4.4"] = answer(
            f"torch.compile (default mode) turned the basic-ops GeLU's "
            f"{_count(u['kernels_per_call'], device)} into {_count(comp['kernels_per_call'], device)}"
            f" ({names(comp['kernel_names'])}): {secs(comp['device_s'])} against "
            f"{secs(u['device_s'])} unfused ({speed(u['device_s'] / comp['device_s'])}) and "
            f"{secs(f['device_s'])} for F.gelu; first call (compiling) {comp['first_call_s']:.1f} s.",
            unfused_kernels=u["kernels_per_call"], compiled_kernels=comp["kernels_per_call"],
            compiled_s=comp["device_s"])
    else:
        out["4.4"] = answer("torch.compile of the GeLU did not run here: " + next(
            (r.get("error", "") for r in g_lab["rows"] if r["variant"] == COMPILED), "") + ".")
    nog = modes.get("max-autotune-no-cudagraphs") or modes.get("default")
    if nog and eager:
        out["4.4.1"] = answer(
            f"The MLP under {nog['mode']}" + (" (a CPU stands in with the default mode)"
                                                if nog["mode"] == "default" else "") +
            f" launches {nog['kernels_per_call']:.0f} {kind} "
            f"({names([k['name'] for k in nog['kernels']], 4)}) against eager's "
            f"{eager['kernels_per_call']:.0f}; device time {secs(nog['device_s'])} against "
            f"{secs(eager['device_s'])} eager: {speed(eager['device_s'] / nog['device_s'])}" + (
                f"; the kernels' time {'rose' if nog['kernel_s'] > eager['kernel_s'] else 'fell'}"
                f" from {secs(eager['kernel_s'])} to {secs(nog['kernel_s'])}"
                + why_kernel_time(eager, nog) if nog.get("kernel_s") and eager.get("kernel_s")
                else fewer_but_slower(eager, nog)) + ".",
            **{f"{k}_kernels": r["kernels_per_call"] for k, r in modes.items()})
    else:
        out["4.4.1"] = answer("torch.compile of the MLP did not run here: " + "; ".join(
            f"{r['mode']}: {r.get('error')}" for r in m["rows"] if "error" in r) + ".")
    graphs = modes.get("max-autotune")
    if graphs and eager:
        out["4.4.2"] = answer(graph_text(eager, nog if nog is not graphs else None, graphs),
                              eager_wall_s=eager["wall_s"], graph_wall_s=graphs["wall_s"],
                              graph_kernel_s=graphs.get("kernel_s"))
    else:
        out["4.4.2"] = answer("Not run here: " + next(
            (r["error"] for r in m["rows"] if r["mode"] == "max-autotune" and "error" in r),
            "max-autotune needs a GPU") + ".")
    return out


def fewer_but_slower(eager: dict, compiled: dict) -> str:
    """Where no kernel time is profiled (a CPU): what the op count and device time say."""
    if compiled["kernels_per_call"] < eager["kernels_per_call"] and \
            speed(eager["device_s"] / compiled["device_s"]).endswith("slower"):  # not "as fast"
        return ("; fewer ops, yet slower: the generated kernels take longer here than the "
                "library's own matmuls they replace")
    return ""


def graph_text(eager: dict, nog: dict | None, graphs: dict) -> str:
    """max-autotune (CUDA graphs) against eager and against the same compile without graphs, in
    wall time: what a graph saves is the launches between kernels, and what it adds (copying
    the inputs into the graph's own buffers, the replay call) can cost more at this size."""
    ref = nog or eager
    verdict = speed(ref["wall_s"] / graphs["wall_s"])
    text = (f"max-autotune adds CUDA graphs (they replay under torch.no_grad): wall time per call "
            f"{secs(graphs['wall_s'])} against {secs(eager['wall_s'])} eager"
            + (f" and {secs(nog['wall_s'])} without graphs" if nog else "")
            + f": {verdict} than {'the same compile without graphs' if nog else 'eager'}; "
            f"kernel time {secs(graphs.get('kernel_s'))} in {graphs['kernels_per_call']:.0f} "
            "kernels (the graph's input copy included). ")
    if graphs["wall_s"] <= ref["wall_s"]:
        return text + ("The graph replays every kernel with one launch, so the gaps between "
                       "them close: it pays where launches dominate, as in the decode step "
                       "(B.cuda_graph_profile).")
    extra = [f"{kernel_label(k['name'])} {secs(k['us_per_call'] / 1e6)}" for k in graphs["kernels"]
             if k["category"] == "memcpy/memset"]
    return text + ("Here the graph is slower: the kernels already ran back to back, so there "
                   "were few launch gaps to close, while the graph adds copying the input into "
                   "its static buffer and the replay's own host cost" +
                   (f" ({', '.join(extra[:2])})" if extra else "") + ".")
