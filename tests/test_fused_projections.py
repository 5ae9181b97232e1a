"""Phi-3's fused projections (q, k, v as one linear; gate and up as one): MACs equal
FlopCounterMode's on a real layer, and the input read once (its parameters against transformers'
own: test_moe.py's presets)."""
import pytest
import torch

from rooflab import cost as C
from rooflab import models as M

TINY = {"model_type": "phi3", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 128, "sliding_window": None}


@pytest.mark.parametrize("batch,seq", [(2, 7), (1, 1)])
def test_fused_layer_macs_equal_flop_counter_mode(batch, seq):
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from rooflab import hf
    cfg = M.from_hf_dict(TINY, "tiny-phi3")
    layer, _ = hf.build_layer(cfg, "full", "cpu", torch.float32)
    x = torch.randn(batch, seq, cfg.hidden)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        layer.mlp(x)
        layer.self_attn.qkv_proj(x)
    parts = {p.name: p for p in M.layer_costs(cfg, M.Phase.prefill(batch, seq))}
    assert "attn.q_proj" not in parts and "mlp.up_proj" not in parts
    linear = ("attn.qkv_proj", "mlp.gate_up_proj", "mlp.down_proj")
    assert 2 * sum(parts[n].macs for n in linear) == fc.get_total_flops()


def test_the_input_is_read_once_not_three_times():
    fused = M.from_hf_dict(TINY, "fused")
    apart = M.ModelConfig(**{**fused.as_dict(), "fused_projections": False})
    ph, e = M.Phase.prefill(4, 32), C.elem_bytes(fused.dtype)
    one = {p.name: p for p in M.layer_costs(fused, ph)}
    three = {p.name: p for p in M.layer_costs(apart, ph)}
    qkv = sum(three[n].bytes for n in ("attn.q_proj", "attn.k_proj", "attn.v_proj"))
    gate_up = three["mlp.gate_proj"].bytes + three["mlp.up_proj"].bytes
    assert qkv - one["attn.qkv_proj"].bytes == 2 * ph.tokens * fused.hidden * e
    assert gate_up - one["mlp.gate_up_proj"].bytes == ph.tokens * fused.hidden * e
    assert sum(p.macs for p in one.values()) == sum(p.macs for p in three.values())


def test_partial_rotary_is_not_modelled_and_says_so():
    with pytest.raises(M.ModelError, match="partial_rotary_factor 0.5 is not modelled"):
        M.from_hf_dict({**TINY, "partial_rotary_factor": 0.5}, "bad")
