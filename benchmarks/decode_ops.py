"""The small ops of a decode step, one by one, against rooflab's prediction: where the held-out
decode layers' gap comes from (docs/predictions.md), measured before the cost model moves.

The families, each swept over the shapes that decide it, never the held-out layers' own:
- GEMVs (M tokens x K) @ (K x N), M 1-64, at equal weight bytes with K < N and K > N (a
  split-K GEMM launches a second kernel);
- narrow projections (N 256-1,024: a GQA model's k and v), with a bias (addmm) and without:
  few output tiles to spread a weight's read over the SMs;
- a dynamic KV cache's append (cat of B x H x (L-1) x 128 and the new B x H x 1 x 128, 2-8 KV
  heads): a copy of the whole cache at every step;
- RMSNorm's mean over few rows (8-128) of 1,024-8,192 elements (one program a row?);
- widening casts and broadcast multiplies of a decode's rows (bf16 -> fp32, x * rms[..., None]),
  a norm's weight times its rows (the weight broadcast down the rows) and RoPE's negated half of
  a head-transposed q (strided).
Each row: the device time a call with L2 flushed first (cold) and not (warm), and a kernel's in a
CUDA graph of the same op eight times over (chained: how op_classes measures a floor), the kernels
it launched (names), and the prediction from its counted op on the run's measured ceilings and
op costs: which of the three the layers' small kernels take is what the floors must be measured
as. Where rooflab predicts an op at its time alone (a few-row reduction or GEMM), that prediction
is this row's measurement again; `predicted_model_s` is the cost model without those times.
Usage: python benchmarks/decode_ops.py OUT_DIR   (-> decode_ops.json)
"""
from __future__ import annotations

import dataclasses
import sys

import torch

from rooflab import count
from rooflab import predict as PR
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC
from rooflab.measure import profile as P
from rooflab.measure.timer import time_call
from rooflab.roofline import Roof

from common import write

DEVICE = "cuda"  # the tests run small rows on the CPU
GEMV = [(m, k, n) for m in (1, 8, 32, 64) for k, n in ((2048, 8192), (8192, 2048), (4096, 4096),
                                                         (1024, 4096), (4096, 1024))]
REDUCE = [(rows, n) for rows in (8, 32, 128) for n in (1024, 2048, 4096, 8192)]
ELEMENTWISE = [(rows, n) for rows in (8, 32) for n in (1152, 2048, 4096, 5120)]
NARROW = [(m, k, n) for m in (8, 32) for k, n in ((1280, 256), (2560, 256), (2560, 512),
                                                    (3584, 512), (2304, 1024))]
CACHE = [(b, h, length) for b, length in ((8, 1024), (8, 4096), (32, 512)) for h in (2, 4, 8)]


def cases(gemv=GEMV, reduce=REDUCE, elementwise=ELEMENTWISE, narrow=NARROW, cache=CACHE):
    """(family, shape, a no-argument call) for every row."""
    bf = torch.bfloat16
    for m, k, n in gemv:
        x, w = torch.randn(m, k, device=DEVICE, dtype=bf), torch.randn(n, k, device=DEVICE, dtype=bf)
        yield "gemv", (m, k, n), (lambda x=x, w=w: torch.nn.functional.linear(x, w))
    for m, k, n in narrow:
        x, w = torch.randn(m, k, device=DEVICE, dtype=bf), torch.randn(n, k, device=DEVICE, dtype=bf)
        b = torch.randn(n, device=DEVICE, dtype=bf)
        yield "narrow", (m, k, n), (lambda x=x, w=w: torch.nn.functional.linear(x, w))
        yield "narrow+bias", (m, k, n), (lambda x=x, w=w, b=b: torch.nn.functional.linear(x, w, b))
    for b, h, length in cache:
        past = torch.randn(b, h, length - 1, 128, device=DEVICE, dtype=bf)
        new = torch.randn(b, h, 1, 128, device=DEVICE, dtype=bf)
        yield "cache_cat", (b, h, length), (lambda p=past, n=new: torch.cat((p, n), dim=-2))
    for rows, n in reduce:
        x = torch.randn(rows, 1, n, device=DEVICE)
        yield "mean", (rows, n), (lambda x=x: x.pow(2).mean(-1, keepdim=True))
    for rows, n in elementwise:
        x = torch.randn(rows, 1, n, device=DEVICE, dtype=bf)
        r = torch.randn(rows, 1, 1, device=DEVICE)
        xf = x.float()
        w = torch.randn(n, device=DEVICE, dtype=bf)
        q = torch.randn(rows, 1, n // 128, 128, device=DEVICE, dtype=bf).transpose(1, 2)
        yield "widen", (rows, n), (lambda x=x: x.to(torch.float32))
        yield "broadcast", (rows, n), (lambda xf=xf, r=r: xf * r)
        yield "weight", (rows, n), (lambda x=x, w=w: w * x)
        yield "strided", (rows, n), (lambda q=q: -q[..., 64:])


def row(family: str, shape: tuple, fn, roof: Roof, costs: OC.OpCosts) -> dict:
    with torch.no_grad():
        c = count.count(fn)
    OC.measure_rates(costs, c.records, DEVICE)  # a GEMM's extra kernels, as a layer's prediction
    times = PR.op_times(c.records, roof, costs)
    # the same without the shapes timed alone (few-row reductions and GEMMs are predicted at
    # their time alone, which this row times again): what the model says of them
    model = PR.op_times(c.records, roof, dataclasses.replace(costs, alone_s={}))
    t, warm = (time_call(fn, warmup=5, budget_s=0.05, max_reps=200, flush_l2=cold, wall=False,
                         device=DEVICE) for cold in (True, False))
    prof = P.profile(fn, iters=3, warmup=1, device=DEVICE)
    r = {"family": family, "shape": shape, "device_s": t.device_s, "cv": t.cv,
         "warm_s": warm.device_s, "chained_s": OC.tiny_kernel_s(fn, DEVICE) / prof.launches_per_iter
         if prof.launches_per_iter else None,
         "predicted_s": sum(x.predicted_s for x in times),
         "predicted_model_s": sum(x.predicted_s for x in model),
         "ops": [x.record.op for x in times], "ops_counted": len(times),
         "launches": prof.launches_per_iter,
         "kernels": [k.name[:100] for k in prof.kernels]}
    r["predicted_over_measured"] = r["predicted_s"] / r["device_s"] if r["device_s"] else None
    return r


def main(out_dir: str) -> None:
    ceil, costs = CE.get(DEVICE), OC.measure_op_costs(DEVICE)
    roof = Roof.from_ceilings(ceil, "bf16")
    rows = []
    for family, shape, fn in cases():
        rows.append(row(family, shape, fn, roof, costs))
        r = rows[-1]
        print(f"{family:9s} {str(shape):20s} cold {r['device_s'] * 1e6:7.2f} us  warm "
              f"{r['warm_s'] * 1e6:7.2f}  chained {(r['chained_s'] or 0) * 1e6:7.2f}  predicted "
              f"{r['predicted_s'] * 1e6:7.2f} us  ({r['predicted_over_measured']:.2f})  "
              f"launches {r['launches']:.0f} for {r['ops_counted']} op(s)", flush=True)
        write(out_dir, "decode_ops", {"op_costs": costs.as_dict(), "ceilings": ceil.as_dict(),
                                      "rows": rows})


if __name__ == "__main__":
    main(sys.argv[1])
