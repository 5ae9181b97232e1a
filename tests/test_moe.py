"""Mixtures of experts (Mixtral, Qwen3-MoE): parameters equal transformers' own, the MLP's MACs
equal FlopCounterMode's and the dispatch counter's on a real layer, the experts a batch reaches,
the roof's verdict both ways, and the config fields rooflab does not model said in one line."""
import pytest
import torch

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import models as M
from rooflab import roofline as R
from rooflab.report import console
from rooflab.studies import decoder

TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, "num_experts_per_tok": 2}
FAMILIES = {  # a small config of each family, its own field names
    "mixtral": {**TINY, "model_type": "mixtral", "num_local_experts": 8,
                "intermediate_size": 32},
    "qwen3_moe": {**TINY, "model_type": "qwen3_moe", "num_experts": 8, "intermediate_size": 96,
                  "moe_intermediate_size": 32, "norm_topk_prob": True},
    "gpt_oss": {**TINY, "model_type": "gpt_oss", "num_local_experts": 8, "intermediate_size": 32,
                "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8,
                "attention_bias": True},
}


PRESETS = {"Mixtral-8x7B": (46.70, 12.88), "Qwen3-30B-A3B": (30.53, 3.35),
           "DeepSeek-V2-Lite": (15.71, 2.66), "Phi-3-mini": (3.82, 3.82),
           "gpt-oss-20b": (20.91, 4.19)}  # billions: all, active (both embeddings counted)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_parameters_are_transformers_own(name):
    pytest.importorskip("transformers")
    from rooflab import hf
    cfg = M.load(name)
    model, _ = hf.build_model(cfg, "meta")
    params = dict(model.named_parameters())
    assert M.param_count(cfg) == sum(p.numel() for p in params.values())
    # active: every weight outside the experts, and k / E of the experts'
    experts = sum(p.numel() for n, p in params.items() if ".experts." in n)
    active = sum(p.numel() for p in params.values()) - experts + (
        experts * cfg.experts_per_token // cfg.experts if cfg.experts else 0)  # dense: all
    assert M.param_count(cfg, active=True) == active
    assert (M.param_count(cfg) / 1e9, M.param_count(cfg, active=True) / 1e9) == pytest.approx(
        PRESETS[name], abs=0.01)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("batch,seq", [(2, 5), (1, 1), (3, 17)])
def test_moe_layer_macs_equal_flop_counter_mode_and_the_counter(family, batch, seq):
    """Whatever the routing, T * k rows go through the experts: the MACs are exact."""
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from rooflab import count, hf
    cfg = M.from_hf_dict(FAMILIES[family], "tiny")
    layer, config = hf.build_layer(cfg, "full", "cpu", torch.float32)
    x = torch.randn(batch, seq, cfg.hidden, generator=torch.Generator().manual_seed(seq))
    mlp = [p for p in M.layer_costs(cfg, M.Phase.prefill(batch, seq)) if p.name.startswith("mlp.")]
    macs = sum(p.macs for p in mlp)
    for impl in ("eager", "grouped_mm"):  # a loop over the experts hit; one grouped GEMM
        config._experts_implementation = impl
        with torch.no_grad():
            c = count.count(lambda: layer.mlp(x), module=layer)
        assert sum(r.macs for r in c.records) == macs, impl
    config._experts_implementation = "eager"  # FlopCounterMode counts no grouped GEMM
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        layer.mlp(x)
    assert 2 * macs == fc.get_total_flops()
    assert macs == batch * seq * cfg.hidden * (cfg.experts + 3 * cfg.experts_per_token
                                               * cfg.expert_intermediate)  # by hand
    assert not c.unsupported_ops()


def test_a_gpt_oss_config_without_attention_bias_is_biased_as_transformers_builds_it():
    """transformers' GptOssConfig biases every attention projection unless told not to."""
    pytest.importorskip("transformers")
    import transformers
    d = {k: v for k, v in FAMILIES["gpt_oss"].items() if k != "attention_bias"}
    cfg = M.from_hf_dict(d, "tiny")
    assert cfg.attn_bias and cfg.o_bias and cfg.attn_sinks and cfg.expert_bias
    with torch.device("meta"):
        model = transformers.GptOssForCausalLM(transformers.GptOssConfig(**d))
    assert M.param_count(cfg) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("family", [*FAMILIES, "deepseek_v2"])
def test_moe_layers_count_on_the_meta_device(family):
    """No weights, no data: the grouped GEMM's shapes hold every expert's rows, so the meta
    device counts a mixture exactly (the per-expert loop would need the routing's values)."""
    pytest.importorskip("transformers")
    from rooflab import count, hf
    cfg = M.from_hf_dict(DEEPSEEK if family == "deepseek_v2" else FAMILIES[family], "tiny")
    layer, _ = hf.build_layer(cfg, "full", "meta", torch.bfloat16)
    x = torch.empty(3, 7, cfg.hidden, device="meta", dtype=torch.bfloat16)
    with torch.no_grad():
        c = count.count(lambda: layer.mlp(x), module=layer)
    mlp = [p for p in M.layer_costs(cfg, M.Phase.prefill(3, 7)) if p.name.startswith("mlp.")]
    assert sum(r.macs for r in c.records) == sum(p.macs for p in mlp)
    assert not c.unsupported_ops()


@pytest.mark.parametrize("family", [*FAMILIES, "deepseek_v2"])
def test_a_layer_made_alone_is_initialised_as_in_its_model(family):
    """HF initialises a router's and the experts' weights in the model, not the layer: left
    as torch.empty made them, a measured layer sent every token to the same experts."""
    pytest.importorskip("transformers")
    from rooflab import hf
    cfg = M.from_hf_dict(DEEPSEEK if family == "deepseek_v2" else FAMILIES[family], "tiny")
    layer, _ = hf.build_layer(cfg, "full", "cpu", torch.float32)
    model, _ = hf.build_model(cfg, "cpu", torch.float32)
    in_model = dict(model.model.layers[-1].named_parameters())
    for name, p in layer.named_parameters():
        assert torch.isfinite(p).all(), name
        assert p.std().item() == pytest.approx(in_model[name].std().item(), rel=0.25, abs=1e-6), name

def test_experts_hit_under_uniform_routing():
    cfg = M.load("Qwen3-30B-A3B")
    assert M.experts_hit(cfg, 1) == pytest.approx(8)      # one token: its k experts
    assert M.experts_hit(cfg, 4096) == pytest.approx(128)  # a prefill: all of them
    g = torch.Generator().manual_seed(0)  # against draws of k distinct experts a token
    for tokens in (2, 8, 64):
        hits = [len(set(torch.cat([torch.randperm(128, generator=g)[:8] for _ in range(tokens)])
                        .tolist())) for _ in range(400)]
        assert sum(hits) / len(hits) == pytest.approx(M.experts_hit(cfg, tokens), rel=0.02)


def test_decode_reads_the_weights_of_the_experts_hit_only():
    cfg = M.load("Mixtral-8x7B")
    w = C.weight_bytes(3 * cfg.hidden * cfg.expert_intermediate, "bf16")  # one expert's
    one = sum(p.bytes for p in M.layer_costs(cfg, M.Phase.decode(1, 512))
              if p.name.startswith("mlp.experts.") and "proj" not in p.name
              and p.macs)  # gate_up and down: their weights and rows
    assert w * 2 < one < w * 2 * 1.01  # k = 2 experts, plus a token's rows
    many = M.layer_costs(cfg, M.Phase.prefill(4, 1024))
    assert sum(p.bytes for p in many if p.macs and "experts" in p.name) > 8 * w  # all eight


def test_the_experts_sentence_follows_the_roof_both_ways():
    cfg = M.load("Mixtral-8x7B")
    h200 = R.Roof.of(H.lookup("H200"), "bf16")
    slow = R.Roof("slow", peak_flops_per_s=2e12, mem_bandwidth_bytes_per_s=1e12)  # ridge 2
    for roof, says in ((h200, "memory-bound at every batch"), (slow, "compute-bound from B=")):
        e = decoder.experts_at_decode(cfg, roof)
        line = console.experts_sentence(e)
        assert says in line and f"ridge {roof.ridge:.0f}" in line
        bounds = [r["bound"] for r in e["rows"]]
        assert bounds == sorted(bounds, key=lambda b: b == "compute")  # memory, then compute
    assert "pass --gpu" in console.experts_sentence(decoder.experts_at_decode(cfg, None))


@pytest.mark.parametrize("change,says", [
    ({"mlp_only_layers": [0]}, "not modelled"),
    ({"decoder_sparse_step": 2}, "not modelled"),
    ({"num_experts_per_tok": 9}, "more than the experts"),
    ({"moe_intermediate_size": None}, "moe_intermediate_size"),
])
def test_moe_fields_not_modelled_are_one_error(change, says):
    with pytest.raises(M.ModelError, match=says):
        M.from_hf_dict({**FAMILIES["qwen3_moe"], **change}, "bad")


def test_tensor_parallel_splits_every_expert():
    from rooflab import parallel
    cfg = M.load("Mixtral-8x7B")
    one = parallel.shard(cfg, 2)
    assert (one.experts, one.expert_intermediate) == (8, 7168)
    full = [p for p in M.layer_costs(cfg, M.Phase.prefill(1, 64)) if "experts" in p.name]
    half = [p for p in M.layer_costs(one, M.Phase.prefill(1, 64)) if "experts" in p.name]
    assert sum(p.macs for p in half) * 2 == sum(p.macs for p in full)


DEEPSEEK = {"model_type": "deepseek_v2", "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "vocab_size": 128, "n_routed_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1,
            "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
            "v_head_dim": 12}


def test_deepseek_v2_lite_caches_the_latent():
    """512 + 64 values a token and layer, against 16 heads' K (192) and V (128)."""
    cfg = M.load("DeepSeek-V2-Lite")
    mc = M.model_costs(cfg, M.Phase.decode(1, 1000))
    assert mc["kv_cache_bytes"] == 27 * 1000 * (512 + 64) * 2


@pytest.mark.parametrize("q_lora_rank", [None, 24])
def test_latent_attention_and_shared_experts_count_exactly(q_lora_rank):
    """A whole tiny DeepSeek-V2 (a dense first layer, then latent attention, routed and shared
    experts): the counter's MACs equal the analytic model's; FlopCounterMode's fall short by
    exactly the experts' grouped GEMMs, which it does not count (rows x K x N each, by hand)."""
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from rooflab import count, hf
    cfg = M.from_hf_dict({**DEEPSEEK, "q_lora_rank": q_lora_rank}, "tiny-deepseek")
    model, _ = hf.build_model(cfg, "cpu", torch.float32, attn="eager")
    assert M.param_count(cfg) == sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, 128, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(ids, use_cache=False)
    with torch.no_grad():
        c = count.count(lambda: model(ids, use_cache=False), module=model)
    macs = M.model_costs(cfg, M.Phase.prefill(2, 5))["total"].macs
    assert sum(r.macs for r in c.records) == macs and not c.unsupported_ops()
    rows = 2 * 5 * cfg.experts_per_token  # one MoE layer
    grouped = rows * cfg.hidden * 2 * cfg.expert_intermediate + rows * cfg.expert_intermediate \
        * cfg.hidden
    assert fc.get_total_flops() == 2 * (macs - grouped)


def test_latent_attention_expands_the_whole_cache_every_step():
    """transformers caches the latent and expands every cached position at each decode step:
    kv_b_proj's rows grow with the cache, its MACs with them."""
    cfg = M.load("DeepSeek-V2-Lite")
    kv_b = lambda n: next(p for p in M.layer_costs(cfg, M.Phase.decode(4, n))  # noqa: E731
                          if p.name == "attn.kv_b_proj")
    assert kv_b(2048).macs == 4 * 2048 * 512 * 16 * (128 + 128) == 2 * kv_b(1024).macs


@pytest.mark.parametrize("phase", [M.Phase.decode(2, 10), M.Phase.prefill(2, 6)])
def test_absorbed_latent_attention_macs_equal_flop_counter_mode(phase):
    """latent_attention_absorbed's MACs against FlopCounterMode on the absorbed attention written
    out in torch (its projections, q into the latent, attention over one shared latent KV head,
    the output out of it, o_proj), dense scores; and the two ways at decode both ways round:
    absorbing reads less at decode, expanding multiplies less at a long prefill."""
    import dataclasses

    from torch.utils.flop_counter import FlopCounterMode

    cfg = dataclasses.replace(M.load("DeepSeek-V2-Lite"), hidden=64, heads=4, kv_heads=4,
                              head_dim=24, qk_rope_dim=8, kv_lora_rank=32, v_head_dim=16,
                              q_lora_rank=0)
    b, t, n, h, nope, r, rope, dv = (phase.batch, phase.seq, phase.kv_len, cfg.heads, 16, 32, 8,
                                     16)
    parts = M.latent_attention_absorbed(cfg, phase, "fp32")
    x = torch.randn(b, t, cfg.hidden)
    w_q, w_kv_a = torch.randn(h * (nope + rope), cfg.hidden), torch.randn(r + rope, cfg.hidden)
    w_uk, w_uv, w_o = torch.randn(h, nope, r), torch.randn(h, r, dv), torch.randn(64, h * dv)
    with FlopCounterMode(display=False) as fc:
        q = (x @ w_q.T).view(b, t, h, nope + rope).transpose(1, 2)
        new = x @ w_kv_a.T  # this step's latent and rope key; the cache holds n - t more
        cache = torch.cat((torch.randn(b, n - t, r + rope), new), 1)
        q_lat = torch.einsum("bhtd,hdr->bhtr", q[..., :nope], w_uk)
        q_all = torch.cat((q_lat, q[..., nope:]), -1)  # (b, h, t, r + rope)
        p = torch.softmax(q_all @ cache.unsqueeze(1).transpose(-2, -1), -1)
        o_lat = p @ cache[..., :r].unsqueeze(1)  # the values are the latent
        o = torch.einsum("bhtr,hrd->bhtd", o_lat, w_uv).transpose(1, 2).reshape(b, t, h * dv)
        o @ w_o.T
    assert sum(c.macs for c in parts) == fc.get_total_flops() // 2
    lite = M.load("DeepSeek-V2-Lite")
    decode, prefill = (M.latent_ways(lite, ph) for ph in (M.Phase.decode(8, 4096),
                                                         M.Phase.prefill(1, 4096)))
    assert decode["absorb"]["bytes"] < decode["expand"]["bytes"] / 10
    assert prefill["absorb"]["macs"] > prefill["expand"]["macs"]


def test_the_latent_sentence_says_which_way_round_from_the_numbers():
    decode = {"expand": {"macs": 6_000, "bytes": 30_000}, "absorb": {"macs": 60, "bytes": 2_000}}
    prefill = {"expand": {"macs": 100, "bytes": 1_000}, "absorb": {"macs": 204, "bytes": 1_040}}
    assert console.latent_sentence(decode).endswith(
        "absorbing moves 15x fewer bytes and does 100x fewer MACs")
    assert console.latent_sentence(prefill).endswith(
        "absorbing moves 1.04x more bytes and does 2.0x more MACs")
    assert "6,000 MACs and 30 kB" in console.latent_sentence(decode)


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "DeepSeek-V2-Lite", "Mixtral-8x7B",
                                  "gpt-oss-20b"])
def test_moe_and_latent_layers_through_the_layer_measurement(name):
    """decoder.py --moe's layers, small, measured on the CPU: the real layer decodes from its
    cache (the latent and the rope keys for DeepSeek-V2), every counted op with a kernel is
    found in the profile, and the latent is expanded over the whole cache."""
    import dataclasses

    from rooflab.measure import ceilings as CE
    from rooflab.studies import layer_measure as LM

    cfg = M.load(name)
    small = dict(hidden=128, intermediate=256, expert_intermediate=64, heads=4,
                 kv_heads=min(cfg.kv_heads, 4), vocab=256, layers=2)
    if cfg.kv_lora_rank:
        small.update(kv_lora_rank=32, q_lora_rank=0, kv_heads=4)
    cfg = dataclasses.replace(cfg, **small)
    r = LM.measure_layer(cfg, M.Phase.decode(2, 64), "full", CE.get("cpu", quick=True), "cpu",
                         dtype="fp32")
    assert r["kernel_s"] > 0 and r["predicted_s"] > 0
    assert all(o["kernel_s"] for o in r["ops"]), [o["op"] for o in r["ops"] if not o["kernel_s"]]
    ops = {o["op"] for o in r["ops"]}
    assert any(o.startswith("_grouped_mm(") for o in ops)  # the experts, one grouped GEMM
    if cfg.kv_lora_rank:  # kv_b_proj over every cached position's latent: 2 x 64 rows of 32
        assert f"mm(128x32,32x{4 * (cfg.head_dim - cfg.qk_rope_dim + cfg.v_head_dim)})" in ops


@pytest.mark.parametrize("name", ["Mixtral-8x7B", "Qwen3-30B-A3B", "DeepSeek-V2-Lite",
                                  "Phi-3-mini", "gpt-oss-20b"])
@pytest.mark.parametrize("command", [["layer", "--phase", "decode", "--batch", "8", "--kv-len",
                                      "4096"], ["model"], ["model", "--tp", "2"]])
def test_the_new_presets_through_the_cli(name, command, capsys):
    import json

    from rooflab.cli import main
    assert main([*command, "--model", name, "--gpu", "H200", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["total"]["macs"] > 0
    if command[0] == "model" and name != "Phi-3-mini":
        assert 0 < d["active_params"] < d["params"]
