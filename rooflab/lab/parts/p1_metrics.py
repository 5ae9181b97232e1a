"""Part 1: latency, MACs and I/O of a GEMM; the triple loop against torch.matmul; no warm-up."""
from __future__ import annotations

from rooflab import cost as C
from rooflab.studies import metrics
from rooflab.lab.answers import agree, agree_bound, answer, speed
from rooflab.lab.context import Context, result, table
from rooflab.units import secs, si

TITLE = "Metrics: latency, MACs, I/O"


def run(ctx: Context) -> dict:
    d = metrics.measure_metrics(ctx.device, ctx.quick)
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
    answers = questions(d, ctx.device)
    tables = [table("p1_gemm", "Triple loop vs torch.matmul", rows,
                    ["n", "macs", "flops", "bytes", "intensity", "naive_median_s", "naive_runs",
                     "torch_median_s", "speedup", "torch_cv"])]
    not_run = [f"the triple loop at n = {s['n']}: predicted {secs(s['predicted_naive_s'])}, past "
               f"its budget of {secs(d['naive_budget_s'])}" for s in d["naive_skipped"]]
    return result(f"torch.matmul {speed(big['speedup'])} than the triple loop at n={big['n']}",
                  d, plots, answers, not_run, tables=tables)


# --- its questions, answered from its numbers -----------------------------------------------
def questions(d: dict, device: str) -> dict:
    rows = d["naive_vs_torch"]
    big = rows[-1]
    cw, naive = d["cold_vs_warm"], d["naive_cold_series_s"]
    warm = cw["warm"]
    spread = (max(naive) - min(naive)) / min(naive)
    first = cw["first_over_settled"]
    causes = [f"the first torch.matmul (n = {cw['n']}) took {secs(cw['first_call_s'])} of wall "
              f"time against {secs(cw['settled_s'])} for the later runs without warm-up "
              f"(their median; {first:.1f}x): " + (
                  "the first call pays one-time set-up (library load, handle creation, "
                  "allocation)" if first > 1.5 else
                  "little one-time cost was left to pay, as earlier calls in this process had "
                  "already initialised the library")]
    causes.append(f"the pure-Python triple loop, itself run {len(naive)} times back to back, "
                  f"spread by {spread:.0%} between its fastest and slowest run (the interpreter, "
                  "the allocator and other processes)")
    causes.append(f"after warm-up, torch.matmul's device time still varies by CV "
                  f"{warm['cv']:.1%} within one round (the median round of three: 20th to 80th "
                  f"percentile {secs(warm['p20_s'])} to {secs(warm['p80_s'])})")
    ratio = cw["timer_over_independent"]
    bound = agree_bound(warm["cv"])
    check = (" The warm figure, checked in this run against an independent clock "
             "(torch.utils.benchmark's own loop), the fastest of three alternating rounds each "
             "(a round's median, so it can sit below another round's percentiles): "
             f"{secs(cw['warm_fastest_s'])} against {secs(cw['independent_s'])}, a ratio of "
             f"{ratio:.2f}")
    launch = cw.get("launch_s")
    launch_bound = launch is not None and launch > cw["warm_fastest_s"]
    slip = ("the device's speed moved between the rounds (another process, clocks), or a clock "
            "is off; compare this run's timings with care.")
    if launch_bound:  # the loop of back-to-back calls runs at the host's launch rate
        by_launch = launch / cw["independent_s"]
        check += (f". Here the host takes {secs(launch)} to launch one call, longer than the "
                  "kernel runs, so a loop of back-to-back calls (the independent clock's) runs "
                  "at the launch rate, not the device's: against the launch time it reads "
                  f"{by_launch:.2f}: " + (
                      f"the two agree once the launches are counted (within {bound:.0%}); the "
                      "device time is the kernel's own." if agree(by_launch, warm["cv"]) else
                      f"they disagree by more than {bound:.0%} even so: " + slip))
    else:
        check += ": " + (f"the two clocks agree (within {bound:.0%})." if agree(ratio, warm["cv"])
                         else f"the two clocks disagree by more than {bound:.0%}: " + slip)
    skipped = d.get("naive_skipped") or []
    ran = ", ".join(str(r["n"]) for r in rows)
    sizes = (f"The triple loop ran at n = {ran}" + (
        "; " + ", ".join(f"n = {s['n']} (predicted {secs(s['predicted_naive_s'])})"
                         for s in skipped)
        + f" did not fit its {secs(d['naive_budget_s'])} budget and was skipped. " if skipped
        else ", all of the lab's sizes. "))
    per = "; ".join(f"n = {r['n']}: loop {secs(r['naive_median_s'])}, torch.matmul "
                    f"{secs(r['torch_median_s'])}, {speed(r['speedup'])}" for r in rows)
    gemv = C.gemv(big["n"], big["n"], "fp32")
    return {
        "1.1": answer(
            sizes + f"torch.matmul on this {'GPU' if device == 'cuda' else 'CPU'} against the "
            f"loop (device time; 'faster' is torch.matmul's): {per}. At n = {big['n']}: "
            f"{si(big['naive_flops_per_s'], 'FLOP/s')} in the loop against "
            f"{si(big['torch_flops_per_s'], 'FLOP/s')}: the loop pays the interpreter for every "
            "multiply-add, torch.matmul runs vectorised, multithreaded or on the GPU.",
            n=big["n"], naive_s=big["naive_median_s"], torch_s=big["torch_median_s"],
            speedup=big["speedup"], sizes_run=[r["n"] for r in rows],
            sizes_skipped=[s["n"] for s in skipped]),
        "1.2": answer(
            "Timed run after run with no warm-up (wall time), the numbers move for three reasons "
            "this run shows: " + "; ".join(causes) + ". A latency is only worth quoting after "
            "warm-up, over many runs, with its spread." + check,
            first_call_s=cw["first_call_s"], settled_s=cw["settled_s"], first_over_settled=first,
            naive_runs_s=naive, naive_spread=spread, warm_cv=warm["cv"],
            warm_s=cw["warm_fastest_s"], independent_s=cw["independent_s"],
            timer_over_independent=ratio, agree_bound=bound, launch_s=launch,
            launch_bound=launch_bound),
        "1.3": answer(
            f"C = A B with A (N, K) and B (K, M) needs N*K*M multiply-accumulates, whatever the "
            f"dtype: at n = {big['n']}, {big['macs']:,} MACs = {big['flops']:,} FLOPs (1 MAC = 2 "
            f"FLOPs). A GEMV is M = 1: {gemv.macs:,} MACs at the same N = K.",
            n=big["n"], macs=big["macs"], flops=big["flops"], gemv_macs=gemv.macs),
        "1.4": answer(
            f"Read A and B once, write C once: 4 (N*K + K*M + N*M) bytes in fp32, "
            f"{big['bytes']:,} at n = {big['n']}, for an intensity of {big['intensity']:.1f} "
            f"FLOP/byte (it grows as n/6); the GEMV at the same size moves {gemv.bytes:,} bytes "
            f"for {gemv.intensity:.2f} FLOP/byte.",
            n=big["n"], bytes=big["bytes"], intensity=big["intensity"], gemv_bytes=gemv.bytes,
            gemv_intensity=gemv.intensity),
    }
