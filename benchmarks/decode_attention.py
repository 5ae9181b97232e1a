"""Attention at decode as a whole model calls it, op by op: which SDPA backend runs, how many
programs it launches, and what that costs, against rooflab's prediction.

Part 1: a decode step (or the prefill) of whole models (random weights), every op measured
beside its predicted time, with the kernels each attention op launched.
Part 2: SDPA at q_len 1..8 with a boolean mask (what a static KV cache makes HF pass) and without,
sweeping batch x heads (the programs a non-split kernel launches) and the cached length.
Usage: python benchmarks/decode_attention.py OUT_DIR [models] [BxL,...] [sdpa: 1|0]
    [phase: decode|prefill]"""
from __future__ import annotations

import inspect
import sys

import torch
import torch.nn.functional as F

from rooflab import count
from rooflab import models as M
from rooflab.studies import generate as GN
from rooflab.studies import layer_measure as LM
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC
from rooflab.measure import profile as P
from rooflab.measure.timer import time_call

from common import write


def model_rows(name: str, batch: int, seq: int, ceil, costs, phase: str = "decode") -> dict:
    """Every op of one decode step (or of the prefill) beside its prediction."""
    cfg = M.load(name)
    with torch.no_grad():
        g = GN.Generation(cfg, batch, seq, 32, "cuda", "bf16")
        call = g.step if phase == "decode" else g.prefill
        with count.Counter(g.model) as c:
            call()
        prof = P.profile(call, iters=3, warmup=2, device="cuda")
    OC.measure_attention(costs, c.records, "cuda")
    ops = LM.by_op(c.records, ceil, "bf16", costs, prof)
    attn = {k: v for k, v in prof.op_kernels.items() if "attention" in k or "sdpa" in k.lower()}
    del g
    torch.cuda.empty_cache()
    return {"model": name, "batch": batch, "seq": seq, "phase": phase,
            "kernel_us": prof.device_time_us / prof.iters,
            "predicted_kernels_us": sum(o["predicted_s"] for o in ops) * 1e6,
            "ops": ops[:25], "attention_kernels": attn}


def sdpa_row(b: int, h: int, hkv: int, q_len: int, kv: int, mask: str, layout: str) -> dict:
    """layout: 'repeat' (K/V expanded to h heads), 'gqa' (enable_gqa), 'pack' (the query heads
    sharing a KV head as q_len x group rows of one head)."""
    d, dev, dt = 128, "cuda", torch.bfloat16
    q = torch.randn(b, h, q_len, d, device=dev, dtype=dt)
    k = torch.randn(b, hkv, kv, d, device=dev, dtype=dt)
    v = torch.randn_like(k)
    kw = {}
    if layout == "repeat":
        k, v = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
    elif layout == "gqa":
        kw["enable_gqa"] = True
    elif layout == "pack":
        q = q.reshape(b, hkv, (h // hkv) * q_len, d)
    rows = q.shape[2]
    m = None
    if mask == "bool":
        m = torch.ones(b, 1, rows, kv, device=dev, dtype=torch.bool)
        m[..., kv - 32:] = False  # a static cache's unfilled tail
    elif mask == "float":
        m = torch.zeros(b, 1, rows, kv, device=dev, dtype=dt)
        m[..., kv - 32:] = float("-inf")
    fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)  # noqa: E731
    out = {"batch": b, "heads": h, "kv_heads": hkv, "q_len": q_len, "kv_len": kv, "mask": mask,
           "layout": layout}
    try:
        with count.Counter() as c:
            fn()
        rec = [r for r in c.records if r.op in OC.ATTENTION_OPS or "attention" in r.op]
        out["ops"] = [r.op for r in c.records if r.bytes]
        out["bytes"] = sum(r.bytes for r in c.records)
        out["attention_op"] = rec[0].op if rec else None
        t = time_call(fn, warmup=3, budget_s=0.1, max_reps=200, device=dev, wall=False)
        prof = P.profile(fn, iters=3, warmup=1, device=dev)
        out.update(device_us=t.device_s * 1e6, cv=t.cv,
                   kernels=[(k.name[:90], k.mean_us, k.calls / 3) for k in prof.kernels],
                   gb_per_s=out["bytes"] / t.device_s / 1e9)
    except Exception as e:  # noqa: BLE001 - a refused shape is a row
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return out


def main(out_dir: str, models: str = "Llama-3.1-8B", shapes: str = "1x512,8x4096,64x512",
         sdpa: str = "1", phase: str = "decode"):
    import transformers.integrations.sdpa_attention as hf_sdpa

    ceil, costs = CE.get("cuda"), OC.measure_op_costs("cuda")
    src = inspect.getsource(hf_sdpa.sdpa_attention_forward)
    result = {"hf_uses_pack_gqa": "pack_gqa" in src, "op_costs": costs.as_dict(),
              "models": [], "sdpa": []}
    for name in models.split(","):
        for s in shapes.split(","):
            b, L = map(int, s.split("x"))
            r = model_rows(name, b, L, ceil, costs, phase)
            result["models"].append(r)
            print(name, phase, b, L, "kernel", round(r["kernel_us"]), "predicted",
                  round(r["predicted_kernels_us"]), flush=True)
            for o in r["ops"][:6]:
                print(f"   {o['op'][:80]:80s} {o['calls']:4d} meas "
                      f"{(o['kernel_s'] or 0) * 1e6:8.1f} pred {o['predicted_s'] * 1e6:8.1f}")
            print("   ", r["attention_kernels"], flush=True)
    write(out_dir, "decode_attention", result)
    grid = []
    for mask in ("bool", "none") if sdpa == "1" else ():
        for layout in ("repeat", "pack", "gqa"):
            for b, kv in ((1, 544), (1, 4128), (8, 544), (8, 4128), (64, 544), (1, 32768)):
                grid.append((b, 32, 8, 1, kv, mask, layout))
    for bh in (1, 4, 16, 64, 132, 264, 528) if sdpa == "1" else ():  # programs, one cache
        grid.append((bh, 1, 1, 1, 16384, "bool", "repeat"))
    for q_len in (2, 4, 8) if sdpa == "1" else ():
        grid.append((8, 32, 8, q_len, 4128, "bool", "repeat"))
    for g in grid:
        r = sdpa_row(*g)
        result["sdpa"].append(r)
        print(g, r.get("attention_op"), round(r.get("device_us", 0), 1), "us",
              round(r.get("gb_per_s", 0)), "GB/s", r.get("error", ""),
              [k[0][:40] for k in r.get("kernels", [])][:3], flush=True)
        write(out_dir, "decode_attention", result)


if __name__ == "__main__":
    main(*sys.argv[1:6])
