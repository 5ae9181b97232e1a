"""The kernels whose limits the kernels' docstrings explain, for Nsight Compute to read: each
warmed up (compiled, autotuned), then launched once more inside an NVTX range named after it.
Usage: ncu --clock-control none --nvtx --nvtx-include 'NAME/' ... python benchmarks/ncu_targets.py
NAMES: decode_q16 (B8 H32 Hkv8, 16 queries, 4k keys, d128), decode_q1 (the same, 1 query),
flash_d128 (B2 H16 N4096 d128 bf16, non-causal), decode_q1_512 and cudnn_q1_512 (one query
against 512 keys, rooflab's kernel and SDPA's cuDNN backend), decode_d64 and cudnn_d64 (one
query, 4k keys, d64), decode_b64 and cudnn_b64 (B64, one query, 1k keys): the class sweep's
decode rows furthest below cuDNN; prefill_short and cudnn_short (B16 H32 Hkv8 N512 d128,
non-causal), prefill_b128 and cudnn_b128 (B128 N256, causal): its prefill rows furthest below
cuDNN; default all."""
from __future__ import annotations

import argparse

import torch

from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD


def decode(lq: int, n_kv: int = 4096, cudnn: bool = False, d: int = 128, b: int = 8):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, 32, lq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(b, 8, n_kv, d, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    if cudnn:
        from rooflab.studies.attention import _sdpa
        return lambda: _sdpa("cudnn")(q, k, v, lq > 1)
    return lambda: FD.flash_decode(q, k, v, lq > 1)


def flash():
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    return lambda: FA.flash_attention(q, k, v, False)


def prefill(b: int, n: int, causal: bool, cudnn: bool = False):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, 32, n, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(b, 8, n, 128, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    if cudnn:
        from rooflab.studies.attention import _sdpa
        return lambda: _sdpa("cudnn")(q, k, v, causal)
    return lambda: FA.flash_attention(q, k, v, causal)


TARGETS = {"decode_q16": lambda: decode(16), "decode_q1": lambda: decode(1),
           "flash_d128": flash, "decode_q1_512": lambda: decode(1, 512),
           "cudnn_q1_512": lambda: decode(1, 512, cudnn=True),
           "decode_d64": lambda: decode(1, d=64), "cudnn_d64": lambda: decode(1, cudnn=True, d=64),
           "decode_b64": lambda: decode(1, 1024, b=64),
           "cudnn_b64": lambda: decode(1, 1024, cudnn=True, b=64),
           "prefill_short": lambda: prefill(16, 512, False),
           "cudnn_short": lambda: prefill(16, 512, False, cudnn=True),
           "prefill_b128": lambda: prefill(128, 256, True),
           "cudnn_b128": lambda: prefill(128, 256, True, cudnn=True)}

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="?", default=",".join(TARGETS))
    given = p.parse_args().names
    names = given.split(",")
    if set(names) - set(TARGETS):
        p.error(f"names are among {', '.join(TARGETS)} (got {given})")
    if not torch.cuda.is_available():
        p.error("Nsight Compute reads a CUDA GPU: there is none here")
    for name in names:
        fn = TARGETS[name]()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
