"""Triton kernels: on the CPU under TRITON_INTERPRET=1 (CI), on CUDA with the gpu marker.
Tolerances are tied to PyTorch's own low-precision error on the same fresh random inputs."""
import os

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed")

from rooflab import count  # noqa: E402
from rooflab.kernels import flash_attention as FA  # noqa: E402
from rooflab.kernels import flash_decoding as FD  # noqa: E402
from rooflab.kernels import gelu as G  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def gelu_tolerance(n, dtype, device):
    torch_err = G.max_error(G.gelu_torch, n, dtype, device, seed=n)
    if INTERPRET and dtype == torch.bfloat16:
        # the interpreter truncates fp32 -> bf16 instead of rounding: allow one bf16 ulp of |y|<8
        return max(2 * torch_err, 2.0 ** -7 * 8)
    return max(2 * torch_err, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 1000, G.BLOCK + 3, 3 * G.BLOCK])  # incl. a ragged last block
def test_gelu_triton_matches(device, dtype, n):
    err = G.max_error(G.gelu_triton, n, dtype, device, seed=n)
    assert err == err  # not NaN: every element was written over the NaN poison
    assert err <= gelu_tolerance(n, dtype, device)


def test_gelu_unfused_cost_matches_the_counter():
    x = torch.randn(1000)
    c = count.count(G.gelu_unfused, x)
    hand = G.cost(1000, "fp32", fused=False)
    assert len(c.kernels()) == hand.kernels == 9
    assert c.total_bytes == hand.bytes == 4 * 1000 * (12 + 9)  # 84000: x * x reads x once
    assert G.cost(1000, "fp32").bytes == 8000  # fused: read once, write once
    assert float((G.gelu_unfused(x) - G.gelu_torch(x)).abs().max()) < 1e-5


def test_gelu_rejects_other_dtypes():
    with pytest.raises(TypeError, match="fp32, fp16 and bf16"):
        G.gelu_triton(torch.zeros(4, dtype=torch.int32))


SHAPES = [  # (B, H, Lq, Lkv, D, Hkv)
    (1, 2, 37, 37, 64, None),     # not a multiple of the block
    (2, 4, 20, 53, 32, 2),        # GQA, Lq < Lkv
    (1, 4, 1, 70, 64, 1),         # decode-like, MQA
    (1, 2, 33, 33, 256, 1),       # gemma's head_dim
    (1, 2, 48, 48, 128, None),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_fp64(device, shape, dtype, causal):
    b, h, lq, lkv, d, hkv = shape
    e = FA.errors(b, h, lq, lkv, d, hkv, dtype, causal, device=device, seed=lq + d)
    assert e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    assert e["lse_max_abs_err"] < 1e-3


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_through_tensor_descriptors(monkeypatch, device, shape, causal):
    """The TMA path (Hopper's tensor memory accelerator): same answers, ragged edges included."""
    if device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs compute capability 9 or later")
    made = []
    real = FA.descriptors
    monkeypatch.setattr(FA, "descriptors", lambda *a: made.append(1) or real(*a))
    cfg = {**FA.config(shape[4], causal), "TMA": True}
    b, h, lq, lkv, d, hkv = shape
    e = FA.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, causal, device=device, seed=lq + d,
                  kernel=lambda q, k, v, c: FA.flash_attention(
                      q, k, v, c, cfg=cfg, out=torch.full_like(q, float("nan"))))
    assert made and e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4 and e["lse_max_abs_err"] < 1e-3


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_the_first_blocks_max(device, shape, causal):
    """FIXED_MAX: after the first block, the max stays where it put it; same answers."""
    cfg = {**FA.config(shape[4], causal), "FIXED_MAX": True}
    b, h, lq, lkv, d, hkv = shape
    e = FA.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, causal, device=device, seed=lq + d,
                  kernel=lambda q, k, v, c: FA.flash_attention(
                      q, k, v, c, cfg=cfg, out=torch.full_like(q, float("nan"))))
    assert e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4 and e["lse_max_abs_err"] < 1e-3


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_q_in_registers(device, shape, dtype, causal):
    """Q_REG: q halved after its load (exact) and qk_scale doubled; same answers, by
    addresses and, where the GPU has one, through TMA."""
    b, h, lq, lkv, d, hkv = shape
    for tma in (False, True):
        cfg = {**FA.config(d, causal), "Q_REG": True, "TMA": tma}
        e = FA.errors(b, h, lq, lkv, d, hkv, dtype, causal, device=device, seed=lq + d,
                      kernel=lambda q, k, v, c: FA.flash_attention(
                          q, k, v, c, cfg=cfg, out=torch.full_like(q, float("nan"))))
        assert e["all_finite"]
        assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
        assert e["lse_max_abs_err"] < 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_first_blocks_max_falls_back_past_a_spike(device, causal):
    """A key far above the first block's max (p would be 2^100, inf in fp16): the kernel sees it
    and redoes the sweep with a running max, so the answer stays finite and right."""
    g = torch.Generator().manual_seed(3)
    d = 64
    spike = torch.randn(d, generator=g)
    q = torch.randn(1, 2, 70, d, generator=g) + 3 * spike
    k = torch.randn(1, 2, 200, d, generator=g)
    k[:, :, 150] = 3 * spike                   # a score near 9 sqrt(d) = 72 for every query,
    v = torch.randn(1, 2, 200, d, generator=g)  # past the first block at any tile size
    q, k, v = (t.to(device, torch.float16) for t in (q, k, v))
    cfg = {**FA.config(d, causal), "FIXED_MAX": True}
    o, lse = FA.flash_attention(q, k, v, causal, cfg=cfg)
    ref = FA.standard_attention(q.double(), k.double(), v.double(), causal)
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    assert float((o.double() - ref).norm() / ref.norm()) < 2e-3


@pytest.mark.parametrize("score", [9.5, 11.5])
def test_flash_attention_first_blocks_max_at_fp16s_edge(device, score):
    """One later key `score` (natural log units) above every key of the first block: 9.5 keeps
    the first block's max (p reaches e^9.5 = 2^13.7, inside fp16); 11.5 would make p 2^16.6,
    past fp16's 65504, so the kernel must have redone the sweep. Right answers both ways."""
    g = torch.Generator().manual_seed(5)
    d = 64
    q = torch.zeros(1, 1, 40, d)
    q[..., 0] = 8.0                             # every query along e_0, |q| = 8 = sqrt(d)
    k = 0.01 * torch.randn(1, 1, 200, d, generator=g)
    k[:, :, 150, 0] = score                     # q . k / sqrt(d) = score for that key alone,
    v = torch.randn(1, 1, 200, d, generator=g)  # past the first block at any tile size
    q, k, v = (t.to(device, torch.float16) for t in (q, k, v))
    o, _ = FA.flash_attention(q, k, v, cfg={**FA.config(d, False), "FIXED_MAX": True})
    ref = FA.standard_attention(q.double(), k.double(), v.double())
    assert torch.isfinite(o).all()
    assert float((o.double() - ref).norm() / ref.norm()) < 2e-3


def test_flash_attention_without_tma_where_strides_do_not_allow_it(device):
    wide = torch.randn(1, 2, 40, 65, dtype=torch.float16, device=device)
    q = wide[..., :64]  # rows 130 bytes apart: not a multiple of 16
    assert not FA.tma_ok(q)
    cfg = {**FA.config(64, False), "TMA": True}
    o, _ = FA.flash_attention(q, q, q, cfg=cfg)  # the address path takes it
    ref = FA.standard_attention(q.double(), q.double(), q.double())
    assert float((o.double() - ref).abs().max()) < 1e-2


def test_flash_attention_bad_input(device):
    q = torch.zeros(1, 2, 8, 48, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="head_dim"):
        FA.flash_attention(q, q, q)
    with pytest.raises(TypeError, match="fp16 or bf16"):
        FA.flash_attention(q.float(), q.float(), q.float())
    q = torch.zeros(1, 4, 8, 64, dtype=torch.float16, device=device)
    k = torch.zeros(1, 3, 8, 64, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="divide"):
        FA.flash_attention(q, k, k)
    with pytest.raises(ValueError, match="scale must be positive"):
        FA.flash_attention(q, q, q, scale=-0.125)


def test_flash_attention_falls_back_to_smaller_tiles(monkeypatch, device):
    """A GPU without the shared memory for the tuned tiles (e.g. a T4) gets smaller ones."""
    real = FA.flash_fwd
    tried = []

    class Launcher:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                tried.append(kw["BLOCK_M"])
                if len(tried) == 1:
                    raise triton.runtime.errors.OutOfResources(200_000, 65_536, "shared memory")
                return real[grid](*args, **kw)
            return launch

    monkeypatch.setattr(FA, "flash_fwd", Launcher())
    monkeypatch.setattr(FA, "config", lambda d, causal: {"BLOCK_M": 128, "BLOCK_N": 64,
                                                         "num_warps": 4, "num_stages": 1})
    q = torch.randn(1, 2, 40, 64, dtype=torch.float16, device=device)
    o, _ = FA.flash_attention(q, q, q)
    assert tried[0] == 128 and tried[1] == FA.SMALL_SMEM[0]["BLOCK_M"]
    ref = FA.standard_attention(q.double(), q.double(), q.double())
    assert float((o.double() - ref).abs().max()) < 1e-2


def test_flash_cost_is_fused_and_causal():
    c = FA.cost(1, 2, 128, 128, 64, dtype="fp16", causal=True)
    assert c.macs == 2 * (2 * (128 * 129 // 2)) * 64  # causal pairs only
    assert c.bytes == 2 * (4 * 2 * 128 * 64) + 4 * 2 * 128  # Q, K, V, O once + fp32 LSE


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_gpu_large(d, dtype, causal):
    e = FA.errors(2, 8, 1031, 1031, d, 2, dtype, causal, device="cuda", seed=d)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


GLUON_SHAPES = [  # (B, H, Lq, Lkv, D, Hkv): whole tiles; GQA, Lq != Lkv, one block, many
    (2, 8, 1024, 1024, 128, 2), (1, 4, 256, 2048, 64, 4), (2, 4, 128, 128, 256, 1),
    (1, 8, 64, 768, 128, 8), (1, 2, 512, 4096, 256, 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GLUON_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [{}, {"BLOCK_N": 64, "STAGES": 3},
                                 {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8}])
def test_flash_attention_sm90_matches_fp64(shape, dtype, causal, cfg):
    from rooflab.kernels import flash_attention_sm90 as F9
    b, h, n_q, n_kv, d, hkv = shape
    cfg = {**F9.config(d), **cfg}
    q = torch.empty(b, h, n_q, d, device="cuda", dtype=dtype)
    k = torch.empty(b, hkv, n_kv, d, device="cuda", dtype=dtype)
    why = F9.usable(q, k, k, causal, cfg)
    if why:
        pytest.skip(f"the Gluon kernel does not take this: {why}")
    e = FA.errors(b, h, n_q, n_kv, d, hkv, dtype, causal, device="cuda", seed=n_kv,
                  kernel=lambda q, k, v, causal: F9.flash_attention_sm90(
                      q, k, v, causal, cfg=cfg, out=torch.full_like(q, float("nan"))))
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
    assert e["lse_max_abs_err"] < 1e-3, e


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 8, 1024, 1024, 128, 2), (1, 4, 256, 2048, 64, 4),
                                   (1, 2, 512, 1024, 256, 2), (1, 8, 128, 128, 128, 8)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [{}, {"BLOCK_N": 64}])
def test_flash_attention_sm90_ws_matches_fp64(shape, causal, cfg):
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, n_q, n_kv, d, hkv = shape
    cfg = {**F9W.config(d), **cfg}
    q = torch.empty(b, h, n_q, d, device="cuda", dtype=torch.bfloat16)
    k = torch.empty(b, hkv, n_kv, d, device="cuda", dtype=torch.bfloat16)
    why = F9W.usable(q, k, k, causal, cfg)
    if why:
        pytest.skip(f"the Gluon kernel does not take this: {why}")
    e = FA.errors(b, h, n_q, n_kv, d, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=lambda q, k, v, causal: F9W.flash_attention_sm90_ws(
                      q, k, v, causal, cfg=cfg, out=torch.full_like(q, float("nan"))))
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
    assert e["lse_max_abs_err"] < 1e-3, e


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_runs_the_gluon_kernels_where_they_are_faster(monkeypatch, causal):
    """On sm_90, whole tiles go to the Gluon kernel that FA.GLUON names for their head dim; a
    ragged length or an explicit config to the Triton kernel; every answer matches fp64."""
    import importlib
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels are for sm_90")
    calls = []
    for name in set(FA.GLUON.values()):
        m = importlib.import_module(f"rooflab.kernels.{name}")
        real = getattr(m, name)
        monkeypatch.setattr(m, name, lambda *a, real=real, name=name, **k:
                            calls.append(name) or real(*a, **k))
    for n, d, cfg, kernel in [(1024, 64, None, FA.GLUON[64]), (1024, 128, None, FA.GLUON[128]),
                              (512, 256, None, FA.GLUON[256]), (1000, 64, None, None),
                              (1000, 128, None, None)]:
        calls.clear()
        e = FA.errors(2, 8, n, n, d, 2, torch.bfloat16, causal, device="cuda", seed=n)
        assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
        assert calls == ([kernel] if kernel else []), (n, d, calls)
    q = torch.randn(1, 2, 256, 128, device="cuda", dtype=torch.float16)
    calls.clear()
    FA.flash_attention(q, q, q, causal, cfg={})  # an explicit config: the Triton kernel
    assert calls == []


@pytest.mark.gpu
def test_flash_attention_extra_memory_is_linear():
    from rooflab.measure import peak_memory
    mk = lambda n: torch.randn(1, 8, n, 128, device="cuda", dtype=torch.float16)  # noqa: E731
    extra = {}
    for n in (4096, 16384):
        q, k, v = mk(n), mk(n), mk(n)
        extra[n] = peak_memory(FA.flash_attention, q, k, v, device="cuda").extra_peak_bytes
    # O (n*8*128*2 B) and LSE (n*8*4 B) only: 4x the tokens, 4x the bytes, never 16x
    assert extra[16384] <= 4.5 * extra[4096]
    assert extra[16384] <= 16384 * 8 * (128 * 2 + 4) * 1.1


DECODE_SHAPES = [  # (B, H, Lq, Lkv, D, Hkv, programs); 16 keys a block under the interpreter
    (2, 8, 1, 100, 64, 2, None),    # GQA 4:1, ragged cache; programs cross from head to head
    (1, 4, 3, 37, 32, 1, 3),        # MQA, three queries (speculative decoding)
    (1, 8, 16, 20, 64, 8, 2),       # causal rows that see no key of a run; 4 heads a program
    (2, 2, 1, 1, 16, 2, None),      # a cache of one token
    (1, 4, 2, 290, 256, 2, 5),      # gemma's head_dim
    (2, 8, 2, 100, 64, 2, 2),       # two whole heads a program: written final, no merge
]


@pytest.mark.parametrize("shape", DECODE_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_decode_matches_fp64(device, shape, dtype, causal):
    b, h, lq, lkv, d, hkv, programs = shape
    e = FD.errors(b, h, lq, lkv, d, hkv, dtype, causal, device=device, seed=lkv,
                  programs=programs)
    assert e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    assert e["lse_max_abs_err"] < 1e-3


@pytest.mark.parametrize("shape", DECODE_SHAPES)
@pytest.mark.parametrize("merge_rows,tma,last", [(0, False, False), (8, False, False),
                                                 (0, True, False), (0, False, True)])
def test_flash_decode_every_merge_and_load(device, shape, merge_rows, tma, last):
    """The merge one row a program (MERGE_ROWS 0) or in tiles of 8 rows: two tiles of a KV
    head's 16 rows, a ragged second one of its 12, one part-filled by its 4; K and V through
    TMA descriptors (keys past a head's cache load as zeros); the merge by the last program
    to finish a head (LAST_MERGES), twice, its counts back at zero after each."""
    b, h, lq, lkv, d, hkv, programs = shape
    if tma and not FA.tma_ok(torch.empty(16, device=device)):
        pytest.skip("TMA needs compute capability 9 or later")
    cfg = {**FD.config(d), "MERGE_ROWS": merge_rows, "TMA": tma, "LAST_MERGES": last}
    for _ in range(2 if last else 1):
        e = FA.errors(b, h, lq, lkv, d, hkv, torch.float16, True, device, seed=lkv,
                      kernel=lambda q, k, v, c: FD.flash_decode(q, k, v, c, programs=programs,
                                                                cfg=cfg))
        assert e["all_finite"]
        assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
        assert e["lse_max_abs_err"] < 1e-3
    if last:
        assert not FD.arrival_counts(device, b * hkv).any()


def test_flash_decode_strided_inputs_and_limits(device):
    """A KV cache viewed out of a (B, L, H, D) buffer, as models keep it, needs no copy."""
    g = torch.Generator(device="cpu").manual_seed(1)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, torch.float16)  # noqa: E731
    q, k, v = mk(2, 1, 8, 64).transpose(1, 2), mk(2, 50, 2, 64).transpose(1, 2), \
        mk(2, 50, 2, 64).transpose(1, 2)
    o, _ = FD.flash_decode(q, k, v, programs=3)
    ref = FD.standard_attention(q.double(), k.double(), v.double(), True)
    assert float((o.double() - ref).abs().max()) < 2e-3
    with pytest.raises(ValueError, match="rows"):
        FD.flash_decode(mk(1, 8, 32, 64), mk(1, 1, 40, 64), mk(1, 1, 40, 64))
    with pytest.raises(TypeError, match="fp16 or bf16"):
        FD.flash_decode(q.float(), k.float(), v.float())


def test_flash_decode_skips_the_merge_only_for_whole_heads(device, monkeypatch):
    merges = []

    class Counted:  # either merge kernel, whichever FD.merge_rows picks
        def __init__(self, real):
            self.real = real

        def __getitem__(self, grid):
            merges.append(grid)
            return self.real[grid]

    for name in ("merge_splits", "merge_tiles"):
        monkeypatch.setattr(FD, name, Counted(getattr(FD, name)))
    cfg = {**FD.config(64), "LAST_MERGES": False}        # 64 keys a step, at any n_kv
    n_kv = 2 * cfg["BLOCK_N"] + 5                        # 3 blocks a head: runs of 2 split it
    q = torch.randn(2, 8, 1, 64, device=device, dtype=torch.float16)
    k = torch.randn(2, 2, n_kv, 64, device=device, dtype=torch.float16)
    ref = FD.standard_attention(q.double(), k.double(), k.double(), True)
    for programs, merged in ((4, False), (2, False), (12, True)):
        merges.clear()
        o, _ = FD.flash_decode(q, k, k, programs=programs, cfg=cfg)  # runs of 1, 2 heads; split
        assert bool(merges) == merged
        assert float((o.double() - ref).abs().max()) < 2e-3
    k = torch.randn(2, 2, 6 * cfg["BLOCK_N"] - 3, 64, device=device, dtype=torch.float16)
    ref = FD.standard_attention(q.double(), k.double(), k.double(), True)
    for programs, merged in ((8, False), (12, True)):  # by default a head cut in two runs is
        merges.clear()                                 # merged by its last program, in 3 not
        o, _ = FD.flash_decode(q, k, k, programs=programs, cfg=FD.config(64))
        assert bool(merges) == merged
        assert float((o.double() - ref).abs().max()) < 2e-3


def test_flash_decode_merges_in_tiles_only_with_many_heads():
    """merge_tiles (4 rows a program) from 64 (batch, KV head) pairs, the one-row merge below;
    a config's MERGE_ROWS wins."""
    assert FD.merge_rows(64) == 4 and FD.merge_rows(512) == 4
    assert FD.merge_rows(63) == 0 and FD.merge_rows(8) == 0
    assert FD.merge_rows(8, 16) == 16 and FD.merge_rows(64, 0) == 0


def test_flash_decode_gives_whole_heads_their_own_program_only_in_one_wave(monkeypatch):
    from types import SimpleNamespace
    h200 = SimpleNamespace(multi_processor_count=132, shared_memory_per_multiprocessor=233472)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: h200)
    cfg = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    assert FD._programs(128, 64, 8, cfg) == 64      # the lab's 512 cached tokens: short heads
    assert FD._programs(128, 64, 16, cfg) == 256    # 1024: cut, two programs per SM, 4 a head
    assert FD._programs(64, 512, 64, cfg) == 512    # 48 KB a program: 4 an SM, one wave
    assert FD._programs(128, 512, 64, cfg) == 256   # 96 KB: 2 an SM, two waves: 2 heads each
    assert FD._programs(256, 8, 128, cfg) == 128    # few long heads: one per SM, 16 a head


def test_flash_decode_takes_128_keys_a_step_only_at_short_caches(monkeypatch):
    from types import SimpleNamespace
    h200 = SimpleNamespace(multi_processor_count=132, shared_memory_per_multiprocessor=233472)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: h200)
    monkeypatch.setattr(FD, "INTERPRET", False)
    short = lambda *a: FD.config(*a)["BLOCK_N"] == 128  # noqa: E731
    assert short(128, FD.SHORT_CACHE, 4, 64)       # the lab's 512 cached tokens, GQA 4:1
    assert short(64, 300, 16, 132)                 # 16 rows, one pair an SM
    assert not short(128, FD.SHORT_CACHE + 1, 4, FD.MANY_PAIRS - 1)
    assert not short(256, 512, 4, 64)              # 384 KB of tiles would not fit
    assert not short(128, 512, 64, 64)             # 16 queries a head: 64 rows
    assert not short(128, 512, 4, 512)             # more pairs than SMs
    assert not short(128)
    assert short(128, 4096, 4, FD.MANY_PAIRS)      # long caches with many pairs, head_dim 128
    assert short(128, 32768, 16, 512)
    assert not short(128, 4096, 4, FD.MANY_PAIRS - 1)  # one sequence: 8 pairs
    assert not short(64, 4096, 4, 512)             # head_dim 64: 64 a step were faster
    assert not short(128, 4096, 64, 64)            # 16 queries a head
    assert FD.config(128, 4096, 4, 64)["TMA"]      # through TMA where the tensors allow it


def test_flash_decode_cuts_every_head_alike():
    """aligned(): a whole number of programs a head, or of heads a program, never more
    programs than given."""
    assert FD.aligned(132, 64) == 128 and FD.aligned(264, 64) == 256
    assert FD.aligned(132, 8) == 128 and FD.aligned(264, 8) == 264
    assert FD.aligned(132, 512) == 128 and FD.aligned(264, 512) == 256
    assert FD.aligned(132, 133) == 67                # 2 heads a program, the last one alone
    for programs in (1, 7, 132, 264):
        for heads in (1, 3, 8, 64, 100, 512, 1000):
            p = FD.aligned(programs, heads)
            assert 1 <= p <= max(programs, 1)
            assert p % heads == 0 if heads <= programs else -(-heads // p) == -(-heads // programs)


def test_flash_decode_runs_one_program_an_sm_where_one_fits(monkeypatch):
    from types import SimpleNamespace
    h200 = SimpleNamespace(multi_processor_count=132, shared_memory_per_multiprocessor=233472)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: h200)
    cfg = {"BLOCK_N": 128, "num_warps": 4, "num_stages": 3}  # 192 KB at head_dim 128
    assert FD._programs(128, 64, 4, cfg) == 64      # whole heads, one wave
    assert FD._programs(128, 512, 4, cfg) == 128    # one an SM (4 heads each), not 2 waves
    assert FD._programs(64, 512, 4, cfg) == 256     # 96 KB: two an SM, 2 heads each


@pytest.mark.parametrize("shape", [(2, 8, 1, 300, 64, 2), (1, 8, 4, 200, 128, 2)])
def test_flash_decode_with_128_keys_a_step(device, shape):
    """The short-cache config (ragged: 300 = 2 x 128 + 44) against fp64, GQA, causal."""
    b, h, lq, lkv, d, hkv = shape
    cfg = {"BLOCK_N": 128, "num_warps": 4, "num_stages": 3}
    e = FA.errors(b, h, lq, lkv, d, hkv, torch.float16, True, device, seed=lkv,
                  kernel=lambda q, k, v, c: FD.flash_decode(q, k, v, c, cfg=cfg))
    assert e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    assert e["lse_max_abs_err"] < 1e-3


def test_flash_decode_gives_every_program_the_same_work():
    # (blocks per program, programs, partial slots per head)
    assert FD.schedule(8, 8, 4096, 64, 132) == (32, 128, 3)   # 4,096 blocks: 2 runs a head
    assert FD.schedule(64, 8, 4096, 64, 132) == (249, 132, 2)  # runs cross from head to head
    assert FD.schedule(1, 1, 100, 128, 132) == (2, 1, 2)       # too short to split
    assert FD.schedule(1, 1, 1 << 20, 64, 132) == (261, 63, 64)  # the merge's limit
    for b, hkv, n_kv, programs in ((8, 8, 4096, 132), (3, 5, 1000, 77), (64, 8, 4128, 264)):
        per, grid, slots = FD.schedule(b, hkv, n_kv, 64, programs)
        total = b * hkv * -(-n_kv // 64)
        assert grid <= programs and (grid - 1) * per < total <= grid * per  # none idle
        # a head's blocks meet at most `slots` programs
        assert max((h * -(-n_kv // 64) + -(-n_kv // 64) - 1) // per - h * -(-n_kv // 64) // per
                   + 1 for h in range(b * hkv)) <= slots


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(8, 32, 1, 4096, 128, 8), (1, 8, 4, 32771, 256, 1),
                                   (64, 16, 1, 1031, 64, 16), (8, 32, 1, 512, 128, 8),
                                   (64, 16, 16, 500, 64, 16)])
def test_flash_decode_gpu_large(shape):
    b, h, lq, lkv, d, hkv = shape
    e = FD.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, True, device="cuda", seed=lkv)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


@pytest.mark.gpu
def test_flash_decode_merge_is_race_free():
    """The merge kernel is launched before the partials are written (programmatic dependent
    launch on Hopper) and waits for them; the in-kernel merge reads its head's other partial
    once the count says it is written: run the lab's decode shape many times each way; every
    output must be bit-identical to the first of its way (and the ways agree with fp64)."""
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(8, 32, 1, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(8, 8, 4096, 128, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    ref = FD.standard_attention(q.double(), k.double(), v.double(), False)
    base = FD.config(128, 4096, 4, 64)
    kernel = {**base, "LAST_MERGES": False}
    ways = [({**kernel, "PDL": False}, kernel), ({**base, "LAST_MERGES": True},) * 2]
    for first_cfg, cfg in ways:
        first, _ = FD.flash_decode(q, k, v, causal=False, cfg=first_cfg)
        for _ in range(200):
            o, _ = FD.flash_decode(q, k, v, causal=False, cfg=cfg)
            assert torch.equal(o, first)
        assert float((first.double() - ref).abs().max()) < 1e-2
