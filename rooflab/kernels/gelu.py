"""GeLU (tanh approximation), four ways, and rooflab's own fused Triton kernel.

    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))        8 FLOPs / element

Read in order: the unfused reference (each line one eager kernel, its HBM traffic annotated), the
Triton kernel (one read, one write), its launcher, its cost, the correctness check and the sweep.
"""
from __future__ import annotations

import math
import os

import torch

from rooflab import cost as C

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# --- 1. the reference: basic torch ops, one kernel each -------------------------------------
def gelu_unfused(x: torch.Tensor) -> torch.Tensor:
    """Eager chain of basic ops. n elements of e bytes; each line reads and writes HBM."""
    cube = x * x * x                          # 2 kernels: read x (once) -> write t; read t, x -> write cube
    inner = x + 0.044715 * cube               # 2 kernels: read cube -> write s; read x, s -> write inner
    scaled = SQRT_2_OVER_PI * inner           # 1 kernel:  read inner -> write scaled
    t = torch.tanh(scaled)                    # 1 kernel:  read scaled -> write t
    one_plus = 1.0 + t                        # 1 kernel:  read t -> write one_plus
    return 0.5 * x * one_plus                 # 2 kernels: read x -> write h; read h, one_plus -> write y


UNFUSED_KERNELS = 9  # the launches gelu_unfused makes
UNFUSED_READS, UNFUSED_WRITES = 12, 9  # tensor reads and writes of n elements, from the comments


def gelu_torch(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own fused kernel."""
    return torch.nn.functional.gelu(x, approximate="tanh")


# --- 2. the kernel ---------------------------------------------------------------------------
# This module is the optional edge: without Triton the kernel is absent and gelu_triton() says so.
try:
    import triton
    import triton.language as tl
except ImportError as _e:  # pragma: no cover - exercised where Triton is missing
    triton = None
    TRITON_MISSING = f"Triton is not installed ({_e}); pip install 'rooflab[triton]'"

if triton is not None:
    @triton.jit
    def _gelu(x):
        # 0.5 * (1 + tanh(z)) == sigmoid(2z) == 1 / (1 + 2^(-2 log2(e) z)): one exp2, no tanh.
        # -2 log2(e) z = x * (c0 + c1 x^2) with c0 = -2 log2(e) sqrt(2/pi), c1 = 0.044715 c0:
        # two multiplies and an FMA an element, 3 multiplies fewer than z's formula as written
        # (docs/kernels/gelu.md). The exponent is capped so exp2 never overflows (x / (1 +
        # 2^115) is 0 to fp32 precision).
        x = x.to(tl.float32)
        return x / (1.0 + tl.math.exp2(tl.minimum(x * (x * x * -0.10294324 + -2.3022082), 115.0)))

    @triton.jit
    def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = pid.to(tl.int64) * BLOCK                        # int64: > 2^31 elements work
        offs = start + tl.arange(0, BLOCK)
        if start + BLOCK <= n:
            # a full block, no mask: the compiler can prove 16-byte runs and issues vector
            # loads. With a mask `offs < n` it can do so only when n is a multiple of 16; at
            # any other length every element would be its own load (bf16: 25% of copy speed)
            x = tl.load(x_ptr + offs)                            # read x once (HBM -> registers)
            tl.store(y_ptr + offs, _gelu(x).to(y_ptr.dtype.element_ty))  # write y once
        else:                                                    # the ragged last block
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(y_ptr + offs, _gelu(x).to(y_ptr.dtype.element_ty), mask=mask)


# --- 3. the launcher -------------------------------------------------------------------------
BLOCK = 1024
# (block, warps) per element size: the best of benchmarks/fusion.py's sweep on the H200 at 64M
# and 256M elements; 2-byte tensors under 4M elements (8 MB) are latency-bound, and twice the
# programs hide it better (the searches: docs/kernels/gelu.md)
TUNED = {4: (1024, 8), 2: (2048, 4)}
SMALL_N, SMALL_TUNED = 1 << 22, (1024, 4)


def gelu_triton(x: torch.Tensor, out: torch.Tensor | None = None, block: int | None = None,
                num_warps: int | None = None) -> torch.Tensor:
    """Fused GeLU-tanh over any tensor of fp32, fp16 or bf16 (read as a contiguous copy where
    it is not one); ``out``: where to write it, x's shape and dtype, contiguous."""
    if triton is None:
        raise RuntimeError(TRITON_MISSING)
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"gelu_triton supports fp32, fp16 and bf16, got {x.dtype}")
    x = x.contiguous()
    if out is not None and not (out.shape == x.shape and out.dtype == x.dtype and
                                out.device == x.device and out.is_contiguous()):
        raise ValueError(f"out is a contiguous {x.dtype} tensor of x's shape {tuple(x.shape)} on "
                         f"{x.device}, got {out.dtype} {tuple(out.shape)} on {out.device}")
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    if n:
        tuned_block, tuned_warps = (SMALL_TUNED if x.element_size() == 2 and n < SMALL_N else
                                    TUNED.get(x.element_size(), (BLOCK, 4)))
        block = block or (BLOCK if os.environ.get("TRITON_INTERPRET") == "1" else tuned_block)
        grid = (triton.cdiv(n, block),)
        gelu_kernel[grid](x, out, n, BLOCK=block, num_warps=num_warps or tuned_warps)
    return out


# --- 4. the cost -----------------------------------------------------------------------------
def cost(n: int, dtype: str, fused: bool = True) -> C.Cost:
    """Fused: read n, write n. Unfused: the reference's 12 reads and 9 writes of n elements."""
    if fused:
        return C.gelu_tanh(n, dtype).named("gelu fused")
    c = C.elementwise(n, dtype, UNFUSED_READS, UNFUSED_WRITES, C.GELU_TANH_FLOPS)
    return C.Cost("gelu unfused", 0, c.flops, c.bytes, C.gelu_tanh(n, dtype).bytes_fused,
                  kernels=UNFUSED_KERNELS)


# --- 5. the check ----------------------------------------------------------------------------
def max_error(fn, n: int, dtype: torch.dtype, device: str, seed: int = 0) -> float:
    """max |fn(x) - gelu(x in fp64)| on fresh random x, output poisoned first (NaN survives)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = (torch.randn(n, generator=g) * 3).to(device=device, dtype=dtype)
    ref = gelu_torch(x.double())
    out = torch.full_like(x, float("nan"))
    got = fn(x) if fn is not gelu_triton else gelu_triton(x, out=out)
    return float((got.double() - ref).abs().max())


# --- 6. the sweep lives in rooflab/studies/fusion.py (it needs the timer and the profiler) --------
VARIANTS = {"unfused": gelu_unfused, "torch": gelu_torch, "triton": gelu_triton}
