"""rooflab's attention kernels on every class of input a model feeds them, beside SDPA's fused
backends in the same run: FlashAttention for a prefill, flash-decoding for a decode.

Classes (a grid of its own, wider than any tuning row): ragged lengths; HF's layout ((B, L, H, D)
seen as (B, H, L, D), not contiguous), and such a q with k, v contiguous (what transformers
passes at prefill with a dynamic cache) or the first rows of a static cache twice as long (with a
static one); fewer queries than keys, causal (the queries last, as a chunked prefill: SDPA takes
it as the explicit mask HF builds) and not; GQA groups 1-16, some not powers of two (two heads a
KV head also on a short causal row of many heads); batch 1-256; fp16 and bf16; head dims 64,
128, 256; latent attention's q and k wider than v (DeepSeek-V2-Lite's 192 and 128, as
transformers expands them: contiguous, and with transformers' v, 128 of each head's 256
columns tokens first; rooflab's Triton kernel on them timed beside, as "rooflab, Triton", not a
peer); q, k and v slices of fused projections (GPT-2's c_attn: a token's q, k
and v side by side in one row); a sliding window (SDPA takes it as the mask HF builds;
gemma-3-270m-it's heads at 8 x 4,096 among them); a padded batch's prefill (left padding of
each row its own length: kept keys, SDPA given the mask HF builds); a decode's cache with a
mask of kept keys (a static cache's unused slots). Every output is checked against fp32
attention.
Softcapped scores (Gemma 2) and attention sinks (gpt-oss), which no SDPA backend takes: the peer
is the model's eager attention (matmul, cap, softmax, matmul in the row's dtype), what a model
runs without rooflab's kernels; SDPA's backends without the cap or the sinks are timed beside it
as a floor, not as peers.
Each time is a median with its robust CV beside it (a row's "unstable": those over
rooflab.units.CV_UNSTABLE).
Each row is also placed on this run's roof (copy bandwidth and the dtype's matmul peak, measured
first, measure_ceilings()): its count (rooflab.cost.attention: the causal or windowed pairs, a
padded batch's padding counted; bytes fused, each tensor once), whether that bounds it by
memory or by compute, and each implementation's time against the roof's, so that a row below its
peer says what limits both.
Drawn rows (--drawn N --seed S): N shapes a phase drawn at random across the same classes at
once (batch, GQA group, KV heads, lengths not multiples of a tile, head dim, dtype, layout, fewer
queries than keys, kept keys), none of them a tuning row: how often rooflab is at or past its peer
where nobody looked (-> attention_drawn_sS.json, each row labelled with the classes it is in).
Usage: python benchmarks/attention_classes.py OUT_DIR [prefill,decode] [--drawn N --seed S]
       (-> attention_classes.json)
"""
from __future__ import annotations

import argparse
import math
import random

import torch
import torch.nn.functional as F

from rooflab import cost as C
from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD
from rooflab.measure.ceilings import measure_ceilings
from rooflab.measure.op_classes import DECODE_MAX_Q
from rooflab.measure.timer import time_call
from rooflab.units import CV_UNSTABLE
from rooflab.roofline import Roof, place
from rooflab.studies import attention as A

from common import write

DEVICE = "cuda"  # the tests run the same rows, small, on the CPU under the interpreter
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
BASE = dict(b=2, h=32, hkv=8, lq=2048, lkv=2048, d=128, dt="bf16", causal=True, layout="bhld",
            keep=False, window=None, dv=None, softcap=0.0, sinks=False)
PREFILL = [  # class, changes from BASE
    ("base", {}), ("ragged", {"lq": 1000, "lkv": 1000}), ("ragged", {"lq": 3001, "lkv": 3001}),
    ("hf layout", {"layout": "blhd"}), ("hf layout, ragged", {"layout": "blhd", "lq": 1500,
                                                              "lkv": 1500}),
    ("dynamic cache", {"layout": "dynamic"}),
    ("static cache", {"layout": "cache"}), ("static cache", {"layout": "cache", "b": 32,
                                                             "lq": 512, "lkv": 512}),
    ("fewer queries, causal", {"lq": 512, "lkv": 4096}),
    ("fewer queries", {"lq": 512, "lkv": 4096, "causal": False}),
    *[("gqa group", {"h": 4 * g, "hkv": 4}) for g in (1, 3, 5, 7, 16)],
    ("gqa group, short", {"h": 16, "hkv": 8, "b": 64, "lq": 384, "lkv": 384}),
    *[("batch", {"b": b, "lq": n, "lkv": n})
      for b, n in ((1, 4096), (16, 1024), (32, 512), (128, 256))],
    ("batch, no mask", {"b": 16, "lq": 512, "lkv": 512, "causal": False}),
    ("fp16", {"dt": "fp16"}), ("head dim 64", {"d": 64}),
    ("head dim 64", {"d": 64, "b": 32, "lq": 512, "lkv": 512, "layout": "blhd"}),
    ("head dim 256", {"d": 256, "h": 8, "hkv": 8}),
    # the classes the drawn sweeps found below the peer (flash_decoding.md, "Drawn shapes"):
    # head dim 256 at lengths that are not whole tiles (Gemma-2's and gemma-3-270m-it's heads),
    # and short rows without a mask
    ("head dim 256, ragged", {"d": 256, "h": 8, "hkv": 4, "b": 4, "lq": 2500, "lkv": 2500}),
    ("head dim 256, ragged", {"d": 256, "h": 4, "hkv": 1, "b": 8, "lq": 700, "lkv": 700}),
    ("batch, no mask, short", {"b": 64, "lq": 300, "lkv": 300, "causal": False,
                               "layout": "blhd"}),
    ("sliding window", {"window": 512, "d": 256, "h": 4, "hkv": 1, "b": 8, "lq": 4096,
                        "lkv": 4096}),
    ("sliding window", {"window": 1024, "lq": 4096, "lkv": 4096}),
    ("sliding window, ragged", {"window": 500, "lq": 3001, "lkv": 3001, "layout": "blhd"}),
    ("latent attention", {"d": 192, "dv": 128, "h": 16, "hkv": 16, "b": 8, "lq": 1024,
                          "lkv": 1024}),
    *[("latent attention, transformers' v", {"layout": "latent", "d": 192, "dv": 128, "h": 16,
                                             "hkv": 16, "b": b, "lq": lq, "lkv": lkv})
      for b, lq, lkv in ((8, 1024, 1024), (1, 4096, 4096), (4, 512, 512), (16, 256, 256),
                         (1, 256, 4096))],
    ("fused projection", {"layout": "fused"}),
    ("fused projection", {"layout": "fused", "d": 64, "h": 16, "hkv": 16, "b": 8, "lq": 1024,
                          "lkv": 1024}),  # GPT-2 medium's heads
    ("padded batch", {"keep": True, "b": 8, "lq": 1024, "lkv": 1024}),
    ("padded batch, sliding window", {"keep": True, "window": 512, "d": 256, "h": 4, "hkv": 1,
                                      "b": 8, "lq": 4096, "lkv": 4096}),
    ("softcap", {"softcap": 50.0, "d": 256, "h": 8, "hkv": 4, "b": 4}),  # Gemma-2-2b's heads
    ("softcap, sliding window", {"softcap": 50.0, "window": 4096, "d": 256, "h": 8, "hkv": 4,
                                 "b": 1, "lq": 8192, "lkv": 8192}),
    ("sinks, sliding window", {"sinks": True, "window": 128, "d": 64, "h": 64, "hkv": 8,
                               "b": 1, "lq": 4096, "lkv": 4096}),  # gpt-oss-20b's heads
]
DECODE = [
    ("base", {"lq": 1, "lkv": 4096, "b": 8, "causal": False}),
    *[("ragged cache", {"lq": 1, "lkv": n, "b": 8, "causal": False}) for n in (1000, 4097)],
    *[("gqa group", {"lq": 1, "lkv": 4096, "b": 8, "h": 4 * g, "hkv": 4, "causal": False})
      for g in (1, 5, 7, 16)],
    *[("batch", {"lq": 1, "lkv": n, "b": b, "causal": False})
      for b, n in ((1, 8192), (64, 1024), (256, 512))],
    ("batch 1, few pairs", {"lq": 1, "lkv": 1846, "b": 1, "h": 64, "hkv": 4, "d": 64,
                            "causal": False}),  # a drawn row below the peer
    ("fp16, ragged", {"lq": 1, "lkv": 2049, "b": 8, "dt": "fp16", "causal": False}),
    ("hf layout", {"lq": 1, "lkv": 4096, "b": 8, "layout": "blhd", "causal": False}),
    ("head dim 64", {"lq": 1, "lkv": 4096, "b": 8, "d": 64, "causal": False}),
    ("head dim 256", {"lq": 1, "lkv": 4096, "b": 8, "d": 256, "h": 8, "hkv": 1,
                      "causal": False}),
    ("head dim 256, short cache", {"lq": 1, "lkv": 480, "b": 2, "d": 256, "h": 8, "hkv": 4,
                                   "causal": False}),  # Gemma-2's heads: a drawn class below
    ("kept keys (static cache)", {"lq": 1, "lkv": 4096, "b": 8, "keep": True, "causal": False}),
    ("four queries, causal", {"lq": 4, "lkv": 4096, "b": 8}),
    ("latent attention", {"lq": 1, "lkv": 4096, "b": 8, "d": 192, "dv": 128, "h": 16,
                          "hkv": 16, "causal": False}),
    ("softcap", {"lq": 1, "lkv": 4096, "b": 8, "d": 256, "h": 8, "hkv": 4, "softcap": 50.0,
                 "causal": False}),
    ("sinks", {"lq": 1, "lkv": 4096, "b": 8, "d": 64, "h": 64, "hkv": 8, "sinks": True,
               "causal": False}),
]


def inputs(s: dict):
    """q, k, v in the class's layout, and the (B, Lkv) kept keys or None."""
    g = torch.Generator(device=DEVICE).manual_seed(s["lkv"] + s["h"])
    dt = DT[s["dt"]]

    def mk(heads, n, layout, d=s["d"]):
        if layout == "blhd":  # HF's projection output, heads transposed in a view
            return torch.randn(s["b"], n, heads, d, device=DEVICE, dtype=dt,
                               generator=g).transpose(1, 2)
        if layout == "latent" and d == s["dv"]:  # v: a head's last dv of 2 dv columns
            return torch.randn(s["b"], n, heads, 2 * d, device=DEVICE, dtype=dt,
                               generator=g).transpose(1, 2)[..., d:]
        if layout == "fused":  # the middle third of a token's row (a fused projection's)
            row = torch.randn(s["b"], n, 3 * heads * d, device=DEVICE, dtype=dt, generator=g)
            return row[..., heads * d:2 * heads * d].view(s["b"], n, heads, d).transpose(1, 2)
        if layout == "cache":  # the first n rows of a static cache of 2n
            return torch.randn(s["b"], heads, 2 * n, d, device=DEVICE, dtype=dt,
                               generator=g)[:, :, :n]
        return torch.randn(s["b"], heads, n, d, device=DEVICE, dtype=dt, generator=g)
    kv = {"dynamic": "bhld"}.get(s["layout"], s["layout"])  # k and v; q is transformers'
    q = mk(s["h"], s["lq"], "blhd" if s["layout"] in ("cache", "dynamic") else kv)
    k, v = mk(s["hkv"], s["lkv"], kv), mk(s["hkv"], s["lkv"], kv, s["dv"] or s["d"])
    keep = None
    at = torch.arange(s["lkv"], device=DEVICE)[None, :]
    if s["keep"] and s["lq"] > DECODE_MAX_Q:  # a padded batch: row b left-padded by its own
        keep = at >= torch.linspace(0, s["lkv"] // 4, s["b"], device=DEVICE).long()[:, None]
    elif s["keep"]:  # a static cache of 4096 slots, 3/4 written: row b has its own length
        lens = torch.linspace(s["lkv"] // 2, 3 * s["lkv"] // 4, s["b"], device=DEVICE).long()
        keep = at < lens[:, None]
    return q, k, v, keep


def mask_of(s: dict, keep):
    """The boolean mask SDPA takes for this class (None where is_causal or nothing says it):
    causal with the queries last (what HF builds for a chunk), a sliding window, or the kept
    keys."""
    if keep is not None and s["lq"] > DECODE_MAX_Q:  # causal, a window, the padding
        return FA.seen(s["lq"], s["lkv"], s["window"], DEVICE)[None, None] & keep[:, None, None]
    if keep is not None:
        return keep[:, None, None, :]
    if s["window"]:
        return FA.seen(s["lq"], s["lkv"], s["window"], DEVICE)
    if s["causal"] and s["lq"] != s["lkv"]:
        i = torch.arange(s["lq"], device=DEVICE)[:, None]
        return torch.arange(s["lkv"], device=DEVICE)[None, :] <= s["lkv"] - s["lq"] + i
    return None


def ours(q, k, v, s, keep, sinks=None):
    if s["lq"] <= DECODE_MAX_Q:  # as rooflab's attention in a model picks its kernel
        return FD.flash_decode(q, k, v, s["causal"], keep=keep, sinks=sinks,
                               softcap=s["softcap"])[0]
    return FA.flash_attention(q, k, v, s["causal"], window=s["window"], keep=keep, sinks=sinks,
                              softcap=s["softcap"])[0]


def roofs() -> dict[str, Roof]:
    """This run's roof for each dtype, measured now (copy bandwidth and matmul peaks), not read
    from the cache."""
    c = measure_ceilings(DEVICE)
    return {dt: Roof.from_ceilings(c, dt) for dt in DT}


def placed(s: dict, times: dict, roof: Roof) -> dict:
    """The class's count on ``roof``: FLOPs, bytes, what bounds it, the roof's time and each
    implementation's time over it (1: at the roof)."""
    p = place(roof, C.attention(s["b"], s["h"], s["lq"], s["lkv"], s["d"], s["hkv"], s["dt"],
                                causal=s["causal"], window=s["window"], v_dim=s["dv"]), fused=True)
    return {"flops": p.flops, "bytes": p.bytes, "roof": roof.label, "bound": p.bound,
            "roof_s": p.time_floor_s, "of_roof": {n: p.time_floor_s / t for n, t in times.items()}}


def timed(fn):
    """fn's timing as every row takes it: L2 flushed before each call, the device's own time."""
    return time_call(fn, warmup=3, budget_s=0.1, max_reps=100, flush_l2=True, wall=False,
                     device=DEVICE)


def row(cls: str, change: dict, roof: dict[str, Roof] | None = None) -> dict:
    """One class's row: each implementation's time, error and refusal; placed on ``roof``
    (this run's, by dtype) where given."""
    s = {**BASE, **change}
    q, k, v, keep = inputs(s)
    mask = mask_of(s, keep)
    causal = s["causal"] and mask is None  # SDPA's is_causal, where no mask says it
    sdpa = {f"sdpa_{b}": (lambda f=A._sdpa(b): f(q, k, v, causal, mask))
            for b in ("flash", "cudnn", "efficient")}
    if s["softcap"] or s["sinks"]:  # what SDPA does not take: eager is the peer, SDPA a floor
        sinks = torch.linspace(-2, 2, s["h"], device=DEVICE) if s["sinks"] else None
        eager = lambda dt: FA.standard_attention(  # noqa: E731
            q.to(dt), k.to(dt), v.to(dt), s["causal"], window=s["window"],
            sinks=None if sinks is None else sinks.to(dt), softcap=s["softcap"])
        ref = eager(torch.float32)
        impls = {"rooflab": lambda: ours(q, k, v, s, keep, sinks), "eager": lambda: eager(q.dtype),
                 **{f"{n} without": f for n, f in sdpa.items()}}
    else:
        ref = torch.nan_to_num(F.scaled_dot_product_attention(  # fp32: the answer every output
            q.float(), k.float(), v.float(), attn_mask=mask, enable_gqa=s["h"] != s["hkv"],
            is_causal=causal))  # is held to; a query that sees no key (padding): zeros
        impls = {"rooflab": lambda: ours(q, k, v, s, keep), **sdpa}
        if s["dv"] and s["lq"] > DECODE_MAX_Q:  # latent attention: the Triton kernel beside
            impls["rooflab, Triton"] = lambda: FA.flash_attention(q, k, v, s["causal"], cfg={})[0]
    r = {"class": cls, **s, "times_s": {}, "cv": {}, "rel_err": {}, "errors": {}}
    for name, fn in impls.items():
        try:
            out = fn()
            r["rel_err"][name] = float((out.float() - ref).norm() / ref.norm())
            t = timed(fn)
            r["times_s"][name], r["cv"][name] = t.device_s, round(t.cv, 4)
            if t.unstable:
                r["unstable"] = [*r.get("unstable", []), name]
        except Exception as e:  # noqa: BLE001 - a backend refusing a class is a result
            r["errors"][name] = str(e).splitlines()[0][:160]
    peers = {n: t for n, t in r["times_s"].items()
             if not n.startswith("rooflab") and " without" not in n}
    if "rooflab" in r["times_s"] and peers:
        r["best_peer"] = min(peers, key=peers.get)
        r["rooflab_over_best_peer"] = peers[r["best_peer"]] / r["times_s"]["rooflab"]  # >1: ahead
    on_roof = ""
    if roof:
        r["placed"] = p = placed(s, r["times_s"], roof[s["dt"]])
        on_roof = f"{p['bound']}-bound, of its roof: " + str(
            {n: round(x, 2) for n, x in p["of_roof"].items()})
    print(f"{cls:26s} {str(change)[:60]:60s}", {n: round(t * 1e6, 1) for n, t in
                                                 r["times_s"].items()},
          "x%.3f" % r.get("rooflab_over_best_peer", 0), r.get("best_peer"),
          {n: "%.1e" % e for n, e in r["rel_err"].items()}, r["errors"] or "", on_roof,
          f"unstable (robust CV over {CV_UNSTABLE:.0%}): {r['unstable']}" if "unstable" in r
          else "",
          flush=True)
    return r


def below(rows: list[dict]) -> list[dict]:
    """The rows below their best peer, each with what bounds it and how near rooflab and the
    peer come to this run's roof."""
    out = []
    for r in rows:
        if r.get("rooflab_over_best_peer", 1) < 1:
            p = r.get("placed")
            out.append({"phase": r["phase"], "class": r["class"],
                        "rooflab_over_best_peer": round(r["rooflab_over_best_peer"], 3),
                        **({"bound": p["bound"],
                            "rooflab_of_roof": round(p["of_roof"]["rooflab"], 3),
                            "best_peer_of_roof": round(p["of_roof"][r["best_peer"]], 3)}
                           if p else {})})
    return out


def tally(rows: list[dict]) -> dict[str, list[int]]:
    """Each phase's [rows at or past their best peer, rows with a peer]."""
    out = {}
    for r in rows:
        if "rooflab_over_best_peer" in r:
            k_n = out.setdefault(r["phase"], [0, 0])
            k_n[0] += r["rooflab_over_best_peer"] >= 1
            k_n[1] += 1
    return out


def drawn(phase: str, n: int, seed: int) -> list[tuple[str, dict]]:
    """``n`` shapes of ``phase`` drawn with ``seed``, each with the classes it is in: log-uniform
    batch and lengths, any GQA group (1-16 at decode, 1-8 at prefill) over 1-16 KV heads, head
    dims 64, 128 and 256, fp16 or bf16, the three layouts transformers passes, and at a decode
    more queries or kept keys now and then. Redrawn where it would not fit (K and V over 2 GB;
    a prefill past 2 TFLOP or 1 G scores, the size of its fp32 reference)."""
    rng = random.Random(f"{phase}:{seed}")
    log_int = lambda lo, hi: int(math.exp(rng.uniform(math.log(lo), math.log(hi))))  # noqa: E731
    rows = []
    while len(rows) < n:
        d = rng.choice((64, 128, 128, 256))
        hkv = rng.choice((1, 2, 4, 8, 8, 16))
        s = {**BASE, "d": d, "hkv": hkv, "dt": rng.choice(("bf16", "bf16", "bf16", "fp16")),
             "layout": rng.choice(("bhld", "blhd", "dynamic"))}
        if phase == "decode":
            s |= {"b": log_int(1, 257), "lkv": log_int(128, 32769), "causal": False, "lq": 1,
                  "h": hkv * rng.randint(1, 16)}  # at most 16 x 8 rows: flash_decode's 128
            if rng.random() < 0.2:  # a few queries a step (speculative decoding), causal
                s |= {"lq": rng.randint(2, 8), "causal": True}
            elif rng.random() < 0.2:  # a static cache's written slots
                s["keep"] = True
        else:
            n_kv = log_int(128, 8193)
            s |= {"b": log_int(1, 65), "lkv": n_kv, "lq": n_kv, "h": hkv * rng.randint(1, 8),
                  "causal": rng.random() < 0.85}
            if rng.random() < 0.25:  # a chunk of a longer prompt
                s["lq"] = log_int(DECODE_MAX_Q + 1, max(DECODE_MAX_Q + 2, n_kv // 2))
        cache = 4 * s["b"] * hkv * s["lkv"] * d
        scores = s["b"] * s["h"] * s["lq"] * s["lkv"]
        if cache > 2 << 30 or (phase == "prefill" and (scores > 1 << 30 or 4 * scores * d > 2e12)):
            continue
        rows.append((label(s), {k: v for k, v in s.items() if BASE.get(k) != v}))
    return rows


def label(s: dict) -> str:
    """The classes a shape is in, as the sweep names them."""
    decode = s["lq"] <= DECODE_MAX_Q
    group = s["h"] // s["hkv"]
    names = [f"{s['b']} x {s['h']}/{s['hkv']}", f"head dim {s['d']}", s["dt"],
             {"bhld": "contiguous", "blhd": "hf layout", "dynamic": "dynamic cache"}[s["layout"]]]
    if group & (group - 1):
        names.append(f"gqa group {group}")
    if s["lkv"] % 128:
        names.append("ragged")
    if not decode and s["lq"] < s["lkv"]:
        names.append("fewer queries" + (", causal" if s["causal"] else ""))
    elif not decode and not s["causal"]:
        names.append("no mask")
    if decode and s["lq"] > 1:
        names.append(f"{s['lq']} queries, causal")
    if s["keep"]:
        names.append("kept keys")
    return ", ".join(names)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("phases", nargs="?", default="prefill,decode")
    p.add_argument("--drawn", type=int, metavar="N", help="N drawn shapes a phase, not the grid")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if set(a.phases.split(",")) - {"prefill", "decode"} or (a.drawn is not None and a.drawn < 1):
        p.error("phases are prefill, decode or both, comma-separated; --drawn N takes N >= 1")
    roof = roofs()
    print({dt: f"{r.peak_flops_per_s / 1e12:.0f} TFLOP/s, {r.mem_bandwidth_bytes_per_s / 1e12:.2f} "
           "TB/s" for dt, r in roof.items()}, flush=True)
    ceilings = {dt: {"peak_flops_per_s": r.peak_flops_per_s,
                     "mem_bandwidth_bytes_per_s": r.mem_bandwidth_bytes_per_s}
                for dt, r in roof.items()}
    name = "attention_classes" if a.drawn is None else f"attention_drawn_s{a.seed}"
    rows = []
    for phase, grid in (("prefill", PREFILL), ("decode", DECODE)):
        if phase in a.phases.split(","):
            for cls, change in grid if a.drawn is None else drawn(phase, a.drawn, a.seed):
                rows.append({"phase": phase, **row(cls, change, roof)})
                write(a.out_dir, name, {"ceilings": ceilings, "rows": rows,
                                        "at_or_past_best_peer": tally(rows),
                                        "below_best_peer": below(rows),
                                        **({} if a.drawn is None else {"seed": a.seed})})


if __name__ == "__main__":
    main()
