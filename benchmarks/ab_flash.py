"""Same-run A/B of rooflab's FlashAttention: the kernel file as it was at a git revision
(``before``) against the working tree's (``after``) and named variants of its config, beside
SDPA's cuDNN and flash backends; medians of alternating rounds; outputs against ``after``.

Usage: python benchmarks/ab_flash.py OUT_DIR [--before REV] [--variant NAME=JSON ...]
           [--head-dims 64,128] [--rows PY_LIST] [--layout bhld|blhd|latent] [--v-dim N]
           [--rounds 3] [--name ab_flash] [--device cuda] [--triton]
A variant's JSON is merged over FA.config(head_dim, causal) of each row, e.g.
  --variant 'r168={"num_stages": 2, "Q_REG": true, "maxnreg": 168}'
A variant {"GLUON": CFG} runs the Gluon kernel of flash_attention_sm90.py instead, CFG over its
config and the inputs' flags ({} for its own), {"GLUON_WS": CFG} the warp-specialized one of
flash_attention_sm90_ws.py; with "FROM": PATH beside either, the kernel of the module at PATH
instead (that file at another revision, from git show); rows they do not
take are recorded as their errors. A variant
{"COPY": true} runs flash_attention as routed on contiguous copies of k and v, the copy timed.
Rows are benchmarks/kernels.py's FLASH_ROWS unless --rows gives (B, H, Hkv, N, D, dtype, causal)
tuples. --layout blhd lays q, k and v out as transformers' projections leave them, (B, L, H, D)
in memory seen as (B, H, L, D). --v-dim N: v (and O) N wide, q and k D (latent attention: D
192, N 128); with --layout latent, q and k contiguous and v as DeepSeek-V2's attention in
transformers passes it, N of each head's 2N columns, tokens first. Without --before there is
no ``before``. --triton: ``before`` and ``after`` run their module's Triton kernel with its own
config (where a GPU would route them to a Gluon kernel, as both revisions do on sm_90). Each
row is written as soon as it is done.
"""
from __future__ import annotations

import importlib
import os
import sys

import torch

from rooflab.kernels import flash_attention as FA
from rooflab.studies import attention as A

from common import ab_parser, alternate, rows as parse_rows, variants as parse_variants
from common import git, module_before, module_from, write
from kernels import DT, FLASH_ROWS, flash_s

KERNEL = "rooflab/kernels/flash_attention.py"


def gluon(q, k, v, causal: bool, over: dict, ws: bool = False, module=None):
    """A Gluon kernel's (O, LSE) with ``over`` merged over its config and the inputs' flags
    (its flags()), or why not; ``module``: the kernel's module, if not the tree's."""
    name = "flash_attention_sm90_ws" if ws else "flash_attention_sm90"
    m = module or importlib.import_module(f"rooflab.kernels.{name}")
    cfg = m.flags(q, k, v, causal, over)
    why = m.usable(q, k, v, causal, cfg)
    if why:
        raise ValueError(f"the Gluon kernel does not take this row: {why}")
    return getattr(m, name)(q, k, v, causal, cfg=cfg)


def row(shape, before, variants: dict, rounds: int, device: str, layout: str = "bhld",
        v_dim: int = 0, triton: bool = False) -> dict:
    b, h, hkv, n, d, dt, causal = shape
    g = torch.Generator(device=device).manual_seed(n)

    def made(heads, d=d):
        if layout == "latent" and d == v_dim:  # a head's last v_dim of 2 v_dim columns
            return torch.randn(b, n, heads, 2 * d, device=device, dtype=DT[dt],
                               generator=g).transpose(1, 2)[..., d:]
        if layout == "blhd":
            return torch.randn(b, n, heads, d, device=device, dtype=DT[dt],
                               generator=g).transpose(1, 2)
        return torch.randn(b, heads, n, d, device=device, dtype=DT[dt], generator=g)
    q, k, v = made(h), made(hkv), made(hkv, v_dim or d)
    own = {"cfg": {}} if triton else {}  # {}: the Triton kernel, its module's config()
    fns = {"after": lambda: FA.flash_attention(q, k, v, causal, **own)}
    if before is not None:
        fns["before"] = lambda: before.flash_attention(q, k, v, causal, **own)
    for name, over in variants.items():
        if over.get("COPY"):
            fns[name] = lambda: FA.flash_attention(q, k.contiguous(), v.contiguous(), causal)
            continue
        if "GLUON" in over or "GLUON_WS" in over:
            mod = module_from(over["FROM"]) if "FROM" in over else None
            fns[name] = lambda g=over.get("GLUON", over.get("GLUON_WS")), ws="GLUON_WS" in over, \
                mod=mod: gluon(q, k, v, causal, g, ws, mod)
            continue
        cfg = {**FA.config(v_dim or d, causal), **over}
        fns[name] = lambda cfg=cfg: FA.flash_attention(q, k, v, causal, cfg=cfg)
    for peer in ("cudnn", "flash"):
        f = A._sdpa(peer)
        if f is not None:
            fns[peer] = lambda f=f: f(q, k, v, causal)
    m = alternate(fns, [x for x in fns if x not in ("after", "cudnn", "flash")],
                  fns["after"]()[0].float(), lambda f: flash_s(f, device), rounds)
    r = {"shape": list(shape), "layout": layout, "v_dim": v_dim or d, "triton": triton,
         "config": FA.config(v_dim or d, causal),
         "errors": m["errors"],
         "max_abs_diff_vs_after": m["max_abs_diff"]}
    times, med = m["all_s"], m["median_s"]
    flops = FA.cost(b, h, n, n, d, hkv, dt, causal, v_dim=v_dim or None).flops
    r.update(all_s=times, median_s=med, tflops={x: flops / s / 1e12 for x, s in med.items()},
             time_ratio_over_after={x: med[x] / med["after"] for x in med if "after" in med})
    return r


def main(argv=None) -> None:
    p = ab_parser(__doc__, "ab_flash")
    p.add_argument("--before")
    p.add_argument("--head-dims")
    p.add_argument("--layout", choices=("bhld", "blhd", "latent"), default="bhld")
    p.add_argument("--v-dim", type=int, default=0)
    p.add_argument("--triton", action="store_true")
    a = p.parse_args(argv)
    variants = parse_variants(p, a.variant)
    for name, over in variants.items():
        if "FROM" in over and not (("GLUON" in over or "GLUON_WS" in over)
                                   and os.path.isfile(over["FROM"])):
            p.error(f"--variant {name}: FROM takes a file of a kernel, beside GLUON or GLUON_WS")
    shapes = parse_rows(p, a.rows, FLASH_ROWS, "B, H, Hkv, N, D, dtype, causal")
    if a.head_dims:
        shapes = [s for s in shapes if str(s[4]) in a.head_dims.split(",")]
    if a.layout == "latent" and not a.v_dim:
        p.error("--layout latent takes --v-dim (v's head dim, e.g. 128)")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA GPU here (--device cpu runs it under TRITON_INTERPRET=1)")
    before = module_before(p, a.before, KERNEL)
    after = git("rev-parse", "HEAD").strip() + (" + changes" if git("status", "--porcelain",
                                                                      "--", KERNEL) else "")
    rows = []
    for shape in shapes:
        rows.append(row(shape, before, variants, a.rounds, a.device, a.layout, a.v_dim,
                        a.triton))
        tf = rows[-1]["tflops"]
        print(shape, "TFLOP/s (higher is faster):", {x: round(t) for x, t in tf.items()},
              rows[-1]["errors"], flush=True)
        write(a.out_dir, a.name, {"after": after, "before": a.before, "variants": variants,
                                  "rows": rows, "note": __doc__})


if __name__ == "__main__":
    sys.exit(main())
