"""Same-run A/B of rooflab's flash-decoding: the default config against named variants, beside
a read of the same bytes (and, at q_len 1, SDPA's cuDNN backend); medians of alternating rounds,
L2 flushed before each call; outputs against the default.

Usage: python benchmarks/ab_decode.py OUT_DIR [--variant NAME=JSON ...] [--rows PY_LIST]
           [--kept LO,HI] [--before REV] [--rounds 3] [--name ab_decode] [--device cuda]
A variant's JSON is merged over the row's FD.config; its key "programs", if any, is the launcher's
programs argument, e.g. --variant 's2={"num_stages": 2, "programs": 396}', or "pairs": one program
per (batch, KV head), each head whole, "N a pair": N programs a pair, each head cut in N runs
(about: schedule()'s runs are whole blocks), or "N an SM": about N programs an SM, a count that
cuts every head alike as the launcher's does ("split": "2 an SM", the launcher's where two fit).
Rows are (B, H, Hkv, Lq, Lkv, D) tuples, bf16, causal where Lq > 1; by default the kernels
benchmark's decode shapes with more than one query. --kept LO,HI: a static cache's kept keys,
row b's first slots, from LO to HI of the cache along the batch (every call given the mask, SDPA
too). --before REV: the kernel file as it was at git revision REV, its own defaults, beside the
tree's (``before``). Each row is written as soon as it is done.
"""
from __future__ import annotations

import re

import torch

from rooflab.kernels import flash_decoding as FD
from rooflab.studies import attention as A
from rooflab.measure import ceilings as CE

from common import ab_parser, alternate, module_before, rows, variants as parse_variants
from common import write
from kernels import DECODE_SHAPES, t_s

ROWS = [s for s in DECODE_SHAPES if s[3] > 1]
KERNEL = "rooflab/kernels/flash_decoding.py"


def row(shape, variants: dict, rounds: int, bw: float | None, device: str,
        kept: tuple | None = None, before=None) -> dict:
    b, h, hkv, lq, lkv, d = shape
    causal = lq > 1
    g = torch.Generator(device=device).manual_seed(lkv)
    q = torch.randn(b, h, lq, d, device=device, dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(b, hkv, lkv, d, device=device, dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    keep = None
    if kept:  # row b keeps its first lens[b] slots
        lens = torch.linspace(kept[0] * lkv, kept[1] * lkv, b, device=device).long().clamp(min=lq)
        keep = torch.arange(lkv, device=device)[None, :] < lens[:, None]
    fns = {"default": lambda: FD.flash_decode(q, k, v, causal, keep=keep)}
    if before is not None:
        fns["before"] = lambda: before.flash_decode(q, k, v, causal, keep=keep)
    default = FD.config(d, lkv, h // hkv * lq, b * hkv)
    for name, over in variants.items():
        over = dict(over)
        programs = over.pop("programs", None)
        programs = "2 an SM" if programs == "split" else programs
        if isinstance(programs, str) and programs.endswith(" an SM"):
            sms = torch.cuda.get_device_properties(0).multi_processor_count if (
                device == "cuda") else 4
            programs = FD.aligned(int(programs.split()[0]) * sms, b * hkv)
        programs = b * hkv if programs == "pairs" else programs
        if isinstance(programs, str) and programs.endswith(" a pair"):
            programs = int(programs.split()[0]) * b * hkv
        cfg = {**default, **over}
        fns[name] = lambda cfg=cfg, p=programs: FD.flash_decode(q, k, v, causal, programs=p,
                                                                cfg=cfg, keep=keep)
    if not causal and device == "cuda":  # SDPA aligns is_causal top-left: with Lq > 1
        # only the kernels agree
        f = A._sdpa("cudnn")
        mask = None if keep is None else keep[:, None, None, :]
        if f is not None:
            fns["cudnn"] = lambda f=f: f(q, k, v, False, mask)
    nbytes = FD.cost(b, h, lq, lkv, d, hkv, "bf16", causal).bytes
    x = torch.empty(nbytes // 2, device=device, dtype=torch.bfloat16)
    fns["read_same_bytes"] = x.sum
    checked = [*variants, *(["before"] if before is not None else [])]
    m = alternate(fns, checked, fns["default"]()[0].float(), lambda f: t_s(f, device=device),
                  rounds)
    r = {"shape": list(shape), "config": default, "bytes": nbytes, "errors": m["errors"],
         "max_abs_diff_vs_default": m["max_abs_diff"], "kept": list(kept) if kept else None,
         "kept_fraction": None if keep is None else float(keep.float().mean())}
    times, med = m["all_s"], m["median_s"]
    r.update(all_s=times, median_s=med,
             time_ratio_over_default={n: s / med["default"] for n, s in med.items()})
    if bw:
        r["fraction_of_copy_ceiling"] = {n: nbytes / s / bw for n, s in med.items()}
    return r


def main(argv=None) -> None:
    p = ab_parser(__doc__, "ab_decode")
    p.add_argument("--kept")
    p.add_argument("--before", metavar="REV")
    a = p.parse_args(argv)
    variants = parse_variants(p, a.variant)
    for name, over in variants.items():
        n = over.get("programs")
        if not (n is None or n in ("pairs", "split") or isinstance(n, int) and n > 0 or (
                isinstance(n, str) and re.fullmatch(r"[1-9]\d* (an SM|a pair)", n))):
            p.error(f"--variant {name}: programs takes a count, \"pairs\", \"split\", "
                    f"\"N an SM\" or \"N a pair\" (got {n!r})")
    shapes = rows(p, a.rows, ROWS, "B, H, Hkv, Lq, Lkv, D")
    kept = None
    if a.kept:
        try:
            kept = tuple(float(x) for x in a.kept.split(","))
        except ValueError:
            kept = ()
        if len(kept) != 2 or not 0 < kept[0] <= kept[1] <= 1:
            p.error(f"--kept takes LO,HI, fractions of the cache with 0 < LO <= HI <= 1 "
                    f"(got {a.kept!r})")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA GPU here (--device cpu runs it under TRITON_INTERPRET=1)")
    before = module_before(p, a.before, KERNEL)
    bw = CE.get("cuda").mem_bandwidth_bytes_per_s if a.device == "cuda" else None
    done = []
    for shape in shapes:
        done.append(row(shape, variants, a.rounds, bw, a.device, kept, before))
        us = {n: round(s * 1e6, 1) for n, s in done[-1]["median_s"].items()}
        print(shape, us, done[-1]["errors"], flush=True)
        write(a.out_dir, a.name, {"copy_ceiling_bytes_per_s": bw, "variants": variants,
                                  "before": a.before,
                                  "rows": done, "note": __doc__})


if __name__ == "__main__":
    main()
