"""rooflab/kernels/flash_decoding.py: split-KV decode against fp64, its schedule and merges.
On the CPU under TRITON_INTERPRET=1 (CI), on CUDA with the gpu marker; tolerances are tied to
PyTorch's own low-precision error on the same fresh random inputs."""
import os
from types import SimpleNamespace

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed")

from rooflab.kernels import flash_attention as FA  # noqa: E402
from rooflab.kernels import flash_decoding as FD  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

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


@pytest.mark.parametrize("shape", DECODE_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_decode_attends_to_the_keys_kept(device, shape, causal):
    """keep (B, Lkv): a static cache's unused slots, a left-padded row, holes; the same answer
    as fp64 attention with that mask (and the causal one), whichever runs and merges cut it."""
    b, h, lq, lkv, d, hkv, programs = shape
    g = torch.Generator(device="cpu").manual_seed(lkv)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, torch.float16)  # noqa: E731
    q, k, v = mk(b, h, lq, d), mk(b, hkv, lkv, d), mk(b, hkv, lkv, d)
    keep = torch.rand(b, lkv, generator=g) > 0.3
    keep[0, lkv // 2:] = False      # a static cache's unused end
    keep[-1, :lkv // 4] = False     # a left-padded row (the only row where B = 1: both)
    keep[:, lkv // 2 - 1] = True    # every row attends somewhere
    if lq > 1:
        keep[:, -lq:] = True        # causal rows see their own key
    o, lse = FD.flash_decode(q, k, v, causal, programs=programs, keep=keep.to(device))
    allowed = keep[:, None, None, :].expand(b, h, lq, lkv).clone()
    if causal:
        allowed &= torch.arange(lkv)[None, :] <= lkv - lq + torch.arange(lq)[:, None]
    rep = lambda t: t.double().cpu().repeat_interleave(h // hkv, 1)  # noqa: E731
    s = (q.double().cpu() @ rep(k).transpose(-1, -2)) * d ** -0.5
    s = s.masked_fill(~allowed, float("-inf"))
    ref = torch.softmax(s, -1) @ rep(v)
    assert float((o.double().cpu() - ref).abs().max()) < 3e-3
    assert float((lse.double().cpu() - torch.logsumexp(s, -1)).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="keep"):
        FD.flash_decode(q, k, v, causal, keep=keep[:, :-1].to(device))


@pytest.mark.parametrize("programs,cfg,path", [
    (6, {}, "whole"), (1, {}, "whole"), (18, {"MERGE_ROWS": 0}, "merge_splits"),
    (18, {"MERGE_ROWS": 4}, "merge_tiles"), (12, {}, "last"), (4, {"LAST_MERGES": 1}, "last")])
@pytest.mark.parametrize("sinks", [False, True])
def test_flash_decode_row_that_keeps_no_key(device, programs, cfg, path, sinks):
    """A batch row whose keep is all False gets zeros and LSE -inf (with sinks, zeros and the
    sink's logit), as flash_attention's, by a whole head's program (one loop or several), either
    merge kernel and a head's last program; the other rows as before."""
    g = torch.Generator(device="cpu").manual_seed(7)
    b, h, hkv, lq, lkv, d = 3, 4, 2, 2, 96, 32  # six heads of six 16-key blocks
    per, _, _ = FD.schedule(b, hkv, lkv, 16, programs)
    runs = -(-6 // per)
    assert path == ("whole" if per % 6 == 0 else "last" if runs <= 2 or "LAST_MERGES" in cfg
                    else "merge_tiles" if cfg["MERGE_ROWS"] else "merge_splits")
    q, k, v = (torch.randn(*s, generator=g).to(device, torch.float16)
               for s in ((b, h, lq, d), (b, hkv, lkv, d), (b, hkv, lkv, d)))
    keep = torch.ones(b, lkv, dtype=torch.bool)
    keep[1] = False
    sink = torch.linspace(-1, 1, h, device=device) if sinks else None
    o, lse = FD.flash_decode(q, k, v, False, programs=programs, keep=keep.to(device),
                             sinks=sink, cfg={**FD.config(d), "BLOCK_N": 16, **cfg})
    assert not o[1].float().abs().any()
    expect = sink.float()[:, None].expand(h, lq) if sinks else torch.full((h, lq), -torch.inf)
    assert torch.equal(lse[1].cpu(), expect.cpu())
    rows = [0, 2]
    ref, _ = FD.flash_decode(q[rows].contiguous(), k[rows].contiguous(), v[rows].contiguous(),
                             False, sinks=sink)
    assert float((o[rows].float() - ref.float()).abs().max()) < 2e-3


@pytest.mark.parametrize("shape", [  # (B, H, Lq, Lkv, D of q and k, Hkv, D of v, programs)
    (2, 4, 1, 70, 48, 2, 32, None),      # 32 + 16: GQA, ragged
    (1, 16, 1, 100, 192, 16, 128, 3),    # DeepSeek's 128 + 64, 16 heads, cut and merged
    (2, 4, 3, 45, 96, 1, 64, 3),         # 64 + 32, three causal queries on one KV head
    (4, 8, 1, 40, 48, 4, 32, 2),         # 8 whole heads a program: one loop across them
])
@pytest.mark.parametrize("last", [False, True])
def test_flash_decode_with_q_and_k_wider_than_v(device, shape, last):
    """Latent attention's decode: the extra dims of q and k in a second dot (by addresses, TMA
    off), O and the partials v's width; merged by the merge kernel and by a head's last
    program."""
    b, h, lq, lkv, d, hkv, dv, programs = shape
    cfg = {**FD.config(dv), "LAST_MERGES": last}
    e = FD.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, lq > 1, device=device, seed=lkv,
                  programs=programs, v_dim=dv)
    assert e["all_finite"] and e["lse_max_abs_err"] < 1e-3
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    q = torch.randn(b, h, lq, d, device=device, dtype=torch.float16)
    k, v = q[:, :hkv, :1].expand(b, hkv, lkv, d), q[:, :hkv, :1, :dv].expand(b, hkv, lkv, dv)
    assert FD.flash_decode(q, k, v, programs=programs, cfg=cfg)[0].shape == (b, h, lq, dv)


@pytest.mark.parametrize("shape", DECODE_SHAPES[:3] + DECODE_SHAPES[-1:])
@pytest.mark.parametrize("merge_rows,last", [(None, False), (8, False), (None, True)])
def test_flash_decode_with_attention_sinks_matches_fp64(device, shape, merge_rows, last):
    """gpt-oss's sinks at decode: a logit a head in every row's denominator, counted once
    whatever the cut: by a whole head's program, by either merge kernel, by a head's last
    program. O and the LSE (the sink's term in it) against fp64."""
    b, h, lq, lkv, d, hkv, programs = shape
    g = torch.Generator(device="cpu").manual_seed(lkv)
    q, k, v = (torch.randn(b, heads, n, d, generator=g).to(device, torch.bfloat16)
               for heads, n in ((h, lq), (hkv, lkv), (hkv, lkv)))
    sinks = 2 * torch.randn(h, generator=g).to(device)
    causal = lq > 1
    ref = FA.standard_attention(q.double(), k.double(), v.double(), causal, sinks=sinks.double())
    low = FA.standard_attention(q, k, v, causal, sinks=sinks)
    s = (q.double() @ k.double().repeat_interleave(h // hkv, 1).transpose(-1, -2)) * d ** -0.5
    if causal:
        s = s.masked_fill(~FA.seen(lq, lkv, device=device), float("-inf"))
    lse_ref = torch.cat([s, sinks.double()[:, None, None].expand(b, h, lq, 1)], -1).logsumexp(-1)
    cfg = {**FD.config(d), "LAST_MERGES": last, **({"MERGE_ROWS": merge_rows} if merge_rows
                                                   else {})}
    o, lse = FD.flash_decode(q, k, v, causal, programs=programs, cfg=cfg, sinks=sinks)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4
    assert float((lse.double() - lse_ref).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="a logit a query head"):
        FD.flash_decode(q, k, v, causal, sinks=sinks[:2])


@pytest.mark.parametrize("shape", DECODE_SHAPES[:3] + DECODE_SHAPES[4:])  # and gemma's 256
@pytest.mark.parametrize("last", [False, True])
def test_flash_decode_with_softcapped_scores_matches_fp64(device, shape, last):
    """Gemma 2's softcap at decode (cap * tanh(s / cap) on every scaled score), before the
    partials, so every cut and merge sees capped scores; scores of order 10 against a cap of 5."""
    b, h, lq, lkv, d, hkv, programs = shape
    g = torch.Generator(device="cpu").manual_seed(lkv)
    q, k, v = (torch.randn(b, heads, n, d, generator=g).to(device, torch.bfloat16) * scale
               for heads, n, scale in ((h, lq, 3), (hkv, lkv, 3), (hkv, lkv, 1)))
    ref = FA.standard_attention(q.double(), k.double(), v.double(), lq > 1, softcap=5.0)
    low = FA.standard_attention(q, k, v, lq > 1, softcap=5.0)
    o, _ = FD.flash_decode(q, k, v, lq > 1, programs=programs, softcap=5.0,
                           cfg={**FD.config(d), "LAST_MERGES": last})
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4
    with pytest.raises(ValueError, match="softcap must be positive and finite"):
        FD.flash_decode(q, k, v, lq > 1, softcap=float("inf"))


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
    """No merge where every run is whole heads; one loop across the heads where a run is
    several (ACROSS), a loop a head otherwise."""
    merges, across = [], []

    class Counted:  # either merge kernel, whichever FD.merge_rows picks
        def __init__(self, real):
            self.real = real

        def __getitem__(self, grid):
            merges.append(grid)
            return self.real[grid]

    class Flagged:  # the split kernel: its ACROSS flag, each launch
        def __init__(self, real):
            self.real = real

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                across.append(kwargs["ACROSS"])
                return self.real[grid](*args, **kwargs)
            return launch

    for name in ("merge_splits", "merge_tiles"):
        monkeypatch.setattr(FD, name, Counted(getattr(FD, name)))
    monkeypatch.setattr(FD, "split_kv_fwd", Flagged(FD.split_kv_fwd))
    cfg = {**FD.config(64), "LAST_MERGES": False}        # 64 keys a step, at any n_kv
    n_kv = 2 * cfg["BLOCK_N"] + 5                        # 3 blocks a head: runs of 2 split it
    q = torch.randn(2, 8, 1, 64, device=device, dtype=torch.float16)
    k = torch.randn(2, 2, n_kv, 64, device=device, dtype=torch.float16)
    ref = FD.standard_attention(q.double(), k.double(), k.double(), True)
    for programs, merged, one_loop in ((4, False, False), (2, False, True), (12, True, False)):
        merges.clear()
        o, _ = FD.flash_decode(q, k, k, programs=programs, cfg=cfg)  # runs of 1, 2 heads; split
        assert bool(merges) == merged and across[-1] == one_loop
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


H200 = SimpleNamespace(name="NVIDIA H200", multi_processor_count=132,  # its device properties
                       shared_memory_per_multiprocessor=233472)


def test_flash_decode_gives_whole_heads_their_own_program_only_in_one_wave(monkeypatch):
    gpu = H200
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: gpu)
    cfg = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    assert FD._programs(128, 64, 8, cfg) == 64      # the lab's 512 cached tokens: short heads
    assert FD._programs(128, 64, 16, cfg) == 256    # 1024: cut, two programs per SM, 4 a head
    assert FD._programs(64, 512, 64, cfg) == 512    # 48 KB a program: 4 an SM, one wave
    assert FD._programs(64, 529, 64, cfg) == 265    # past one wave: runs for 4 an SM (2 heads)
    assert FD._programs(64, 1024, 64, cfg) == 512   # (before: for 2 an SM, 177 and 256)
    assert FD._programs(128, 529, 64, cfg) == 177   # 96 KB: for 2 an SM (3 heads)
    assert FD._programs(128, 512, 64, cfg) == 256   # 96 KB: 2 an SM, two waves: 2 heads each
    assert FD._programs(256, 8, 128, cfg) == 128    # few long heads: one per SM, 16 a head
    assert FD._programs(256, 9, 8, cfg) == 126      # 512 keys at head dim 256, 9 pairs: cut
    assert FD._programs(256, 16, 7, cfg) == 128     # (aligned: a whole number a head)
    assert FD._programs(256, 17, 8, cfg) == 17      # more pairs: whole heads
    assert FD._programs(256, 9, 6, cfg) == 9        # 384 keys: whole heads
    assert FD._programs(128, 9, 8, cfg) == 9        # 512 keys at 128: whole heads
    n128 = {**cfg, "BLOCK_N": 128}                  # head_dim 64: 96 KB, two an SM
    assert FD._programs(64, 110, 12, n128) == 110   # 4.8 TB/s at 44 GB/s a pair: whole heads
    assert FD._programs(64, 109, 12, n128) == 218   # fewer: cut, 2 runs a head, merged
    gpu = SimpleNamespace(**{**vars(H200), "name": "NVIDIA H100 80GB HBM3"})  # 3.35 TB/s
    assert FD._programs(64, 77, 12, n128) == 77
    assert FD._programs(64, 76, 12, n128) == 228    # 3 runs a head
    gpu = SimpleNamespace(**{**vars(H200), "name": "a GPU rooflab has no datasheet of"})
    assert FD._programs(64, 132, 12, n128) == 132   # whole heads only where they fill the SMs
    assert FD._programs(64, 131, 12, n128) == 262


def test_flash_decode_takes_128_keys_a_step_by_its_rule(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: H200)
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
    assert short(64, 4096, 4, 64) and short(64, 1024, 4, 264)  # head_dim 64: two pairs an SM
    assert not short(64, 4096, 4, 512)             # past them 64 a step were faster
    assert not short(64, 1024, 4, 265)
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
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: H200)
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


@pytest.mark.parametrize("programs", [2, 8])  # whole heads; heads cut in runs, merged
def test_flash_decode_with_128_keys_a_step_and_sinks(device, programs):
    """Head dim 64 at 128 keys a step (its rule from 513 keys) with gpt-oss's sinks, ragged:
    O and the LSE against fp64."""
    g = torch.Generator(device="cpu").manual_seed(programs)
    q, k, v = (torch.randn(2, heads, n, 64, generator=g).to(device, torch.bfloat16)
               for heads, n in ((8, 1), (1, 700), (1, 700)))
    sinks = torch.randn(8, generator=g).to(device)
    ref = FA.standard_attention(q.double(), k.double(), v.double(), False, sinks=sinks.double())
    low = FA.standard_attention(q, k, v, False, sinks=sinks)
    cfg = {"BLOCK_N": 128, "num_warps": 4, "num_stages": 3}
    o, _ = FD.flash_decode(q, k, v, False, programs=programs, cfg=cfg, sinks=sinks)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4


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
                                   (64, 16, 16, 500, 64, 16), (8, 64, 1, 4097, 64, 8)])
def test_flash_decode_gpu_large(shape):
    b, h, lq, lkv, d, hkv = shape
    e = FD.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, True, device="cuda", seed=lkv)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(8, 16, 1, 4096, 192, 16, 128), (64, 16, 1, 1031, 192, 16, 128)])
def test_flash_decode_gpu_wider_qk(shape):
    """DeepSeek-V2-Lite's decode shapes (16 heads, q and k 192 wide, v 128), compiled."""
    b, h, lq, lkv, d, hkv, dv = shape
    e = FD.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, True, device="cuda", seed=lkv,
                  v_dim=dv)
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


@pytest.mark.parametrize("seed", range(48))
def test_flash_decode_on_drawn_shapes(device, seed):
    """Shapes and knobs nobody picked: a seeded draw of batch, KV heads, a group that need not
    be a power of two, queries, a ragged cache, head dim, programs (runs across heads, whole
    heads, one a head), the merge (one row a program, tiles, a head's last program), kept keys,
    sinks and a softcap together; O and the LSE against fp64 with the same mask."""
    r = torch.Generator().manual_seed(seed)
    pick = lambda xs: xs[int(torch.randint(len(xs), (1,), generator=r))]  # noqa: E731
    b, hkv, group, lq, d = pick([1, 2, 3]), pick([1, 2, 3]), pick([1, 2, 3, 5, 7]), \
        pick([1, 1, 2, 3]), pick([16, 32, 64])
    lkv, h = int(torch.randint(lq, 261, (1,), generator=r)), hkv * group
    causal = lq > 1 or pick([False, True])
    blocks = b * hkv * -(-lkv // FD.config(d)["BLOCK_N"])
    programs = pick([None, int(torch.randint(1, blocks + 4, (1,), generator=r))])
    cfg = {**FD.config(d), **pick([{}, {"MERGE_ROWS": 0}, {"MERGE_ROWS": 4}]),
           **pick([{}, {"LAST_MERGES": True}, {"LAST_MERGES": False}])}
    mk = lambda *s, x=1.0: (x * torch.randn(*s, generator=r)).to(device, torch.float16)  # noqa
    softcap = pick([0.0, 5.0])
    q, k, v = mk(b, h, lq, d, x=3.0 if softcap else 1.0), mk(b, hkv, lkv, d), mk(b, hkv, lkv, d)
    keep = pick([None, torch.rand(b, lkv, generator=r) > 0.4])
    if keep is not None:
        keep[:, lkv - lq] = True                 # every query row sees a key, causal or not
    sinks = pick([None, 2 * torch.randn(h, generator=r)])
    o, lse = FD.flash_decode(q, k, v, causal, programs=programs, cfg=cfg,
                             keep=None if keep is None else keep.to(device),
                             sinks=None if sinks is None else sinks.to(device), softcap=softcap)
    rep = lambda t: t.double().cpu().repeat_interleave(group, 1)  # noqa: E731
    s = (q.double().cpu() @ rep(k).transpose(-1, -2)) * d ** -0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    allowed = torch.ones(b, h, lq, lkv, dtype=torch.bool)
    if keep is not None:
        allowed &= keep[:, None, None, :]
    if causal:
        allowed &= FA.seen(lq, lkv)
    s = s.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(b, h, lq, 1)], -1)
    p = torch.softmax(s, -1)
    ref = p[..., :lkv] @ rep(v)
    drawn = dict(b=b, h=h, hkv=hkv, lq=lq, lkv=lkv, d=d, causal=causal, programs=programs,
                 cfg=cfg, keep=keep is not None, sinks=sinks is not None, softcap=softcap)
    assert float((o.double().cpu() - ref).abs().max()) < 3e-3, drawn
    assert float((lse.double().cpu() - torch.logsumexp(s, -1)).abs().max()) < 1e-3, drawn
    if cfg.get("LAST_MERGES"):
        assert not FD.arrival_counts(device, b * hkv).any()


@pytest.mark.parametrize("merge_rows", [0, 4])
def test_flash_decode_row_whose_first_runs_see_no_key(device, merge_rows):
    """A left-padded row whose padding fills a head's first four runs: their partials hold no
    key (LSE -inf), and the merge, all of a row's slots at once or four a step in tiles,
    starts from them without a NaN."""
    g = torch.Generator(device="cpu").manual_seed(3)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, torch.float16)  # noqa: E731
    q, k, v = mk(2, 4, 1, 32), mk(2, 4, 200, 32), mk(2, 4, 200, 32)
    keep = torch.ones(2, 200, dtype=torch.bool)
    keep[1, :150] = False
    # 8 heads of 13 blocks of 16 keys laid end to end, runs of 2 blocks: each of batch row 1's
    # heads has four runs in its first 128 keys, all padding
    assert FD.schedule(2, 4, 200, 16, 52)[0] == 2
    cfg = {**FD.config(32), "BLOCK_N": 16, "MERGE_ROWS": merge_rows, "LAST_MERGES": False}
    o, lse = FD.flash_decode(q, k, v, False, programs=52, cfg=cfg, keep=keep.to(device))
    s = (q.double().cpu() @ k.double().cpu().transpose(-1, -2)) * 32 ** -0.5
    s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
    assert float((o.double().cpu() - torch.softmax(s, -1) @ v.double().cpu()).abs().max()) < 3e-3
    assert float((lse.double().cpu() - torch.logsumexp(s, -1)).abs().max()) < 1e-3
