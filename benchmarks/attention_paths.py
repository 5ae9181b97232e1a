"""The rows of a class sweep (attention_classes.py's JSON) below a ratio to their best peer, each
timed again by every path rooflab has for it, in its own layout and contiguous: a prefill's
routed kernel (routing.which), the Triton kernel and each Gluon kernel (or why it refuses); a
decode's launch (config, programs, schedule, TMA) and 64- and 128-key steps; cuDNN and flash
beside. Which path loses, and whether the layout is why.

Usage: python benchmarks/attention_paths.py OUT_DIR SWEEP.json [SWEEP.json ...] [--below 0.97]
       (-> attention_paths.json)
"""
from __future__ import annotations

import argparse
import importlib
import json

from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD
from rooflab.kernels import routing
from rooflab.measure.op_classes import DECODE_MAX_Q
from rooflab.studies import attention as A

import attention_classes as AC
from common import write


def us(fn) -> float | str:
    """fn's device time in us, timed as the sweep times it, or the first line of why it failed."""
    try:
        fn()
        return round(AC.timed(fn).device_s * 1e6, 1)
    except Exception as e:  # noqa: BLE001 - a path refusing a row is a result
        return str(e).splitlines()[0][:100]


def paths(s: dict) -> dict:
    """Every path's time for shape ``s`` (attention_classes' keys), cuDNN and flash beside."""
    q, k, v, keep = AC.inputs(s)
    mask = AC.mask_of(s, keep)
    causal = s["causal"] and mask is None
    r = {"rooflab": us(lambda: AC.ours(q, k, v, s, keep)),
         **{b: us(lambda b=b: A._sdpa(b)(q, k, v, causal, mask)) for b in ("cudnn", "flash")}}
    if s["lq"] > DECODE_MAX_Q:
        r["routed"] = routing.which(q, k, v, s["causal"])
        r["triton"] = us(lambda: FA.flash_attention(q, k, v, s["causal"], cfg={}))
        for name in {"flash_attention_sm90", *routing.GLUON.get((s["d"], s["d"]), ())}:
            m = importlib.import_module(f"rooflab.kernels.{name}")
            r[name] = m.usable(q, k, v, s["causal"]) or us(
                lambda m=m, name=name: getattr(m, name)(q, k, v, s["causal"]))
    else:
        c = FD.config(s["d"], s["lkv"], s["h"] // s["hkv"] * s["lq"], s["b"] * s["hkv"])
        p = FD._programs(s["d"], s["b"] * s["hkv"], -(-s["lkv"] // c["BLOCK_N"]), c)
        r["launch"] = {**c, "programs": p, "tma": FA.tma_ok(k, v),
                       "schedule": FD.schedule(s["b"], s["hkv"], s["lkv"], c["BLOCK_N"], p)}
        for n in (64, 128):
            r[f"{n} keys a step"] = us(lambda n=n: FD.flash_decode(
                q, k, v, s["causal"], keep=keep, cfg={**c, "BLOCK_N": n}))
    return r


def load(parser, path: str) -> dict:
    """The sweep at ``path``; one that cannot be read, or has no rows, is the parser's error."""
    try:
        with open(path) as f:
            sweep = json.load(f)
    except (OSError, ValueError) as e:
        parser.error(f"cannot read {path}: {e}")
    if not isinstance(sweep, dict) or not isinstance(sweep.get("rows"), list):
        parser.error(f"{path} has no rows: not a class sweep's JSON")
    return sweep


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("sweeps", nargs="+")
    p.add_argument("--below", type=float, default=0.97)
    a = p.parse_args(argv)
    rows = []
    sweeps = {path: load(p, path) for path in a.sweeps}  # all read before anything is timed
    for path, sweep in sweeps.items():
        for r in sweep["rows"]:
            if r.get("rooflab_over_best_peer", a.below) >= a.below:
                continue
            s = {key: r[key] for key in AC.BASE}
            out = {"sweep": path, "sweep_commit": sweep.get("meta", {}).get("commit"),
                   "phase": r["phase"], "class": r["class"], "shape": s,
                   "sweep_ratio": r["rooflab_over_best_peer"], s["layout"]: paths(s)}
            if s["layout"] != "bhld":
                out["bhld"] = paths({**s, "layout": "bhld"})
            print(json.dumps(out), flush=True)
            rows.append(out)
            write(a.out_dir, "attention_paths", {"below": a.below, "rows": rows})


if __name__ == "__main__":
    main()
