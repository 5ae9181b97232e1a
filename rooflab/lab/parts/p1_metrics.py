"""Part 1: latency, MACs and I/O of a GEMM; the triple loop against torch.matmul; no warm-up."""
from __future__ import annotations

from rooflab.lab import metrics
from rooflab.lab.answers import answer
from rooflab.lab.context import Context, result, table
from rooflab.units import secs, si

TITLE = "Metrics: latency, MACs, I/O"


def run(ctx: Context) -> dict:
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
    answers = questions(d, ctx.device)
    tables = [table("p1_gemm", "Triple loop vs torch.matmul", rows,
                    ["n", "macs", "flops", "bytes", "intensity", "naive_median_s",
                     "torch_median_s", "speedup", "torch_cv"])]
    return result(f"torch.matmul {big['speedup']:,.0f}x faster than the triple loop at "
                  f"n={big['n']}", d, plots, answers, tables=tables)


# --- its questions, answered from its numbers -----------------------------------------------
def questions(d: dict, device: str) -> dict:
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
    ratio = cw["timer_over_independent"]
    agree = abs(ratio - 1) <= max(0.1, 2 * warm["cv"])
    check = (" The warm figure, checked in this run against an independent clock "
             "(torch.utils.benchmark's own loop), the fastest of three alternating rounds each: "
             f"{secs(cw['warm_fastest_s'])} against {secs(cw['independent_s'])}, a ratio of "
             f"{ratio:.2f}: " + (
                 "the two clocks agree." if agree else
                 f"more apart than twice the warm runs' spread (CV {warm['cv']:.1%}): the "
                 "device's speed moved between the rounds, or a clock is off; compare this "
                 "run's timings with care."))
    return {
        "1.1": answer(
            f"At n = {big['n']} the GEMM is {big['macs']:,} MACs ({big['flops']:,} FLOPs) over "
            f"{big['bytes']:,} bytes of fp32 I/O, intensity {big['intensity']:.1f} FLOP/byte. The "
            f"pure-Python triple loop took {secs(big['naive_median_s'])}; torch.matmul on this "
            f"{'GPU' if device == 'cuda' else 'CPU'} took {secs(big['torch_median_s'])} (device "
            "time): "
            f"{big['speedup']:,.0f}x faster ({si(big['naive_flops_per_s'], 'FLOP/s')} vs "
            f"{si(big['torch_flops_per_s'], 'FLOP/s')}).",
            n=big["n"], macs=big["macs"], flops=big["flops"], bytes=big["bytes"],
            naive_s=big["naive_median_s"], torch_s=big["torch_median_s"],
            speedup=big["speedup"]),
        "1.2": answer(
            "Timed run after run with no warm-up (wall time), the numbers move for three reasons "
            "this run shows: " + "; ".join(causes) + ". A latency is only worth quoting after "
            "warm-up, over many runs, with its spread." + check,
            first_call_s=cw["first_call_s"], settled_s=cw["settled_s"], first_over_settled=first,
            naive_runs_s=naive, naive_spread=spread, warm_cv=warm["cv"],
            warm_s=cw["warm_fastest_s"], independent_s=cw["independent_s"],
            timer_over_independent=cw["timer_over_independent"]),
    }
