"""A prefill's grouped GEMM under routings of its rows, against a uniform router's draw of the
same rows (op_classes.uniform_draw): where a prediction does not know the groups (the meta
device) it prices every routing at that draw's rate, so each row's time over the draw's is its
error for that routing; where it knows them, it times the routing itself.

For each mixture of experts' gate+up and down projections at a prefill of 1 x 1,024 and 8 x 1,024
tokens (rows = tokens x experts a token), the rows are routed: evenly; evenly but one row moved
from every other group to the next (255, 257: tile edges crossed); as a uniform router's draw
(multinomial); by Dirichlet shares of concentration 10, 2 and 0.5 (seeded), the last leaving
experts empty. Each row: the device time (L2 flushed) and its ratio to the even routing's and
to the uniform draw's (the reference where the groups are unknown).
Usage: python benchmarks/grouped_routing.py OUT_DIR   (-> grouped_routing.json)
"""
from __future__ import annotations

import sys

import torch

from rooflab import models as M
from rooflab.measure import op_classes as OC
from rooflab.measure.timer import time_call

from common import write

MODELS = ("Mixtral-8x7B", "Qwen3-30B-A3B", "DeepSeek-V2-Lite")
TOKENS = (1024, 8192)


def routings(rows: int, e: int) -> dict[str, list[int]]:
    per = rows // e
    out = {"even": [per] * e,
           "edges crossed": [per + (1 if i % 2 else -1) for i in range(e)],
           "uniform draw": OC.uniform_draw(rows, e)}
    for alpha in (10, 2, 0.5):
        shares = torch.distributions.Dirichlet(torch.full((e,), float(alpha))).sample()
        counts = (shares * rows).floor().long()
        counts[shares.argmax()] += rows - int(counts.sum())
        out[f"dirichlet {alpha}"] = counts.tolist()
    return out


def timed(k: int, n: int, e: int, rows: int, device: str, dtype=torch.bfloat16) -> list[dict]:
    """One projection (matrices K x N, e of them) over rows routed each way: device time, over
    the even routing's and over the uniform draw's (the reference where groups are unknown)."""
    w = torch.randn(e, n, k, device=device, dtype=dtype).transpose(-2, -1)
    a = torch.randn(rows, k, device=device, dtype=dtype)
    out = []
    for how, sizes in routings(rows, e).items():
        offs = torch.tensor(sizes, device=device).cumsum(0).int()
        t = time_call(lambda o=offs: torch._grouped_mm(a, w, offs=o), warmup=3, budget_s=0.05,
                      max_reps=50, flush_l2=device == "cuda", wall=False, device=device,
                      name=how).device_s
        out.append({"k": k, "n": n, "rows": rows, "routing": how,
                    "largest_over_mean": max(sizes) * e / rows,
                    "groups_used": sum(1 for g in sizes if g), "device_s": t})
    times = {r["routing"]: r["device_s"] for r in out}
    for r in out:
        r["over_even"] = r["device_s"] / times["even"]
        r["over_reference"] = r["device_s"] / times["uniform draw"]
    return out


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    rows_out = []
    for name in MODELS:
        cfg = M.load(name)
        e, h, i = cfg.experts, cfg.hidden, cfg.expert_intermediate or cfg.intermediate
        for proj, (k, n) in (("gate+up", (h, 2 * i)), ("down", (i, h))):
            for tokens in TOKENS:
                for row in timed(k, n, e, tokens * cfg.experts_per_token, "cuda"):
                    rows_out.append({"model": name, "proj": proj, "tokens": tokens, **row})
                    print(f"{name:17s} {proj:7s} {tokens:5d} {row['routing']:14s} "
                          f"{row['device_s'] * 1e6:8.1f} us  over even {row['over_even']:5.2f}x"
                          f"  over the reference {row['over_reference']:5.2f}x", flush=True)
                write(out_dir, "grouped_routing", {"rows": rows_out})


if __name__ == "__main__":
    main(sys.argv[1])
