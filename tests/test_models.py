"""Component formulas with exact integers, config parsing and the model totals."""
import json
import re

import pytest

from rooflab import cost as C
from rooflab import models as M

G = M.load("gemma-3-270m-it")


def by_name(parts):
    return {p.name: p for p in parts}


def test_gemma_preset_matches_public_config():
    assert (G.hidden, G.intermediate, G.layers, G.heads, G.kv_heads, G.head_dim) == \
        (640, 2048, 18, 4, 1, 256)
    assert [i for i, t in enumerate(G.layer_types) if t == "full"] == [5, 11, 17]
    assert G.sliding_window == 512 and G.vocab == 262144 and G.act == "gelu_tanh"
    assert M.param_count(G) == 268_098_176  # the published "270m"


def test_prefill_components_exact():
    ph = M.Phase.prefill(2, 64)  # T = 128 tokens
    p = by_name(M.layer_costs(G, ph, "full"))
    assert p["attn.q_proj"].macs == 128 * 640 * 1024  # T * hidden * heads*head_dim = 83886080
    assert p["attn.k_proj"].macs == 128 * 640 * 256  # one KV head: 20971520
    assert p["attn.o_proj"].macs == 128 * 1024 * 640
    assert p["mlp.gate_proj"].macs == p["mlp.up_proj"].macs == 128 * 640 * 2048  # 167772160
    assert p["mlp.down_proj"].bytes == 2 * (128 * 2048 + 2048 * 640 + 128 * 640)  # 3309568
    assert p["attn.core"].macs == 2 * (2 * 4 * 64 * 64) * 256  # 16777216, dense
    assert p["attn.core"].detail["macs_causal"] == 2 * (2 * 4 * (64 * 65 // 2)) * 256  # 8519680
    assert p["mlp.act"].flops == 8 * 128 * 2048  # GeLU-tanh, 8 FLOPs/elem
    # RMSNorm over head_dim: 4 per element, 2 per row (512 rows), Gemma's 1 + w: 256
    assert p["attn.q_norm"].flops == 4 * 128 * 4 * 256 + 2 * 128 * 4 + 256  # 525568
    names = [x.name for x in M.layer_costs(G, ph, "full")]
    assert names == ["input_norm", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.q_norm",
                     "attn.k_norm", "attn.rope", "attn.core", "attn.o_proj", "post_attn_norm",
                     "residual.attn", "pre_ffn_norm", "mlp.gate_proj", "mlp.up_proj", "mlp.act",
                     "mlp.mul", "mlp.down_proj", "post_ffn_norm", "residual.mlp"]


def test_decode_reads_kv_cache_and_sliding_window():
    ph = M.Phase.decode(4, 4096)
    full = by_name(M.layer_costs(G, ph, "full"))["attn.core"]
    sliding = by_name(M.layer_costs(G, ph, "sliding"))["attn.core"]
    assert full.detail["kv_positions"] == 4096 and sliding.detail["kv_positions"] == 512
    assert full.macs == 2 * (4 * 4 * 1 * 4096) * 256  # B*H*1*kv * D * 2 = 33554432
    assert full.detail["kv_cache_read_bytes"] == 2 * 4 * 1 * 256 * 2 * 4095  # K+V, old positions
    assert full.detail["kv_cache_write_bytes"] == 2 * 4 * 1 * 256 * 2  # the new token: 4096
    k = by_name(M.layer_costs(G, ph, "full"))["attn.k_proj"]
    assert k.macs == 4 * 640 * 256  # decode projects only the new token


def test_groups_and_total():
    parts = M.layer_costs(G, M.Phase.prefill(1, 16), "sliding")
    g = M.groups(parts)
    assert g["mlp"].macs == sum(p.macs for p in parts if p.name.startswith("mlp."))
    assert g["attention"].macs + g["mlp"].macs == C.total(parts).macs  # norms have no MACs


def test_model_totals_and_kv_cache():
    ph = M.Phase.decode(1, 4096)
    mc = M.model_costs(G, ph)
    # 3 full layers cache 4096 positions, 15 sliding layers cache 512: K+V, 1 head, 256, bf16
    assert mc["kv_cache_bytes"] == 2 * 1 * 256 * 2 * (3 * 4096 + 15 * 512)  # 20447232
    assert mc["layers_by_type"]["full"]["count"] == 3
    head = mc["parts"][-1]
    assert head.name == "lm_head" and head.macs == 640 * 262144


def test_llama_family_has_no_sandwich_norms():
    ll = M.load("llama-3.1-8b")
    names = [p.name for p in M.layer_costs(ll, M.Phase.prefill(1, 8))]
    assert "post_attn_norm" not in names and "attn.q_norm" not in names
    assert M.param_count(ll) == 8_030_261_248


def test_hf_config_json(tmp_path):
    cfg = {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
           "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
           "head_dim": 128, "vocab_size": 151936, "hidden_act": "silu", "torch_dtype": "bfloat16"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = M.load(str(p))
    assert m.family == "qwen3" and m.qk_norm and m.kv_heads == 8 and m.dtype == "bf16"
    gem = {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048,
        "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 256, "vocab_size": 1000, "sliding_window": 512,
        "hidden_activation": "gelu_pytorch_tanh"}}
    p.write_text(json.dumps(gem))
    assert M.load(str(p)).layer_types == ("sliding",) * 5 + ("full",)


@pytest.mark.parametrize("cfg,msg", [
    ({"model_type": "bert", "hidden_size": 8}, "not supported"),
    ({"model_type": "llama", "hidden_size": 8}, "num_attention_heads"),
    ({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
      "num_key_value_heads": 3, "intermediate_size": 8, "vocab_size": 8}, "must divide"),
    ({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
      "intermediate_size": 8, "vocab_size": 8, "hidden_act": "relu2"}, "activation"),
])
def test_bad_configs(tmp_path, cfg, msg):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(M.ModelError, match=msg):
        M.load(str(p))


LLAMA = {"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
         "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 8}


@pytest.mark.parametrize("field,value,msg", [
    ("model_type", {}, "model_type {} is not supported"),
    ("max_position_embeddings", [], "max_position_embeddings must be a positive integer"),
    ("max_position_embeddings", 1.5, "max_position_embeddings must be a positive integer"),
    ("rope_theta", "x", "rope_theta must be a positive number"),
    ("rope_local_base_freq", -1, "rope_local_base_freq must be a positive number"),
    ("rms_norm_eps", float("nan"), "rms_norm_eps must be a positive number"),
    ("attn_logit_softcapping", "50", "attn_logit_softcapping must be a positive number"),
    ("rope_parameters", 3, "rope_parameters must be an object"),
    ("rope_parameters", {"rope_theta": True}, "rope_theta must be a positive number"),
])
def test_a_config_field_of_the_wrong_kind_is_one_error(field, value, msg):
    """A number the model is built from (rope bases, lengths, eps, softcaps) checked as read: a
    ModelError that names the field, which the CLI prints as one line, never an internal one."""
    with pytest.raises(M.ModelError, match=re.escape(msg)):
        M.from_hf_dict({**LLAMA, field: value})


def test_a_null_softcap_is_none_and_a_missing_one_transformers_default():
    gemma2 = {**LLAMA, "model_type": "gemma2", "sliding_window": 4}
    assert M.from_hf_dict(gemma2).attn_softcap == 50.0
    assert M.from_hf_dict({**gemma2, "attn_logit_softcapping": None}).attn_softcap is None
    assert M.from_hf_dict({**LLAMA, "max_position_embeddings": None}).max_positions == 8192


def test_malformed_and_unknown(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{")
    with pytest.raises(M.ModelError, match="not valid JSON"):
        M.load(str(p))
    with pytest.raises(M.ModelError, match="unknown model"):
        M.load("gpt-5")


def test_a_gemma_config_without_its_activation_takes_transformers_default():
    """Gemma's configs may leave the MLP activation out; transformers then runs GeLU-tanh, and
    so must the count (a held-out config found it counted as SiLU)."""
    d = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
         "head_dim": 32, "vocab_size": 100, "sliding_window": 16}
    assert M.from_hf_dict(d).act == "gelu_tanh"
    assert M.from_hf_dict({**d, "model_type": "llama"}).act == "silu"
