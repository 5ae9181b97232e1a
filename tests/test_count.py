"""Three-way cross-check on real transformers layers (meta device): hand formulas (models.py),
the dispatch counter (count.py) and torch's FlopCounterMode must agree exactly."""
import time

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from rooflab import count, hf  # noqa: E402
from rooflab import cost as C  # noqa: E402
from rooflab import models as M  # noqa: E402

PROJ = ["attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj"]


def counted(cfg, phase, lt):
    call = hf.prepare(cfg, lt, phase)
    c = count.count(call, module=call.layer)
    fc = FlopCounterMode(display=False)
    with torch.no_grad(), fc:
        call()
    per = {}
    for r in c.records:
        comp = hf.component_of(r.module, cfg.family)
        d = per.setdefault(comp, {"macs": 0, "bytes": 0})
        d["macs"] += r.macs
        d["bytes"] += r.bytes
    return c, fc, per


@pytest.mark.parametrize("model", ["gemma-3-270m-it", "Llama-3.1-8B"])
@pytest.mark.parametrize("phase", [M.Phase.prefill(2, 64), M.Phase.decode(3, 100)])
def test_projection_macs_and_bytes_match_hand_formulas(model, phase):
    cfg = M.load(model)
    lt = cfg.layer_types[0]
    c, fc, per = counted(cfg, phase, lt)
    hand = {p.name: p for p in M.layer_costs(cfg, phase, lt)}
    for name in PROJ:
        assert per[name]["macs"] == hand[name].macs, name
        assert per[name]["bytes"] == hand[name].bytes, name  # one GEMM: A, W, C once each
    assert c.matmul_flops() == fc.get_total_flops()  # all matmuls, attention included
    # attention core: QK^T and PV as counted, dense, equal the hand formula
    core = c.matmul_flops() - 2 * sum(per[n]["macs"] for n in PROJ)
    assert core == 2 * hand["attn.core"].macs


def test_70b_class_layer_counts_fast_without_memory():
    cfg = M.from_hf_dict({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
                          "num_hidden_layers": 80, "num_attention_heads": 64,
                          "num_key_value_heads": 8, "vocab_size": 128256}, name="70b")
    t0 = time.perf_counter()
    call = hf.prepare(cfg, "full", M.Phase.prefill(1, 2048))
    c = count.count(call, module=call.layer)
    elapsed = time.perf_counter() - t0
    assert next(call.layer.parameters()).device.type == "meta"
    hand = M.layer_costs(cfg, M.Phase.prefill(1, 2048))
    assert c.matmul_flops() == 2 * sum(p.macs for p in hand)
    assert elapsed < 5.0  # well under a second once transformers is imported; generous for CI


def test_norm_ops_follow_cost_conventions():
    x = torch.randn(8, 64)
    ln = count.count(torch.nn.LayerNorm(64), x)
    assert [r.flops for r in ln.records if r.op == "native_layer_norm"] == [7 * 8 * 64]  # 3584
    if hasattr(torch.nn, "RMSNorm"):
        rms = count.count(torch.nn.RMSNorm(64), x)
        if any(r.op in ("rms_norm", "_fused_rms_norm") for r in rms.records):
            assert rms.total_flops == 4 * 8 * 64  # the fused op: 2048
        else:  # decomposed: square, mean, scale, weight per element; eps add and rsqrt per row
            assert rms.total_flops == 4 * 8 * 64 + 2 * 8  # 2064, as cost.rmsnorm's 4/element


def test_views_move_no_bytes_and_registry():
    x = torch.randn(4, 8, device="meta")
    c = count.count(lambda: x.view(8, 4).t().contiguous())
    view_ops = [r for r in c.records if r.op in ("view", "t")]
    assert view_ops and all(r.bytes == 0 for r in view_ops)
    clone = [r for r in c.records if r.op not in ("view", "t")][0]
    assert clone.bytes == 2 * 4 * 8 * 4  # read 128 B, write 128 B
    with pytest.raises(ValueError):
        count.register(torch.ops.aten.mm)(lambda a, o: (0, 0))


def test_an_allocation_moves_no_bytes_and_its_fill_does():
    """empty_like hands out memory (no kernel); writing into it is the kernel, as an MoE's
    inverse permutation does: inv = empty_like(perm); inv[perm] = arange."""
    perm = torch.randperm(16)
    def inverse():
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(16)
        return inv
    ops = {r.op: r for r in count.count(inverse).records}
    assert ops["empty_like"].bytes == 0
    assert ops["index_put_"].bytes > 0


def test_counter_matches_flopcountermode_on_sdpa_and_addmm():
    q = torch.randn(2, 4, 32, 16)
    k = torch.randn(2, 4, 48, 16)
    v = torch.randn(2, 4, 48, 16)
    lin = torch.nn.Linear(16, 24)
    x = torch.randn(5, 16)

    def f():
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
        lin(x)

    expected_macs = 2 * (2 * 4 * 32 * 48 * 16) + 5 * 16 * 24  # QK^T + PV (196608) + addmm (1920)
    # the fused CPU kernel (_scaled_dot_product_flash_attention_for_cpu) is in our registry
    assert count.count(f).total_macs == expected_macs
    # the math backend decomposes into bmm, which FlopCounterMode also counts: they agree
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        c = count.count(f)
        fc = FlopCounterMode(display=False)
        with fc:
            f()
    assert c.matmul_flops() == fc.get_total_flops() == 2 * expected_macs


# --- no blind spots --------------------------------------------------------------------------
def test_gathers_read_the_rows_they_touch():
    emb = torch.nn.Embedding(50000, 768)
    ids = torch.randint(0, 50000, (1, 8))
    c = count.count(emb, ids)
    (r,) = c.kernels()
    # ids (8 int64 = 64 B) + 8 rows of 768 fp32 (24,576 B) read; 24,576 B written: 49,216 B
    assert (r.bytes_read, r.bytes_written) == (64 + 8 * 768 * 4, 8 * 768 * 4)
    src = torch.randn(1000, 16)
    idx = torch.tensor([3, 5, 7])
    (r,) = count.count(lambda: src.index_select(0, idx)).kernels()
    assert (r.bytes_read, r.bytes_written) == (24 + 3 * 64, 3 * 64)  # 216, 192
    (r,) = count.count(lambda: src[idx]).kernels()
    assert (r.bytes_read, r.bytes_written) == (24 + 3 * 64, 3 * 64)
    dst = torch.zeros(1000, 16)
    vals = torch.randn(3, 16)
    (r,) = count.count(lambda: dst.index_put_((idx,), vals)).kernels()
    assert (r.bytes_read, r.bytes_written) == (24 + 3 * 64, 3 * 64)  # not the 64,000-B dst
    cache, new = torch.zeros(2, 4, 1000, 16), torch.randn(2, 4, 1, 16)  # a KV cache's new row
    (r,) = count.count(lambda: cache.index_copy_(2, idx[:1], new)).kernels()
    assert (r.bytes_read, r.bytes_written) == (8 + 2 * 4 * 16 * 4, 2 * 4 * 16 * 4)
    assert r.flops == 0 and r.out_elements == 2 * 4 * 16  # the new row, not the cache


def test_inference_mode_is_refused_for_it_hides_copies_inside_composite_ops():
    x = torch.randn(2, 3, 4).transpose(1, 2)
    q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 4, 32, 16)
    mask = torch.ones(1, 1, 1, 32, dtype=torch.bool)
    c = count.count(lambda: (x.reshape(2, 12), F.scaled_dot_product_attention(q, k, k, mask)))
    ops = [r.op for r in c.kernels()]
    assert ops[0] == "clone" and c.kernels()[0].bytes == 2 * 2 * 12 * 4  # the reshape copied
    assert any(o in {p.__name__ for p in count.SDPA_OPS} for o in ops)  # the backend's op
    with torch.inference_mode(), pytest.raises(count.CountError, match="no_grad"):
        with count.Counter(torch.nn.Linear(2, 2)):
            pass

    class Inside(torch.nn.Module):  # a forward that enters inference mode itself
        def forward(self, t):
            with torch.inference_mode():
                return t.reshape(2, 12)

    with pytest.raises(count.CountError, match="no_grad"):
        count.count(Inside(), x)


def test_macs_of_mv_dot_and_convolution():
    A, x = torch.randn(256, 512), torch.randn(512)
    assert count.count(lambda: A @ x).total_macs == 256 * 512  # mv: 131072
    b = torch.randn(256)
    assert count.count(lambda: torch.addmv(b, A, x)).total_flops == 2 * 256 * 512 + 256
    assert count.count(lambda: x.dot(x)).total_macs == 512
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)
    img = torch.randn(1, 64, 56, 56, device="meta")
    c = count.count(conv.to("meta"), img)
    assert c.total_macs == 1 * 64 * 56 * 56 * 64 * 9 == 115_605_504  # out elems * C_in * 3*3
    fc = FlopCounterMode(display=False)
    with fc:
        conv(img)
    assert c.matmul_flops() == fc.get_total_flops()  # torch's own counter agrees
    grouped = torch.nn.Conv2d(64, 128, 3, groups=4, bias=False).to("meta")
    assert count.count(grouped, img).total_macs == 1 * 128 * 54 * 54 * 16 * 9  # C_in/groups = 16
    deconv = torch.nn.ConvTranspose2d(64, 32, 2, stride=2, bias=False).to("meta")
    c = count.count(deconv, img)
    fc = FlopCounterMode(display=False)
    with fc:
        deconv(img)
    assert c.matmul_flops() == fc.get_total_flops() == 2 * 64 * 56 * 56 * 32 * 4


def test_scaled_mm_counts_macs():
    a = torch.empty(64, 128, device="meta", dtype=torch.float8_e4m3fn)
    b = torch.empty(32, 128, device="meta", dtype=torch.float8_e4m3fn).t()
    one = torch.ones((), device="meta")
    try:
        c = count.count(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16))
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"_scaled_mm has no meta kernel in this torch: {e}")
    assert c.total_macs == 64 * 128 * 32  # 262144


def test_in_place_ops_do_not_read_what_they_overwrite():
    dst, src = torch.empty(1000), torch.randn(1000)
    (r,) = count.count(lambda: dst.copy_(src)).kernels()
    assert (r.bytes_read, r.bytes_written) == (4000, 4000)  # not 1.5x
    (r,) = count.count(lambda: dst.fill_(1.0)).kernels()
    assert (r.bytes_read, r.bytes_written) == (0, 4000)
    (r,) = count.count(lambda: dst.zero_()).kernels()
    assert (r.bytes_read, r.bytes_written) == (0, 4000)
    (r,) = count.count(lambda: dst.add_(src)).kernels()  # add_ does read its destination
    assert (r.bytes_read, r.bytes_written) == (8000, 4000)


def test_a_tensor_passed_twice_is_read_once():
    x = torch.randn(1000)
    (r,) = count.count(lambda: x + x).kernels()
    assert (r.bytes_read, r.bytes_written) == (4000, 4000)
    (r,) = count.count(lambda: x * x.view(1000)).kernels()  # the same memory, seen the same way
    assert r.bytes_read == 4000
    (r,) = count.count(lambda: x[:500] + x[500:]).kernels()  # two halves: both read
    assert r.bytes_read == 4000


def test_in_place_views_launch_nothing():
    def f():
        y = torch.randn(4, 8)
        y.unsqueeze_(0)
        y.squeeze_(0)
        y.t_()
        y.transpose_(0, 1)
        return y
    c = count.count(f)
    views = [r for r in c.records if r.op in ("unsqueeze_", "squeeze_", "t_", "transpose_")]
    assert len(views) == 4 and all(r.bytes == 0 for r in views)
    assert [r.op for r in c.kernels()] == ["randn"]


def test_one_flop_convention_and_unsupported_ops_listed():
    from rooflab import cost as C
    x = torch.randn(10, 20)
    assert count.count(torch.nn.functional.silu, x).total_flops == C.SILU_FLOPS * 200
    assert count.count(lambda: x.softmax(-1)).total_flops == C.SOFTMAX_FLOPS * 200
    c = count.count(lambda: torch.special.bessel_j0(x))
    assert c.total_flops == 0 and c.unsupported_ops() == {"special_bessel_j0": 1}
    assert count.count(lambda: (x + 1).exp()).unsupported_ops() == {}


@pytest.mark.parametrize("model", ["gemma-3-270m-it", "Llama-3.1-8B"])
@pytest.mark.parametrize("phase", [M.Phase.prefill(2, 64), M.Phase.decode(3, 100)])
def test_every_component_agrees_with_the_analytic_layer(model, phase):
    """FLOPs of every component, non-matmul ones included, exactly; bytes exactly where both
    count the same kernels. Stated differences: a norm is one fused kernel in models.py but
    HF's RMSNorm runs six eager ops in fp32 (casts, pow, mean, add, rsqrt, mul); attention's
    eager bytes follow the lab's five softmax passes, not HF's op sequence."""
    cfg = M.load(model)
    lt = cfg.layer_types[0]
    c, _, _ = counted(cfg, phase, lt)
    assert c.unsupported_ops() == {}
    per = {}
    for r in c.records:
        d = per.setdefault(hf.component_of(r.module, cfg.family), {"flops": 0, "bytes": 0})
        d["flops"] += r.flops
        d["bytes"] += r.bytes
    hand = {p.name: p for p in M.layer_costs(cfg, phase, lt)}
    hand["attn.core+rope"] = C.total([hand.pop("attn.rope"), hand.pop("attn.core")])
    hand["residuals"] = C.total([hand.pop("residual.attn"), hand.pop("residual.mlp")])
    assert set(per) == set(hand)
    for name, h in hand.items():
        assert per[name]["flops"] == h.flops, name
        if not name.endswith("norm") and name != "attn.core+rope":
            assert per[name]["bytes"] == h.bytes, name
    assert c.total_flops == C.total(list(hand.values())).flops


def test_groups_follow_the_modules():
    cfg = M.load("gemma-3-270m-it")
    phase = M.Phase.prefill(1, 32)
    c, _, _ = counted(cfg, phase, "sliding")
    mlp = sum(r.flops for r in c.records if r.module.startswith("mlp"))
    attn = sum(r.flops for r in c.records if r.module.startswith("self_attn"))
    g = M.groups(M.layer_costs(cfg, phase, "sliding"))
    assert g["mlp"].flops == mlp and g["attention"].flops == attn  # what layer.mlp runs
    assert g["norms_residuals"].flops == c.total_flops - mlp - attn


def test_an_input_an_earlier_op_wrote_carries_the_bytes_moved_since():
    """fresh: (bytes, bytes every op between read and wrote) of each input a counted op wrote;
    none for a tensor from outside (a weight, the layer's input), and none through a view."""
    a = torch.randn(64, 32)
    with count.Counter() as c:
        b = a * 2.0              # a: from outside
        d = a + 1.0              # 2 x 8 kB moved since b was written
        e = b.t() * d.t()        # b through a view, and d just written
    mul, add, last = (r for r in c.records if r.bytes)
    size = a.numel() * 4
    assert mul.fresh == () and add.fresh == ()
    assert last.fresh == ((size, 2 * size), (size, 0))
    assert e.shape == (32, 64)
