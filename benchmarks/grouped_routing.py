"""A prefill's grouped GEMM under routings of its rows, against its even routing (the rate
reference op_classes measures), beside the factor rooflab predicts (op_classes.routing_factor:
waves of whole tiles, never below the read of the matrices the routing uses).

For each mixture of experts' gate+up and down projections at a prefill of 1 x 1,024 and 8 x 1,024
tokens (rows = tokens x experts a token), the rows are routed: evenly; evenly but one row moved
from every other group to the next (255, 257: tile edges crossed); as a uniform router's draw
(multinomial); by Dirichlet shares of concentration 10, 2 and 0.5 (seeded), the last leaving
experts empty. Each row: the device time (L2 flushed), its ratio to the even routing's, and the
predicted ratio.
Usage: python benchmarks/grouped_routing.py OUT_DIR   (-> grouped_routing.json)
"""
from __future__ import annotations

import sys

import torch

from rooflab import count
from rooflab import models as M
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC
from rooflab.measure.timer import time_call

from common import write

MODELS = ("Mixtral-8x7B", "Qwen3-30B-A3B", "DeepSeek-V2-Lite")
TOKENS = (1024, 8192)


def routings(rows: int, e: int, gen: torch.Generator) -> dict[str, list[int]]:
    per = rows // e
    out = {"even": [per] * e,
           "edges crossed": [per + (1 if i % 2 else -1) for i in range(e)],
           "uniform draw": torch.multinomial(torch.ones(e), rows, True, generator=gen)
           .bincount(minlength=e).tolist()}
    for alpha in (10, 2, 0.5):
        shares = torch.distributions.Dirichlet(torch.full((e,), float(alpha))).sample()
        counts = (shares * rows).floor().long()
        counts[shares.argmax()] += rows - int(counts.sum())
        out[f"dirichlet {alpha}"] = counts.tolist()
    return out


def main(out_dir: str) -> None:
    ceil, sms = CE.get("cuda"), torch.cuda.get_device_properties(0).multi_processor_count
    bw = ceil.mem_bandwidth_bytes_per_s
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    rows_out = []
    for name in MODELS:
        cfg = M.load(name)
        e, h, i = cfg.experts, cfg.hidden, cfg.expert_intermediate or cfg.intermediate
        for proj, (k, n) in (("gate+up", (h, 2 * i)), ("down", (i, h))):
            w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
            for tokens in TOKENS:
                rows = tokens * cfg.experts_per_token
                a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
                base = None
                for how, sizes in routings(rows, e, gen).items():
                    offs = torch.tensor(sizes, device="cuda").cumsum(0).int()
                    fn = (lambda x=a[:sum(sizes)], o=offs: torch._grouped_mm(x, w, offs=o))
                    with count.Counter() as c:
                        fn()
                    (r,) = [x for x in c.records if x.op in OC.GROUPED_OPS]
                    t = time_call(fn, warmup=3, budget_s=0.05, max_reps=50, flush_l2=True,
                                  wall=False, device="cuda", name=how).device_s
                    base = base or (t, r)
                    predicted = max(OC.routing_factor(r, sms), r.bytes / bw / base[0])
                    row = {"model": name, "proj": proj, "tokens": tokens, "rows": rows,
                           "k": k, "n": n, "routing": how, "largest_over_mean":
                           max(sizes) * e / sum(sizes), "groups_used": sum(1 for g in sizes if g),
                           "tile": OC.grouped_tile(r), "device_s": t,
                           "measured_over_even": t / base[0], "predicted_over_even": predicted}
                    rows_out.append(row)
                    print(f"{name:17s} {proj:7s} {tokens:5d} {how:14s} "
                          f"{t * 1e6:8.1f} us  measured {row['measured_over_even']:5.2f}x  "
                          f"predicted {predicted:5.2f}x", flush=True)
                    write(out_dir, "grouped_routing", {"sm_count": sms, "rows": rows_out})


if __name__ == "__main__":
    main(sys.argv[1])
