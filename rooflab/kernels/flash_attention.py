"""FlashAttention forward in Triton: tiles, an online softmax, and no N x N matrix in HBM.

Read in order: the reference (standard attention, its HBM traffic annotated), the kernel, the
launcher, the cost, the check. Shapes: q (B, H, Lq, D), k and v (B, Hkv, Lkv, D) with Hkv dividing
H (GQA/MQA); queries are the last Lq of Lkv positions when causal (prefill: Lq == Lkv). A sliding
window (causal only) lets each query see its last ``window`` keys, itself included, as
transformers' sliding layers do, and kept keys (B, Lkv) hide keys of a batch row (a padded batch);
a query that sees no key gets zeros, as SDPA gives it; attention sinks (gpt-oss: a learned logit
a head, in every softmax's denominator) join the sum; a softcap (Gemma 2) bounds every score s
to cap * tanh(s / cap). q and k may be wider than v by a power of two (latent attention: 192 =
128 + 64 rotary dims against v's 128); the output is v's width.
"""
from __future__ import annotations

import math
import os

import torch

from rooflab import cost as C
from rooflab.kernels import routing  # which kernel runs a call
from rooflab.kernels.inputs import cap, checked, kept, local, sink_logits  # what they take


# --- 1. the reference ------------------------------------------------------------------------
def standard_attention(q, k, v, causal: bool = False, scale: float | None = None,
                       window: int | None = None, sinks=None, softcap: float = 0.0):
    """softmax(Q K^T * scale) V, materialising the (Lq, Lkv) score matrix S. ``sinks`` (H,):
    a logit a head that joins every row's softmax with no value vector; ``softcap`` > 0: every
    score s becomes softcap * tanh(s / softcap)."""
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    rep = q.shape[1] // k.shape[1]
    if rep > 1:  # GQA: each K/V head serves `rep` query heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-2, -1)) * scale     # read Q, K -> write S (B, H, Lq, Lkv) to HBM
    if softcap:
        s = softcap * torch.tanh(s / softcap)   # read S -> write S (three passes, as run)
    if causal:
        s = s.masked_fill(~seen(q.shape[-2], k.shape[-2], window, q.device),
                          float("-inf"))  # read S -> write S
    if sinks is not None:                     # a column of each head's sink, dropped after
        s = torch.cat([s, sinks.to(s.dtype)[:, None, None].expand(*s.shape[:-1], 1)], -1)
    p = torch.softmax(s.float(), dim=-1).to(q.dtype)  # read S (several passes) -> write P
    return p[..., :v.shape[-2]] @ v           # read P, V -> write O (B, H, Lq, D)


def seen(n_q: int, n_kv: int, window: int | None = None, device=None) -> torch.Tensor:
    """(Lq, Lkv) bool: the keys each query sees under the causal mask (queries the last Lq),
    at most its last ``window``."""
    keep = torch.ones(n_q, n_kv, dtype=torch.bool, device=device).tril(n_kv - n_q)
    return keep if window is None else keep & ~keep.tril(n_kv - n_q - window)


# --- 2. the kernel ---------------------------------------------------------------------------
# This module is the optional edge: it is imported only where attention runs, and without Triton
# the kernel is simply absent (flash_attention() says so in one line).
try:
    import triton
    import triton.language as tl
except ImportError as _e:  # pragma: no cover - exercised where Triton is missing
    triton = None
    TRITON_MISSING = f"Triton is not installed ({_e}); pip install 'rooflab[triton]'"

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

if triton is not None:
    @triton.jit
    def _tile(base, start_n, stride_n, offs_n, offs_d, n_kv, b, hk, BLOCK_N: tl.constexpr,
              EVEN_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
        # one (BLOCK_N, D) tile of K or V: through a descriptor (rows past the end load as 0 and
        # are masked in the scores), or by addresses (masked only where n_kv is ragged)
        if TMA:
            t = base.load([b, hk, start_n, 0]).reshape(BLOCK_N, offs_d.shape[0])
        elif EVEN_N:
            t = tl.load(base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        else:
            t = tl.load(base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :],
                        mask=(start_n + offs_n)[:, None] < n_kv, other=0.0)
        if UPCAST:  # the CPU interpreter's bf16 dot is wrong; CI checks the algorithm in fp32
            t = t.to(tl.float32)
        return t

    @triton.jit
    def softcapped(qk, cap_in):
        # tanh(qk * cap_in) / cap_in, tanh by exp2 (exact at +-inf): cap_in = scale / softcap,
        # so the scaled score s becomes softcap * tanh(s / softcap). One scalar reciprocal, so
        # each score pays a multiply, not a second divide
        t = 1.0 - 2.0 / (tl.math.exp2(qk * (cap_in * 2.8853900817779268)) + 1.0)
        return t * (1.0 / cap_in)

    @triton.jit
    def _scores(q, q2, k_base, start_n, stride_kn, offs_n, offs_d, offs_e, n_kv, b, hk, cap_in,
                BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, UPCAST: tl.constexpr,
                TMA: tl.constexpr, QK_EXTRA: tl.constexpr, SOFTCAP: tl.constexpr):
        # one key block's raw scores (BLOCK_M, BLOCK_N), never stored. QK_EXTRA: q and k's dims
        # past v's head dim (q2 holds q's), a second dot onto the first (by addresses)
        k = _tile(k_base, start_n, stride_kn, offs_n, offs_d, n_kv, b, hk, BLOCK_N, EVEN_N,
                  UPCAST, TMA)
        qk = tl.dot(q, tl.trans(k))
        if QK_EXTRA:
            k2 = _tile(k_base + offs_d.shape[0], start_n, stride_kn, offs_n, offs_e, n_kv, b, hk,
                       BLOCK_N, EVEN_N, UPCAST, False)
            qk = tl.dot(q2, tl.trans(k2), qk)
        if SOFTCAP:
            qk = softcapped(qk, cap_in)
        return qk

    @triton.jit
    def _update(acc, l_i, m_i, qk, v, qk_scale, EMPTY_ROWS: tl.constexpr = False):
        # the online softmax on one block of raw scores qk (BLOCK_M, BLOCK_N): the running max
        # in log2 units (qk_scale > 0 commutes with max), then one fused multiply-add per score,
        # scale and shift together, the softmax's cheapest form. EMPTY_ROWS: a row may have seen
        # no key yet (a window starts after the block, or its keys are not kept), so its max is
        # -inf: shift by 0 there
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        m_use = m_new
        if EMPTY_ROWS:
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(qk * qk_scale - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)             # rescale what was summed so far
        l_i = l_i * alpha + tl.sum(p, 1)
        # the tensor cores add P V onto the rescaled accumulator in place
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        return acc, l_i, m_new

    @triton.jit
    def _inner(acc, l_i, m_i, q, q2, k_base, v_base, stride_kn, stride_vn, offs_m, offs_n,
               offs_d, offs_e, lo, hi, n_kv, delta, qk_scale, b, hk, BLOCK_N: tl.constexpr,
               MASK: tl.constexpr, EVEN_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr,
               QK_EXTRA: tl.constexpr, window=0, LOCAL: tl.constexpr = False, keep_row=None,
               HAS_KEEP: tl.constexpr = False, EMPTY_ROWS: tl.constexpr = False, cap_in=1.0,
               SOFTCAP: tl.constexpr = False):
        # One sweep over key/value blocks [lo, hi). Registers hold q (BLOCK_M, D), the running
        # max m_i, the running sum l_i and the unnormalised output acc (BLOCK_M, D).
        # MASK with LOCAL: the window's edge too (a query sees its last ``window`` keys).
        # HAS_KEEP: in every block, only the keys keep_row (this batch row's) keeps.
        for start_n in tl.range(lo, hi, BLOCK_N):
            cols = start_n + offs_n
            # V's load before the scores: Triton's pipeliner then gives a stage's K and V one
            # barrier (loaded after them, V gets its own: a second wait each block)
            v = _tile(v_base, start_n, stride_vn, offs_n, offs_d, n_kv, b, hk, BLOCK_N, EVEN_N,
                      UPCAST, TMA)
            qk = _scores(q, q2, k_base, start_n, stride_kn, offs_n, offs_d, offs_e, n_kv, b, hk,
                         cap_in, BLOCK_N, EVEN_N, UPCAST, TMA, QK_EXTRA, SOFTCAP)
            if MASK:  # the diagonal band: causal mask (query row + delta sees keys <= it)
                qk = tl.where(offs_m[:, None] + delta >= cols[None, :], qk, float("-inf"))
                if LOCAL:
                    qk = tl.where(offs_m[:, None] + delta - cols[None, :] < window, qk,
                                  float("-inf"))
            if not EVEN_N:
                qk = tl.where(cols[None, :] < n_kv, qk, float("-inf"))
            if HAS_KEEP:
                kept = tl.load(keep_row + cols, mask=cols < n_kv, other=0) != 0
                qk = tl.where(kept[None, :], qk, float("-inf"))
            acc, l_i, m_i = _update(acc, l_i, m_i, qk, v, qk_scale, EMPTY_ROWS)
        return acc, l_i, m_i

    @triton.jit
    def _inner_fixed_max(acc, l_i, m_ref, q, q2, k_base, v_base, stride_kn, stride_vn, offs_n,
                         offs_d, offs_e, lo, hi, n_kv, qk_scale, b, hk, BLOCK_N: tl.constexpr,
                         UPCAST: tl.constexpr, TMA: tl.constexpr, QK_EXTRA: tl.constexpr,
                         cap_in, SOFTCAP: tl.constexpr):
        # The sweep over whole blocks with the max held where the first block left it (m_ref):
        # no rescale of acc per block (BLOCK_M x D multiplies and an exp2 a row saved each
        # time). p = exp2(score - m_ref) may pass 1; the largest scaled score seen (m_seen)
        # tells the caller whether it stayed small enough.
        m_seen = m_ref
        for start_n in tl.range(lo, hi, BLOCK_N):
            v = _tile(v_base, start_n, stride_vn, offs_n, offs_d, n_kv, b, hk, BLOCK_N, True,
                      UPCAST, TMA)  # before the scores, as in _inner
            qk = _scores(q, q2, k_base, start_n, stride_kn, offs_n, offs_d, offs_e, n_kv, b, hk,
                         cap_in, BLOCK_N, True, UPCAST, TMA, QK_EXTRA, SOFTCAP)
            m_seen = tl.maximum(m_seen, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_ref[:, None])
            l_i += tl.sum(p, 1)
            acc = tl.dot(p.to(v.dtype), v, acc)
        return acc, l_i, m_seen

    @triton.jit
    def flash_fwd(Q, K, V, O, LSE, KEEP, SINKS, sm_scale, softcap,
                  sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som, skeep,
                  H, GROUP, n_q, n_kv, window,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, EVEN_N: tl.constexpr, UPCAST: tl.constexpr,
                  TMA: tl.constexpr, FIXED_MAX: tl.constexpr, Q_REG: tl.constexpr,
                  LOCAL: tl.constexpr, QK_EXTRA: tl.constexpr, HAS_KEEP: tl.constexpr,
                  HAS_SINK: tl.constexpr, SOFTCAP: tl.constexpr):
        # TMA: Q, K, V, O are (B, H, N, D) tensor descriptors and tiles move by Hopper's tensor
        # memory accelerator; otherwise they are pointers and tiles move by loads of addresses.
        # FIXED_MAX: the whole blocks after the first with the first block's max.
        # Q_REG: the Q tile held in registers for Q K^T (else the compiler reads it from shared
        # memory at every block). LOCAL (causal only, FIXED_MAX off): each query sees its last
        # ``window`` keys; the blocks before the tile's first window are skipped.
        # QK_EXTRA (by addresses only): q and k are HEAD_DIM + QK_EXTRA wide, v and O HEAD_DIM.
        # HAS_KEEP (FIXED_MAX off): KEEP (B, Lkv) says which keys each batch row attends to.
        # With either mask a row may see no key: EMPTY_ROWS, and such a row's O is zeros.
        # HAS_SINK: SINKS (H,) fp32, a logit a head that every row's sum starts from.
        # SOFTCAP: every scaled score s is softcap * tanh(s / softcap) (softcapped())
        start_m = tl.program_id(0)
        if CAUSAL:  # the longest tiles (last queries, most keys) first, the shortest in the tail
            start_m = tl.num_programs(0) - 1 - start_m
        bh = tl.program_id(1)
        b, h = bh // H, bh % H
        hk = h // GROUP                                  # the K/V head this query head reads
        keep_row = KEEP + b.to(tl.int64) * skeep         # its batch row's kept keys
        EMPTY_ROWS: tl.constexpr = LOCAL or HAS_KEEP
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        offs_e = offs_d                                  # q and k's extra dims, if any
        if QK_EXTRA:
            offs_e = tl.arange(0, QK_EXTRA)
        if TMA:
            q = Q.load([b, h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
            q2 = q
            k_base, v_base = K, V
        else:
            q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
            k_base = K + b.to(tl.int64) * skb + hk.to(tl.int64) * skh
            v_base = V + b.to(tl.int64) * svb + hk.to(tl.int64) * svh
            q = tl.load(q_base + offs_m[:, None] * sqm + offs_d[None, :],
                        mask=offs_m[:, None] < n_q, other=0.0)   # read the Q tile once
            q2 = q
            if QK_EXTRA:
                q2 = tl.load(q_base + HEAD_DIM + offs_m[:, None] * sqm + offs_e[None, :],
                             mask=offs_m[:, None] < n_q, other=0.0)
        out_dtype = q.dtype                              # O's, as Q's before any upcast
        if UPCAST:
            q, q2 = q.to(tl.float32), q2.to(tl.float32)
        if Q_REG:  # a computed q is a register operand. Halving is exact (a power of two; in
            q, q2 = q * 0.5, q2 * 0.5  # fp16 below 2^-13 it drops the last bit); qk_scale doubles
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        if HAS_SINK:  # the sink's term, exp(sink - max), is the sum's first: no value vector
            m_i = tl.full([BLOCK_M], 1.0, tl.float32) * tl.load(SINKS + h) * 1.4426950408889634
            l_i = l_i + 1.0
        m_0, l_0 = m_i, l_i
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        qk_scale = sm_scale * 1.4426950408889634         # fold log2(e) in: exp2 is cheaper
        if Q_REG:
            qk_scale = qk_scale * 2.0
        cap_in = qk_scale * 0.6931471805599453 / softcap  # the raw scores' scale over the cap
        delta = n_kv - n_q                               # causal: queries are the last n_q
        if CAUSAL:  # blocks fully left of the diagonal need no mask; the band across it does
            full_hi = tl.maximum(((start_m * BLOCK_M + delta) // BLOCK_N) * BLOCK_N, 0)
            hi = tl.minimum((start_m + 1) * BLOCK_M + delta, n_kv)
        else:       # whole blocks need no mask; a ragged last one does
            full_hi = (n_kv // BLOCK_N) * BLOCK_N
            hi = n_kv
        lo = 0
        if LOCAL:  # the band across the window's edge: from the first key the tile's first
            # query sees to the first every query of the tile sees
            lo = (tl.maximum(start_m * BLOCK_M + delta - window + 1, 0) // BLOCK_N) * BLOCK_N
            edge = tl.maximum((start_m + 1) * BLOCK_M + delta - window, 0)
            mid = tl.minimum(tl.maximum(tl.cdiv(edge, BLOCK_N) * BLOCK_N, lo), full_hi)
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, q2, k_base, v_base, skn, svn, offs_m,
                                   offs_n, offs_d, offs_e, lo, mid, n_kv, delta, qk_scale, b, hk,
                                   BLOCK_N, True, True, UPCAST, TMA, QK_EXTRA, window, True,
                                   keep_row, HAS_KEEP, True, cap_in, SOFTCAP)
            lo = mid
        first = full_hi               # the whole blocks with a running max: all of them, or
        if FIXED_MAX:                 # the first alone, which sets the max the rest keep
            first = tl.minimum(full_hi, BLOCK_N)
        acc, l_i, m_i = _inner(acc, l_i, m_i, q, q2, k_base, v_base, skn, svn, offs_m, offs_n,
                               offs_d, offs_e, lo, first, n_kv, delta, qk_scale, b, hk, BLOCK_N,
                               False, True, UPCAST, TMA, QK_EXTRA, 0, False, keep_row, HAS_KEEP,
                               EMPTY_ROWS, cap_in, SOFTCAP)
        if FIXED_MAX:
            acc_f, l_f, m_seen = _inner_fixed_max(acc, l_i, m_i, q, q2, k_base, v_base, skn,
                                                  svn, offs_n, offs_d, offs_e, first, full_hi,
                                                  n_kv, qk_scale, b, hk, BLOCK_N, UPCAST, TMA,
                                                  QK_EXTRA, cap_in, SOFTCAP)
            grew = tl.where(m_i == float("-inf"), 0.0, m_seen - m_i)
            if tl.max(grew, 0) > 15.0:  # some p passed 2^15 (fp16 ends at 65504): redo the
                # sweep with a running max (that tile then costs two sweeps)
                acc, l_i, m_i = _inner(tl.zeros([BLOCK_M, HEAD_DIM], tl.float32), l_0, m_0, q, q2,
                                       k_base, v_base, skn, svn, offs_m, offs_n, offs_d,
                                       offs_e, 0, full_hi, n_kv, delta, qk_scale, b, hk,
                                       BLOCK_N, False, True, UPCAST, TMA, QK_EXTRA,
                                       cap_in=cap_in, SOFTCAP=SOFTCAP)
            else:
                acc, l_i = acc_f, l_f
        acc, l_i, m_i = _inner(acc, l_i, m_i, q, q2, k_base, v_base, skn, svn, offs_m, offs_n,
                               offs_d, offs_e, full_hi, hi, n_kv, delta, qk_scale, b, hk, BLOCK_N,
                               CAUSAL, EVEN_N, UPCAST, TMA, QK_EXTRA, window, LOCAL, keep_row,
                               HAS_KEEP, EMPTY_ROWS, cap_in, SOFTCAP)
        if EMPTY_ROWS:  # a row that saw no key: O zeros, LSE -inf
            acc = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
            lse = tl.where(l_i > 0, (m_i + tl.math.log2(l_i)) * 0.6931471805599453,
                           float("-inf"))
        else:
            acc = acc / l_i[:, None]
            lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # back to natural log
        tl.store(LSE + bh.to(tl.int64) * n_q + offs_m, lse, mask=offs_m < n_q)
        if TMA:  # rows past n_q are clipped by the descriptor
            O.store([b, h, start_m * BLOCK_M, 0],
                    acc.to(out_dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))
        else:
            o_base = O + b.to(tl.int64) * sob + h.to(tl.int64) * soh
            tl.store(o_base + offs_m[:, None] * som + offs_d[None, :],
                     acc.to(O.dtype.element_ty), mask=offs_m[:, None] < n_q)  # the O tile, once


# --- 3. the launcher -------------------------------------------------------------------------
def config(head_dim: int, causal: bool) -> dict:
    """Tiles, pipeline depth and flags, by head dim (searched on the H200; the search and its
    figures: docs/kernels/flash_attention.md).

    | head_dim | BLOCK_M x BLOCK_N | stages | TMA | FIXED_MAX | Q_REG |
    | 16, 32   | 64 x 64           | 3      | -   | -         | -     |
    | 64       | 64 x 64           | 3      | yes | -         | yes   |
    | 128      | 64 x 32           | 4      | yes | yes       | yes   |
    | 256      | 64 x 32           | 3      | yes | yes       | yes   |

    Why: Triton waits on every tensor-core group at once, so the matmuls and the softmax overlap
    only between programs sharing an SM: tiles are sized for three or four programs an SM.
    Q in registers (Q_REG) spares Q K^T a shared-memory read; 32-key blocks leave the registers
    it needs above 64. Holding the first block's max (FIXED_MAX) drops a rescale a block, which
    pays where the accumulator is wide (head_dim > 64)."""
    if INTERPRET:
        return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    c = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "TMA": head_dim >= 64,
         "FIXED_MAX": head_dim > 64, "Q_REG": head_dim >= 64}
    if head_dim > 64:  # 32-key blocks leave registers for Q (see above)
        c.update(BLOCK_N=32, num_stages=4 if head_dim == 128 else 3)
    return c


# GPUs with less shared memory than the H200 (a T4 has 64 KB per SM) get smaller tiles, in order
SMALL_SMEM = [{"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2},
              {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1},
              {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}]


def tma_ok(*tensors) -> bool:
    """Whether Hopper's tensor memory accelerator can move these tiles: a GPU of compute
    capability 9 or later (or the interpreter), 16-byte aligned addresses and strides, none
    of them 0 (a broadcast) where the dim is longer than one."""
    if not INTERPRET and not (torch.cuda.is_available() and
                              torch.cuda.get_device_capability()[0] >= 9):
        return False
    return all(t.data_ptr() % 16 == 0 and all(s * t.element_size() % 16 == 0 and (s or n == 1)
                                              for s, n in zip(t.stride()[:-1], t.shape))
               for t in tensors)


def descriptor(t, rows: int):
    """A TMA descriptor of (B, H, N, D) ``t``, tiles of one head's ``rows`` rows x D (rows past
    N load as zeros)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, t.shape[-1]])


def descriptors(q, k, v, o, block_m: int, block_n: int) -> tuple:
    """(B, H, N, D) descriptors of q, k, v, o, tiles of one head's BLOCK rows x D."""
    return (descriptor(q, block_m), descriptor(k, block_n), descriptor(v, block_n),
            descriptor(o, block_m))


def resolved(cfg: dict, tma_possible: bool) -> tuple[int, int, dict, dict]:
    """(BLOCK_M, BLOCK_N, the kernel's flags, Triton's options) of a config: TMA where the
    tensors allow it."""
    c = dict(cfg)
    bm, bn = c.pop("BLOCK_M"), c.pop("BLOCK_N")
    flags = {"TMA": c.pop("TMA", False) and tma_possible, "FIXED_MAX": c.pop("FIXED_MAX", False),
             "Q_REG": c.pop("Q_REG", False)}
    return bm, bn, flags, c  # what is left: num_warps, num_stages, maxnreg, ...


def flash_attention(q, k, v, causal: bool = False, scale: float | None = None,
                    cfg: dict | None = None, out: torch.Tensor | None = None,
                    window: int | None = None, keep: torch.Tensor | None = None,
                    sinks: torch.Tensor | None = None, softcap: float = 0.0):
    """(O, LSE): O (B, H, Lq, Dv) in q's dtype; LSE (B, H, Lq) fp32, natural log. ``cfg`` (a
    dict, {} for config()'s) runs this module's Triton kernel; without it, a Gluon kernel runs
    where routing.which() picks one. ``window`` (causal only): each query sees its last ``window``
    keys. ``keep``: None, or (B, Lkv) bool, the keys each batch row attends to (a padded
    batch); a query that sees no key gets zeros (LSE -inf). ``sinks``: None, or (H,) a logit a
    head in every softmax's denominator (attention sinks). ``softcap`` > 0: every score s is
    softcap * tanh(s / softcap). q and k may be wider than v (inputs.dims_error)."""
    if triton is None:
        raise RuntimeError(TRITON_MISSING)
    q, k, v = checked(q, k, v, causal, "flash_attention")
    if scale is not None and not scale > 0:  # the kernel takes the running max of unscaled scores
        raise ValueError(f"scale must be positive (got {scale})")
    softcap = cap(softcap)
    if window is not None and not (causal and window >= 1):
        raise ValueError(f"a window takes causal attention and at least 1 key (got {window})")
    b, h, n_q, d_qk = q.shape
    _, hkv, n_kv, _ = k.shape
    d, extra = v.shape[-1], d_qk - v.shape[-1]  # the kernel's HEAD_DIM is v's
    if out is not None and (out.shape != (b, h, n_q, d) or out.device != q.device):
        raise ValueError(f"out is ({b}, {h}, {n_q}, {d}) on {q.device}, got "
                         f"{tuple(out.shape)} on {out.device}")
    window = local(window, n_kv)
    keep, sinks = kept(keep, b, n_kv), sink_logits(sinks, h)
    plain = window is None and keep is None and sinks is None and not softcap
    if cfg is None and plain:  # on Hopper, a Gluon kernel where routing.which() picks one
        done = routing.gluon(q, k, v, causal, scale, out)
        if done is not None:
            return done
    o = q.new_empty(b, h, n_q, d) if out is None else out
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    configs = [cfg] if cfg else [config(d, causal), *SMALL_SMEM]
    for i, chosen in enumerate(configs):
        bm, bn, flags, options = resolved(chosen, o.dtype == q.dtype and not extra
                                          and tma_ok(q, k, v, o))
        if window is not None or keep is not None:  # the fixed max assumes every row sees
            flags["FIXED_MAX"] = False  # the first key
        try:
            flash_fwd[(-(-n_q // bm), b * h)](
                *(descriptors(q, k, v, o, bm, bn) if flags["TMA"] else (q, k, v, o)),
                lse, lse if keep is None else keep, lse if sinks is None else sinks,
                scale if scale is not None else d_qk ** -0.5, softcap or 1.0,
                q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                0 if keep is None else keep.stride(0),
                h, h // hkv, n_q, n_kv, window or 0, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                CAUSAL=causal, EVEN_N=n_kv % bn == 0,
                UPCAST=INTERPRET and q.dtype == torch.bfloat16, LOCAL=window is not None,
                QK_EXTRA=extra, HAS_KEEP=keep is not None, HAS_SINK=sinks is not None,
                SOFTCAP=bool(softcap),
                **flags, **options)
            return o, lse
        except triton.runtime.errors.OutOfResources:
            if i == len(configs) - 1:  # even the smallest tiles do not fit this GPU
                raise


# --- 4. the cost -----------------------------------------------------------------------------
def cost(b, h, n_q, n_kv, d, hkv=None, dtype="fp16", causal=False, window=None,
         v_dim=None) -> C.Cost:
    """What this kernel must do: the causal (and windowed) count when causal (it skips masked
    blocks); bytes are fused-ideal (Q, K, V read once, O written once; the LSE is B*H*Lq*4
    more). ``v_dim``: v's head dim where q and k are wider (d)."""
    c = C.attention(b, h, n_q, n_kv, d, hkv, dtype, causal=causal, window=window, v_dim=v_dim)
    return C.Cost("flash attention (triton)", c.macs, c.flops, c.bytes_fused + 4 * b * h * n_q,
                  c.bytes_fused + 4 * b * h * n_q)


# --- 5. the check ----------------------------------------------------------------------------
def errors(b, h, n_q, n_kv, d, hkv=None, dtype=torch.float16, causal=False, device="cuda",
           seed=0, kernel=None, window=None, v_dim=None) -> dict:
    """Error of the kernel and of PyTorch's own low-precision attention against fp64, on fresh
    random inputs (relative Frobenius norm), plus the LSE error and whether every output was
    written (outputs are poisoned with NaN first). ``kernel(q, k, v, causal) -> (O, LSE)``
    checks another kernel of the same contract (flash_decoding's)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    hkv = hkv or h
    mk = lambda heads, n, dim=d: torch.randn(b, heads, n, dim,  # noqa: E731
                                             generator=g).to(device, dtype)
    q, k, v = mk(h, n_q), mk(hkv, n_kv), mk(hkv, n_kv, v_dim or d)
    ref = standard_attention(q.double(), k.double(), v.double(), causal, window=window)
    torch_lp = standard_attention(q, k, v, causal, window=window)
    o, lse = (kernel(q, k, v, causal) if kernel else
              flash_attention(q, k, v, causal, window=window, out=torch.full(
                  (b, h, n_q, v.shape[-1]), float("nan"), device=device, dtype=dtype)))
    rep = h // hkv
    s = (q.double() @ k.double().repeat_interleave(rep, 1).transpose(-2, -1)) * d ** -0.5
    if causal:
        s = s.masked_fill(~seen(n_q, n_kv, window, device), float("-inf"))
    lse_ref = torch.logsumexp(s, dim=-1)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    return {"triton_rel_err": rel(o), "torch_rel_err": rel(torch_lp),
            "lse_max_abs_err": float((lse.double() - lse_ref).abs().max()),
            "all_finite": bool(torch.isfinite(o).all() and torch.isfinite(lse).all())}


def tflops(c: C.Cost, seconds: float) -> float:
    return c.flops / seconds / 1e12 if seconds > 0 else math.nan
