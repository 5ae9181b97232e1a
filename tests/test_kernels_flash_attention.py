"""rooflab/kernels/flash_attention*.py: FlashAttention forward (Triton, and the Gluon kernels on
Hopper) against fp64, every path (TMA, the first block's max, Q in registers, small tiles).
On the CPU under TRITON_INTERPRET=1 (CI), on CUDA with the gpu marker; tolerances are tied to
PyTorch's own low-precision error on the same fresh random inputs."""
import pytest
import torch
import torch.nn.functional as F

triton = pytest.importorskip("triton", reason="Triton is not installed")

from rooflab.kernels import flash_attention as FA  # noqa: E402
from rooflab.kernels import flash_decoding as FD  # noqa: E402
from rooflab.kernels import routing  # noqa: E402

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
    with pytest.raises(ValueError, match="q and k must have one head dim"):
        FA.flash_attention(q, q[..., :32], q[..., :32])


@pytest.mark.parametrize("kernel", ["flash_attention", "flash_decode"])
def test_attention_kernels_refuse_what_they_cannot_read(device, kernel):
    """Each input a kernel would read past, or divide by zero on, is one ValueError before any
    launch: not a garbage answer from another batch row's memory."""
    fn = FA.flash_attention if kernel == "flash_attention" else FD.flash_decode
    mk = lambda *shape: torch.zeros(*shape, dtype=torch.float16, device=device)  # noqa: E731
    q, k = mk(2, 4, 1, 64), mk(2, 2, 8, 64)
    for args, why in [((q, k, mk(3, 2, 8, 64)), "q's batch or one row"),
                      ((q, mk(3, 2, 8, 64), k), "q's batch or one row"),
                      ((q, mk(2, 2, 0, 64), mk(2, 2, 0, 64)), "at least one key"),
                      ((mk(2, 0, 1, 64), mk(2, 0, 8, 64), mk(2, 0, 8, 64)), "one or more"),
                      ((q[0], k[0], k[0]), "4-D"),
                      ((q, k, k.cpu() if device != "cpu" else k.to("meta")), "one device")]:
        with pytest.raises(ValueError, match=why):
            fn(*args)
    if kernel == "flash_attention":
        with pytest.raises(ValueError, match="out is"):
            fn(q, k, k, out=mk(2, 4, 2, 64))


@pytest.mark.parametrize("kernel", ["flash_attention", "flash_decode"])
def test_one_row_of_keys_broadcasts_over_the_batch(device, kernel):
    """k and v of batch 1 serve every row of q, as SDPA broadcasts them: read at a batch stride
    of 0 (no TMA descriptor takes that stride: the address path)."""
    fn = FA.flash_attention if kernel == "flash_attention" else FD.flash_decode
    g = torch.Generator().manual_seed(3)
    lq = 1 if kernel == "flash_decode" else 37
    q = torch.randn(3, 4, lq, 64, generator=g).to(device, torch.bfloat16)
    k, v = (torch.randn(1, 2, 70, 64, generator=g).to(device, torch.bfloat16) for _ in range(2))
    assert not FA.tma_ok(k.expand(3, -1, -1, -1))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
    for kk, vv in ((k, v), (k.expand(3, -1, -1, -1), v.expand(3, -1, -1, -1))):
        o, _ = fn(q, kk, vv, False)
        assert float((o.double() - ref).norm() / ref.norm()) < 1e-2


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
    q = torch.randn(1, 2, 40, 32, dtype=torch.float16, device=device)  # no Gluon kernel's dim
    o, _ = FA.flash_attention(q, q, q)
    assert tried[0] == 128 and tried[1] == FA.SMALL_SMEM[0]["BLOCK_M"]
    ref = FA.standard_attention(q.double(), q.double(), q.double())
    assert float((o.double() - ref).abs().max()) < 1e-2


WINDOWS = [  # (B, H, Lq, Lkv, D, Hkv, window): sliding windows, causal
    (1, 2, 40, 40, 32, 1, 8),     # narrower than a tile: both edges in one block
    (2, 4, 37, 37, 64, 2, 16),    # ragged length, GQA, the window a whole tile
    (1, 2, 50, 50, 32, 2, 1),     # each query itself alone
    (1, 2, 30, 45, 32, 1, 7),     # fewer queries than keys: the last 30 of 45 positions
    (1, 2, 64, 64, 16, 1, 63),    # one key hidden from the last query
    (1, 2, 33, 33, 256, 1, 17),   # gemma's head dim
]


@pytest.mark.parametrize("shape", WINDOWS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flash_attention_with_a_sliding_window_matches_fp64(device, shape, dtype):
    """Each query sees its last ``window`` keys, itself included, as transformers' sliding
    layers do: blocks before the tile's first window skipped, its edge masked."""
    b, h, lq, lkv, d, hkv, w = shape
    e = FA.errors(b, h, lq, lkv, d, hkv, dtype, True, device=device, seed=lq + w, window=w)
    assert e["all_finite"]
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    assert e["lse_max_abs_err"] < 1e-3
    # an answer the window changes: the plain causal one is far from it. Key 0, outside the
    # last query's window, is that query's own direction (the first head of each group's), so
    # it outweighs the rest there whatever the draw
    q, k, v = (torch.randn(b, n, m, d, device=device, dtype=dtype)
               for n, m in ((h, lq), (hkv or h, lkv), (hkv or h, lkv)))
    k[:, :, 0] = 2 * q[:, ::h // (hkv or h), -1]
    windowed, causal = FA.flash_attention(q, k, v, True, window=w)[0], \
        FA.flash_attention(q, k, v, True)[0]
    assert not torch.allclose(windowed, causal, atol=1e-2)
    assert routing.which(q, k, v, True, window=w) == "flash_attention"


WIDER_QK = [  # (B, H, Lq, Lkv, D of q and k, Hkv, D of v): latent attention's q and k wider
    (1, 2, 40, 40, 192, 2, 128),  # DeepSeek's 128 + 64 rotary dims
    (2, 4, 20, 53, 48, 2, 32),    # GQA, Lq < Lkv, ragged
    (1, 2, 33, 33, 96, 1, 64),    # MiniCPM3's 64 + 32
]


@pytest.mark.parametrize("shape", WIDER_QK)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_q_and_k_wider_than_v_matches_fp64(device, shape, causal):
    """The extra dims of q and k in a second dot onto the scores; O is v's width. Every other
    path's flag on (the first block's max, Q in registers), and a window."""
    b, h, lq, lkv, d, hkv, dv = shape
    for window in (None, 9) if causal else (None,):
        e = FA.errors(b, h, lq, lkv, d, hkv, torch.bfloat16, causal, device=device, seed=lq + d,
                      window=window, v_dim=dv)
        assert e["all_finite"] and e["lse_max_abs_err"] < 1e-3, (window, e)
        assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, (window, e)
    q = torch.randn(b, h, lq, d, device=device, dtype=torch.float16)
    k, v = q[:, :hkv, :1].expand(b, hkv, lkv, d), q[:, :hkv, :1, :dv].expand(b, hkv, lkv, dv)
    assert routing.which(q, k, v, causal) == "flash_attention"  # the Gluon kernels take one dim
    assert FA.flash_attention(q, k, v, causal)[0].shape == (b, h, lq, dv)


def _padded(b: int, n: int, device) -> torch.Tensor:
    """(B, Lkv) kept keys: row 0 left-padded by 5, the last row by 11 and missing key 20 too,
    the others whole."""
    keep = torch.ones(b, n, dtype=torch.bool, device=device)
    keep[0, :5] = False
    keep[-1, :11] = False
    keep[-1, 20] = False
    return keep


@pytest.mark.parametrize("shape", [  # (B, H, L, D of q and k, Hkv, D of v, window)
    (3, 4, 37, 32, 2, 32, None),   # GQA, ragged
    (2, 2, 40, 64, 1, 64, 9),      # with a window
    (2, 2, 33, 48, 2, 32, None),   # q and k wider than v
])
@pytest.mark.parametrize("tiles", [None, (64, 32)])
def test_flash_attention_with_kept_keys_matches_fp64(device, shape, tiles):
    """A padded batch: each row attends to its kept keys only (in every block, not the diagonal
    alone); a query that sees none (a padded one) gets zeros and an LSE of -inf, as SDPA's
    output is zeros there. At the config's tiles and at a GPU's 64 x 32."""
    b, h, n, d, hkv, dv, window = shape
    cfg = tiles and {"BLOCK_M": tiles[0], "BLOCK_N": tiles[1], "num_warps": 4, "num_stages": 1}
    g = torch.Generator(device="cpu").manual_seed(n)
    q, k, v = (torch.randn(b, heads, n, dim, generator=g).to(device, torch.bfloat16)
               for heads, dim in ((h, d), (hkv, d), (hkv, dv)))
    keep = _padded(b, n, device)
    o, lse = FA.flash_attention(q, k, v, True, window=window, keep=keep, cfg=cfg,
                                out=torch.full((b, h, n, dv), float("nan"), device=device,
                                               dtype=torch.bfloat16))
    seen = FA.seen(n, n, window, device)[None, None] & keep[:, None, None, :]
    rep = h // hkv
    ref, low = (torch.nn.functional.scaled_dot_product_attention(
        q.to(dt), k.to(dt).repeat_interleave(rep, 1), v.to(dt).repeat_interleave(rep, 1),
        attn_mask=seen) for dt in (torch.float64, torch.bfloat16))
    ref = torch.nan_to_num(ref)  # queries that see no key: zeros (SDPA's since torch 2.5)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4
    empty = ~seen.any(-1).expand(b, h, n)
    assert empty[0, :, :5].all() and (o[empty] == 0).all() and (lse[empty] == float("-inf")).all()
    assert routing.which(q, k, v, True, keep=keep) == "flash_attention"
    with pytest.raises(ValueError, match="keep is a"):
        FA.flash_attention(q, k, v, True, keep=keep[:, :-1])


@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (True, 9)])
def test_flash_attention_with_attention_sinks_matches_fp64(device, causal, window):
    """gpt-oss's sinks: a logit a head in every row's denominator, no value vector. The sum
    starts from the sink's term; with the first block's max held too (FIXED_MAX)."""
    b, h, n, d, hkv = 2, 4, 37, 64, 2
    g = torch.Generator(device="cpu").manual_seed(n)
    q, k, v = (torch.randn(b, heads, n, d, generator=g).to(device, torch.bfloat16)
               for heads in (h, hkv, hkv))
    sinks = 2 * torch.randn(h, generator=g).to(device)

    ref = FA.standard_attention(q.double(), k.double(), v.double(), causal, window=window,
                                sinks=sinks.double())
    low = FA.standard_attention(q, k, v, causal, window=window, sinks=sinks)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    for cfg in (None, {**FA.config(d, causal), "FIXED_MAX": True}):
        o, _ = FA.flash_attention(q, k, v, causal, window=window, sinks=sinks, cfg=cfg)
        assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4, cfg
    assert routing.which(q, k, v, causal, sinks=sinks) == "flash_attention"
    with pytest.raises(ValueError, match="a logit a query head"):
        FA.flash_attention(q, k, v, causal, sinks=sinks[:2])


@pytest.mark.parametrize("causal,window,n_q,d", [(False, None, 37, 64), (True, None, 37, 64),
                                                  (True, 9, 37, 64), (True, None, 20, 64),
                                                  (True, 9, 37, 256)])  # Gemma 2's head dim
def test_flash_attention_with_softcapped_scores_matches_fp64(device, causal, window, n_q, d):
    """Gemma 2's softcap: every scaled score s is cap * tanh(s / cap). Scores of order 10
    against a cap of 5, so that it bends them (without it the output is 0.8-2.6 of its norm
    off); with the first block's max held and Q in registers too (FIXED_MAX, Q_REG: q halved,
    the scale doubled)."""
    b, h, n, hkv, cap = 2, 4, 37, 2, 5.0
    g = torch.Generator(device="cpu").manual_seed(n_q)
    q, k, v = (torch.randn(b, heads, m, d, generator=g).to(device, torch.bfloat16) * scale
               for heads, m, scale in ((h, n_q, 3), (hkv, n, 3), (hkv, n, 1)))
    ref = FA.standard_attention(q.double(), k.double(), v.double(), causal, window=window,
                                softcap=cap)
    low = FA.standard_attention(q, k, v, causal, window=window, softcap=cap)
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    for cfg in (None, {**FA.config(d, causal), "FIXED_MAX": True, "Q_REG": True}):
        o, _ = FA.flash_attention(q, k, v, causal, window=window, softcap=cap, cfg=cfg)
        assert torch.isfinite(o).all() and rel(o) <= 2 * rel(low) + 1e-4, cfg
    assert routing.which(q, k, v, causal, softcap=cap) == "flash_attention"
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="softcap must be positive and finite"):
            FA.flash_attention(q, k, v, causal, softcap=bad)


@pytest.mark.parametrize("seed", range(24))
def test_flash_attention_on_drawn_shapes(device, seed):
    """Shapes and inputs nobody picked: a seeded draw of batch, KV heads, a group that need not
    be a power of two, fewer queries than keys, ragged lengths, head dims (q and k wider than v
    too), transformers' tokens-first layout, and a window, kept keys, sinks and a softcap where
    drawn; O and the LSE against fp64 with the same mask. On a GPU as routed (a Gluon kernel
    where one takes the inputs), under the interpreter the Triton kernel."""
    r = torch.Generator().manual_seed(seed)
    pick = lambda xs: xs[int(torch.randint(len(xs), (1,), generator=r))]  # noqa: E731
    b, hkv, group, d = pick([1, 2, 3]), pick([1, 2]), pick([1, 2, 3, 5]), pick([16, 32, 64])
    extra = pick([0, 0, 16])                     # q and k wider than v: latent attention
    n_kv = int(torch.randint(1, 100, (1,), generator=r))
    n_q = pick([n_kv, n_kv, int(torch.randint(1, n_kv + 1, (1,), generator=r))])
    h, causal = hkv * group, pick([False, True])
    window = pick([None, int(torch.randint(1, n_kv + 1, (1,), generator=r))]) if causal else None
    keep = pick([None, torch.rand(b, n_kv, generator=r) > 0.2])
    if keep is not None:
        keep[0, :int(torch.randint(0, n_kv, (1,), generator=r))] = False   # a left-padded row
    sinks, softcap = pick([None, 2 * torch.randn(h, generator=r)]), pick([0.0, 5.0])
    tokens_first = pick([False, True])

    def made(heads, n, dim, x=1.0):
        t = x * torch.randn(b, n, heads, dim, generator=r)
        t = t.transpose(1, 2) if tokens_first else t.transpose(1, 2).contiguous()
        return t.to(device, torch.float16)
    q = made(h, n_q, d + extra, 3.0 if softcap else 1.0)
    k, v = made(hkv, n_kv, d + extra), made(hkv, n_kv, d)
    o, lse = FA.flash_attention(q, k, v, causal, window=window, softcap=softcap,
                                keep=None if keep is None else keep.to(device),
                                sinks=None if sinks is None else sinks.to(device),
                                cfg={} if device == "cpu" else None)
    rep = lambda t: t.double().cpu().repeat_interleave(group, 1)  # noqa: E731
    s = (q.double().cpu() @ rep(k).transpose(-1, -2)) * (d + extra) ** -0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    allowed = torch.ones(b, h, n_q, n_kv, dtype=torch.bool)
    if causal:
        allowed &= FA.seen(n_q, n_kv, window)
    if keep is not None:
        allowed &= keep[:, None, None, :]
    s = s.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(b, h, n_q, 1)], -1)
    ref = torch.nan_to_num(torch.softmax(s, -1))[..., :n_kv] @ rep(v)  # no key: zeros
    drawn = dict(b=b, h=h, hkv=hkv, n_q=n_q, n_kv=n_kv, d=d, extra=extra, causal=causal,
                 window=window, keep=keep is not None, sinks=sinks is not None,
                 softcap=softcap, tokens_first=tokens_first)
    assert float((o.double().cpu() - ref).abs().max()) < 3e-3, drawn
    assert torch.equal(lse.cpu().isinf(), torch.logsumexp(s, -1).isinf()), drawn
    finite = ~lse.cpu().isinf()
    assert float((lse.double().cpu() - torch.logsumexp(s, -1))[finite].abs().max()) < 1e-3, drawn


def test_head_dims_the_kernels_take():
    from rooflab.kernels.inputs import dims_error
    assert dims_error(128, 128) == dims_error(192, 128) == dims_error(32, 16) == ""
    assert dims_error(160, 128) == ""  # 32 wider
    # 72 wider: not a power of two; 256 wider: wider than v; 48: not a head dim; q narrower
    for d_qk, d_v in ((200, 128), (384, 128), (48, 48), (128, 192)):
        assert "(got %d for q and k, %d for v)" % (d_qk, d_v) in dims_error(d_qk, d_v)


@pytest.mark.parametrize("tiles", [(64, 32), (128, 64)])
@pytest.mark.parametrize("window", [17, 64, 100])
def test_a_windows_bands_at_the_gpus_tile_sizes(device, tiles, window):
    """The window's bands cut at the tiles a GPU runs (64 x 32 at head dim 128 and 256, and
    wider), not the interpreter's 16 x 16: a window narrower than a key block, one a query
    tile wide, one between."""
    cfg = {"BLOCK_M": tiles[0], "BLOCK_N": tiles[1], "num_warps": 4, "num_stages": 1}
    e = FA.errors(1, 2, 130, 277, 32, 1, torch.float16, True, device=device, seed=window,
                  window=window, kernel=lambda q, k, v, c: FA.flash_attention(
                      q, k, v, c, cfg=cfg, window=window))
    assert e["all_finite"] and e["lse_max_abs_err"] < 1e-3
    assert e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


def test_a_window_as_long_as_the_keys_is_plain_causal(device):
    q = torch.randn(1, 2, 24, 32, device=device, dtype=torch.float16)
    from rooflab.kernels.inputs import local
    assert local(24, 24) is None and local(23, 24) == 23
    assert torch.equal(FA.flash_attention(q, q, q, True, window=24)[0],
                       FA.flash_attention(q, q, q, True)[0])
    with pytest.raises(ValueError, match="window takes causal"):
        FA.flash_attention(q, q, q, False, window=8)
    with pytest.raises(ValueError, match="window takes causal"):
        FA.flash_attention(q, q, q, True, window=0)


def test_seen_is_the_causal_band_a_window_wide():
    keep = FA.seen(3, 5, 2)  # queries at positions 2, 3, 4 of 5, the last two keys each
    assert keep.tolist() == [[False, True, True, False, False], [False, False, True, True, False],
                             [False, False, False, True, True]]
    assert FA.seen(3, 5).sum() == 3 + 4 + 5


def test_flash_cost_is_fused_and_causal():
    c = FA.cost(1, 2, 128, 128, 64, dtype="fp16", causal=True)
    assert c.macs == 2 * (2 * (128 * 129 // 2)) * 64  # causal pairs only
    assert c.bytes == 2 * (4 * 2 * 128 * 64) + 4 * 2 * 128  # Q, K, V, O once + fp32 LSE
    w = FA.cost(1, 2, 128, 128, 64, dtype="fp16", causal=True, window=16)
    # queries 0-15 see 1-16 keys, the other 112 see 16 each
    assert w.macs == 2 * 2 * (16 * 17 // 2 + 112 * 16) * 64 and w.bytes == c.bytes


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_gpu_large(d, dtype, causal):
    e = FA.errors(2, 8, 1031, 1031, d, 2, dtype, causal, device="cuda", seed=d)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
def test_flash_attention_gpu_sliding_window(d):
    """A window of 300 over 1,031 ragged tokens: its edge falls inside blocks of every width."""
    e = FA.errors(2, 8, 1031, 1031, d, 2, torch.bfloat16, True, device="cuda", seed=d,
                  window=300)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4
    assert e["lse_max_abs_err"] < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_gpu_wider_qk(causal):
    """DeepSeek-V2-Lite's prefill heads (q and k 192 wide, v 128), compiled, ragged."""
    e = FA.errors(2, 16, 1031, 1031, 192, 16, torch.bfloat16, causal, device="cuda", seed=3,
                  v_dim=128)
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
def test_flash_attention_gpu_kept_keys(d):
    """A padded batch of 1,031 tokens, compiled: rows padded by 5 and by 11 (and a hole)."""
    g = torch.Generator(device="cpu").manual_seed(d)
    q, k, v = (torch.randn(3, heads, 1031, d, generator=g).to("cuda", torch.bfloat16)
               for heads in (8, 2, 2))
    keep = _padded(3, 1031, "cuda")
    o, _ = FA.flash_attention(q, k, v, True, keep=keep)
    seen = FA.seen(1031, 1031, None, "cuda")[None, None] & keep[:, None, None, :]
    ref = torch.nan_to_num(torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float().repeat_interleave(4, 1), v.float().repeat_interleave(4, 1),
        attn_mask=seen))
    assert torch.isfinite(o).all() and float((o.float() - ref).norm() / ref.norm()) < 1e-2


GLUON_SHAPES = [  # (B, H, Lq, Lkv, D, Hkv): whole tiles; GQA, Lq != Lkv, one block, many
    (2, 8, 1024, 1024, 128, 2), (1, 4, 256, 2048, 64, 4), (2, 4, 128, 128, 256, 1),
    (1, 8, 64, 768, 128, 8), (1, 2, 512, 4096, 256, 2)]


def _holds_to_fp64(e: dict) -> None:
    """A Gluon kernel's output (out poisoned with NaN first) as near fp64 as PyTorch's own."""
    assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
    assert e["lse_max_abs_err"] < 1e-3, e


def _blhd(t):
    """The same values laid out as transformers' projections leave them: (B, L, H, D) in
    memory, seen as (B, H, L, D)."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GLUON_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [{}, {"BLOCK_N": 32}, {"STAGES": 1}, {"BLOCK_N": 64, "STAGES": 3},
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
    _holds_to_fp64(e)


GLUON_RAGGED = [  # (B, H, Lq, Lkv, D, Hkv): lengths that are not whole tiles, one query row
    (2, 6, 200, 200, 128, 3), (1, 4, 100, 333, 128, 2), (1, 4, 77, 1000, 64, 4),
    (1, 2, 130, 130, 256, 1), (1, 8, 1, 300, 128, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GLUON_RAGGED)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [{}, {"BLOCK_N": 32, "STAGES": 2}, {"BLOCK_N": 64, "STAGES": 1}])
def test_flash_attention_sm90_takes_ragged_lengths(shape, causal, cfg):
    """RAGGED from the inputs alone; every output row written (out starts NaN) and none past
    its head's (the next head's rows are checked with it)."""
    from rooflab.kernels import flash_attention_sm90 as F9
    b, h, n_q, n_kv, d, hkv = shape

    def kernel(q, k, v, causal):
        assert F9.flags(q, k, v, causal, cfg)["RAGGED"] and F9.usable(q, k, v, causal,
                                                                       cfg) is None
        return F9.flash_attention_sm90(q, k, v, causal, cfg=cfg,
                                       out=torch.full_like(q, float("nan")))

    e = FA.errors(b, h, n_q, n_kv, d, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=kernel)
    _holds_to_fp64(e)


WS_WHOLE = [(2, 8, 1024, 1024, 128, 2), (1, 4, 256, 2048, 64, 4), (1, 2, 512, 1024, 256, 2),
            (1, 8, 128, 128, 128, 8), (4, 8, 256, 256, 128, 2)]
WS_RAGGED = [(2, 8, 200, 200, 128, 2), (1, 4, 100, 333, 128, 4), (1, 2, 77, 1000, 256, 1),
             (3, 6, 130, 130, 128, 3), (1, 4, 256, 256, 128, 2)]  # (and whole, under RAGGED)
WS_CASES = ([(s, c) for s in WS_WHOLE for c in ({}, {"BLOCK_N": 64}, {"OWN_BLOCKS": True},
                                                {"OWN_BLOCKS": True, "BLOCK_N": 64})]
            + [(s, c) for s in WS_RAGGED for c in ({"RAGGED": True}, {
                "RAGGED": True, "BLOCK_N": 64, "OWN_BLOCKS": True})])


def _ws_matches_fp64(shape, causal, cfg):
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, n_q, n_kv, d, hkv = shape
    cfg = {**F9W.config(d, causal, n_kv), **cfg}
    q = torch.empty(b, h, n_q, d, device="cuda", dtype=torch.bfloat16)
    k = torch.empty(b, hkv, n_kv, d, device="cuda", dtype=torch.bfloat16)
    why = F9W.usable(q, k, k, causal, cfg)
    if why:
        pytest.skip(f"the Gluon kernel does not take this: {why}")
    e = FA.errors(b, h, n_q, n_kv, d, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=lambda q, k, v, causal: F9W.flash_attention_sm90_ws(
                      q, k, v, causal, cfg=cfg, out=torch.full_like(q, float("nan"))))
    _holds_to_fp64(e)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,cfg", WS_CASES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_sm90_ws_matches_fp64(shape, causal, cfg):
    """Every output row written (out starts NaN); with RAGGED, lengths that are not whole
    tiles, and no row written past its head's (the next head's rows are checked with it)."""
    _ws_matches_fp64(shape, causal, cfg)


WS_PERSISTENT = [(16, 8, 512, 512, 128, 2), (4, 32, 1024, 1024, 128, 8), (1, 4, 256, 2048, 64, 4),
                 (40, 8, 256, 256, 128, 2), (3, 6, 130, 130, 128, 3), (8, 16, 300, 700, 128, 4),
                 (50, 4, 100, 100, 64, 1)]  # 4-10 tiles a program on 132 SMs, and fewer than one


@pytest.mark.gpu
@pytest.mark.parametrize("shape", WS_PERSISTENT)
@pytest.mark.parametrize("block_n", [64, 128])
@pytest.mark.parametrize("causal,by_length", [(False, False), (True, False), (True, True)])
def test_flash_attention_sm90_ws_persistent_matches_fp64(shape, block_n, causal, by_length):
    """PERSISTENT: a program an SM walking tiles, whole and ragged (each out row written once,
    none past its head's), the ring and the Q buffers' phases carried from tile to tile;
    causal tiles (longest first, by head or by length in bands of heads; OWN_BLOCKS where
    config() sets it)."""
    _ws_matches_fp64(shape, causal, {"PERSISTENT": True, "BLOCK_N": block_n,
                                     "BY_LENGTH": by_length,
                                     "RAGGED": bool(shape[2] % 128 or shape[3] % block_n)})


@pytest.mark.gpu
@pytest.mark.parametrize("shape", WS_PERSISTENT)
@pytest.mark.parametrize("stages", [2, 4])
def test_flash_attention_sm90_ws_short_causal_walk_matches_fp64(shape, stages):
    """A causal walk by length under OWN_BLOCKS, its warpgroups taking a tile's two 64-row
    halves in turn (each Q, O and LSE row where its own rows are), in two stages and in four
    (flags())."""
    _ws_matches_fp64(shape, True, {"PERSISTENT": True, "OWN_BLOCKS": True, "BLOCK_N": 64,
                                   "STAGES": stages, "BY_LENGTH": True,
                                   "RAGGED": bool(shape[2] % 128 or shape[3] % 64)})


@pytest.mark.gpu
@pytest.mark.parametrize("n", [384, 700])
def test_flash_attention_sm90_ws_persistent_takes_transformers_layout(n):
    """Without a mask at head dim 128 the warp-specialized kernel walks the tiles by default
    where walks() says (384: yes; 700: 128-row tiles would pad more, so the plain kernel),
    transformers' layout too."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, d, hkv = 24, 8, 128, 2

    def kernel(q, k, v, causal):
        out = torch.full((b, n, h, d), float("nan"), device="cuda", dtype=q.dtype)
        q, k, v, out = _blhd(q), _blhd(k), _blhd(v), out.transpose(1, 2)
        assert F9W.flags(q, k, v, causal, out=out)["PERSISTENT"] == (n == 384)
        assert routing.which(q, k, v, causal, out) == (
            "flash_attention_sm90_ws" if n == 384 else "flash_attention_sm90")
        return FA.flash_attention(q, k, v, causal, out=out)

    _holds_to_fp64(FA.errors(b, h, n, n, d, hkv, torch.bfloat16, False, device="cuda",
                             seed=n, kernel=kernel))


@pytest.mark.gpu
@pytest.mark.parametrize("n,causal", [(3001, True), (1300, False)])
@pytest.mark.parametrize("persistent", [False, True])
def test_flash_attention_sm90_ws_takes_a_half_empty_last_tile(n, causal, persistent):
    """A head whose last 128-row tile is half empty, a program a tile and walked: that half's
    warpgroup computes one block and stores nothing; every row as fp64's."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, d, hkv = 2, 4, 128, 2

    def kernel(q, k, v, causal):
        cfg = F9W.flags(q, k, v, causal, {"PERSISTENT": persistent})
        assert cfg["RAGGED"] and F9W.usable(q, k, v, causal, cfg) is None
        out = torch.full_like(q, float("nan"))
        return F9W.flash_attention_sm90_ws(q, k, v, causal, cfg=cfg, out=out)

    _holds_to_fp64(FA.errors(b, h, n, n, d, hkv, torch.bfloat16, causal, device="cuda",
                             seed=n, kernel=kernel))


def test_the_warp_specialized_kernel_walks_tiles_where_they_pad_no_more():
    """A head whose last 128-row tile is half empty pads 64 rows more than 64-row tiles: walked
    where that is at most WALK_PAD_SHARE (1/16) of them, from 961 query rows, or a share
    given; never for latent attention."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    assert not F9W.walks(3000, 3000, 128, 128, True, pad_share=0)  # whole tiles only
    assert F9W.walks(512, 512, 128, 128, False) and F9W.walks(1000, 1000, 128, 128, False)
    assert F9W.walks(65, 65, 128, 128, False)        # one tile of 128 rows, two of 64
    assert not F9W.walks(700, 700, 128, 128, False)  # 6 tiles of 128 (768 rows), 11 of 64
    assert not F9W.walks(64, 64, 128, 128, False)
    assert F9W.walks(2048, 2048, 128, 128, True) and F9W.walks(512, 1025, 128, 128, True)
    assert F9W.walks(8192, 8192, 128, 128, True) and F9W.walks(128, 512, 128, 128, True)
    assert F9W.walks(256, 256, 128, 128, True, 4) and F9W.walks(384, 384, 128, 128, True, 3)
    assert F9W.walks(384, 384, 128, 128, True, 2) and F9W.walks(640, 640, 128, 128, True)
    assert not F9W.walks(256, 256, 128, 128, True, 2)  # the shortest walked by head: slower
    assert not F9W.walks(384, 384, 128, 128, True, 1)
    assert not F9W.walks(128, 128, 128, 128, True, 8)  # one tile a head
    assert F9W.walks(256, 256, 192, 128, True) and F9W.walks(1024, 1024, 192, 128, True)
    assert F9W.walks(512, 512, 192, 128, False) and F9W.walks(640, 640, 192, 128, False)
    assert not F9W.walks(128, 128, 192, 128, True)  # latent causal: past 128 keys,
    assert not F9W.walks(1152, 1152, 192, 128, True)  # up to LATENT_WALK_KEYS
    assert not F9W.walks(1280, 1280, 192, 128, False)
    assert not F9W.walks(8320, 8320, 128, 128, True)  # nor past WALK_CAUSAL_MOST
    assert F9W.walks(3000, 3000, 128, 128, True)  # 24 tiles of 128, 47 of 64: 1/47 more
    assert F9W.walks(961, 961, 128, 128, False) and F9W.walks(1088, 1088, 128, 128, True)
    assert not F9W.walks(960, 960, 128, 128, False)  # 8 tiles of 128, 15 of 64: 1/15 more
    assert not F9W.walks(900, 900, 128, 128, True) and not F9W.walks(130, 130, 128, 128, False)
    assert not F9W.walks(576, 576, 192, 128, False)  # latent: 5 tiles of 128, 9 of 64
    assert not F9W.walks(512, 512, 64, 64, False)


def test_the_plain_kernel_goes_first_on_short_rows_not_walked_in_whole_tiles():
    """At head dim 128 the plain Gluon kernel goes first on the rows its short() takes, unless
    the warp-specialized kernel walks them in whole tiles, or walks a causal row with a
    half-empty last tile on a grid shallower than DEEP_CAUSAL programs an SM."""
    deep, mid, shallow = 30.0, 14.0, 2.0  # programs an SM: causal rows up to 2,048 keys are
    assert routing.DEEP_CAUSAL == 20          # short on 3 or more
    assert routing.plain_first(700, 700, False, 4, mid)      # short, its last tile half empty
    assert not routing.plain_first(1024, 1024, False, 4, mid)  # short, walked in whole tiles
    assert routing.plain_first(1024, 1024, False, 4, 3.9)  # ... but under two waves of tiles
    assert routing.FEW_NOMASK == 4 and not routing.plain_first(1024, 1024, True, 4, 3.9)
    assert routing.plain_first(1088, 1088, True, 4, deep)    # half empty, deep: plain first
    assert not routing.plain_first(1800, 1800, True, 4, mid)   # half empty, shallower: walked
    assert routing.plain_first(900, 900, True, 4, mid)       # 1 of 15 tiles padded: not walked
    assert not routing.plain_first(1088, 1088, True, 4, shallow)  # not short: walked
    assert not routing.plain_first(3001, 3001, True, 4, deep)     # past 2,048 keys: walked
    assert not routing.plain_first(1300, 1300, False, 4, deep)    # past 1,024: walked


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 8, 256, 256, 128, 2), (1, 4, 128, 512, 256, 4),
                                   (2, 6, 200, 200, 128, 3), (1, 4, 100, 333, 128, 2),
                                   (2, 8, 1100, 1100, 256, 2)])  # ragged at 256: 144 tiles
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_sm90_ws_takes_transformers_layout(shape, fused, causal):
    """q, k, v and out as transformers passes them, (B, L, H, D) in memory seen as (B, H, L, D),
    run STRIDED, and RAGGED where the lengths are not whole tiles, from the inputs alone;
    ``fused``: q and v slices of one fused projection's rows, k rotated into its own tensor
    (GPT-NeoX's and Phi-3's)."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, n_q, n_kv, d, hkv = shape

    def kernel(q, k, v, causal):
        out = torch.full((b, n_q, h, d), float("nan"), device="cuda", dtype=q.dtype)
        q, k, v, out = _blhd(q), _blhd(k), _blhd(v), out.transpose(1, 2)
        if fused:
            q, v = _fused(q, 0), _fused(v, 2)
        assert F9W.usable(q, k, v, causal, out=out) is None
        f = F9W.flags(q, k, v, causal, out=out)
        assert f["Q_STRIDED"] and f["K_STRIDED"] and f["V_STRIDED"]
        return F9W.flash_attention_sm90_ws(q, k, v, causal, out=out)

    e = FA.errors(b, h, n_q, n_kv, d, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=kernel)
    _holds_to_fp64(e)


def _fused(t, part=1):
    """The same values laid out as a fused projection leaves them (GPT-2's q, k and v side by
    side in a token's row): part ``part`` of three, tokens first (the others hold NaN)."""
    b, h, n, d = t.shape
    row = torch.full((b, n, 3 * h * d), float("nan"), device=t.device, dtype=t.dtype)
    return row[..., part * h * d:(part + 1) * h * d].view(b, n, h, d).transpose(1, 2).copy_(t)


def _latent_v(t):
    """The same values laid out as DeepSeek-V2's attention in transformers passes v: each
    head's last D of 2 D columns, tokens first (the rest, another tensor's, holds NaN)."""
    b, h, n, d = t.shape
    wide = torch.full((b, n, h, 2 * d), float("nan"), device=t.device, dtype=t.dtype)
    return wide.transpose(1, 2)[..., d:].copy_(t)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 16, 1024, 1024, 16), (2, 8, 256, 256, 2),
                                   (1, 4, 200, 200, 4), (1, 6, 100, 333, 2)])
@pytest.mark.parametrize("layout", ["contiguous", "tokens first", "transformers' latent v"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("walk", [None, False, True])
def test_flash_attention_sm90_ws_takes_latent_attention(shape, layout, causal, walk):
    """q and k 192 wide, v 128 (latent attention; each Q and K tile comes as two and S is two
    wgmma ops): whole and ragged lengths, fewer queries than keys, GQA; contiguous, in
    transformers' layout, and as DeepSeek-V2 passes them (q and k contiguous, v 128 of each
    head's 256 columns tokens first, read where it lies); every output row written (out
    starts NaN), none past its head's; routing sends such inputs here; as flags() has them
    (``walk`` None), walked (PERSISTENT, 64-key blocks) and not."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, n_q, n_kv, hkv = shape

    def kernel(q, k, v, causal):
        out = torch.full((b, h, n_q, 128), float("nan"), device="cuda", dtype=q.dtype)
        if layout == "tokens first":
            q, k, v, out = _blhd(q), _blhd(k), _blhd(v), _blhd(out)
        elif layout == "transformers' latent v":
            v = _latent_v(v)
            assert F9W.flags(q, k, v, causal)["V_STRIDED"]
        cfg = None if walk is None else {"PERSISTENT": False} if not walk else {
            "PERSISTENT": True, "BLOCK_N": 64, "RAGGED": bool(n_q % 128 or n_kv % 64)}
        assert F9W.usable(q, k, v, causal, cfg, out=out) is None
        assert routing.which(q, k, v, causal, out) == "flash_attention_sm90_ws"
        return F9W.flash_attention_sm90_ws(q, k, v, causal, cfg=cfg, out=out)

    e = FA.errors(b, h, n_q, n_kv, 192, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=kernel, v_dim=128)
    _holds_to_fp64(e)


@pytest.mark.gpu
@pytest.mark.parametrize("tokens_first", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_sm90_ws_reads_k_and_v_from_a_longer_cache(tokens_first, causal):
    """q in transformers' layout; k and v the first 512 rows of a 1,024-row cache, heads first
    (a static cache) or tokens first. The rows past 512 hold NaN: none is read."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    b, h, n, d, hkv = 2, 8, 512, 128, 2

    def kernel(q, k, v, causal):
        def cached(t):
            shape = (b, 1024, hkv, d) if tokens_first else (b, hkv, 1024, d)
            full = torch.full(shape, float("nan"), device="cuda", dtype=t.dtype)
            part = (full.transpose(1, 2) if tokens_first else full)[:, :, :n]
            return part.copy_(t)
        q, k, v = _blhd(q), cached(k), cached(v)
        assert F9W.usable(q, k, v, causal) is None and F9W.layout(k) == (tokens_first, 1024, d)
        return F9W.flash_attention_sm90_ws(q, k, v, causal)

    e = FA.errors(b, h, n, n, d, hkv, torch.bfloat16, causal, device="cuda", seed=n,
                  kernel=kernel)
    _holds_to_fp64(e)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 8, 256, 256, 128, 2), (1, 4, 128, 512, 64, 4),
                                   (2, 4, 512, 512, 256, 1), (2, 4, 200, 256, 128, 2)])
@pytest.mark.parametrize("kv", ["tokens first", "heads first", "static cache",
                                "static cache, tokens first", "fused", "v apart"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_sm90_takes_each_layout(shape, kv, causal):
    """The plain Gluon kernel on q and out in transformers' layout (a ragged query length
    too), k and v in each layout a model passes (a static cache's first rows: the rows past
    them hold NaN, none is read; slices of one fused projection's rows, GPT-2's; k heads first
    and v each head's last D of 2 D columns, tokens first)."""
    from rooflab.kernels import flash_attention_sm90 as F9
    b, h, n_q, n_kv, d, hkv = shape

    def kernel(q, k, v, causal):
        def laid(t):
            if kv == "tokens first":
                return _blhd(t)
            if kv in ("heads first", "v apart"):
                return t
            if kv == "fused":
                return _fused(t)
            first = kv.endswith("tokens first")
            full = torch.full((b, 2 * n_kv, hkv, d) if first else (b, hkv, 2 * n_kv, d),
                              float("nan"), device="cuda", dtype=t.dtype)
            return (full.transpose(1, 2) if first else full)[:, :, :n_kv].copy_(t)
        out = torch.full((b, n_q, h, d), float("nan"), device="cuda",
                         dtype=q.dtype).transpose(1, 2)
        q, k, v = _blhd(q), laid(k), laid(v)
        if kv == "v apart":
            v = _latent_v(v)
        assert F9.usable(q, k, v, causal, out=out) is None
        return F9.flash_attention_sm90(q, k, v, causal, out=out)

    e = FA.errors(b, h, n_q, n_kv, d, hkv, torch.bfloat16, causal, device="cuda", seed=n_kv,
                  kernel=kernel)
    _holds_to_fp64(e)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_runs_the_gluon_kernels_where_they_are_faster(monkeypatch, causal):
    """On sm_90, inputs go to the Gluon kernel that routing.GLUON names for their head dim,
    ragged lengths too (at 256 to the Triton kernel below 1,024 queries or a wave of 128-row
    tiles); at 128 on rows F9.short() takes, to the plain Gluon kernel, unless the
    warp-specialized one walks them in whole tiles (no mask on two waves of tiles or more, or
    causal past 128 keys with 4 heads a KV head, past 384 with 1); transformers' layout goes
    where contiguous tensors of its shape go; an explicit config goes to the Triton kernel;
    every answer matches fp64."""
    import importlib
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels are for sm_90")
    calls = []
    plain, ws = "flash_attention_sm90", "flash_attention_sm90_ws"
    for name in (plain, ws):
        m = importlib.import_module(f"rooflab.kernels.{name}")
        real = getattr(m, name)
        monkeypatch.setattr(m, name, lambda *a, real=real, name=name, **k:
                            calls.append(name) or real(*a, **k))
    few = ws if causal else plain  # short rows without a mask on under two waves of tiles
    for n, d, kernel in [(1024, 64, plain), (2560, 128, ws), (1024, 128, few), (256, 128, few),
                         (512, 256, ws), (1000, 64, plain), (1000, 128, few), (500, 128, few),
                         (700, 128, plain), (1500, 128, ws), (2048, 128, ws),
                         (1000, 256, None), (1100, 256, ws)]:
        calls.clear()
        e = FA.errors(2, 8, n, n, d, 2, torch.bfloat16, causal, device="cuda", seed=n)
        assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
        assert calls == ([kernel] if kernel else []), (n, d, calls)
        q, kv = (torch.empty(2, h, n, d, device="cuda", dtype=torch.bfloat16) for h in (8, 2))
        assert routing.which(q, kv, kv, causal) == (kernel or "flash_attention")
    q, kv = (torch.empty(64, h, 256, 128, device="cuda", dtype=torch.bfloat16) for h in (8, 2))
    assert routing.which(q, kv, kv, causal) == ws  # 1,024 tiles, two waves and more: walked
    for n, d, kernel in [(256, 128, plain), (2560, 128, ws), (1024, 64, plain)]:
        q = torch.randn(1, 2, n, d, device="cuda", dtype=torch.float16,
                        generator=torch.Generator("cuda").manual_seed(n))
        calls.clear()
        o_triton, _ = FA.flash_attention(q, q, q, causal, cfg={})  # an explicit config
        assert calls == []
        hf = _blhd(q)  # transformers' layout goes where contiguous tensors of its shape go
        o, _ = FA.flash_attention(hf, hf, hf, causal)
        assert calls == [kernel] and o.stride() == hf.stride(), (n, d, calls)
        # q = k = v: each row's output is near its own v, up to 4-8, where fp16's step is 0.004
        torch.testing.assert_close(o, o_triton, atol=2e-3, rtol=2e-3)


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




def test_the_warp_specialized_kernels_flags_follow_the_inputs():
    """RAGGED where a length is not whole tiles (128 query rows, BLOCK_N keys); Q_STRIDED,
    K_STRIDED and V_STRIDED where q (and out), k and v come tokens first, each on its own;
    four stages where the walk takes 64-key blocks; a causal walk by length from
    BY_LENGTH_GROUP heads a KV head; a config's keys win."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W

    def t(n, heads=8, hf=False):
        return (torch.empty(2, n, heads, 128).transpose(1, 2) if hf
                else torch.empty(2, heads, n, 128))

    def flags(q, k, causal=False, cfg=None):
        f = F9W.flags(q, k, k, causal, cfg)
        assert f["K_STRIDED"] == f["V_STRIDED"]
        return f["RAGGED"], f["Q_STRIDED"], f["K_STRIDED"]

    assert flags(t(256), t(256)) == (False, False, False)
    assert flags(t(200), t(256)) == (True, False, False)  # 200 query rows: not whole tiles
    assert flags(t(256), t(320)) == (True, False, False)  # 320 keys: not whole blocks of 128
    assert flags(t(256), t(320), causal=True) == (False, False, False)  # short: 64-key blocks
    assert flags(t(256), t(1000), causal=True) == (True, False, False)
    assert flags(t(256), t(576), causal=True) == (True, False, False)   # 576: 128-key blocks
    assert flags(t(256, hf=True), t(256, hf=True)) == (False, True, True)
    assert flags(t(256, hf=True), t(256)) == (False, True, False)  # k, v from a cache
    assert flags(t(256), t(256), cfg={"RAGGED": True}) == (True, False, False)
    stages = lambda n, cfg=None: F9W.flags(t(n), t(n), t(n), True, cfg)["STAGES"]  # noqa: E731
    assert stages(512) == 4 and stages(256) == stages(1024) == 2  # walked with 64-key blocks
    assert stages(512, {"STAGES": 3}) == 3 and stages(512, {"PERSISTENT": False}) == 2
    by_length = lambda heads, kv, causal=True: F9W.flags(  # noqa: E731
        t(1024, heads), t(1024, kv), t(1024, kv), causal)["BY_LENGTH"]
    assert by_length(32, 8) and by_length(24, 8) and not by_length(32, 16)  # groups 4, 3, 2
    assert not by_length(16, 16) and not by_length(32, 8, causal=False)
    latent_v = torch.empty(2, 256, 8, 256).transpose(1, 2)[..., 128:]  # DeepSeek-V2's v
    f = F9W.flags(t(256), t(256), latent_v, False)
    assert (f["Q_STRIDED"], f["K_STRIDED"], f["V_STRIDED"]) == (False, False, True)
    latent = lambda n, causal: F9W.flags(  # noqa: E731 (q and k 192 wide, v 128)
        torch.empty(2, 8, n, 192), torch.empty(2, 8, n, 192), t(n), causal)
    for n, causal in [(640, True), (640, False), (1024, False)]:  # walked: 64-key blocks
        f = latent(n, causal)
        assert f["PERSISTENT"] and (f["BLOCK_N"], f["OWN_BLOCKS"], f["RAGGED"]) == (
            64, causal, False)
    f = latent(1280, True)
    assert not f["PERSISTENT"] and (f["BLOCK_N"], f["OWN_BLOCKS"]) == (128, False)


def test_the_warp_specialized_kernel_reads_each_layout_by_its_rows():
    """layout(): a 2-D view of P rows a head (heads first) or a batch (tokens first), P at
    least the length, heads W columns apart; a static cache's first rows keep its length as
    P; slices of a fused projection's rows and latent attention's v (each head's last 128 of
    256 columns) are read where they lie; anything else, None."""
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    assert F9W.layout(torch.empty(2, 8, 300, 128)) == (False, 300, 128)
    assert F9W.layout(torch.empty(2, 300, 8, 128).transpose(1, 2)) == (True, 300, 128)
    cache = torch.empty(2, 8, 1024, 128)
    assert F9W.layout(cache[:, :, :512]) == (False, 1024, 128)
    assert F9W.layout(torch.empty(2, 1024, 8, 128).transpose(1, 2)[:, :, :512]) == (
        True, 1024, 128)
    assert F9W.layout(torch.empty(1, 1, 64, 128)) == (False, 64, 128)
    latent = torch.empty(2, 300, 8, 256).transpose(1, 2)
    assert F9W.layout(latent[..., 128:]) == F9W.layout(latent[..., :128]) == (True, 300, 256)
    fused = torch.empty(2, 300, 3 * 8 * 128)  # GPT-2's c_attn: q, k, v side by side in a row
    q, k, v = (x.view(2, 300, 8, 128).transpose(1, 2) for x in fused.split(8 * 128, dim=2))
    assert F9W.layout(q) == F9W.layout(v) == (True, 300, 128)
    neox = torch.empty(2, 300, 8, 3 * 128).transpose(1, 2)  # GPT-NeoX: a head's q, k, v
    assert F9W.layout(neox[..., 256:]) == (True, 300, 384)
    assert F9W.layout(torch.empty(2, 8, 128, 300).transpose(2, 3)) is None  # D not contiguous
    assert F9W.layout(cache[:, :4]) is None            # heads from a longer stack of heads
    assert F9W.layout(torch.empty(2, 8, 64, 256)[..., :128]) is None  # rows of a wider tensor
    assert F9W.layout(cache[:, :, 1:513]) is None      # its view would run past the storage
    misaligned = torch.empty(2 * 8 * 64 * 128 + 1)[1:].view(2, 8, 64, 128)  # TMA: 16-byte base
    assert F9W.layout(misaligned) is None
    odd_rows = torch.empty(2, 300, 8 * 128 + 2)[..., :8 * 128].view(2, 300, 8, 128)
    assert F9W.layout(odd_rows.transpose(1, 2)) is None  # TMA: rows 16 bytes apart
    overlapping = torch.empty(2, 300, 8 * 64 + 64).as_strided((2, 8, 300, 128),
                                                               (300 * 576, 64, 576, 1))
    assert F9W.layout(overlapping) is None  # heads 64 columns apart, 128 wide


def _bf16(*shape):
    return torch.randn(*shape, dtype=torch.bfloat16)


def _reads_every_row_where_the_kernels_look(t):
    """desc()'s 2-D view of ``t`` holds row r of head h of batch b where the kernels' _at()
    looks (row b x P + r, columns from h x W tokens first; row (b x H + h) x P + r heads
    first), lies inside t's storage, and has no row running into the next (TMA's strides)."""
    from rooflab.kernels import flash_attention_sm90 as F9
    strided, pitch, width = F9.layout(t)
    view = F9.desc(t, 16).base
    b_n, h_n, n, d = t.shape
    for b in range(b_n):
        for h in range(h_n):
            row, col = (b * pitch, h * width) if strided else ((b * h_n + h) * pitch, 0)
            assert torch.equal(view[row:row + n, col:col + d], t[b, h]), (b, h)
    end = view.storage_offset() + (view.shape[0] - 1) * view.stride(0) + view.shape[1]
    assert end * t.element_size() <= t.untyped_storage().nbytes()
    assert view.stride(0) >= view.shape[1] and view.stride(0) * t.element_size() % 16 == 0


@pytest.mark.parametrize("make", [
    lambda: _bf16(2, 8, 40, 64),                                             # contiguous
    lambda: _bf16(2, 40, 8, 64).transpose(1, 2),                             # transformers'
    lambda: _bf16(2, 8, 96, 64)[:, :, :40],                                  # a static cache
    lambda: _bf16(2, 96, 8, 64).transpose(1, 2)[:, :, :40],                  # tokens first
    lambda: _bf16(2, 40, 8, 128).transpose(1, 2)[..., 64:],                  # latent v
    lambda: _bf16(2, 40, 3 * 8 * 64)[..., 8 * 64:16 * 64].view(2, 40, 8, 64).transpose(
        1, 2),                                                               # a fused k
    lambda: _bf16(1, 40, 3, 64).transpose(1, 2)])                            # B = 1
def test_a_tma_descriptor_finds_every_row_where_the_kernels_look(make):
    """For each layout a model passes, the descriptor's view holds every row where the
    kernels look. (The kernels read the view by TMA; _at is Gluon, restated here.)"""
    from rooflab.kernels import flash_attention_sm90 as F9
    if F9.GLUON_MISSING:
        pytest.skip(F9.GLUON_MISSING)
    t = make()
    assert F9.layout(t) is not None
    _reads_every_row_where_the_kernels_look(t)


def test_layout_takes_no_strides_the_kernels_would_misread():
    """300 random views (B, H, L, D) of a buffer: heads, tokens and batches in any order, each
    stride padded or not, an offset or none; wherever layout() takes one, the descriptor holds
    every row where the kernels look. Most of those it takes are neither contiguous nor plain
    transformers' layouts."""
    import random
    from rooflab.kernels import flash_attention_sm90 as F9
    if F9.GLUON_MISSING:
        pytest.skip(F9.GLUON_MISSING)
    rnd, taken = random.Random(0), []
    for _ in range(300):
        b, h, n, d = rnd.choice([1, 2, 3]), rnd.choice([1, 2, 3, 4]), rnd.randint(1, 9), 8
        inner = rnd.choice(["heads", "tokens"])  # which comes right above D in memory
        pad = [rnd.choice([0, 0, 8, 16, 3]) for _ in range(3)]
        if inner == "tokens":   # (B, H, L, D): rows a token within a head
            s2 = d + pad[0]
            s1 = n * s2 + pad[1]
            s0 = h * s1 + pad[2]
        else:                   # (B, L, H, D): a token's heads side by side
            s1 = d + pad[0]
            s2 = h * s1 + pad[1]
            s0 = n * s2 + pad[2]
        offset = rnd.choice([0, 8, 5])
        buf = torch.randn(offset + b * s0 + 64, dtype=torch.bfloat16)
        t = buf.as_strided((b, h, n, d), (s0, s1, s2, 1), offset)
        if F9.layout(t) is not None:
            _reads_every_row_where_the_kernels_look(t)
            taken.append(not t.is_contiguous())
    assert sum(taken) > 30, sum(taken)  # 49 (of 55 taken) with this seed


def test_the_plain_gluon_kernels_flags_follow_the_inputs():
    """RAGGED where a length is not whole tiles (64 query rows, BLOCK_N keys); Q_STRIDED,
    K_STRIDED and V_STRIDED where q, k and v come tokens first; a config's keys win."""
    from rooflab.kernels import flash_attention_sm90 as F9

    def t(n, heads=8, hf=False):
        return (torch.empty(2, n, heads, 128).transpose(1, 2) if hf
                else torch.empty(2, heads, n, 128))

    def flags(q, k, causal=False, cfg=None):
        f = F9.flags(q, k, k, causal, cfg)
        assert f["K_STRIDED"] == f["V_STRIDED"]
        return f["RAGGED"], f["Q_STRIDED"], f["K_STRIDED"]

    assert flags(t(192), t(1024)) == (False, False, False)
    assert flags(t(200), t(256)) == (True, False, False)   # 200 query rows: not whole tiles
    assert flags(t(256), t(1000)) == (True, False, False)  # 1,000 keys: not whole 64-key blocks
    assert flags(t(3, hf=True), t(320)) == (True, True, False)
    assert flags(t(256), t(256, hf=True)) == (False, False, True)
    assert flags(t(200), t(256), cfg={"RAGGED": False}) == (False, False, False)


def test_the_plain_gluon_kernel_narrows_its_key_blocks_only_where_its_rules_say():
    """Head dim 128: 32-key blocks in two stages at most N32_KEYS keys and SHORT_WAVES waves of
    four programs an SM, else 64-key blocks in one stage where short() takes the row, two
    elsewhere. Head dim 64: 64-key blocks causal up to CAUSAL_KEYS_64 keys or on keys that are
    not whole 128-key blocks, else 128. Head dim 256: 32."""
    from rooflab.kernels import flash_attention_sm90 as F9
    deep = 4 * F9.SHORT_WAVES
    tiles = lambda *a: (F9.config(*a)["BLOCK_N"], F9.config(*a)["STAGES"])  # noqa: E731
    assert tiles(128, F9.N32_KEYS, deep) == tiles(128, 128, 10 * deep, True) == (32, 2)
    assert tiles(128, F9.N32_KEYS + 64, deep) == tiles(128, F9.N32_KEYS, deep - 1) == (64, 1)
    wave = F9.CAUSAL_WAVE
    assert tiles(128, F9.SHORT_KEYS, 1) == tiles(128, F9.CAUSAL_KEYS, wave, True) == (64, 1)
    assert tiles(128, F9.SHORT_KEYS + 64, deep) == tiles(128, F9.CAUSAL_KEYS + 64, deep, True) \
        == tiles(128, F9.SHORT_KEYS + 64, wave - 0.5, True) == tiles(128) == (64, 2)
    assert tiles(64, F9.CAUSAL_KEYS_64, 1, True) == tiles(64, 256, 10 * deep, True) == (64, 2)
    assert tiles(64, F9.CAUSAL_KEYS_64 + 128, 1, True) == tiles(64, 256, deep, False) == (128, 2)
    assert tiles(64, 320) == tiles(64, 4000) == tiles(64, 4000, 1, True) == (64, 2)
    assert not F9.short(0, 10 * deep, True)  # no keys: no short row, on any grid
    assert tiles(256, 256, 10 * deep, True) == (32, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_short_rows_run_the_narrower_key_blocks_and_match_fp64(monkeypatch, causal):
    """flash_attention() on short rows runs the plain kernel with the key blocks and stages
    config() names: at head dim 128, causal, 32 keys in two stages on a deep grid, 64 in one on
    a shallow one (without a mask the warp-specialized kernel walks them; two heads a KV head,
    so no causal walk by length); at head dim 64, 64 keys causal and 128 not (lengths that are
    whole 64-key blocks only where causal); in both layouts each matches fp64."""
    from rooflab.kernels import flash_attention_sm90 as F9
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels are for sm_90")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    deep = -(-4 * F9.SHORT_WAVES * sms // (32 * 256 // 64))  # batches for SHORT_WAVES waves
    tiles, real = [], F9.flash_attention_sm90
    monkeypatch.setattr(F9, "flash_attention_sm90", lambda q, k, v, c, *a, **kw: tiles.append(
        tuple(F9.flags(q, k, v, c, kw.get("cfg"))[x] for x in ("BLOCK_N", "STAGES")))
        or real(q, k, v, c, *a, **kw))
    for b, n, d, tile in [(deep, 256, 128, (32, 2)), (2, 256, 128, (64, 1)),
                          (2, 320 if causal else 256, 64, (64, 2) if causal else (128, 2))]:
        tiles.clear()
        e = FA.errors(b, 32, n, n, d, 16, torch.bfloat16, causal, device="cuda", seed=b)
        assert e["all_finite"] and e["triton_rel_err"] <= 2 * e["torch_rel_err"] + 1e-4, e
        walked = d == 128 and not causal  # the warp-specialized kernel's walk runs these
        assert tiles == ([] if walked else [tile]), (b, d, tiles)
        q = torch.randn(b, n, 32, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        kv = torch.randn(b, n, 16, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        o, _ = FA.flash_attention(q, kv, kv, causal)
        ref = FA.standard_attention(q.double(), kv.double().repeat_interleave(2, 1),
                                    kv.double().repeat_interleave(2, 1), causal)
        assert float((o.double() - ref).norm() / ref.norm()) < 1e-2
        assert tiles == ([] if walked else [tile, tile]), (b, d, tiles)


def test_the_plain_gluon_kernels_flags_and_layouts_follow_the_inputs():
    """Q_STRIDED where q comes tokens first, K_STRIDED where k does, V_STRIDED where v does;
    a config's keys win. usable()'s layout checks come after its sm_90 check: on the GPU,
    test_flash_attention_sm90_takes_each_layout."""
    from rooflab.kernels import flash_attention_sm90 as F9
    hf = torch.empty(2, 256, 8, 128).transpose(1, 2)
    heads = torch.empty(2, 8, 256, 128)
    strided = lambda f: tuple(f[f"{x}_STRIDED"] for x in "QKV")  # noqa: E731
    assert strided(F9.flags(hf, heads, heads)) == (True, False, False)
    assert strided(F9.flags(heads, heads, hf)) == (False, False, True)  # k and v apart
    assert strided(F9.flags(heads, hf, hf, cfg={"K_STRIDED": False})) == (False, False, True)
    assert F9.layout(hf) == (True, 256, 128) and F9.layout(heads) == (False, 256, 128)

