"""FlashAttention forward for Hopper in Gluon, warp-specialized (FlashAttention-3's layout).

One program takes 128 query rows of a head with three partitions of warps: a producer (one warp)
that moves Q, K and V by TMA into shared memory and two consumer warpgroups of 64 rows each that
read the same K and V tiles. The producer needs few registers and gives the rest to the
consumers (Hopper reallocates registers between warpgroups). Each consumer runs
flash_attention_sm90.py's loop (block j's Q K^T and block j-1's P V in flight together, the
softmax under P V).

PERSISTENT (walks() says where): one program an SM walks the tiles, as cuDNN's kernel does at
the rows where a program a tile lost to it. The ring's slots and phases run on from tile to
tile, each tile's Q has buffers of its own (two tiles' worth), so the producer loads the next
tile under this one's last blocks, and a tile's O store is waited for only under the next
tile's first Q K^T. Causal tiles come longest first, by head or (BY_LENGTH) by length in
bands of heads, every other round of programs in reverse, and the two warpgroups take a
tile's halves in turn.

Barriers: K's and V's slots each have a ready barrier (the producer's TMA completes it) and an
empty one (both consumers arrive once their ops that read the slot are done); with
PERSISTENT, each Q buffer an empty one too (its consumer arrives once the O stored through it
is out). Scope as flash_attention_sm90.usable says: any lengths (RAGGED), q, k, v each in any
layout() reads. Latent attention's q and k, wider than v (QK_EXTRA: 192 = 128 + 64 rotary
dims): a tile of 192 columns is not a power of two, so each Q and K tile comes as two,
HEAD_DIM and QK_EXTRA wide, on one barrier, and S is two wgmma ops into one accumulator.

Measured against cuDNN and the Triton kernel, and the variants that lost (ping-pong between
the consumers among them): docs/kernels/flash_attention_sm90.md.
"""
from __future__ import annotations

import torch

from rooflab.kernels import flash_attention_sm90 as F9
from rooflab.kernels.flash_attention_sm90 import desc, layout

if F9.gluon is not None:
    import triton

    from rooflab.kernels.flash_attention_sm90 import (
        _at, _key_tail, _masked, _softmax, _store_o, gl, gluon, mbarrier, tma, tma_load,
        warpgroup_mma, warpgroup_mma_wait)

    @gluon.jit
    def _tile(n_q, n_kv, H, GROUP, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              CAUSAL: gl.constexpr):
        # this program's 2 x BLOCK_M query rows: their first row, the K/V rows, the blocks
        start_m = gl.program_id(0)
        if CAUSAL:  # the longest tiles first
            start_m = gl.num_programs(0) - 1 - start_m
        return _rows(gl.program_id(1), start_m, n_q, n_kv, H, BLOCK_M, BLOCK_N, CAUSAL)

    @gluon.jit
    def _walk(t, tiles_m, n_tiles, n_q, n_kv, H, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              CAUSAL: gl.constexpr, BY_LENGTH: gl.constexpr):
        # a walk's tile t: a head's tiles on neighbouring programs, causal ones longest first.
        # BY_LENGTH: in bands of as many heads as programs, a band's longest tiles first, then
        # its next, so that a round of programs takes tiles of one length and a band's K and V
        # stay in L2 from round to round. Causal rounds go every other one in reverse, so that
        # a program that took a round's shorter tiles takes the next round's longer ones
        if CAUSAL:
            p = gl.num_programs(0)
            first = t - t % p
            if (t // p) % 2 == 1:
                t = first + gl.minimum(p, n_tiles - first) - 1 - t % p
            if BY_LENGTH:
                band = t // (p * tiles_m)
                in_band = gl.minimum(p, n_tiles // tiles_m - band * p)   # heads in this band
                u = t - band * p * tiles_m
                return _rows(band * p + u % in_band, tiles_m - 1 - u // in_band, n_q, n_kv, H,
                             BLOCK_M, BLOCK_N, CAUSAL)
            return _rows(t // tiles_m, tiles_m - 1 - t % tiles_m, n_q, n_kv, H, BLOCK_M,
                         BLOCK_N, CAUSAL)
        return _rows(t // tiles_m, t % tiles_m, n_q, n_kv, H, BLOCK_M, BLOCK_N, CAUSAL)

    @gluon.jit
    def _rows(bh, start_m, n_q, n_kv, H, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              CAUSAL: gl.constexpr):
        # tile start_m of head bh: (batch, head, first query row, n_kv - n_q, key blocks)
        m0 = start_m * 2 * BLOCK_M
        delta = n_kv - n_q
        if CAUSAL:
            n_blocks = gl.cdiv(gl.minimum(m0 + 2 * BLOCK_M + delta, n_kv), BLOCK_N)
        else:
            n_blocks = gl.cdiv(n_kv, BLOCK_N)
        return bh // H, bh % H, m0, delta, n_blocks

    @gluon.jit
    def _stripe(w, i, ALTERNATE: gl.constexpr):
        # which half of tile i warpgroup w takes (its rows from m0 + 64 x this). In a causal
        # walk the halves go in turn (ALTERNATE): under OWN_BLOCKS the lower half is a block
        # shorter, and the shared ring keeps the warpgroups a few blocks apart, so one that
        # always took it would wait on the other at every tile
        if ALTERNATE:
            return (i + w) % 2
        return w

    @gluon.jit
    def _load(desc, at, bar, dst):
        # one tile by TMA from (row, column) ``at``; bar counts its bytes in
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma_load(desc, [at[0], at[1]], bar, dst)

    @gluon.jit
    def _load_qk(desc, desc2, at, bar, dst, dst2, HEAD_DIM: gl.constexpr,
                 QK_EXTRA: gl.constexpr):
        # a Q or K tile; with QK_EXTRA, its columns past HEAD_DIM too, on the same barrier
        if QK_EXTRA:
            mbarrier.expect(bar, desc.block_type.nbytes + desc2.block_type.nbytes)
            tma_load(desc, [at[0], at[1]], bar, dst)
            tma_load(desc2, [at[0], at[1] + HEAD_DIM], bar, dst2)
        else:
            _load(desc, at, bar, dst)

    @gluon.jit
    def _qk(q, q2, k, k2, s_zero, QK_EXTRA: gl.constexpr):
        # issue S = Q K^T (and, with QK_EXTRA, + Q2 K2^T onto it); returns the pending S
        s = warpgroup_mma(q, k.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if QK_EXTRA:
            s = warpgroup_mma(q2, k2.permute((1, 0)), s, is_async=True)
        return s

    @gluon.jit
    def _producer(descs, smem, bars, qk_scale, H, GROUP, n_q, n_kv, n_tiles, kv_at,
                  HEAD_DIM: gl.constexpr, QK_EXTRA: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                  OWN_BLOCKS: gl.constexpr, RAGGED: gl.constexpr, Q_STRIDED: gl.constexpr,
                  K_STRIDED: gl.constexpr, V_STRIDED: gl.constexpr,
                  PERSISTENT: gl.constexpr, BY_LENGTH: gl.constexpr, W: gl.constexpr):
        if PERSISTENT:  # tiles pid, pid + programs, ...; a head's tiles on neighbouring programs
            tiles_m = gl.cdiv(n_q, 2 * BLOCK_M)
            count = gl.to_tensor(0)   # K and V blocks loaded so far: the ring's count
            i = gl.to_tensor(0)       # tiles loaded so far
            for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
                b, h, m0, delta, n_blocks = _walk(t, tiles_m, n_tiles, n_q, n_kv, H, BLOCK_M,
                                                  BLOCK_N, CAUSAL, BY_LENGTH)
                _produce(descs, smem, bars, b, h, m0, n_blocks, count, i, H, GROUP, n_q,
                         kv_at, HEAD_DIM, QK_EXTRA, BLOCK_N, STAGES, Q_STRIDED, K_STRIDED,
                         V_STRIDED, PERSISTENT, CAUSAL, BLOCK_M)
                count += n_blocks
                i += 1
        else:
            b, h, m0, delta, n_blocks = _tile(n_q, n_kv, H, GROUP, BLOCK_M, BLOCK_N, CAUSAL)
            _produce(descs, smem, bars, b, h, m0, n_blocks, 0, 0, H, GROUP, n_q, kv_at,
                     HEAD_DIM, QK_EXTRA, BLOCK_N, STAGES, Q_STRIDED, K_STRIDED, V_STRIDED,
                     PERSISTENT, False, BLOCK_M)

    @gluon.jit
    def _produce(descs, smem, bars, b, h, m0, n_blocks, count, i, H, GROUP, n_q, kv_at,
                 HEAD_DIM: gl.constexpr, QK_EXTRA: gl.constexpr, BLOCK_N: gl.constexpr,
                 STAGES: gl.constexpr, Q_STRIDED: gl.constexpr, K_STRIDED: gl.constexpr,
                 V_STRIDED: gl.constexpr, PERSISTENT: gl.constexpr, ALTERNATE: gl.constexpr,
                 BLOCK_M: gl.constexpr):
        # one tile's loads: its Q (both warpgroups' rows), then its K and V blocks into the
        # ring, whose slots and phases run on from ``count`` blocks; tile ``i`` of the program
        # takes Q buffers 2 (i % 2) + w, free once the O stored through them two tiles ago is
        # out. kv_at: k's rows a head (or batch) and columns a head, v's
        q_desc, k_desc, v_desc, o_desc, O, LSE, q2_desc, k2_desc = descs
        q_smem, k_smem, v_smem, q2_smem, k2_smem = smem
        bar_q, q_empty, k_ready, k_empty, v_ready, v_empty = bars
        k_pitch, k_width, v_pitch, v_width = kv_at
        for w in gl.static_range(2):
            qb = (i % 2) * 2 + w
            if PERSISTENT:
                mbarrier.wait(q_empty.index(qb), ((i // 2) & 1) ^ 1)
            _load_qk(q_desc, q2_desc,
                     _at(b, h, m0 + _stripe(w, i, ALTERNATE) * BLOCK_M, H, n_q,
                         HEAD_DIM + QK_EXTRA, Q_STRIDED),
                     bar_q.index(qb), q_smem.index(qb), q2_smem.index(qb), HEAD_DIM, QK_EXTRA)
        for j in range(n_blocks):
            c = count + j
            slot = c % STAGES
            free = ((c // STAGES) & 1) ^ 1      # a fresh barrier reads as free at parity 1
            at = _at(b, h // GROUP, j * BLOCK_N, H // GROUP, k_pitch, k_width, K_STRIDED)
            mbarrier.wait(k_empty.index(slot), free)
            _load_qk(k_desc, k2_desc, at, k_ready.index(slot), k_smem.index(slot),
                     k2_smem.index(slot), HEAD_DIM, QK_EXTRA)
            at = _at(b, h // GROUP, j * BLOCK_N, H // GROUP, v_pitch, v_width, V_STRIDED)
            mbarrier.wait(v_empty.index(slot), free)
            _load(v_desc, at, v_ready.index(slot), v_smem.index(slot))

    @gluon.jit
    def _consumer(descs, smem, bars, qk_scale, H, GROUP, n_q, n_kv, n_tiles,
                  HEAD_DIM: gl.constexpr, QK_EXTRA: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                  OWN_BLOCKS: gl.constexpr, RAGGED: gl.constexpr, Q_STRIDED: gl.constexpr,
                  PERSISTENT: gl.constexpr, BY_LENGTH: gl.constexpr, W: gl.constexpr):
        # warpgroup W's 64 rows of each tile of 128 (the producer's walk)
        if PERSISTENT:
            tiles_m = gl.cdiv(n_q, 2 * BLOCK_M)
            count = gl.to_tensor(0)
            i = gl.to_tensor(0)
            for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
                b, h, m0, delta, n_blocks = _walk(t, tiles_m, n_tiles, n_q, n_kv, H, BLOCK_M,
                                                  BLOCK_N, CAUSAL, BY_LENGTH)
                _consume(descs, smem, bars, qk_scale, b, h, m0, delta, n_blocks, count, i, H,
                         n_q, n_kv, HEAD_DIM, QK_EXTRA, BLOCK_M, BLOCK_N, STAGES, CAUSAL,
                         OWN_BLOCKS, RAGGED, Q_STRIDED, PERSISTENT, CAUSAL, W)
                count += n_blocks
                i += 1
            tma.store_wait(pendings=0)
        else:
            b, h, m0, delta, n_blocks = _tile(n_q, n_kv, H, GROUP, BLOCK_M, BLOCK_N, CAUSAL)
            _consume(descs, smem, bars, qk_scale, b, h, m0, delta, n_blocks, 0, 0, H, n_q, n_kv,
                     HEAD_DIM, QK_EXTRA, BLOCK_M, BLOCK_N, STAGES, CAUSAL, OWN_BLOCKS, RAGGED,
                     Q_STRIDED, PERSISTENT, False, W)

    @gluon.jit
    def _consume(descs, smem, bars, qk_scale, b, h, m0, delta, n_blocks, count, i, H, n_q, n_kv,
                 HEAD_DIM: gl.constexpr, QK_EXTRA: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                 OWN_BLOCKS: gl.constexpr, RAGGED: gl.constexpr, Q_STRIDED: gl.constexpr,
                 PERSISTENT: gl.constexpr, ALTERNATE: gl.constexpr, W: gl.constexpr):
        # one tile, the ring's slots and phases running on from ``count`` blocks. PERSISTENT:
        # O's store is left in flight, and waited for under the next tile's first Q K^T, which
        # then frees its Q buffer for the producer
        q_desc, k_desc, v_desc, o_desc, O, LSE, q2_desc, k2_desc = descs
        q_smem, k_smem, v_smem, q2_smem, k2_smem = smem
        bar_q, q_empty, k_ready, k_empty, v_ready, v_empty = bars
        dtype: gl.constexpr = q_desc.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        first = m0 + _stripe(W, i, ALTERNATE) * BLOCK_M
        offs_m = first + gl.arange(0, BLOCK_M, layout=row_s)
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        mask_from = (first + delta) // BLOCK_N
        mine = n_blocks
        if not CAUSAL:
            mask_from = n_blocks
        elif OWN_BLOCKS:  # only the blocks up to these rows' diagonal (warpgroup 0 stops first)
            mine = gl.cdiv(gl.minimum(first + BLOCK_M + delta, n_kv), BLOCK_N)
        if RAGGED:  # a ragged last tile's half past the last query row: block 0 alone (its
            if first >= n_q:  # rows are never stored), the rest released unread; 1 in
                mine = mine * 0 + 1  # mine's type, as both branches of the if must give it
        qb = (i % 2) * 2 + W
        q, q2 = q_smem.index(qb), q2_smem.index(qb)
        s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
        mbarrier.wait(bar_q.index(qb), (i // 2) & 1)

        # block 0
        slot = count % STAGES
        mbarrier.wait(k_ready.index(slot), (count // STAGES) & 1)
        s_tok = _qk(q, q2, k_smem.index(slot), k2_smem.index(slot), s_zero, QK_EXTRA)
        if PERSISTENT:
            if i > 0:  # the last tile's O is out: its Q buffer is free
                tma.store_wait(pendings=0)
                mbarrier.arrive(q_empty.index(((i - 1) % 2) * 2 + W), count=1)
        s = warpgroup_mma_wait(0, deps=[s_tok])
        mbarrier.arrive(k_empty.index(slot), count=1)
        s = _masked(s, 0, mask_from, offs_m, offs_n, delta, BLOCK_N, CAUSAL)
        s = _key_tail(s, 0, n_blocks, n_kv, offs_n, BLOCK_N, CAUSAL, RAGGED)
        p, alpha, l_i, m_i = _softmax(s, gl.full([BLOCK_M], float("-inf"), gl.float32, row_s),
                                      gl.zeros([BLOCK_M], gl.float32, row_s), qk_scale)
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)

        for j in range(1, mine):
            c = count + j
            slot = c % STAGES
            prev = (c - 1) % STAGES
            mbarrier.wait(k_ready.index(slot), (c // STAGES) & 1)
            s_tok = _qk(q, q2, k_smem.index(slot), k2_smem.index(slot), s_zero, QK_EXTRA)
            mbarrier.wait(v_ready.index(prev), ((c - 1) // STAGES) & 1)
            acc_tok = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
            s = warpgroup_mma_wait(1, deps=[s_tok])
            mbarrier.arrive(k_empty.index(slot), count=1)
            s = _masked(s, j, mask_from, offs_m, offs_n, delta, BLOCK_N, CAUSAL)
            s = _key_tail(s, j, n_blocks, n_kv, offs_n, BLOCK_N, CAUSAL, RAGGED)
            p, alpha, l_i, m_i = _softmax(s, m_i, l_i, qk_scale)
            acc, p_op = warpgroup_mma_wait(0, deps=[acc_tok, p_op])
            mbarrier.arrive(v_empty.index(prev), count=1)
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            p_op = gl.convert_layout(p.to(dtype), p_layout)

        c = count + mine - 1
        last = c % STAGES
        mbarrier.wait(v_ready.index(last), (c // STAGES) & 1)
        acc = warpgroup_mma_wait(0, deps=[warpgroup_mma(p_op, v_smem.index(last), acc,
                                                        is_async=True)])
        mbarrier.arrive(v_empty.index(last), count=1)
        for j in range(mine, n_blocks):  # the other warpgroup's blocks: released unread, each
            c = count + j                 # once landed (an early arrival would free a slot the
            slot = c % STAGES             # other warpgroup still reads)
            phase = (c // STAGES) & 1
            mbarrier.wait(k_ready.index(slot), phase)
            mbarrier.arrive(k_empty.index(slot), count=1)
            mbarrier.wait(v_ready.index(slot), phase)
            mbarrier.arrive(v_empty.index(slot), count=1)
        # this warpgroup's Q buffer (its first HEAD_DIM columns) holds its O
        _store_o(acc, m_i, l_i, first, q, o_desc, O, LSE, b, h, H, n_q, HEAD_DIM, BLOCK_M,
                 RAGGED, Q_STRIDED, not PERSISTENT)

    @gluon.jit
    def flash_fwd_sm90_ws(q_desc, k_desc, v_desc, o_desc, O, LSE, q2_desc, k2_desc, qk_scale,
                          H, GROUP, n_q, n_kv, n_tiles, k_pitch, k_width, v_pitch, v_width,
                          HEAD_DIM: gl.constexpr, QK_EXTRA: gl.constexpr,
                          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                          CAUSAL: gl.constexpr, OWN_BLOCKS: gl.constexpr, RAGGED: gl.constexpr,
                          Q_STRIDED: gl.constexpr, K_STRIDED: gl.constexpr,
                          V_STRIDED: gl.constexpr, PERSISTENT: gl.constexpr,
                          BY_LENGTH: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                          num_warps: gl.constexpr):
        # PERSISTENT: a program an SM walks tiles; Q buffers for two tiles, so that the next
        # tile's Q loads under this one's last blocks
        dtype: gl.constexpr = q_desc.dtype
        Q_BUFS: gl.constexpr = 2 + 2 * PERSISTENT
        q_smem = gl.allocate_shared_memory(dtype, [Q_BUFS, BLOCK_M, HEAD_DIM], q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
        q2_smem, k2_smem = q_smem, k_smem   # unread without QK_EXTRA
        if QK_EXTRA:
            q2_smem = gl.allocate_shared_memory(dtype, [Q_BUFS, BLOCK_M, QK_EXTRA],
                                                q2_desc.layout)
            k2_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, QK_EXTRA],
                                                k2_desc.layout)
        bar_q = gl.allocate_shared_memory(gl.int64, [Q_BUFS, 1], mbarrier.MBarrierLayout())
        q_empty = bar_q                     # unread without PERSISTENT
        if PERSISTENT:
            q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFS, 1], mbarrier.MBarrierLayout())
            for i in gl.static_range(Q_BUFS):
                mbarrier.init(q_empty.index(i), count=1)
        k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(Q_BUFS):
            mbarrier.init(bar_q.index(i), count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(k_ready.index(i), count=1)
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=2)   # both consumers
            mbarrier.init(v_empty.index(i), count=2)
        descs = (q_desc, k_desc, v_desc, o_desc, O, LSE, q2_desc, k2_desc)
        smem = (q_smem, k_smem, v_smem, q2_smem, k2_smem)
        bars = (bar_q, q_empty, k_ready, k_empty, v_ready, v_empty)
        gl.warp_specialize([
            (_consumer, (descs, smem, bars, qk_scale, H, GROUP, n_q, n_kv, n_tiles, HEAD_DIM,
                         QK_EXTRA, BLOCK_M, BLOCK_N, STAGES, CAUSAL, OWN_BLOCKS, RAGGED,
                         Q_STRIDED, PERSISTENT, BY_LENGTH, 0)),
            (_consumer, (descs, smem, bars, qk_scale, H, GROUP, n_q, n_kv, n_tiles, HEAD_DIM,
                         QK_EXTRA, BLOCK_M, BLOCK_N, STAGES, CAUSAL, OWN_BLOCKS, RAGGED,
                         Q_STRIDED, PERSISTENT, BY_LENGTH, 1)),
            (_producer, (descs, smem, bars, qk_scale, H, GROUP, n_q, n_kv, n_tiles,
                         (k_pitch, k_width, v_pitch, v_width), HEAD_DIM, QK_EXTRA, BLOCK_M,
                         BLOCK_N, STAGES, CAUSAL, OWN_BLOCKS, RAGGED, Q_STRIDED, K_STRIDED,
                         V_STRIDED, PERSISTENT, BY_LENGTH, 0))], [4, 1],
            [CONSUMER_REGS, 24])


# q and k's head dim, v's: flash_attention_sm90's and latent attention's (DeepSeek-V2/V3: 128
# dims and 64 rotary ones against v's 128)
DIMS = F9.DIMS | {(192, 128)}
SMEM_BYTES = 227 << 10  # an H100/H200 program's shared memory at most


def config(head_dim: int, causal: bool = False, n_kv: int = 0, v_dim: int = 0) -> dict:
    """Tiles: 2 x 64 query rows, BLOCK_N keys a block; registers a consumer thread (the
    program's maxnreg is what 12 warps may each hold, 65,536 / 384 rounded down to 8).
    128-key blocks where two stages of K and V and both Q tiles fit in shared memory (q's
    head dim ``head_dim``, v's ``v_dim``: 128 and latent attention's 192/128, not 256), else
    64. A short causal row (at most 512 keys) takes 64-key blocks, and each warpgroup computes
    only the blocks up to its own rows' diagonal (OWN_BLOCKS), not all of its program's.
    RAGGED and the STRIDED flags are off here, for whole tiles of contiguous tensors; flags()
    sets them from the inputs, and PERSISTENT (a program an SM walking the tiles)."""
    short = causal and 0 < n_kv <= 512
    fits = 2 * (2 * 64 * head_dim + 2 * 128 * (head_dim + (v_dim or head_dim))) <= SMEM_BYTES
    return {"BLOCK_M": 64, "BLOCK_N": 128 if fits and not short else 64, "STAGES": 2,
            "OWN_BLOCKS": short, "RAGGED": False, "Q_STRIDED": False, "K_STRIDED": False,
            "V_STRIDED": False, "PERSISTENT": False, "BY_LENGTH": False, "CONSUMER_REGS": 240,
            "num_warps": 4, "maxnreg": 168}


# causal rows walk past WALK_CAUSAL_FROM[group - 1] keys (its last entry from BY_LENGTH_GROUP
# heads a KV head on, walked by length; by head below) up to WALK_CAUSAL_MOST
WALK_CAUSAL_FROM = (384, 256, 128)
WALK_CAUSAL_MOST = 8192
# a walk's 128-row tiles may hold this share more rows than 64-row tiles (from 961 query rows;
# a half-empty last tile's empty warpgroup computes one block, _consume); on short rows the
# plain kernel's unpadded 64-row tiles go first instead (routing.plain_first)
WALK_PAD_SHARE = 1 / 16
# ragged lengths at head dim 256 run here from this many queries (and a wave of tiles)
RAGGED_256_FROM = 1024
# latent attention walks with 64-key blocks up to this many keys, causal (past 128) or not
LATENT_WALK_KEYS = 1024
# A causal walk by length reads in a round the K and V of as many heads as programs, each
# shared only by the heads of its group; a 128-row tile does 128 FLOP a byte of K and V, so a
# round is compute-bound where GROUP x 128 is past the HBM's ridge (the H100-SXM's at bf16 in
# rooflab.hardware: about 295 FLOP a byte). Below it, by head: a head's tiles share in L2.
BY_LENGTH_GROUP = 3


def walks(n_q: int, n_kv: int, head_dim: int, v_dim: int, causal: bool, group: int = 1,
          pad_share: float | None = None) -> bool:
    """Whether a program an SM walks the tiles (PERSISTENT), where tiles of 128 query rows hold
    at most ``pad_share`` (WALK_PAD_SHARE) more rows than the plain kernel's 64-row ones (64 a
    head where a head's last tile is half empty; past that the padded rows cost more than the
    walk saves; latent attention: none more): at head dim 128 without a mask, or causal from
    WALK_CAUSAL_FROM (``group`` heads a KV head) to WALK_CAUSAL_MOST keys; latent attention's
    rows up to LATENT_WALK_KEYS, with 64-key blocks (flags()). There the next tile's loads run
    under this one's end, as in cuDNN's kernel. Causal tiles are uneven, and a static walk
    balances them worse than the GPU's own launch order: that costs more than the walk saves on
    long rows, where each tile's setup weighs little, and on the shortest walked by head, where
    the plain kernel's four programs an SM hide each other's setup (the A/Bs:
    docs/kernels/flash_attention_sm90.md)."""
    tiles_64 = -(-n_q // 64)
    padded = 2 * -(-n_q // 128) - tiles_64  # 64-row halves a head past the last query row
    if (head_dim, v_dim) == (192, 128):
        return (not causal or n_kv > 128) and n_kv <= LATENT_WALK_KEYS and not padded
    shortest = WALK_CAUSAL_FROM[min(group, len(WALK_CAUSAL_FROM)) - 1]
    share = WALK_PAD_SHARE if pad_share is None else pad_share
    return (head_dim, v_dim) == (128, 128) and (
        not causal or shortest < n_kv <= WALK_CAUSAL_MOST) and padded <= share * tiles_64


def flags(q, k, v, causal: bool, cfg: dict | None = None, out=None) -> dict:
    """config() with the inputs' flags and ``cfg`` over it: PERSISTENT where walks(), with four
    stages where it takes 64-key blocks at head dim 128, and 64-key blocks for latent
    attention; a causal walk BY_LENGTH where BY_LENGTH_GROUP heads or more share a KV head;
    RAGGED where a length is not whole tiles (a masked key tail; a tile past the last row
    stores without TMA); Q_STRIDED where q and out, K_STRIDED where k, V_STRIDED where v come
    tokens first (strided)."""
    c = config(q.shape[-1], causal, k.shape[2], v.shape[-1])
    group = q.shape[1] // k.shape[1]
    c["PERSISTENT"] = walks(q.shape[2], k.shape[2], q.shape[-1], v.shape[-1], causal, group)
    c["BY_LENGTH"] = causal and group >= BY_LENGTH_GROUP
    if c["PERSISTENT"] and (q.shape[-1], v.shape[-1]) == (192, 128):
        c.update(BLOCK_N=64, OWN_BLOCKS=causal)  # latent's walk: 64-key blocks, config's stages
    c["RAGGED"] = bool(q.shape[2] % (2 * c["BLOCK_M"]) or k.shape[2] % c["BLOCK_N"])
    c = {**c, **F9.strided(q, k, v), **(cfg or {})}
    if c["PERSISTENT"] and c["OWN_BLOCKS"] and q.shape[-1] == 128 and "STAGES" not in (cfg or {}):
        c["STAGES"] = 4  # 64-key blocks: four stages fit beside the walk's four Q buffers
    return c


def walk_stages(qk_dim: int, v_dim: int, block_n: int) -> int:
    """Stages of K and V blocks that fit in shared memory beside a walk's four Q buffers."""
    return (SMEM_BYTES // 2 - 4 * 64 * qk_dim) // (block_n * (qk_dim + v_dim))


def usable(q, k, v, causal: bool, cfg: dict | None = None, out=None) -> str | None:
    """None where this kernel takes these inputs, else why not: flash_attention_sm90.usable's
    rules, head dims of DIMS. Ragged lengths at head dim 256 go to the Triton kernel below
    RAGGED_256_FROM queries or a wave of 128-row tiles (one an SM), where its 64-row tiles
    fill more SMs and pad less (the A/Bs: docs/kernels/flash_attention_sm90.md)."""
    c = flags(q, k, v, causal, cfg, out)
    b, h, n_q = q.shape[:3]
    tiles = b * h * -(-n_q // (2 * c["BLOCK_M"]))
    if c["RAGGED"] and q.shape[-1] == 256 and "RAGGED" not in (cfg or {}) and (
            n_q < RAGGED_256_FROM or q.is_cuda and tiles < F9.sm_count(q.device)):
        return "ragged lengths at head dim 256, short or few tiles"
    if c["PERSISTENT"] and c["STAGES"] > walk_stages(q.shape[-1], v.shape[-1], c["BLOCK_N"]):
        return "PERSISTENT's Q buffers for two tiles and its stages do not fit"
    return F9.usable(q, k, v, causal, {**c, "BLOCK_M": 2 * c["BLOCK_M"]}, out, DIMS)


def flash_attention_sm90_ws(q, k, v, causal: bool = False, scale: float | None = None,
                            cfg: dict | None = None, out: torch.Tensor | None = None):
    """(O, LSE) as flash_attention.flash_attention returns them, for inputs usable() takes;
    without ``out``, O in q's layout (v's width)."""
    b, h, n_q, d_qk = q.shape
    hkv, n_kv, d = k.shape[1], k.shape[2], v.shape[-1]
    out = F9.out_like(q, d) if out is None else out
    c = flags(q, k, v, causal, cfg, out)
    bm, bn = c.pop("BLOCK_M"), c.pop("BLOCK_N")
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    scale = scale if scale is not None else d_qk ** -0.5
    qd, kd, extra = desc(q, bm, d), desc(k, bn, d), d_qk - d  # q and k's first d columns
    q2d, k2d = (desc(q, bm, extra), desc(k, bn, extra)) if extra else (qd, kd)
    grid, tiles = (triton.cdiv(n_q, 2 * bm), b * h), triton.cdiv(n_q, 2 * bm) * b * h
    if c["PERSISTENT"]:  # a program an SM (168 registers a thread for 12 warps: one fits)
        grid = (min(tiles, F9.sm_count(q.device)),)
    flash_fwd_sm90_ws[grid](
        qd, kd, desc(v, bn), desc(out, bm), out, lse, q2d, k2d, scale * F9.LOG2E,
        h, h // hkv, n_q, n_kv, tiles, *layout(k)[1:], *layout(v)[1:], HEAD_DIM=d,
        QK_EXTRA=extra, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, **c)
    return out, lse
