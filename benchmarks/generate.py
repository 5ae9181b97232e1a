"""Whole models generating on one GPU, measured against rooflab's prediction: gemma-3-270m-it,
Llama-3.1-8B and Qwen3-8B at prefill B 1, 8 x L 512, 4096 and decode B 1, 8, 64 (random weights,
bf16, a static KV cache, 32 new tokens, eager and CUDA graph).
Usage: python benchmarks/generate.py OUT_DIR [model,model,...] [BxL,BxL,...]"""
from __future__ import annotations

import sys

import torch

from rooflab import hf
from rooflab import models as M
from rooflab.studies import generate as GN
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC

from common import write

MODELS = ("gemma-3-270m-it", "Llama-3.1-8B", "Qwen3-8B")
SHAPES = [(1, 512), (1, 4096), (8, 512), (8, 4096), (64, 512)]  # (batch, prompt tokens)


def main(out_dir: str, models: str = ",".join(MODELS), shapes: str = "") -> None:
    """shapes: e.g. 1x512,8x4096 (batch x prompt tokens); all of SHAPES by default."""
    ceil, costs = CE.get("cuda"), OC.measure_op_costs("cuda")
    chosen = [tuple(map(int, s.split("x"))) for s in shapes.split(",") if s] or SHAPES
    rows = []
    for name in models.split(","):
        cfg = M.load(name)
        built = hf.build_model(cfg, "cuda", torch.bfloat16, attn="sdpa")
        for batch, seq in chosen:
            try:
                r = GN.measure_generation(cfg, batch, seq, 32, ceil, "cuda", costs=costs, built=built)
            except Exception as e:  # noqa: BLE001 - one shape failing loses nothing else
                r = {"model": name, "batch": batch, "seq": seq,
                     "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            rows.append(r)
            p, d = r.get("prefill", {}), r.get("decode", {})
            print(name, batch, seq, "TTFT", p.get("device_s"), "graph", p.get("graph_device_s"),
                  "pred/meas", round(p.get("predicted_over_device", 0), 3), "pred/kernel",
                  round(p.get("predicted_over_kernel") or 0, 3), p.get("graph_error", ""),
                  "| decode", d.get("eager_device_s"),
                  d.get("graph_device_s"), "pred/meas", round(d.get("predicted_over_device", 0), 3),
                  "| roof", round(p.get("roofline_over_device", 0), 3),
                  round(d.get("roofline_over_device", 0), 3), "| mem", round(
                      r.get("memory_predicted_over_measured", 0), 3), r.get("error", ""),
                  d.get("graph_error", ""), flush=True)
            write(out_dir, "generate", {"op_costs": costs.as_dict(), "rows": rows})
        del built
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:4])


def diagnose(name: str, batch: int, seq: int) -> list[dict]:
    """Where a decode step's kernel time goes, op by op, beside the prediction."""
    from rooflab import count
    from rooflab.studies import layer_measure as LM
    from rooflab.measure import profile as P

    cfg = M.load(name)
    ceil, costs = CE.get("cuda"), OC.measure_op_costs("cuda")
    with torch.no_grad():
        g = GN.Generation(cfg, batch, seq, 32, "cuda", "bf16")
        with count.Counter(g.model) as c:
            g.step()
        prof = P.profile(g.step, iters=3, warmup=2, device="cuda")
    ops = LM.by_op(c.records, ceil, "bf16", costs, prof)
    print(name, batch, seq, "kernel time", prof.device_time_us / prof.iters, "us, launches",
          prof.launches_per_iter, "timeline", prof.timeline)
    for o in ops[:12]:
        print(f"  {o['op'][:70]:70s} calls {o['calls']:4d} measured "
              f"{(o['kernel_s'] or 0) * 1e6:9.1f} us predicted {o['predicted_s'] * 1e6:9.1f} us")
    return ops
