"""Part 1: the three numbers of an operation (latency, MACs, bytes) and why warm-up matters."""
from __future__ import annotations

import random

import torch

from rooflab import cost as C
from rooflab.kernels import naive
from rooflab.measure import cold_series, time_call
from rooflab.measure.timer import launch_s
from rooflab.measure.dtypes import torch_dtype


def _lists(m: int, k: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.uniform(-1, 1) for _ in range(k)] for _ in range(m)]


LAB_SIZES = (64, 128, 256, 512)  # the lab's part 1 sizes (warm-up 2, repeat 5)
NAIVE_BUDGET_S = 30.0            # the triple loop's share of part 1; sizes past it are skipped


def naive_vs_torch(sizes=LAB_SIZES, dtype: str = "fp32", device: str = "cpu",
                   budget_s: float = 0.2, naive_budget_s: float = NAIVE_BUDGET_S) -> dict:
    """Latency of the triple loop vs torch.matmul at M=K=N=n, with the cost of each size.

    The triple loop's time grows as n^3: each size's is predicted from the last one measured,
    and a size whose predicted runs would not fit in what is left of ``naive_budget_s`` is
    skipped (listed with its prediction); the lab's warm-up 2 and repeat 5 where they fit, one
    run where only one does."""
    rows, skipped, spent, last = [], [], 0.0, None
    tdt = torch_dtype(dtype)
    for n in sizes:
        guess = last[1] * (n / last[0]) ** 3 if last else 0.0
        left = naive_budget_s - spent
        if last and guess > left:
            skipped.append({"n": n, "predicted_naive_s": guess})
            continue
        warmup, reps = (2, 5) if guess * 7 <= left else (0, 1)
        a, b = _lists(n, n, 1), _lists(n, n, 2)
        t_naive = time_call(naive.matmul, a, b, warmup=warmup, reps=reps, device="cpu",
                            name=f"naive n={n}")
        spent += t_naive.median_s * (warmup + reps)
        last = (n, t_naive.median_s)
        ta = torch.tensor(a, dtype=tdt, device=device)
        tb = torch.tensor(b, dtype=tdt, device=device)
        t_torch = time_call(torch.matmul, ta, tb, budget_s=budget_s, device=device,
                            name=f"torch.matmul n={n}")
        c = C.gemm(n, n, n, dtype)
        rows.append({
            "n": n, "macs": c.macs, "flops": c.flops, "bytes": c.bytes, "intensity": c.intensity,
            "naive_median_s": t_naive.median_s, "naive_runs": reps,
            "torch_median_s": t_torch.median_s,
            "speedup": t_naive.median_s / t_torch.median_s,
            "naive_flops_per_s": c.flops / t_naive.median_s,
            "torch_flops_per_s": c.flops / t_torch.median_s,
            "torch_cv": t_torch.cv, "torch_unstable": t_torch.unstable, "torch_device": device,
        })
    return {"rows": rows, "skipped": skipped, "naive_budget_s": naive_budget_s}


def independent_s(fn, *args, device: str = "cpu") -> float:
    """fn(*args) per call by torch.utils.benchmark, a clock independent of rooflab's timer:
    its own loop (blocks of back-to-back calls, synchronized at each block's end on a GPU) and
    its own statistics; the median over blocks, with every thread rooflab uses (its default is
    one)."""
    from torch.utils.benchmark import Timer

    t = Timer("fn(*args)", globals={"fn": fn, "args": args},
              num_threads=torch.get_num_threads())
    if device == "cuda":
        torch.cuda.synchronize()
    return t.blocked_autorange(min_run_time=0.2).median


def cold_vs_warm(n: int = 512, runs: int = 8, device: str = "cpu") -> dict:
    """Question 1.2: time torch.matmul several times in a row with no warm-up.

    A fresh pair of inputs, so nothing from earlier runs is cached; the first call pays lazy
    initialisation (library load, handle creation, allocator growth); later calls settle.
    The warm figure is checked against an independent clock (independent_s): three rounds of
    each in alternating order, as a device's speed drifts between back-to-back measurements,
    and the fastest round of each compared: the one least disturbed by other work (in one test
    run under load on 2 cores, the medians' ratio read 0.47 and the fastest rounds' 0.94).
    On a GPU, where a call's launch outlasts its kernel (launch_s), that loop times the launches.
    """
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    cold = cold_series(torch.matmul, a, b, n=runs, device=device, name=f"matmul n={n} cold")
    timings, other = [], []
    for rnd in range(3):
        for ours in ((True, False) if rnd % 2 == 0 else (False, True)):
            if ours:
                timings.append(time_call(torch.matmul, a, b, warmup=5, device=device,
                                         name=f"matmul n={n} warm"))
            else:
                other.append(independent_s(torch.matmul, a, b, device=device))
    warm = sorted(timings, key=lambda t: t.device_s)[1]  # the median round
    best = min(t.device_s for t in timings)
    settled = sorted(cold.samples_s[1:])[len(cold.samples_s[1:]) // 2]
    return {
        "n": n, "device": device, "cold_samples_s": cold.samples_s,
        "first_call_s": cold.samples_s[0], "settled_s": settled,
        "first_over_settled": cold.samples_s[0] / settled, "cold_cv": cold.cv,
        "warm": warm.as_dict(), "warm_fastest_s": best, "independent_s": min(other),
        "timer_over_independent": best / min(other),
        "launch_s": launch_s(torch.matmul, a, b, device=device),
    }


def naive_cold_series(n: int = 32, runs: int = 5) -> list[float]:
    """The triple loop run back to back: Python's own noise (no warm-up either)."""
    a, b = _lists(n, n, 3), _lists(n, n, 4)
    return cold_series(naive.matmul, a, b, n=runs, device="cpu").samples_s


def measure_metrics(device: str = "cpu", quick: bool = False) -> dict:
    """The lab's sizes; ``quick`` keeps them and gives the triple loop 3 s."""
    nt = naive_vs_torch(LAB_SIZES, device=device, naive_budget_s=3.0 if quick else NAIVE_BUDGET_S)
    cw = cold_vs_warm(256 if quick else 1024, device=device)
    return {"naive_vs_torch": nt["rows"], "naive_skipped": nt["skipped"],
            "naive_budget_s": nt["naive_budget_s"], "cold_vs_warm": cw,
            "naive_cold_series_s": naive_cold_series(16 if quick else 32)}
