"""rooflab's attention inside a whole model's forward, call by call, on the inputs the model's own
attention gets: each layer's q, k, v (and its window, sinks, softcap) given to both, the model
going on with its own output, so no call's error reaches the next. Each output is held to the
model's attention in fp32 on the same inputs, beside the model's own bf16 output: where rooflab's
error is of the order of the model's own at every layer, a difference in the logits of two whole
forwards is the model's sensitivity (a mixture's routing flips on near-ties), not the kernels'.

The model runs its eager attention (the one every model has; its masks are eager's). Random
weights, a random prompt of B x L tokens, no cache.
Usage: python benchmarks/attention_agreement.py OUT_DIR MODEL[,MODEL...] [BxL] [DEVICE]
       (-> attention_agreement.json; 1x4096 on cuda by default; a preset or a config.json)
"""
from __future__ import annotations

import importlib
import sys

import torch

from rooflab import hf
from rooflab import models as M
from rooflab.kernels import hf_attention as HA

from common import write


def rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def agreement(name: str, batch: int, seq: int, device: str = "cuda") -> list[dict]:
    """One row a layer: rooflab's and the model's bf16 attention against its fp32 attention."""
    cfg = M.load(name)
    model, _ = hf.build_model(cfg, device, torch.bfloat16, attn="eager")
    mod = importlib.import_module(type(model).__module__)
    own, rows = mod.eager_attention_forward, []

    def compare(module, q, k, v, mask, **kw):
        out, weights = own(module, q, k, v, mask, **kw)
        ours = HA.attention_forward(module, q, k, v, None, **kw)[0]
        f32 = own(module, q.float(), k.float(), v.float(),
                  None if mask is None else mask.float(), **kw)[0]
        rows.append({"model": name, "batch": batch, "seq": seq, "layer": module.layer_idx,
                     "window": kw.get("sliding_window"), "rooflab_vs_fp32": rel(ours, f32),
                     "own_vs_fp32": rel(out, f32), "rooflab_vs_own": rel(ours, out)})
        return out, weights

    HA.CALLS.clear()
    ids = torch.randint(cfg.vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    mod.eager_attention_forward = compare  # what the model's attention looks up at each call
    try:
        with torch.no_grad():
            model(ids.to(device), use_cache=False, logits_to_keep=1)
    finally:
        mod.eager_attention_forward = own
    for r in rows:
        r["paths"] = dict(HA.CALLS)
    return rows


def main(out_dir: str, models: str, shape: str = "1x4096", device: str = "cuda") -> None:
    batch, seq = map(int, shape.split("x"))
    rows = []
    for name in models.split(","):
        rows += agreement(name, batch, seq, device)
        mine = [r for r in rows if r["model"] == name]
        worst = max(mine, key=lambda r: r["rooflab_vs_fp32"] / max(r["own_vs_fp32"], 1e-9))
        print(name, shape, "rooflab / own error against fp32, worst layer:",
              worst["layer"], round(worst["rooflab_vs_fp32"], 5), round(worst["own_vs_fp32"], 5),
              "paths", worst["paths"], flush=True)
        torch.cuda.empty_cache()
    write(out_dir, "attention_agreement", {"rows": rows})


if __name__ == "__main__":
    main(*sys.argv[1:5])
