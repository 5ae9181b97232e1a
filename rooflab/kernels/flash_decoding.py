"""Flash-decoding in Triton: a few queries against a long KV cache, the cache split across programs.

At decode a (batch, KV head) pair has one query per head of its group (GQA) and thousands of keys.
FlashAttention's grid (one program per query tile) would give the GPU B*H programs, each walking
the whole cache alone: too few to keep HBM busy. Here the cache is cut into runs of key blocks;
a program reads each block of K and V exactly once for all the query heads that share it, and
leaves a partial softmax (its output and log-sum-exp) per head it touched. A second, small kernel
merges the partials of each query row: O = sum_s w_s O_s / sum_s w_s, w_s = exp(lse_s - max lse),
one row a program or, with many (batch, KV head) pairs, a tile of rows a program (merge_rows).
On Hopper and later the merge is launched while the first kernel runs (programmatic dependent
launch) and waits inside for its partials: on the H200 up to 2.3 us faster where the cache is
long or the batch large, no change below 8k cached tokens (h200_kernels_decode_pdl.json).
Where a head is cut into two runs, the second of its programs to finish (told by an atomic count,
which it sets back to 0) merges them itself and no merge kernel runs: on the H200 0.2-0.6 us
faster from 2k to 16k keys at B=8 (h200_kernels_decode_ab_tma_rule.json). With more runs a head
it lost: +0.9 to +3.5 us at the lab's decode shapes, +13 us with one sequence, whose few last
programs merge alone (h200_kernels_decode_merge_variants.json), +4.5 us with one sequence of 4k
in 16 runs a head (h200_kernels_decode_ab_tma_last.json).

How the work is cut (the launcher's schedule): every head's key blocks laid end to end, then cut
into one equal run per program, a run crossing from one head to the next where it must (as
stream-K cuts a GEMM), so that every program has the same work; the launcher picks a count of
programs that cuts every head alike (aligned). Where every (batch, KV head) pair
can have a program of its own in one wave, and they either fill the SMs or a head's cache is
short (8 blocks or fewer), each program takes one whole head instead and writes its answer
itself: no partials, no merge kernel. On the H200 (h200_kernels_decode_search.json) that took
125.8 us at 512 heads of head_dim 64 and 4096 keys (the even cut 132.9) and 10.4 us at the
lab's 512 cached tokens (the cut 11.0); at 1024 (16 blocks a head, 64 heads) the cut was faster,
14.2 against 15.6 us. Where the heads need two waves it is not a rule: at B=64 x 8 KV heads of
head_dim 128 whole heads took 239-270 us by pipeline depth, the even cut 245.

Read in order: the reference, the kernels, the launcher (the schedule), the cost, the check.
Shapes: q (B, H, Lq, D) with Lq small (1-16), k and v (B, Hkv, Lkv, D), Hkv dividing H; the
queries are the last Lq of Lkv positions when causal.
"""
from __future__ import annotations

import os

import torch

from rooflab import cost as C
from rooflab.kernels import flash_attention as FA
from rooflab.kernels.flash_attention import checked, standard_attention  # reference, checks

try:
    import triton
    import triton.language as tl
except ImportError as _e:  # pragma: no cover - exercised where Triton is missing
    triton = None
    TRITON_MISSING = f"Triton is not installed ({_e}); pip install 'rooflab[triton]'"

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
MAX_ROWS = 128  # query heads per KV head x query positions, held by one program

__all__ = ["standard_attention", "flash_decode", "schedule", "cost", "errors"]

if triton is not None:
    @triton.jit
    def partial_softmax(Q, K, V, O_PART, LSE_PART, bhk, slot, max_slots, lo, hi, qk_scale,
                        sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som, HKV, GROUP,
                        n_q, n_kv, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                        WHOLE: tl.constexpr, TMA: tl.constexpr):
        # One (batch, KV head) = bhk (int64), keys [lo, hi): its partial goes to ``slot``.
        # WHOLE: [lo, hi) is the head's whole cache, so the partial is the answer: O_PART and
        # LSE_PART are then O and LSE themselves, written in their final form (no merge).
        b, hk = bhk // HKV, bhk % HKV
        rows = tl.arange(0, BLOCK_M)                     # row r = (head g of the group, query i)
        g, i = rows // n_q, rows % n_q
        valid = rows < GROUP * n_q
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + b * sqb + (hk * GROUP + g)[:, None] * sqh + i[:, None] * sqm
                    + offs_d[None, :], mask=valid[:, None], other=0.0)  # the group's queries
        if UPCAST:  # the CPU interpreter's bf16 dot is wrong; CI checks the algorithm in fp32
            q = q.to(tl.float32)
        if not TMA:
            k_base = K + b * skb + hk * skh
            v_base = V + b * svb + hk * svh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        last_key = n_kv - n_q + i                        # causal: row i sees keys <= this
        for start in range(lo, hi, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            inside = cols < hi
            if TMA:  # K and V are (B, Hkv, Lkv, D) descriptors: keys past Lkv load as 0
                at = [b.to(tl.int32), hk.to(tl.int32), tl.cast(start, tl.int32), 0]
                k = K.load(at).reshape(BLOCK_N, HEAD_DIM)
                v = V.load(at).reshape(BLOCK_N, HEAD_DIM)
            else:
                k = tl.load(k_base + cols[:, None] * skn + offs_d[None, :],
                            mask=inside[:, None], other=0.0)  # this block of K: read once
                v = tl.load(v_base + cols[:, None] * svn + offs_d[None, :],
                            mask=inside[:, None], other=0.0)  # and of V
            if UPCAST:
                k = k.to(tl.float32)
                v = v.to(tl.float32)
            qk = tl.dot(q, tl.trans(k)) * qk_scale       # scores in log2 units
            keep = inside[None, :]
            if CAUSAL:
                keep = keep & (cols[None, :] <= last_key[:, None])
            qk = tl.where(keep, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing seen yet
            p = tl.math.exp2(qk - m_ref[:, None])
            alpha = tl.math.exp2(m_i - m_ref)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        seen = l_i > 0                                   # causal rows may see no key of a range
        acc = acc / tl.where(seen, l_i, 1.0)[:, None]
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
        if WHOLE:  # every row saw its keys: the final O (in O's dtype) and LSE (natural log)
            head = hk * GROUP + g
            tl.store(LSE_PART + (b * HKV * GROUP + head) * n_q + i, lse * 0.6931471805599453,
                     mask=valid)
            tl.store(O_PART + b * sob + head[:, None] * soh + i[:, None] * som + offs_d[None, :],
                     acc.to(O_PART.dtype.element_ty), mask=valid[:, None])
        else:
            part = (bhk * max_slots + slot) * BLOCK_M + rows
            tl.store(LSE_PART + part, lse, mask=valid)   # partials: fp32, a few KB in all
            tl.store(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], acc,
                     mask=valid[:, None])

    @triton.jit
    def split_kv_fwd(Q, K, V, O_PART, LSE_PART, O, LSE, ARRIVED, qk_scale,
                     sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
                     HKV, GROUP, n_q, n_kv, n_blocks, per_program, total_blocks, max_slots,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PDL: tl.constexpr,
                     WHOLE: tl.constexpr, TMA: tl.constexpr, LAST_MERGES: tl.constexpr):
        # Every (batch, KV head)'s key blocks laid end to end; program p takes the blocks
        # [p * per_program, (p + 1) * per_program), crossing from one head to the next where
        # its range does, and leaves one partial per head it touched (slot 0 is the head's
        # first program). Every program gets the same work, whatever B * Hkv is. WHOLE: every
        # run is whole heads (blocks per program a multiple of a head's), each written final.
        # LAST_MERGES: the last program to finish a head (counted in ARRIVED) merges its
        # partials into O and LSE and sets the count back to 0: no second kernel.
        if PDL:
            tl.extra.cuda.gdc_launch_dependents()        # the merge may start launching now
        pid = tl.program_id(0)
        start = pid * per_program
        end = tl.minimum(start + per_program, total_blocks)
        for head in range(start // n_blocks, (end - 1) // n_blocks + 1):
            bhk = head + tl.zeros([], tl.int64)          # 64-bit offsets from here on
            lo = tl.maximum(start, bhk * n_blocks) - bhk * n_blocks
            hi = tl.minimum(end, (bhk + 1) * n_blocks) - bhk * n_blocks
            partial_softmax(Q, K, V, O_PART, LSE_PART, bhk, pid - (bhk * n_blocks) // per_program,
                            max_slots, lo * BLOCK_N, tl.minimum(hi * BLOCK_N, n_kv), qk_scale,
                            sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som, HKV,
                            GROUP, n_q, n_kv, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, UPCAST, WHOLE,
                            TMA)
            if LAST_MERGES:
                tl.debug_barrier()                       # every store of the partial, then
                arrived = tl.atomic_add(ARRIVED + bhk, 1, sem="acq_rel")  # publish and count
                first = (bhk * n_blocks) // per_program
                if arrived == ((bhk + 1) * n_blocks - 1) // per_program - first:  # the last
                    tl.atomic_xchg(ARRIVED + bhk, 0)
                    _merge_rows(O_PART, LSE_PART, O, LSE, bhk, tl.arange(0, BLOCK_M), sob, soh,
                                som, HKV, GROUP, n_q, n_blocks, per_program, max_slots,
                                HEAD_DIM, BLOCK_M, BLOCK_M)

    @triton.jit
    def merge_splits(O_PART, LSE_PART, O, LSE, sob, soh, som, H, GROUP, n_q, n_blocks,
                     per_program, max_slots, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     SLOTS: tl.constexpr, PDL: tl.constexpr):
        row = tl.program_id(0)                           # one query row of one head
        bh = row // n_q
        i = row % n_q
        b, h = bh // H, bh % H
        bhk = (b * (H // GROUP) + h // GROUP).to(tl.int64)
        r = (h % GROUP) * n_q + i
        used = ((bhk + 1) * n_blocks - 1) // per_program - (bhk * n_blocks) // per_program + 1
        s = tl.arange(0, SLOTS)
        offs_d = tl.arange(0, HEAD_DIM)
        part = (bhk * max_slots + s) * BLOCK_M + r
        if PDL:
            tl.extra.cuda.gdc_wait()                     # until the partials are all written
        lse = tl.load(LSE_PART + part, mask=s < used, other=float("-inf"))
        m = tl.max(lse, 0)                               # every row sees a key somewhere
        w = tl.math.exp2(lse - m)                        # empty slots weigh exp2(-inf) = 0
        o = tl.load(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=(s < used)[:, None], other=0.0)
        total = tl.sum(w, 0)
        out = tl.sum(o * w[:, None], 0) / total
        tl.store(LSE + row, (m + tl.math.log2(total)) * 0.6931471805599453)  # natural log
        tl.store(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + i * som + offs_d,
                 out.to(O.dtype.element_ty))

    @triton.jit
    def _slot(O_PART, LSE_PART, bhk, s, max_slots, used, r, valid, offs_d,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
        # slot s's partial of rows r: (LSE (log2), O); a slot past the head's last, -inf and 0
        part = (bhk * max_slots + s) * BLOCK_M + r
        keep = valid & (r * 0 + s < used)                # s as a row vector: a mask
        lse = tl.load(LSE_PART + part, mask=keep, other=float("-inf"))
        o = tl.load(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], mask=keep[:, None],
                    other=0.0)
        return lse, o

    @triton.jit
    def _merge_rows(O_PART, LSE_PART, O, LSE, bhk, r, sob, soh, som, HKV, GROUP, n_q, n_blocks,
                    per_program, max_slots, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    ROWS: tl.constexpr):
        # rows r of one (batch, KV head) (head g of the group, query i): their partials merged
        # four slots at a time, each row's weights in its own threads (no reduction across
        # threads), every slot's rows read as one contiguous tile
        valid = r < GROUP * n_q
        b, g, i = bhk // HKV, r // n_q, r % n_q
        head = (bhk % HKV) * GROUP + g
        first = (bhk * n_blocks) // per_program
        used = ((bhk + 1) * n_blocks - 1) // per_program - first + 1
        offs_d = tl.arange(0, HEAD_DIM)
        m = tl.full([ROWS], float("-inf"), tl.float32)
        total = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, HEAD_DIM], tl.float32)
        for s in range(0, used, 4):  # four slots' loads in flight at once, then merged
            lse0, o0 = _slot(O_PART, LSE_PART, bhk, s, max_slots, used, r, valid, offs_d,
                             HEAD_DIM, BLOCK_M)
            lse1, o1 = _slot(O_PART, LSE_PART, bhk, s + 1, max_slots, used, r, valid, offs_d,
                             HEAD_DIM, BLOCK_M)
            lse2, o2 = _slot(O_PART, LSE_PART, bhk, s + 2, max_slots, used, r, valid, offs_d,
                             HEAD_DIM, BLOCK_M)
            lse3, o3 = _slot(O_PART, LSE_PART, bhk, s + 3, max_slots, used, r, valid, offs_d,
                             HEAD_DIM, BLOCK_M)
            m_new = tl.maximum(tl.maximum(m, tl.maximum(lse0, lse1)), tl.maximum(lse2, lse3))
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet
            alpha = tl.math.exp2(m - m_ref)
            w0, w1 = tl.math.exp2(lse0 - m_ref), tl.math.exp2(lse1 - m_ref)  # an empty slot
            w2, w3 = tl.math.exp2(lse2 - m_ref), tl.math.exp2(lse3 - m_ref)  # weighs 0
            total = total * alpha + w0 + w1 + w2 + w3
            acc = (acc * alpha[:, None] + o0 * w0[:, None] + o1 * w1[:, None]
                   + o2 * w2[:, None] + o3 * w3[:, None])
            m = m_new
        tl.store(LSE + (b * HKV * GROUP + head) * n_q + i,  # every row sees a key somewhere
                 (m + tl.math.log2(total)) * 0.6931471805599453, mask=valid)  # natural log
        tl.store(O + b * sob + head[:, None] * soh + i[:, None] * som + offs_d[None, :],
                 (acc / total[:, None]).to(O.dtype.element_ty), mask=valid[:, None])

    @triton.jit
    def merge_tiles(O_PART, LSE_PART, O, LSE, sob, soh, som, HKV, GROUP, n_q, n_blocks,
                    per_program, max_slots, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    ROWS: tl.constexpr, PDL: tl.constexpr):
        # one (batch, KV head) and ROWS of its rows a program
        if PDL:
            tl.extra.cuda.gdc_wait()                     # until the partials are all written
        _merge_rows(O_PART, LSE_PART, O, LSE, tl.program_id(0).to(tl.int64),
                    tl.program_id(1) * ROWS + tl.arange(0, ROWS), sob, soh, som, HKV, GROUP,
                    n_q, n_blocks, per_program, max_slots, HEAD_DIM, BLOCK_M, ROWS)


# --- the launcher ----------------------------------------------------------------------------
SHORT_CACHE = 512  # keys a head or fewer: blocks of 128 keys where few rows (see config)
MANY_PAIRS = 64    # (batch, KV head) pairs from which longer caches take 128 keys a step too,
                   # and the merge kernel takes tiles of rows (merge_rows)


def config(head_dim: int, n_kv: int | None = None, rows: int = 1, heads: int = 1) -> dict:
    """Keys per loop step, warps, pipeline depth and TMA (K and V by Hopper's tensor memory
    accelerator, where the GPU has one and the tensors are aligned) for a head_dim and, given
    the shape, when to take 128 keys a step instead of 64: with at most 16 rows (heads per KV
    head x queries) and head_dim 128 or less, either a short cache (SHORT_CACHE keys or fewer)
    with one (batch, KV head) pair an SM or fewer, as cuDNN's kernel takes them there (Nsight
    Compute: a 16x128x128 tile, 64 CTAs of 128 threads, h200_ncu_decode_q1_512.txt), or a
    longer one at head_dim 128 with MANY_PAIRS pairs or more (one program an SM).

    On the H200, in one run at 15 shapes (h200_kernels_decode_ab_tma_last.json), TMA took up to
    0.7 us off, or was within 0.3 us at 3 (0.3-1.9 us off at all 7 of the rule's run,
    h200_kernels_decode_ab_tma_rule.json); 128 keys a step from 1k keys at B=8 and 64 took
    0.3-3.9 us off, and the rule leaves out where it lost: one sequence (8 pairs; 11.3 against
    10.8 us at 4k), 16 queries a head (43.3 against 39.9), head_dim 64 with 512 pairs (128.4
    against 124.4). At 512 keys 128 a step had taken 10.3 us to 9.6 (cuDNN 8.9), and with one
    sequence 9.5 to 8.5; there it also lost with 16 queries a head (15.7 against 12.1) and at
    B=64 (41.2 against 36.4; h200_kernels_decode_ab_n128.json, h200_kernels_decode_ab_rule.json).
    Earlier searches (blocks of 16-128 keys, 2-8 stages, whole heads or 1-3 programs per SM)
    found nothing 3% faster at 7 shapes (h200_kernels_decode_pipeline_search.json).

    What limits it: with one query a head it runs at the rate of a read of the same bytes or
    faster (torch's sum: 36.1 us at B=8 and 4k keys against the kernel's 35.1; at 512, 10.2
    against 9.0); where the bytes are few that rate is far below the copy ceiling (one sequence
    of 4k: 16.8 MB, 10.5 us to read, 0.37 of it). At 512 cached tokens cuDNN took 8.9-9.0 us
    against our 8.9-9.0 (h200_kernels.json, h200_kernels_decode_ab_tma_rule.json): both launch 64
    programs, one a head, that walk 4 blocks of 128 keys each, and Nsight Compute times them
    alike (10.18 us against cuDNN's 10.05, 1.66 and 1.68 TB/s, one warp a scheduler idle 86% and
    78% of cycles; h200_ncu_decode_q1_512_tma.txt, h200_ncu_cudnn_q1_512_rerun.txt). Not the
    launch: an empty kernel takes 0.6 us in this timing. Spread over more SMs the same 16.8 MB
    read faster (a plain Triton read by address, 32 KB a step: 15.0 us by 64 programs, 9.2 by
    128, 6.7 by 256; h200_kernels_read_floor.json), but a head cut in two needs a merge, and
    cutting the heads in two (128 programs, merged by the last of each or by the merge kernel)
    took 10.5-10.8 us. Tried there too and left: 8 warps 9.4,
    4 stages 9.3, blocks of 64 in 6 stages 11.2 (h200_kernels_decode_ab_tma.json), 2 warps 11.2,
    2 stages 11.9, 256 keys a step 11.6-11.8 (h200_kernels_decode_ab_512_tma.json), asking L2
    for a run's later blocks as it starts (prefetch.global.L2 a 128-byte line; not kept) 10.9,
    1.12-1.35x slower at all 7 shapes tried (h200_kernels_decode_ab_prefetch.json); a cluster
    of 2 CTAs a program (num_ctas=2, to spread a head over two SMs) does not compile in Triton
    3.6 (h200_kernels_decode_ab_ctas.json); before TMA,
    cutting the heads again, 32 keys a block in 4 stages or 128 in 2 stages of 8 warps took
    10.7-12.9 us there (h200_kernels_decode_ab_short_cache.json).
    With 16 a head, Nsight Compute timed this kernel at 38.8 us (3.55 TB/s) at B=8 and 4k
    keys and the one-row merge after it at 15.6 (h200_ncu_decode_q16.txt): the merge, not the
    64-row chain QK^T -> softmax -> PV, was most of the gap to a read (37 us); merged in tiles
    (merge_rows) the pair took 39.6-39.7 us, 0.81 of the copy ceiling. Tried on the chain and
    left: FlashAttention's update (one multiply-add a score, P V accumulated in the dot), -0.6%
    to +0.7%; holding the first block's max, 1-15% slower at all 12 shapes: two loops, two
    pipeline fills (h200_kernels_decode_variants_ab.json); Q in registers, as FlashAttention
    holds it at head_dim 64, 0.986-1.010x at 16 shapes (h200_kernels_decode_qreg.json); the
    64 rows cut into tiles of 32 or 16, a program each, the tiles of a run neighbours sharing K
    and V through L2: 49.8 us became 69.7 (32 rows) and 91.6 (16) at B=8 and 4k keys, 12.2
    became 24.2 at 512 (h200_kernels_decode_ab_row_tiles.json; commit 1e29545 has it)."""
    if INTERPRET:
        return {"BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    sms = torch.cuda.get_device_properties(0).multi_processor_count if (
        torch.cuda.is_available()) else 0
    c = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "TMA": True}  # TMA where it can
    if n_kv is not None and rows <= 16 and head_dim <= 128 and (
            (n_kv <= SHORT_CACHE and heads <= sms)
            or (n_kv > SHORT_CACHE and head_dim == 128 and heads >= MANY_PAIRS)):
        c["BLOCK_N"] = 128
    return c


def schedule(b: int, hkv: int, n_kv: int, block_n: int, programs: int) -> tuple[int, int, int]:
    """(blocks per program, programs, partial slots per head). The B * Hkv heads' key blocks,
    laid end to end, are cut into ``programs`` equal runs of at least two blocks; a head is cut
    into at most 64 runs (the merge holds them at once)."""
    n_blocks = -(-n_kv // block_n)
    total = b * hkv * n_blocks
    per = max(2, -(-total // programs), -(-n_blocks // 63))
    return per, -(-total // per), -(-n_blocks // per) + 1


WHOLE_HEADS_MAX_BLOCKS = 8  # a head this short is one program's: the merge would cost more


def merge_rows(heads: int, given: int | None = None) -> int:
    """Rows a merge program takes: 4 (merge_tiles) where there are 64 or more (batch, KV head)
    pairs, else 0 (merge_splits, one row a program); a config's MERGE_ROWS (``given``) instead.

    Why: Nsight Compute put merge_splits at 15.6 us beside the split kernel's 38.8 at B=8, 16
    queries a head, 4k keys (h200_ncu_decode_q16.txt), its slots reduced across threads (L1
    82% busy). merge_tiles merges a tile of rows four slots a step, each row in its own
    threads. In one run over 12 shapes (h200_kernels_decode_ab_merge_tiles4.json) tiles of 4
    rows took 39.6 us against 48.9 there (0.81 of the copy ceiling against 0.66), 36.6 against
    40.9 at 4 queries, 36.0 against 37.4 at one; with 8 pairs (one sequence, or MQA) their
    slot loop is a long serial chain over few programs, and one row a program won: 11.1 against
    20.1 us at one sequence of 4k, 22.1 against 26.1 with d=256 MQA. At each of the 12 shapes
    this rule's choice was within 1.5% of the fastest of the four merges tried."""
    if given is not None:
        return given
    return 4 if heads >= MANY_PAIRS else 0


def _programs(head_dim: int, heads: int, n_blocks: int, cfg: dict) -> int:
    """One program per (batch, KV head) where all of them run at once (in one wave: K and V
    tiles of every pipeline stage fit in shared memory beside each other) and either fill the
    SMs or are short (see the module's docstring). Otherwise about as many as run at once
    (aligned: a count that cuts every head alike): two per SM
    where two fit in shared memory (three stages of 64 keys of K and V take 96 KB at head_dim
    128), one at head_dim 256 or with 128 keys a step at 128 (192 KB). On the H200 two per SM
    beat one at 7 of 9 shapes, by up to 1.3x at head_dim 64; at head_dim 256 one per SM took
    22.6 us and two 26.0 (benchmarks/results/h200_kernels_decode.json)."""
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        sms = props.multi_processor_count
        tiles_bytes = cfg["num_stages"] * cfg["BLOCK_N"] * head_dim * 2 * 2  # K, V: 2 B each
        per_sm = getattr(props, "shared_memory_per_multiprocessor", 228 << 10) // tiles_bytes
        if heads <= sms * max(1, per_sm) and (heads >= sms or n_blocks <= WHOLE_HEADS_MAX_BLOCKS):
            return heads
        return aligned(sms * max(1, min(per_sm, 2 if head_dim <= 128 else 1)), heads)
    return 8


def aligned(programs: int, heads: int) -> int:
    """At most ``programs``, and a count that cuts every head alike: a whole number of programs
    a head, or of heads a program. On the H200 at B=8 x 8 KV heads and 16k keys, 128 programs
    (2 a head) took 125.1 us and 132 took 128.6; at B=64, 128 (4 heads each) 242.1 and 132
    245.9 (h200_kernels_decode_ab_tma_last.json)."""
    if heads <= programs:
        return heads * (programs // heads)
    return -(-heads // -(-heads // programs))


_ARRIVED: dict = {}


def arrival_counts(device, n: int) -> torch.Tensor:
    """int32 counts of partials written, one per (batch, KV head), zeros between calls (the
    last program of a head sets its count back): one buffer per device and stream, since calls
    on one stream run one after the other."""
    device = torch.device(device)
    key = (str(device), torch.cuda.current_stream(device).cuda_stream
           if device.type == "cuda" else 0)
    buf = _ARRIVED.get(key)
    if buf is None or buf.numel() < n:
        buf = _ARRIVED[key] = torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    return buf


def dependent_launch(device) -> bool:
    """Programmatic dependent launch: a GPU of compute capability 9.0 or later and a Triton
    that exposes it (3.5 and later); never under the interpreter."""
    if INTERPRET or torch.device(device).type != "cuda":
        return False
    cuda = getattr(getattr(tl, "extra", None), "cuda", None)
    return (hasattr(cuda, "gdc_wait") and
            torch.cuda.get_device_capability(torch.device(device))[0] >= 9)


def flash_decode(q, k, v, causal: bool = True, scale: float | None = None,
                 programs: int | None = None, cfg: dict | None = None):
    """(O, LSE): O (B, H, Lq, D) in q's dtype; LSE (B, H, Lq) fp32, natural log."""
    q, k, v = checked(q, k, v, causal, "flash_decode")
    b, h, n_q, d = q.shape
    _, hkv, n_kv, _ = k.shape
    group = h // hkv
    if group * n_q > MAX_ROWS:
        raise ValueError(f"flash_decode holds (heads per KV head) x q_len <= {MAX_ROWS} rows "
                         f"(got {group} x {n_q}); use flash_attention for longer queries")
    c = dict(cfg or config(d, n_kv, group * n_q, b * hkv))
    block_n = c.pop("BLOCK_N")
    pdl = c.pop("PDL", dependent_launch(q.device))
    tma = c.pop("TMA", False) and FA.tma_ok(k, v)
    block_m = max(16, triton.next_power_of_2(group * n_q))
    rows = min(merge_rows(b * hkv, c.pop("MERGE_ROWS", None)), block_m)  # 0: one row a program
    n_blocks = -(-n_kv // block_n)
    programs = programs or _programs(d, b * hkv, n_blocks, {"BLOCK_N": block_n, **c})
    per, grid, slots = schedule(b, hkv, n_kv, block_n, programs)
    whole = per % n_blocks == 0  # runs of whole heads: each program writes its heads' answer
    # the merge by a head's last program: by default where a head has at most two runs
    last_merges = bool(c.pop("LAST_MERGES", -(-n_blocks // per) <= 2)) and not whole
    pdl = pdl and not (whole or last_merges)
    o = torch.empty_like(q)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    if whole:
        o_part, lse_part = o, lse
    else:
        o_part = torch.empty(b * hkv * slots * block_m * d, device=q.device, dtype=torch.float32)
        lse_part = torch.empty(b * hkv * slots * block_m, device=q.device, dtype=torch.float32)
    scale = scale if scale is not None else d ** -0.5
    kd, vd = (FA.descriptor(k, block_n), FA.descriptor(v, block_n)) if tma else (k, v)
    arrived = arrival_counts(q.device, b * hkv) if last_merges else lse  # lse: unused
    split_kv_fwd[(grid,)](
        q, kd, vd, o_part, lse_part, o, lse, arrived, scale * 1.4426950408889634,  # log2(e): exp2
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2), hkv, group,
        n_q, n_kv, n_blocks, per, b * hkv * n_blocks, slots, HEAD_DIM=d, BLOCK_M=block_m,
        BLOCK_N=block_n, CAUSAL=causal, UPCAST=INTERPRET and q.dtype == torch.bfloat16, PDL=pdl,
        WHOLE=whole, TMA=tma, LAST_MERGES=last_merges, **c)
    if whole or last_merges:
        return o, lse
    if rows:
        merge_tiles[(b * hkv, -(-group * n_q // rows))](
            o_part, lse_part, o, lse, o.stride(0), o.stride(1), o.stride(2), hkv, group, n_q,
            n_blocks, per, slots, HEAD_DIM=d, BLOCK_M=block_m, ROWS=rows, PDL=pdl,
            num_warps=4, **({"launch_pdl": True} if pdl else {}))
    else:
        merge_splits[(b * h * n_q,)](o_part, lse_part, o, lse, o.stride(0), o.stride(1),
                                     o.stride(2), h, group, n_q, n_blocks, per, slots,
                                     HEAD_DIM=d, BLOCK_M=block_m,
                                     SLOTS=max(2, triton.next_power_of_2(slots)), PDL=pdl,
                                     num_warps=4, **({"launch_pdl": True} if pdl else {}))
    return o, lse


# --- the cost --------------------------------------------------------------------------------
def cost(b, h, n_q, n_kv, d, hkv=None, dtype="bf16", causal=True) -> C.Cost:
    """Attention's count; bytes fused-ideal (K and V read once per KV head, Q and O once, the
    LSE 4 bytes a row). The partials (fp32, B*Hkv*splits*rows*(D+1)*4 bytes written and read)
    are left out: at the lab's shapes they are under 1% of the cache."""
    c = C.attention(b, h, n_q, n_kv, d, hkv, dtype, causal=causal)
    return C.Cost("flash decoding (triton)", c.macs, c.flops, c.bytes_fused + 4 * b * h * n_q,
                  c.bytes_fused + 4 * b * h * n_q)


# --- the check -------------------------------------------------------------------------------
def errors(b, h, n_q, n_kv, d, hkv=None, dtype=torch.bfloat16, causal=True, device="cuda",
           seed=0, programs=None) -> dict:
    """flash_attention's check (relative error against fp64 beside PyTorch's own, the LSE error,
    every output finite), run on this kernel."""
    return FA.errors(b, h, n_q, n_kv, d, hkv, dtype, causal, device, seed,
                     kernel=lambda q, k, v, c: flash_decode(q, k, v, c, programs=programs))
