"""The one timer against an independent clock (torch.utils.benchmark: its own loop, its own
clock), three rounds in alternating order, on a matmul and an elementwise multiply. A unit slip,
a per-batch figure read as per-call, or a warm-up counted would put them 2x or more apart. The
fastest round of each is compared, the one least disturbed by other work on the machine.

A timing comparison, so a benchmark: on a busy machine it can read anything (the unit suite checks
the timer against a call of known length instead). Usage: python benchmarks/timer_agreement.py
OUT_DIR [--device cpu|cuda]
"""
from __future__ import annotations

import argparse

import torch
from torch.utils.benchmark import Timer

from common import write
from rooflab.measure import time_call

BOUND = (0.6, 1.6)  # timer / independent clock: outside it, a bug rather than noise


def compare(fn, device: str, rounds: int = 3) -> dict:
    ours, theirs = [], []
    for rnd in range(rounds):
        for who in (("ours", "theirs") if rnd % 2 == 0 else ("theirs", "ours")):
            if who == "ours":
                ours.append(time_call(fn, warmup=3, budget_s=0.1, device=device).device_s)
            else:
                theirs.append(Timer("fn()", globals={"fn": fn},  # its default is 1 thread
                                    num_threads=torch.get_num_threads()).blocked_autorange(
                    min_run_time=0.1).median)
    ratio = min(ours) / min(theirs)
    return {"ours_s": ours, "theirs_s": theirs, "timer_over_independent": ratio,
            "within_bound": BOUND[0] < ratio < BOUND[1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    # sizes where the device's time is the caller's: torch.utils.benchmark times the host's loop,
    # so on a GPU a kernel of a few us reads as its launch rate, not its device time
    n, e = (384, 1 << 16) if a.device == "cpu" else (4096, 1 << 26)
    m, x = torch.randn(n, n, device=a.device), torch.randn(e, device=a.device)
    rows = {f"matmul n={n}": compare(lambda: m @ m, a.device),
            f"multiply {e:,}": compare(lambda: x * 2, a.device)}
    for name, r in rows.items():
        print(f"{name}: timer/independent {r['timer_over_independent']:.3f}"
              f"{'' if r['within_bound'] else ' OUTSIDE ' + str(BOUND)}")
    write(a.out_dir, "timer_agreement", {"bound": BOUND, "rows": rows})


if __name__ == "__main__":
    main()
