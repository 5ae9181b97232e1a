"""Flash-decoding in Triton: a few queries against a long KV cache, the cache split across programs.

At decode a (batch, KV head) pair has one query per head of its group and thousands of keys: one
program a query tile (FlashAttention's grid) is too few programs to keep HBM busy. Here the
heads' key blocks, laid end to end, are cut into equal runs, one a program (launcher: schedule);
a program reads each block of K and V once for all the query heads sharing it and leaves a
partial softmax per head, merged as O = sum_s w_s O_s / sum_s w_s, w_s = exp(lse_s - max): by a
head's last program where it has two runs, else by a merge kernel launched early. Where each pair
can have a program of its own in one wave and the pairs are enough to draw the HBM's bandwidth
(or a head is short), a program takes a whole head: no partials, no merge. A program whose run
is several whole heads walks their blocks in one loop, so the loads stream on across the seams.
Attention sinks join a row's sum once, where it is final (a whole head's program, else the
merge); a softcap bends every score before the partials. Why each choice:
docs/kernels/flash_decoding.md.

Read in order: the reference, the kernels, the launcher, the cost, the check. Shapes: q (B, H,
Lq, D) with Lq small (1-16), k and v (B, Hkv, Lkv, D), Hkv dividing H; the queries are the last
Lq of Lkv positions when causal.
"""
from __future__ import annotations

import functools
import os

import torch

from rooflab import cost as C
from rooflab import hardware
from rooflab.kernels import flash_attention as FA
from rooflab.kernels.flash_attention import standard_attention  # the reference
from rooflab.kernels.inputs import cap, checked, kept, sink_logits  # what the kernels take

try:
    import triton
    import triton.language as tl
    from rooflab.kernels.flash_attention import softcapped  # a score's softcap, in both kernels
except ImportError as _e:  # pragma: no cover - exercised where Triton is missing
    triton = None
    TRITON_MISSING = f"Triton is not installed ({_e}); pip install 'rooflab[triton]'"

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
MAX_ROWS = 128  # query heads per KV head x query positions, held by one program

__all__ = ["standard_attention", "flash_decode", "schedule", "cost", "errors"]

if triton is not None:
    @triton.jit
    def _rows(GROUP, n_q, n_kv, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
              QK_EXTRA: tl.constexpr):
        # a program's rows r = (head g of the group, query i), whether the group has row r,
        # q's and k's dims (d, then any extra e), and the last key each row sees when causal
        rows = tl.arange(0, BLOCK_M)
        g, i = rows // n_q, rows % n_q
        offs_d = tl.arange(0, HEAD_DIM)
        offs_e = offs_d
        if QK_EXTRA:
            offs_e = tl.arange(0, QK_EXTRA)
        return rows, g, i, rows < GROUP * n_q, offs_d, offs_e, n_kv - n_q + i

    @triton.jit
    def _query(Q, bhk, HKV, GROUP, g, i, valid, offs_d, offs_e, sqb, sqh, sqm,
               HEAD_DIM: tl.constexpr, QK_EXTRA: tl.constexpr, UPCAST: tl.constexpr):
        # the group's query rows of one (batch, KV head) = bhk, and their extra dims, if any
        q_rows = Q + (bhk // HKV) * sqb + ((bhk % HKV) * GROUP + g)[:, None] * sqh
        q_rows += i[:, None] * sqm
        q = tl.load(q_rows + offs_d[None, :], mask=valid[:, None], other=0.0)
        q2 = q
        if QK_EXTRA:
            q2 = tl.load(q_rows + HEAD_DIM + offs_e[None, :], mask=valid[:, None], other=0.0)
        if UPCAST:  # the CPU interpreter's bf16 dot is wrong; CI checks the algorithm in fp32
            q, q2 = q.to(tl.float32), q2.to(tl.float32)
        return q, q2

    @triton.jit
    def _fresh(SINKS, bhk, HKV, GROUP, g, valid, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
               WHOLE: tl.constexpr, HAS_SINK: tl.constexpr):
        # a head's running max, sum and output before its first key; with a sink, a whole
        # head's sum starts from it: exp(sink - max) with the max the sink's, 1, no value vector
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        if HAS_SINK and WHOLE:
            m_i = tl.load(SINKS + (bhk % HKV) * GROUP + g, mask=valid, other=0.0)
            m_i = m_i * 1.4426950408889634
            l_i = l_i + 1.0
        return m_i, l_i, tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    @triton.jit
    def _write(O_PART, LSE_PART, acc, l_i, m_i, bhk, slot, max_slots, HKV, GROUP, n_q, g, i,
               rows, valid, offs_d, sob, soh, som, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
               WHOLE: tl.constexpr):
        # one head's run done: WHOLE, the final O (in O's dtype) and LSE (natural log), else the
        # partial (fp32, a few KB in all) to the head's ``slot``; causal rows may see no key of
        # a run
        seen = l_i > 0
        acc = acc / tl.where(seen, l_i, 1.0)[:, None]
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
        if WHOLE:
            b, head = bhk // HKV, (bhk % HKV) * GROUP + g
            tl.store(LSE_PART + (b * HKV * GROUP + head) * n_q + i, lse * 0.6931471805599453,
                     mask=valid)
            tl.store(O_PART + b * sob + head[:, None] * soh + i[:, None] * som + offs_d[None, :],
                     acc.to(O_PART.dtype.element_ty), mask=valid[:, None])
        else:
            part = (bhk * max_slots + slot) * BLOCK_M + rows
            tl.store(LSE_PART + part, lse, mask=valid)
            tl.store(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], acc,
                     mask=valid[:, None])

    @triton.jit
    def _block(q, q2, K, V, KEEP, b, hk, key0, m_i, l_i, acc, n_kv, last_key, qk_scale, cap_in,
               skb, skh, skn, svb, svh, svn, skeep, offs_d, offs_e, HEAD_DIM: tl.constexpr,
               BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
               TMA: tl.constexpr, HAS_KEEP: tl.constexpr, QK_EXTRA: tl.constexpr,
               SOFTCAP: tl.constexpr):
        # keys [key0, key0 + BLOCK_N) of (batch b, KV head hk), K and V read once for the
        # group's rows, onto their online softmax (m_i, l_i, acc)
        cols = key0 + tl.arange(0, BLOCK_N)
        inside = cols < n_kv
        if TMA:  # K and V are (B, Hkv, Lkv, D) descriptors: keys past Lkv load as 0
            at = [tl.cast(b, tl.int32), tl.cast(hk, tl.int32), tl.cast(key0, tl.int32), 0]
            k = K.load(at).reshape(BLOCK_N, HEAD_DIM)
            v = V.load(at).reshape(BLOCK_N, HEAD_DIM)
        else:
            k = tl.load(K + b * skb + hk * skh + cols[:, None] * skn + offs_d[None, :],
                        mask=inside[:, None], other=0.0)
            v = tl.load(V + b * svb + hk * svh + cols[:, None] * svn + offs_d[None, :],
                        mask=inside[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k))
        if QK_EXTRA:
            k2 = tl.load(K + b * skb + hk * skh + HEAD_DIM + cols[:, None] * skn
                         + offs_e[None, :], mask=inside[:, None], other=0.0)
            if UPCAST:
                k2 = k2.to(tl.float32)
            qk = tl.dot(q2, tl.trans(k2), qk)
        if SOFTCAP:
            qk = softcapped(qk, cap_in)
        qk = qk * qk_scale                               # scores in log2 units
        keep = inside[None, :]
        if HAS_KEEP:  # this batch row's valid keys
            kept = tl.load(KEEP + b * skeep + cols, mask=inside, other=0) != 0
            keep = keep & kept[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= last_key[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing seen yet
        p = tl.math.exp2(qk - m_ref[:, None])
        alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        return m_new, l_i, acc

    @triton.jit
    def split_kv_fwd(Q, K, V, KEEP, SINKS, O_PART, LSE_PART, O, LSE, ARRIVED, qk_scale, softcap,
                     sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som, skeep,
                     HKV, GROUP, n_q, n_kv, n_blocks, per_program, total_blocks, max_slots,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PDL: tl.constexpr,
                     WHOLE: tl.constexpr, ACROSS: tl.constexpr, TMA: tl.constexpr,
                     LAST_MERGES: tl.constexpr, HAS_KEEP: tl.constexpr,
                     QK_EXTRA: tl.constexpr, HAS_SINK: tl.constexpr, SOFTCAP: tl.constexpr):
        # Program p takes blocks [p * per_program, (p + 1) * per_program) of all heads' blocks
        # laid end to end: a loop a head it touches, each head's run written as a partial
        # (slot 0: the head's first program). WHOLE: runs of whole heads, each written final.
        # ACROSS (several whole heads a run): one loop over the run's blocks, a head's answer
        # written and the next begun at the seam, so the loads stream on across it.
        # LAST_MERGES: a head's last program (counted in ARRIVED, then set back to 0) merges its
        # partials: no second kernel. HAS_KEEP: KEEP (B, Lkv) says which keys each batch row
        # attends to. QK_EXTRA (by addresses only): q and k are HEAD_DIM + QK_EXTRA wide, v
        # HEAD_DIM (latent attention), their extra dims a second dot onto the scores.
        # HAS_SINK: SINKS (H,) fp32, a logit a head in every row's sum: counted once, by a
        # whole head's program or the merge. SOFTCAP: every scaled score s is softcap *
        # tanh(s / softcap) (FA.softcapped, cap_in its scale).
        if PDL:
            tl.extra.cuda.gdc_launch_dependents()        # the merge may start launching now
        pid = tl.program_id(0)
        start = pid * per_program
        end = tl.minimum(start + per_program, total_blocks)
        cap_in = qk_scale * 0.6931471805599453 / softcap  # the raw scores' scale over the cap
        if ACROSS:
            rows, g, i, valid, offs_d, offs_e, last_key = _rows(GROUP, n_q, n_kv, BLOCK_M,
                                                                HEAD_DIM, QK_EXTRA)
            bhk = (start // n_blocks).to(tl.int64)       # 64-bit offsets from here on
            q, q2 = _query(Q, bhk, HKV, GROUP, g, i, valid, offs_d, offs_e, sqb, sqh, sqm,
                           HEAD_DIM, QK_EXTRA, UPCAST)
            m_i, l_i, acc = _fresh(SINKS, bhk, HKV, GROUP, g, valid, BLOCK_M, HEAD_DIM, True,
                                   HAS_SINK)
            for blk in range(start, end):
                head = blk // n_blocks                   # in 32 bits: a 64-bit division is slow
                m_i, l_i, acc = _block(q, q2, K, V, KEEP, (head // HKV).to(tl.int64),
                                       (head % HKV).to(tl.int64), (blk - head * n_blocks) *
                                       BLOCK_N, m_i, l_i, acc, n_kv, last_key, qk_scale, cap_in,
                                       skb, skh, skn, svb, svh, svn, skeep, offs_d, offs_e,
                                       HEAD_DIM, BLOCK_N, CAUSAL, UPCAST, TMA, HAS_KEEP,
                                       QK_EXTRA, SOFTCAP)
                if (blk + 1) % n_blocks == 0:            # the head's last block: its answer
                    bhk = head.to(tl.int64)
                    _write(O_PART, LSE_PART, acc, l_i, m_i, bhk, 0, max_slots, HKV, GROUP, n_q,
                           g, i, rows, valid, offs_d, sob, soh, som, HEAD_DIM, BLOCK_M, True)
                    more = valid & (rows * 0 + blk + 1 < end)  # the next head's rows, if any
                    q, q2 = _query(Q, bhk + 1, HKV, GROUP, g, i, more, offs_d, offs_e, sqb,
                                   sqh, sqm, HEAD_DIM, QK_EXTRA, UPCAST)
                    m_i, l_i, acc = _fresh(SINKS, bhk + 1, HKV, GROUP, g, more, BLOCK_M,
                                           HEAD_DIM, True, HAS_SINK)
        else:
            for head in range(start // n_blocks, (end - 1) // n_blocks + 1):
                bhk = head + tl.zeros([], tl.int64)      # 64-bit offsets from here on
                rows, g, i, valid, offs_d, offs_e, last_key = _rows(GROUP, n_q, n_kv, BLOCK_M,
                                                                    HEAD_DIM, QK_EXTRA)
                b, hk = bhk // HKV, bhk % HKV
                q, q2 = _query(Q, bhk, HKV, GROUP, g, i, valid, offs_d, offs_e, sqb, sqh, sqm,
                               HEAD_DIM, QK_EXTRA, UPCAST)
                m_i, l_i, acc = _fresh(SINKS, bhk, HKV, GROUP, g, valid, BLOCK_M, HEAD_DIM,
                                       WHOLE, HAS_SINK)
                lo = tl.maximum(start, bhk * n_blocks) - bhk * n_blocks
                hi = tl.minimum(end, (bhk + 1) * n_blocks) - bhk * n_blocks
                for key0 in range(lo * BLOCK_N, hi * BLOCK_N, BLOCK_N):
                    m_i, l_i, acc = _block(q, q2, K, V, KEEP, b, hk, key0, m_i, l_i, acc, n_kv,
                                           last_key, qk_scale, cap_in, skb, skh, skn, svb, svh,
                                           svn, skeep, offs_d, offs_e, HEAD_DIM, BLOCK_N,
                                           CAUSAL, UPCAST, TMA, HAS_KEEP, QK_EXTRA, SOFTCAP)
                _write(O_PART, LSE_PART, acc, l_i, m_i, bhk, pid - (bhk * n_blocks) // per_program,
                       max_slots, HKV, GROUP, n_q, g, i, rows, valid, offs_d, sob, soh, som,
                       HEAD_DIM, BLOCK_M, WHOLE)
                if LAST_MERGES:
                    tl.debug_barrier()                   # every store of the partial, then
                    arrived = tl.atomic_add(ARRIVED + bhk, 1, sem="acq_rel")  # publish, count
                    first = (bhk * n_blocks) // per_program
                    if arrived == ((bhk + 1) * n_blocks - 1) // per_program - first:  # last
                        tl.atomic_xchg(ARRIVED + bhk, 0)
                        _merge_rows(O_PART, LSE_PART, SINKS, O, LSE, bhk, tl.arange(0, BLOCK_M),
                                    sob, soh, som, HKV, GROUP, n_q, n_blocks, per_program,
                                    max_slots, HEAD_DIM, BLOCK_M, BLOCK_M, HAS_SINK)

    @triton.jit
    def merge_splits(O_PART, LSE_PART, SINKS, O, LSE, sob, soh, som, H, GROUP, n_q, n_blocks,
                     per_program, max_slots, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     SLOTS: tl.constexpr, PDL: tl.constexpr, HAS_SINK: tl.constexpr):
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
        m = tl.max(lse, 0)
        if HAS_SINK:  # the sink: one more term of the sum, with no value vector
            sink = tl.load(SINKS + h) * 1.4426950408889634
            m = tl.maximum(m, sink)
        m = tl.where(m == float("-inf"), 0.0, m)         # a row that kept no key: zeros
        w = tl.math.exp2(lse - m)                        # empty slots weigh exp2(-inf) = 0
        o = tl.load(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=(s < used)[:, None], other=0.0)
        total = tl.sum(w, 0)
        if HAS_SINK:
            total += tl.math.exp2(sink - m)
        out = tl.sum(o * w[:, None], 0) / tl.where(total > 0, total, 1.0)
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
    def _merge_rows(O_PART, LSE_PART, SINKS, O, LSE, bhk, r, sob, soh, som, HKV, GROUP, n_q,
                    n_blocks, per_program, max_slots, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, ROWS: tl.constexpr, HAS_SINK: tl.constexpr):
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
        if HAS_SINK:  # the sum starts from the sink's term, 1 with the max the sink's
            m = tl.load(SINKS + head, mask=valid, other=0.0) * 1.4426950408889634
            total = total + 1.0
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
        tl.store(LSE + (b * HKV * GROUP + head) * n_q + i,  # -inf where a row kept no key
                 (m + tl.math.log2(total)) * 0.6931471805599453, mask=valid)  # natural log
        out = acc / tl.where(total > 0, total, 1.0)[:, None]  # and its output zeros
        tl.store(O + b * sob + head[:, None] * soh + i[:, None] * som + offs_d[None, :],
                 out.to(O.dtype.element_ty), mask=valid[:, None])

    @triton.jit
    def merge_tiles(O_PART, LSE_PART, SINKS, O, LSE, sob, soh, som, HKV, GROUP, n_q, n_blocks,
                    per_program, max_slots, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    ROWS: tl.constexpr, PDL: tl.constexpr, HAS_SINK: tl.constexpr):
        # one (batch, KV head) and ROWS of its rows a program
        if PDL:
            tl.extra.cuda.gdc_wait()                     # until the partials are all written
        _merge_rows(O_PART, LSE_PART, SINKS, O, LSE, tl.program_id(0).to(tl.int64),
                    tl.program_id(1) * ROWS + tl.arange(0, ROWS), sob, soh, som, HKV, GROUP,
                    n_q, n_blocks, per_program, max_slots, HEAD_DIM, BLOCK_M, ROWS, HAS_SINK)


# --- the launcher ----------------------------------------------------------------------------
SHORT_CACHE = 512  # keys a head or fewer: blocks of 128 keys where few rows (see config)
MANY_PAIRS = 64    # (batch, KV head) pairs from which longer caches take 128 keys a step too,
                   # and the merge kernel takes tiles of rows (merge_rows)
WHOLE_HEADS_MAX_BLOCKS = 8  # a head this short is one program's: the merge would cost more;
# but at head dim 256, twice the bytes a block, a head of more than CUT_256_BLOCKS is cut where
# there are at most CUT_256_PAIRS pairs: one program streams it slower than a split and its
# merge run (flash_decoding.md, "Head dim 256: short heads whole?")
CUT_256_BLOCKS, CUT_256_PAIRS = 6, 16
PROGRAM_BYTES_PER_S = 44e9  # whole heads (each pair one program, no merge) from the pairs that
                            # draw the HBM's datasheet bandwidth at this rate each: a program
                            # streams alike on any Hopper, the split gains from faster HBM
                            # (the bounds it was fitted to: flash_decoding.md)


def config(head_dim: int, n_kv: int | None = None, rows: int = 1, heads: int = 1) -> dict:
    """Keys per loop step, warps, pipeline depth and TMA (where the GPU has one and the tensors
    are aligned): 64 keys in 3 stages of 4 warps, or 128 keys a step where rows (heads per KV
    head x queries) <= 16 and head_dim <= 128 and either

    | cache                    | (batch, KV head) pairs | as                                  |
    | <= SHORT_CACHE keys      | <= one an SM           | cuDNN's kernel takes them (ncu)     |
    | > SHORT_CACHE, d == 128  | >= MANY_PAIRS          | one program an SM                   |
    | > SHORT_CACHE, d == 64   | <= two an SM           | one wave as _programs counts them   |
    """
    if INTERPRET:
        return {"BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    sms = torch.cuda.get_device_properties(0).multi_processor_count if (
        torch.cuda.is_available()) else 0
    c = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "TMA": True}  # TMA where it can
    if n_kv is not None and rows <= 16 and head_dim <= 128 and (
            (n_kv <= SHORT_CACHE and heads <= sms)
            or (n_kv > SHORT_CACHE and head_dim == 128 and heads >= MANY_PAIRS)
            or (n_kv > SHORT_CACHE and head_dim == 64 and heads <= 2 * sms)):
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


def merge_rows(heads: int, given: int | None = None) -> int:
    """Rows a merge program takes: 4 (merge_tiles: four slots a step, each row in its own
    threads) with MANY_PAIRS or more (batch, KV head) pairs, else 0 (merge_splits, one row a
    program: with few pairs the tiles' slot loop is a long serial chain); or MERGE_ROWS."""
    if given is not None:
        return given
    return 4 if heads >= MANY_PAIRS else 0


def _programs(head_dim: int, heads: int, n_blocks: int, cfg: dict, qk_extra: int = 0) -> int:
    """One program per (batch, KV head) where all of them run at once (in one wave: K and V
    tiles of every pipeline stage fit in shared memory beside each other) and either number
    whole_heads_from(the GPU) or more or are short (the module's docstring; CUT_256_*). Otherwise
    about as many as run at once (aligned: a count that cuts every head alike): as many an SM as fit
    in shared memory, at most four at head_dim 64 or less (48 KB of 64-key tiles) and two at 128
    (96 KB; more lost, flash_decoding.md), one at 256 or with 128 keys a step at 128 (192 KB);
    K ``qk_extra`` dims wider than V where it is. Every stage's tiles are counted, one more than
    Triton keeps: "fits" errs on fewer programs."""
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        sms = props.multi_processor_count
        # K and V tiles of every stage, 2 bytes an element
        tiles_bytes = cfg["num_stages"] * cfg["BLOCK_N"] * (2 * head_dim + qk_extra) * 2
        per_sm = getattr(props, "shared_memory_per_multiprocessor", 228 << 10) // tiles_bytes
        short = n_blocks <= WHOLE_HEADS_MAX_BLOCKS and not (
            head_dim == 256 and n_blocks > CUT_256_BLOCKS and heads <= CUT_256_PAIRS)
        if heads <= sms * max(1, per_sm) and (heads >= whole_heads_from(props.name, sms)
                                              or short):
            return heads
        most = 4 if head_dim <= 64 else 2 if head_dim <= 128 else 1
        return aligned(sms * max(1, min(per_sm, most)), heads)
    return 8


@functools.lru_cache
def whole_heads_from(gpu: str, sms: int) -> float:
    """(batch, KV head) pairs from which each takes one program, whole: those that together read
    at the HBM's datasheet bandwidth at PROGRAM_BYTES_PER_S each (76 on an H100 SXM, 109 on an
    H200), at most every SM; every SM on a GPU not in rooflab's table."""
    try:
        bandwidth = hardware.lookup(gpu).mem_bandwidth_bytes_per_s
    except hardware.HardwareError:
        return sms
    return min(sms, bandwidth / PROGRAM_BYTES_PER_S)


def aligned(programs: int, heads: int) -> int:
    """At most ``programs``, and a count that cuts every head alike: a whole number of programs
    a head, or of heads a program (an uneven cut leaves one head's runs last)."""
    if heads <= programs:
        return heads * (programs // heads)
    return -(-heads // -(-heads // programs))


_ARRIVED: dict = {}  # (device, stream) -> arrival counts


def arrival_counts(device, n: int) -> torch.Tensor:
    """int32 counts of partials written, one per (batch, KV head), zero between calls (a head's
    last program resets its count): one buffer per device and stream (calls on it run in turn)."""
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
                 programs: int | None = None, cfg: dict | None = None, keep=None, sinks=None,
                 softcap: float = 0.0):
    """(O, LSE): O (B, H, Lq, Dv) in q's dtype; LSE (B, H, Lq) fp32, natural log. ``keep``:
    None, or (B, Lkv) bool, the keys each batch row attends to (a static or padded cache's
    valid slots, as flash-attn's cache_seqlens but any pattern); a row that keeps none gets
    zeros (LSE -inf), as flash_attention's.
    ``sinks``: None, or (H,) a logit a head in every softmax's denominator (attention sinks).
    ``softcap`` > 0: every score s is softcap * tanh(s / softcap). q and k may be wider than v
    (inputs.dims_error)."""
    if triton is None:
        raise RuntimeError(TRITON_MISSING)
    q, k, v = checked(q, k, v, causal, "flash_decode")
    softcap = cap(softcap)
    b, h, n_q, d_qk = q.shape
    _, hkv, n_kv, _ = k.shape
    d, extra = v.shape[-1], d_qk - v.shape[-1]  # the kernel's HEAD_DIM is v's
    group = h // hkv
    if group * n_q > MAX_ROWS:
        raise ValueError(f"flash_decode holds (heads per KV head) x q_len <= {MAX_ROWS} rows "
                         f"(got {group} x {n_q}); use flash_attention for longer queries")
    c = dict(cfg or config(d, n_kv, group * n_q, b * hkv))
    block_n = c.pop("BLOCK_N")
    pdl = c.pop("PDL", dependent_launch(q.device))
    tma = c.pop("TMA", False) and not extra and FA.tma_ok(k, v)
    block_m = max(16, triton.next_power_of_2(group * n_q))
    rows = min(merge_rows(b * hkv, c.pop("MERGE_ROWS", None)), block_m)  # 0: one row a program
    n_blocks = -(-n_kv // block_n)
    programs = programs or _programs(d, b * hkv, n_blocks, {"BLOCK_N": block_n, **c}, extra)
    per, grid, slots = schedule(b, hkv, n_kv, block_n, programs)
    whole = per % n_blocks == 0  # runs of whole heads: each program writes its heads' answer
    across = whole and per > n_blocks  # several a run: one loop across their seams
    # the merge by a head's last program: by default where a head has at most two runs
    last_merges = bool(c.pop("LAST_MERGES", -(-n_blocks // per) <= 2)) and not whole
    pdl = pdl and not (whole or last_merges)
    o = q.new_empty(b, h, n_q, d)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    if whole:
        o_part, lse_part = o, lse
    else:
        o_part = torch.empty(b * hkv * slots * block_m * d, device=q.device, dtype=torch.float32)
        lse_part = torch.empty(b * hkv * slots * block_m, device=q.device, dtype=torch.float32)
    scale = scale if scale is not None else d_qk ** -0.5
    kd, vd = (FA.descriptor(k, block_n), FA.descriptor(v, block_n)) if tma else (k, v)
    arrived = arrival_counts(q.device, b * hkv) if last_merges else lse  # lse: unused
    keep, sinks = kept(keep, b, n_kv), sink_logits(sinks, h)
    split_kv_fwd[(grid,)](
        q, kd, vd, keep if keep is not None else q, lse if sinks is None else sinks, o_part,
        lse_part, o, lse, arrived,
        scale * 1.4426950408889634, softcap or 1.0,  # log2(e): exp2
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        keep.stride(0) if keep is not None else 0, hkv, group, n_q, n_kv, n_blocks, per,
        b * hkv * n_blocks, slots, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        UPCAST=INTERPRET and q.dtype == torch.bfloat16, PDL=pdl, WHOLE=whole, ACROSS=across,
        TMA=tma, LAST_MERGES=last_merges, HAS_KEEP=keep is not None, QK_EXTRA=extra,
        HAS_SINK=sinks is not None, SOFTCAP=bool(softcap), **c)
    if whole or last_merges:
        return o, lse
    if rows:
        merge_tiles[(b * hkv, -(-group * n_q // rows))](
            o_part, lse_part, lse if sinks is None else sinks, o, lse, o.stride(0), o.stride(1),
            o.stride(2), hkv, group, n_q, n_blocks, per, slots, HEAD_DIM=d, BLOCK_M=block_m,
            ROWS=rows, PDL=pdl, HAS_SINK=sinks is not None, num_warps=4,
            **({"launch_pdl": True} if pdl else {}))
    else:
        merge_splits[(b * h * n_q,)](o_part, lse_part, lse if sinks is None else sinks, o, lse,
                                     o.stride(0), o.stride(1), o.stride(2), h, group, n_q,
                                     n_blocks, per, slots, HEAD_DIM=d, BLOCK_M=block_m,
                                     SLOTS=max(2, triton.next_power_of_2(slots)), PDL=pdl,
                                     HAS_SINK=sinks is not None, num_warps=4,
                                     **({"launch_pdl": True} if pdl else {}))
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
           seed=0, programs=None, v_dim=None) -> dict:
    """flash_attention's check (relative error against fp64 beside PyTorch's own, the LSE error,
    every output finite), run on this kernel."""
    return FA.errors(b, h, n_q, n_kv, d, hkv, dtype, causal, device, seed,
                     kernel=lambda q, k, v, c: flash_decode(q, k, v, c, programs=programs),
                     v_dim=v_dim)
