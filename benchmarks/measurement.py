"""Issue 'measurement': the timer against triton.testing.do_bench, its CV, the measured ceilings
against the H200 datasheet, CUDA-graph launch overhead; and a small real GPU trace for tests."""
from __future__ import annotations

import gzip
import shutil
import sys

import torch

from rooflab import hardware as H
from rooflab.measure import ceilings as CE
from rooflab.measure import profile as P
from rooflab.measure.timer import time

from common import write


def timer_vs_do_bench() -> list[dict]:
    from triton.testing import do_bench

    kernels = []
    for mib in (128, 256, 512, 2048):  # copies of ~70 us to ~1 ms on an H200
        src = torch.rand(mib << 18, device="cuda")
        dst = torch.empty_like(src)
        kernels.append((f"copy {mib} MiB", lambda dst=dst, src=src: dst.copy_(src)))
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        kernels.append((f"bf16 matmul n={n}", lambda a=a: a @ a))
    rows = []
    for name, fn in kernels:
        # five rounds, alternating which goes first, both with an L2 flush before every run
        # (do_bench flushes too): GPU clocks drift between back-to-back measurements of a
        # matmul, so one pair in one order is not a fair comparison
        ours, theirs, cvs = [], [], []
        for rnd in range(5):
            for who in (("rooflab", "do_bench") if rnd % 2 == 0 else ("do_bench", "rooflab")):
                if who == "rooflab":
                    t = time(fn, warmup=25, reps=200, flush_l2=True, device="cuda")
                    ours.append(t.median_s)
                    cvs.append(t.cv)
                else:
                    theirs.append(do_bench(fn, warmup=25, rep=60, return_mode="median") / 1e3)
        med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
        rows.append({"kernel": name, "rooflab_median_s": med(ours), "do_bench_median_s": med(theirs),
                     "rooflab_rounds_s": ours, "do_bench_rounds_s": theirs,
                     "rooflab_cv": med(cvs), "ratio": med(ours) / med(theirs)})
    return rows


def cv_100us() -> dict:
    src = torch.rand(200 << 18, device="cuda")  # 200 MiB read + 200 MiB written: ~100 us
    dst = torch.empty_like(src)
    warm = time(dst.copy_, src, warmup=20, reps=300, device="cuda")
    cold = time(dst.copy_, src, warmup=20, reps=300, flush_l2=True, device="cuda")
    return {"kernel": "copy 200 MiB", "warm": warm.as_dict(), "cold": cold.as_dict()}


def graph_overhead() -> dict:
    x = torch.zeros(1, device="cuda")

    def hundred_adds():
        for _ in range(100):
            x.add_(1)

    eager = time(hundred_adds, warmup=3, reps=50, device="cuda")
    graph = time(hundred_adds, warmup=3, reps=50, device="cuda", cuda_graph=True)
    return {"eager_per_kernel_s": eager.median_s / 100, "graph_per_kernel_s": graph.median_s / 100,
            "speedup": eager.median_s / graph.median_s}


def small_trace(path: str) -> None:
    """GeLU unfused, F.gelu and a matmul on the GPU: a small real trace for tests/data."""
    from rooflab.kernels.gelu import gelu_torch, gelu_unfused

    x = torch.randn(1 << 16, device="cuda")
    a = torch.randn(256, 256, device="cuda")

    def f():
        gelu_unfused(x)
        gelu_torch(x)
        return a @ a

    raw = path.replace(".gz", "")
    P.profile(f, iters=2, warmup=1, device="cuda", trace_path=raw)
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)


def main(out_dir: str) -> None:
    ceil = CE.measure("cuda")
    h200 = H.lookup("H200")
    rows = timer_vs_do_bench()
    data = {
        "timer_vs_do_bench": rows,
        "timer_within_3pct_for_50us_plus": all(abs(r["ratio"] - 1) <= 0.03 for r in rows
                                               if r["do_bench_median_s"] >= 50e-6),
        "cv_100us": cv_100us(),
        "ceilings": ceil.as_dict(),
        "copy_fraction_of_datasheet": ceil.mem_bandwidth_bytes_per_s / h200.mem_bandwidth_bytes_per_s,
        "bf16_fraction_of_datasheet": ceil.peak_flops_per_s.get("bf16", 0) / h200.peak("bf16"),
        "graph_overhead": graph_overhead(),
    }
    small_trace(f"{out_dir}/h200_small.trace.json.gz")
    write(out_dir, "measurement", data)
    print({k: data[k] for k in ("timer_within_3pct_for_50us_plus", "copy_fraction_of_datasheet",
                                "bf16_fraction_of_datasheet")},
          "cv_100us warm/cold", data["cv_100us"]["warm"]["cv"], data["cv_100us"]["cold"]["cv"])
    for r in rows:
        print(r)


if __name__ == "__main__":
    main(sys.argv[1])
