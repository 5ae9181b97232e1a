"""Which of rooflab's FlashAttention kernels runs a call: on an sm_90 GPU a Gluon kernel
(flash_attention_sm90.py, flash_attention_sm90_ws.py) where one takes the inputs and was measured
faster, else the Triton kernel of flash_attention.py, the one that takes every input (windows,
kept keys, sinks, softcaps, q and k wider than v). flash_attention() asks here when it is given
no config; rooflab's attention inside a model asks first, to name the path it counts."""
from __future__ import annotations

import importlib

from rooflab.kernels.inputs import local

# Which Gluon kernels may run, in order, by q and k's head dim and v's, on an sm_90 GPU for the
# inputs each takes (its usable(); both take ragged lengths, transformers' layouts, a longer
# cache's first rows, k and v in layouts apart): the one of flash_attention_sm90.py at 64, its
# warp-specialized sibling at 128 and 256 (at 256 ragged lengths only from 1,024 queries and a
# wave of tiles), where each beat the Triton kernel and cuDNN, and at latent attention's 192 and
# 128, where it beat the Triton kernel and cuDNN (rows up to 1,024 keys walked). At 128 the
# plain one may go first (plain_first()).
GLUON = {(64, 64): ("flash_attention_sm90",), (128, 128): ("flash_attention_sm90_ws",),
         (256, 256): ("flash_attention_sm90_ws",), (192, 128): ("flash_attention_sm90_ws",)}


def which(q, k, v, causal: bool, out=None, window: int | None = None, keep=None,
          sinks=None, softcap: float = 0.0) -> str:
    """The module whose kernel flash_attention() runs for these inputs without a config (a
    window shorter than the keys, kept keys, sinks, a softcap: flash_attention's, the one
    kernel that takes them)."""
    d = q.shape[-1]
    names = GLUON.get((d, v.shape[-1]), ()) if (
        q.is_cuda and local(window, k.shape[2]) is None and keep is None and sinks is None
        and not softcap) else ()
    plain = importlib.import_module("rooflab.kernels.flash_attention_sm90")
    if names and (d, v.shape[-1]) == (128, 128) and plain_first(
            q.shape[2], k.shape[2], causal, q.shape[1] // k.shape[1], plain.programs_per_sm(q)):
        names = ("flash_attention_sm90", *names)
    for name in names:
        if not importlib.import_module(f"rooflab.kernels.{name}").usable(q, k, v, causal,
                                                                          out=out):
            return name
    return "flash_attention"


# from this many of the plain kernel's programs an SM, causal short rows whose last tile is
# half empty go to it first, not to the walk; below FEW_NOMASK (two waves of the walk's 128-row
# tiles), short rows without a mask go to it first even where the walk takes them in whole tiles
# (the bounds' A/Bs: flash_attention_sm90.md)
DEEP_CAUSAL, FEW_NOMASK = 20, 4


def plain_first(n_q: int, n_kv: int, causal: bool, group: int, per_sm: float) -> bool:
    """At head dim 128, whether the plain Gluon kernel goes before the warp-specialized one: on
    rows its short() takes (at most 1,024 keys, or 2,048 causal on a grid of ``per_sm`` programs
    an SM deep enough), where a program per 64 rows, two to four an SM, hides each short
    program's setup that the warp-specialized kernel's one an SM exposes; unless that one walks
    the row in whole tiles (without a mask, on a grid of at least FEW_NOMASK programs an SM:
    on fewer the walk's one program an SM leaves some SMs a tile and others two), or walks a
    causal row with a half-empty last tile on a grid shallower than DEEP_CAUSAL. On a deeper
    one the plain kernel's many programs an SM even out the causal tiles the walk balances, and
    the padded rows cost the walk what it saves there (docs/kernels/flash_attention_sm90.md)."""
    plain = importlib.import_module("rooflab.kernels.flash_attention_sm90")
    ws = importlib.import_module("rooflab.kernels.flash_attention_sm90_ws")
    walks = lambda share=None: ws.walks(n_q, n_kv, 128, 128, causal, group,  # noqa: E731
                                        pad_share=share)
    return plain.short(n_kv, per_sm, causal) and not (
        walks(0) and (causal or per_sm >= FEW_NOMASK)
        or causal and per_sm < DEEP_CAUSAL and walks())


def gluon(q, k, v, causal: bool, scale, out, name: str = ""):
    """The Gluon kernel's (O, LSE) where which() picks one for these inputs, else None; ``name``:
    which()'s answer for them, where the caller has it."""
    name = name or which(q, k, v, causal, out)
    if name == "flash_attention":
        return None
    return getattr(importlib.import_module(f"rooflab.kernels.{name}"), name)(
        q, k, v, causal, scale, out=out)
