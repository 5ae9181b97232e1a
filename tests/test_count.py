"""Three-way cross-check on real transformers layers (meta device): hand formulas (models.py),
the dispatch counter (count.py) and torch's FlopCounterMode must agree exactly."""
import time

import pytest
import torch

pytest.importorskip("transformers")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from rooflab import count, hf  # noqa: E402
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
