"""FlashAttention forward for Hopper, in Gluon: flash_attention.py's algorithm with the
tensor-core waits written by hand.

Triton makes each Q K^T of flash_attention.py wait for every tensor-core (wgmma) op before it, so
within a program the matmuls and the softmax take turns (its config() says what that costs).
Gluon, Triton's lower-level language, issues wgmma ops asynchronously and waits where it is told.
This kernel uses that for FlashAttention-3's overlap within a warpgroup: block j's Q K^T and
block j-1's P V are issued together, block j's softmax runs while P V is still on the tensor
cores, and only the rescale of the accumulator waits for it. K and V arrive by the tensor memory
accelerator (TMA) into a ring of STAGES buffers, each with its own barrier.

Scope: sm_90, fp16/bf16, head dims 64, 128, 256, GQA, causal or not, any lengths (RAGGED where
they are not whole tiles: the last key block's tail masked, the last query tile stored by
address); q, k, v in any layout() reads (contiguous, transformers' tokens first, slices of a
fused projection's rows, a longer cache's first rows, whole key blocks of it). Anything else is
flash_attention.py's.
Gluon does not run under TRITON_INTERPRET: this kernel is checked on a GPU (tests marked gpu) and
compiled for sm_90 without one in CI (benchmarks/flash_resources.py --gluon, which also reads
ptxas's warning that it serialized the wgmma ops).

routing.which() says where it is the default; the A/Bs behind that, and what was tried
and left: docs/kernels/flash_attention_sm90.md.
"""
from __future__ import annotations

import torch

try:  # Gluon ships with Triton 3.4 and later; its API is experimental and moves between versions
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    # names that moved after Triton 3.6 (3.9 has async_load, async_store, barrier)
    tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
    sync_warps = getattr(gl, "thread_barrier", None) or gl.barrier  # bar.sync of the program
    GLUON_MISSING = None
except ImportError as _e:  # pragma: no cover - where Triton or its Gluon is missing
    gluon = None
    GLUON_MISSING = f"Gluon's Hopper API is not importable ({_e})"

LOG2E = 1.4426950408889634

if gluon is not None:
    @gluon.jit
    def _at(b, h, row, heads, pitch, width, STRIDED: gl.constexpr):
        # where row ``row`` of head h of batch b starts in its tensor's 2-D view (row, column);
        # ``pitch`` rows a head (a batch, STRIDED): its length, or a longer cache's; ``width``
        # columns from one head's first to the next's (STRIDED)
        if STRIDED:  # (B, P, H, W) in memory, a row a token: transformers' layout
            return b * pitch + row, h * width
        else:        # (B, H, P, D) in memory, seen as (B * H * P, D)
            return (b * heads + h) * pitch + row, 0

    @gluon.jit
    def _load(desc, at, bar, dst, pred):
        # one tile by TMA from (row, column) ``at``; bar counts its bytes in
        mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
        tma_load(desc, [at[0], at[1]], bar, dst, pred=pred)

    @gluon.jit
    def _softmax(s, m_i, l_i, qk_scale):
        # the online softmax on raw scores s, in log2 units (flash_attention._update's)
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        p = gl.exp2(s * qk_scale - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        return p, alpha, l_i * alpha + gl.sum(p, 1), m_new

    @gluon.jit
    def _scores(q, k_smem, bar_k, j, s_zero, STAGES: gl.constexpr):
        # issue S = Q K_j^T once block j's K has landed in its slot; returns the pending S.
        # q is Q's tile in shared memory, or in registers
        mbarrier.wait(bar_k.index(j % STAGES), (j // STAGES) & 1)
        return warpgroup_mma(q, k_smem.index(j % STAGES).permute((1, 0)), s_zero,
                             use_acc=False, is_async=True)

    @gluon.jit
    def _pv(p_op, v_smem, bar_v, j, acc, STAGES: gl.constexpr):
        # issue acc += P_j V_j once block j's V has landed; returns the pending acc
        mbarrier.wait(bar_v.index(j % STAGES), (j // STAGES) & 1)
        return warpgroup_mma(p_op, v_smem.index(j % STAGES), acc, is_async=True)

    @gluon.jit
    def _masked(s, j, mask_from, offs_m, offs_n, delta, BLOCK_N: gl.constexpr,
                CAUSAL: gl.constexpr):
        # causal: in blocks that cross the diagonal, query row + delta sees keys <= it
        if CAUSAL:
            if j >= mask_from:
                keep = offs_m[:, None] + delta >= (j * BLOCK_N + offs_n)[None, :]
                s = gl.where(keep, s, float("-inf"))
        return s

    @gluon.jit
    def _key_tail(s, j, n_blocks, n_kv, offs_n, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                  RAGGED: gl.constexpr):
        # a ragged n_kv's last block holds rows past the head's keys: they score -inf (causal
        # masks them already for every row that is stored)
        if RAGGED and not CAUSAL:
            if j == n_blocks - 1:
                s = gl.where((j * BLOCK_N + offs_n < n_kv)[None, :], s, float("-inf"))
        return s

    @gluon.jit
    def _store_o(acc, m_i, l_i, first, o_smem, o_desc, O, LSE, b, h, H, n_q,
                 HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, RAGGED: gl.constexpr,
                 Q_STRIDED: gl.constexpr, WAIT: gl.constexpr):
        # O = acc / l and LSE (natural log) of head h's BLOCK_M query rows from ``first``: O by
        # TMA through o_smem, or by address where a ragged tile runs past the head's last row
        # (TMA would write the next head's rows); WAIT: until the TMA store is out, else the
        # caller waits before it writes o_smem again
        row_o: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
        l_o = gl.convert_layout(l_i, row_o)
        acc = acc / l_o[:, None]
        lse = (gl.convert_layout(m_i, row_o) + gl.log2(l_o)) * 0.6931471805599453
        rows = first + gl.arange(0, BLOCK_M, layout=row_o)
        lse_at = LSE + (b * H + h).to(gl.int64) * n_q + rows
        if RAGGED:
            gl.store(lse_at, lse, mask=rows < n_q)
        else:
            gl.store(lse_at, lse)
        if RAGGED and first + BLOCK_M > n_q:
            offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc.type.layout))
            row, col = _at(b, h, rows.to(gl.int64), H, n_q, HEAD_DIM, Q_STRIDED)
            if Q_STRIDED:                        # elements from one row of the view to the next
                out = O + (row * (H * HEAD_DIM) + col)[:, None] + offs_d[None, :]
            else:
                out = O + (row * HEAD_DIM)[:, None] + offs_d[None, :]
            gl.store(out, acc.to(O.dtype.element_ty), mask=(rows < n_q)[:, None])
        else:
            o_smem.store(acc.to(o_desc.dtype))
            fence_async_shared()
            tile = _at(b, h, first, H, n_q, HEAD_DIM, Q_STRIDED)
            tma_store(o_desc, [tile[0], tile[1]], o_smem)
            if WAIT:
                tma.store_wait(pendings=0)

    @gluon.jit
    def flash_fwd_sm90(q_desc, k_desc, v_desc, o_desc, O, LSE, qk_scale, H, GROUP, n_q, n_kv,
                       k_pitch, k_width, v_pitch, v_width, HEAD_DIM: gl.constexpr,
                       BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                       CAUSAL: gl.constexpr, RAGGED: gl.constexpr, Q_STRIDED: gl.constexpr,
                       K_STRIDED: gl.constexpr, V_STRIDED: gl.constexpr,
                       num_warps: gl.constexpr):
        # q, k, v, o are 2-D views of (B, H, N, D) tensors (layout(): k's and v's pitch and
        # width given); _at places a tile in them. O: o's first element, for a ragged last tile
        start_m = gl.program_id(0)
        if CAUSAL:  # the longest tiles (last queries, most keys) first, the shortest in the tail
            start_m = gl.num_programs(0) - 1 - start_m
        bh = gl.program_id(1)
        b, h = bh // H, bh % H
        q_at = _at(b, h, start_m * BLOCK_M, H, n_q, HEAD_DIM, Q_STRIDED)
        hk = h // GROUP                          # the K/V head this query head reads
        k_at = _at(b, hk, 0, H // GROUP, k_pitch, k_width, K_STRIDED)
        v_at = _at(b, hk, 0, H // GROUP, v_pitch, v_width, V_STRIDED)
        dtype: gl.constexpr = q_desc.dtype

        # The tensor cores' register layouts: S (BLOCK_M, BLOCK_N) and O (BLOCK_M, D) split by
        # rows over the warps, 16 rows a warp; P enters P V from registers, in O's A-operand form
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
        o_smem = q_smem                          # Q's buffer holds O on its way out
        bar_q = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        bar_k = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        bar_v = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        mbarrier.init(bar_q, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(bar_k.index(i), count=1)
            mbarrier.init(bar_v.index(i), count=1)

        delta = n_kv - n_q                       # causal: the queries are the last n_q
        offs_m = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_s)
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:  # blocks up to the diagonal; those from mask_from on cross it
            n_blocks = gl.cdiv(gl.minimum((start_m + 1) * BLOCK_M + delta, n_kv), BLOCK_N)
            mask_from = (start_m * BLOCK_M + delta) // BLOCK_N
        else:
            n_blocks = gl.cdiv(n_kv, BLOCK_N)
            mask_from = n_blocks
        _load(q_desc, q_at, bar_q, q_smem, True)
        for i in gl.static_range(STAGES):  # fill the ring
            _load(k_desc, (k_at[0] + i * BLOCK_N, k_at[1]), bar_k.index(i), k_smem.index(i),
                  i < n_blocks)
            _load(v_desc, (v_at[0] + i * BLOCK_N, v_at[1]), bar_v.index(i), v_smem.index(i),
                  i < n_blocks)
        mbarrier.wait(bar_q, 0)
        q = q_smem

        # block 0: its scores, then its softmax; the accumulator starts empty
        s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
        s = warpgroup_mma_wait(0, deps=[_scores(q, k_smem, bar_k, 0, s_zero, STAGES)])
        s = _masked(s, 0, mask_from, offs_m, offs_n, delta, BLOCK_N, CAUSAL)
        s = _key_tail(s, 0, n_blocks, n_kv, offs_n, BLOCK_N, CAUSAL, RAGGED)
        p, alpha, l_i, m_i = _softmax(s, gl.full([BLOCK_M], float("-inf"), gl.float32, row_s),
                                      gl.zeros([BLOCK_M], gl.float32, row_s), qk_scale)
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
        sync_warps()                             # every warp is done with K's slot 0
        _load(k_desc, (k_at[0] + STAGES * BLOCK_N, k_at[1]), bar_k.index(0), k_smem.index(0),
              STAGES < n_blocks)

        # FlashAttention-3's order: S_j and P_{j-1} V_{j-1} are issued together, and nothing
        # stays in flight across the loop's back edge. Issuing S_{j+1} before the wait on P V
        # as well (so that the rescale runs under it) made ptxas serialize every wgmma (its
        # warning C7514) and lost (docs/kernels/flash_attention_sm90.md).
        for j in range(1, n_blocks):
            s_tok = _scores(q, k_smem, bar_k, j, s_zero, STAGES)            # S_j = Q K_j^T
            acc_tok = _pv(p_op, v_smem, bar_v, j - 1, acc, STAGES)          # acc += P V
            s = warpgroup_mma_wait(1, deps=[s_tok])  # S_j done; P V may run on ...
            s = _masked(s, j, mask_from, offs_m, offs_n, delta, BLOCK_N, CAUSAL)
            s = _key_tail(s, j, n_blocks, n_kv, offs_n, BLOCK_N, CAUSAL, RAGGED)
            p, alpha, l_i, m_i = _softmax(s, m_i, l_i, qk_scale)           # ... under this
            acc, p_op = warpgroup_mma_wait(0, deps=[acc_tok, p_op])
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            p_op = gl.convert_layout(p.to(dtype), p_layout)
            sync_warps()                         # K's slot and V's previous slot are free
            _load(k_desc, (k_at[0] + (j + STAGES) * BLOCK_N, k_at[1]),
                  bar_k.index(j % STAGES), k_smem.index(j % STAGES), j + STAGES < n_blocks)
            _load(v_desc, (v_at[0] + (j - 1 + STAGES) * BLOCK_N, v_at[1]),
                  bar_v.index((j - 1) % STAGES), v_smem.index((j - 1) % STAGES),
                  j - 1 + STAGES < n_blocks)

        # the last block's P V, then normalise
        acc = warpgroup_mma_wait(0, deps=[_pv(p_op, v_smem, bar_v, n_blocks - 1, acc, STAGES)])
        sync_warps()                             # no warp still reads what O overwrites
        _store_o(acc, m_i, l_i, start_m * BLOCK_M, o_smem, o_desc, O, LSE, b, h, H, n_q,
                 HEAD_DIM, BLOCK_M, RAGGED, Q_STRIDED, True)
        mbarrier.invalidate(bar_q)
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(bar_k.index(i))
            mbarrier.invalidate(bar_v.index(i))


# query rows a program; config()'s and short()'s bounds
BLOCK_M, N32_KEYS, SHORT_WAVES, CAUSAL_KEYS_64 = 64, 256, 3, 1024
SHORT_KEYS, CAUSAL_KEYS, CAUSAL_WAVE = 1024, 2048, 3


def short(n_kv: int, per_sm: float, causal: bool) -> bool:
    """Whether a row at head dim 128 is short enough for this kernel to go before the
    warp-specialized one (routing.plain_first(): unless that one walks the row): at most
    SHORT_KEYS keys, or causal at most CAUSAL_KEYS on a grid of at least CAUSAL_WAVE programs
    an SM (``per_sm``). On a shallower one an SM holds one or two 64-row programs, which cannot
    keep it busy over that many keys (docs/kernels/flash_attention_sm90.md)."""
    return 0 < n_kv and (n_kv <= SHORT_KEYS or
                         causal and n_kv <= CAUSAL_KEYS and per_sm >= CAUSAL_WAVE)


def config(head_dim: int, n_kv: int = 0, per_sm: float = 0.0, causal: bool = False) -> dict:
    """Tiles of this kernel: 64 query rows a warpgroup (4 warps); the STRIDED flags off, for
    contiguous tensors (flags() sets them from the inputs). A short row's program has
    few key blocks, so its setup, first softmax and last P V weigh; more programs an SM hide
    them. Where the A/Bs found that faster (docs/kernels/flash_attention_sm90.md):
    - head dim 64, causal, at most CAUSAL_KEYS_64 keys: 64-key blocks (four programs an SM
      where 128-key blocks fit three; and fewer masked scores computed on the diagonal); and
      wherever the keys are not whole 128-key blocks.
    - head dim 128, rows short() takes: 64-key blocks in one stage (48 KB, three programs an
      SM where two stages fit two); at most N32_KEYS on a grid of at least SHORT_WAVES waves
      of four programs an SM (``per_sm``: programs over SMs), 32-key blocks in two (four an
      SM).
    What fits an SM is flash_resources.py --gluon's count. RAGGED is off here, for whole
    tiles; flags() sets it from the inputs."""
    bn, stages = {64: 128, 128: 64}.get(head_dim, 32), 2
    if head_dim == 64 and (causal and 0 < n_kv <= CAUSAL_KEYS_64 or n_kv % 128):
        bn = 64
    if head_dim == 128 and short(n_kv, per_sm, causal):
        if n_kv <= N32_KEYS and per_sm >= 4 * SHORT_WAVES:
            bn = 32
        else:
            stages = 1
    return {"BLOCK_M": BLOCK_M, "BLOCK_N": bn, "STAGES": stages, "RAGGED": False,
            "Q_STRIDED": False, "K_STRIDED": False, "V_STRIDED": False, "num_warps": 4}


def layout(t) -> tuple[bool, int, int] | None:
    """How (B, H, L, D) ``t`` lies in memory, as a 2-D view of P rows a head or a batch whose
    heads start W columns apart: (False, P, D) heads first, (B, H, P, D) with P >= L
    (contiguous: P = L; a static cache's first L rows: P its length); (True, P, W) tokens
    first, a row a token, each head's D columns W >= D apart: transformers' projections leave
    q, k and v so (P = L, W = D, rows H x D apart, or further where q, k and v are slices of
    one fused projection's rows), a cache of that layout holds them so (P its length), and
    latent attention's v is each head's last D of 2 D columns (W = 2 D). None for any other
    (the Triton kernel takes strides as they come)."""
    b, h, n, d = t.shape
    s0, s1, s2, s3 = t.stride()
    if t.data_ptr() % 16:  # TMA: an aligned base
        return None
    if t.is_contiguous():
        return False, n, d
    if s3 != 1:  # TMA: rows of contiguous elements
        return None
    if s2 == d:  # heads first
        strided, pitch, width = False, (s1 if h > 1 else s0 if b > 1 else n * d) // d, d
        ok = (h == 1 or s1 == pitch * d) and (b == 1 or s0 == h * pitch * d)
        end = b * h * pitch * d
    elif (width := s1 if h > 1 else d) >= d and s2 >= (h - 1) * width + d:  # tokens first
        strided, pitch = True, s0 // s2 if b > 1 else n
        ok = (b == 1 or s0 == pitch * s2) and s2 * t.element_size() % 16 == 0  # TMA: strides
        end = (b * pitch - 1) * s2 + (h - 1) * width + d
    else:
        return None
    if not ok or pitch < n or t.untyped_storage().nbytes() < (
            t.storage_offset() + end) * t.element_size():  # the 2-D view past the storage
        return None
    return strided, pitch, width


def strided(q, k, v) -> dict:
    """Q_STRIDED where q (and out), K_STRIDED where k, V_STRIDED where v come tokens first
    (layout), read by TMA at the head's column; k and v may lie apart (DeepSeek-V2's v in
    transformers is a slice of a wider tensor, its k a tensor of its own)."""
    return {f"{x}_STRIDED": bool((layout(t) or (False,))[0]) for x, t in zip("QKV", (q, k, v))}


def sm_count(device) -> int:
    """The SMs of ``device``, a CUDA GPU."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def programs_per_sm(q) -> float:
    """This kernel's programs (BLOCK_M query rows of a head) for q over the GPU's SMs; 0 off
    a GPU."""
    if not q.is_cuda:
        return 0.0
    b, h, n_q, _ = q.shape
    return b * h * -(-n_q // BLOCK_M) / sm_count(q.device)


def flags(q, k, v, causal: bool = False, cfg: dict | None = None) -> dict:
    """config() for these inputs' keys, mask and grid, with their layouts (strided), RAGGED
    where a length is not whole tiles, and ``cfg`` over it."""
    c = config(q.shape[-1], k.shape[2], programs_per_sm(q), causal)
    c["RAGGED"] = bool(q.shape[2] % BLOCK_M or k.shape[2] % c["BLOCK_N"])
    return {**c, **strided(q, k, v), **(cfg or {})}


def out_like(q, v_dim: int = 0):
    """An empty O (v_dim wide, else q's width) in q's layout: tokens first where q is
    (layout), else contiguous."""
    b, h, n_q, d = q.shape
    d = v_dim or d
    if layout(q)[0]:
        return torch.empty(b, n_q, h, d, device=q.device, dtype=q.dtype).transpose(1, 2)
    return torch.empty(b, h, n_q, d, device=q.device, dtype=q.dtype)


# (q and k's head dim, v's) this kernel takes
DIMS = {(64, 64), (128, 128), (256, 256)}


def usable(q, k, v, causal: bool, cfg: dict | None = None, out=None,
           dims: set = DIMS) -> str | None:
    """None where this kernel takes these inputs, else why not (flash_attention.py then runs):
    q and out in one layout of their own length, each head's columns next to the next's (out's
    rows too); k and v each in a layout, their rows past their length read only where the keys
    are whole blocks; lengths that are not whole tiles only under RAGGED (a ``cfg`` may turn it
    off); head dims of ``dims``."""
    if GLUON_MISSING:
        return GLUON_MISSING
    if not (q.is_cuda and torch.cuda.get_device_capability(q.device)[0] == 9):
        return "not an sm_90 GPU"
    c = flags(q, k, v, causal, cfg)
    if causal and q.shape[2] > k.shape[2]:
        return "causal with more queries than keys"
    if (q.shape[-1], v.shape[-1]) not in dims or q.dtype not in (torch.float16, torch.bfloat16):
        return "head dim or dtype"
    if not c["RAGGED"] and (q.shape[2] % c["BLOCK_M"] or k.shape[2] % c["BLOCK_N"]):
        return "lengths not whole tiles"
    if out is not None and out.dtype != q.dtype:
        return "out's dtype is not q's"
    q_at, k_at, v_at = layout(q), layout(k), layout(v)
    if q_at is None or q_at[1:] != (q.shape[2], q.shape[-1]) or out is not None and (
            layout(out) != (q_at[0], q.shape[2], out.shape[-1]) or out.stride(2) != (
                out.shape[1] * out.shape[-1] if q_at[0] else out.shape[-1])):
        return "q and out not in one layout of their own length and rows"
    if k_at is None or v_at is None:
        return "k or v in no layout"
    if any(at[1] > t.shape[2] and t.shape[2] % c["BLOCK_N"] for at, t in ((k_at, k), (v_at, v))):
        return "ragged keys in a longer cache"
    return None


def desc(t, rows: int, cols: int = 0):
    """A TMA descriptor of (B, H, L, D) ``t``'s 2-D view (layout, _at), tiles of rows x D (or
    rows x ``cols``: some of a head's columns)."""
    b, h, n, d = t.shape
    strided, pitch, width = layout(t)
    view = (torch.as_strided(t, (b * pitch, (h - 1) * width + d), (t.stride(2), 1)) if strided
            else torch.as_strided(t, (b * h * pitch, d), (d, 1)))
    el = gl.float16 if t.dtype == torch.float16 else gl.bfloat16
    cols = cols or d
    lay = gl.NVMMASharedLayout.get_default_for([rows, cols], el)
    return TensorDescriptor(view, list(view.shape), list(view.stride()), [rows, cols], lay)


def flash_attention_sm90(q, k, v, causal: bool = False, scale: float | None = None,
                         cfg: dict | None = None, out: torch.Tensor | None = None):
    """(O, LSE) as flash_attention.flash_attention returns them, for inputs usable() takes;
    without ``out``, O in q's layout."""
    b, h, n_q, d = q.shape
    hkv, n_kv = k.shape[1:3]
    out = out_like(q) if out is None else out
    c = flags(q, k, v, causal, cfg)
    bm, bn, stages = c.pop("BLOCK_M"), c.pop("BLOCK_N"), c.pop("STAGES")
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    scale = scale if scale is not None else d ** -0.5
    flash_fwd_sm90[(triton.cdiv(n_q, bm), b * h)](
        desc(q, bm), desc(k, bn), desc(v, bn), desc(out, bm), out, lse, scale * LOG2E, h, h // hkv,
        n_q, n_kv, *layout(k)[1:], *layout(v)[1:], HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
        STAGES=stages, CAUSAL=causal, **c)
    return out, lse
