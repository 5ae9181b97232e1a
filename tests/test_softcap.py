"""Softcapping (Gemma 2): c * tanh(x / c) on every attention score and on the final logits,
counted as transformers runs it (three passes, the eager attention's full score matrix)."""
import pytest
import torch

from rooflab import models as M

GEMMA2 = {"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "vocab_size": 128, "sliding_window": 16,
          "query_pre_attn_scalar": 16}


def test_gemma2_takes_transformers_defaults_and_a_config_may_turn_them_off():
    cfg = M.from_hf_dict(GEMMA2, "g2")
    assert (cfg.attn_softcap, cfg.final_softcap) == (50.0, 30.0)  # Gemma2Config's defaults
    off = M.from_hf_dict({**GEMMA2, "attn_logit_softcapping": None,
                          "final_logit_softcapping": None}, "g2-off")
    assert not any(p.name == "attn.softcap" for p in M.layer_costs(off, M.Phase.prefill(1, 8)))


@pytest.mark.parametrize("kind,phase", [("full", M.Phase.prefill(2, 12)),
                                        ("sliding", M.Phase.prefill(1, 24))])
def test_softcap_flops_equal_the_counters_on_a_real_layer(kind, phase):
    """The dispatch counter sees the divide, tanh and multiply over the scores: 3 FLOPs each."""
    pytest.importorskip("transformers")
    from rooflab import count, hf
    cfg = M.from_hf_dict(GEMMA2, "g2")
    layer, _ = hf.build_layer(cfg, kind, "cpu", torch.float32, attn="eager")
    x = torch.randn(phase.batch, phase.seq, cfg.hidden)
    pos = torch.arange(phase.seq)[None].expand(phase.batch, -1)
    cos, sin = hf.rope_cos_sin(cfg, kind, pos, torch.float32)
    with torch.no_grad():
        c = count.count(lambda: layer(x, position_embeddings=(cos, sin), attention_mask=None),
                        module=layer)
    scores = (phase.batch, cfg.heads, phase.seq, phase.seq)
    capped = [r for r in c.records if r.op in ("div", "tanh", "mul")
              and tuple(r.shapes[0]) == scores]
    part = next(p for p in M.layer_costs(cfg, phase, kind) if p.name == "attn.softcap")
    # the scale, then the cap's three passes
    assert [r.op for r in capped] == ["mul", "div", "tanh", "mul"]
    assert sum(r.flops for r in capped[1:]) == part.flops
    assert part.flops == 3 * phase.batch * cfg.heads * phase.seq * phase.seq


def test_the_final_logits_are_capped_too():
    cfg = M.from_hf_dict(GEMMA2, "g2")
    plain = M.from_hf_dict({**GEMMA2, "final_logit_softcapping": None}, "g2")
    ph = M.Phase.prefill(2, 8)
    head = lambda c: next(p for p in M.model_costs(c, ph)["parts"]  # noqa: E731
                          if p.name == "lm_head")
    assert head(cfg).flops - head(plain).flops == 3 * ph.tokens * cfg.vocab


def test_the_gemma_2_preset_is_transformers_config():
    """gemma-2-2b as embedded equals what rooflab reads from transformers' own Gemma2Config
    (whose defaults are gemma-2-2b's), and has its 2.61 B parameters (256,000 x 2,304 tied
    embeddings, 26 layers)."""
    T = pytest.importorskip("transformers")
    d = {**T.Gemma2Config().to_dict(), "torch_dtype": "bfloat16"}
    assert M.from_hf_dict(d, "gemma-2-2b") == M.load("gemma-2-2b")
    assert M.param_count(M.load("gemma-2-2b")) == 2_614_341_888


def test_sdpa_asked_of_gemma_2_builds_its_eager_attention():
    """transformers 5 runs Gemma 2 without SDPA (its softcap): the model is built with eager
    attention, as transformers itself picks; other families keep SDPA."""
    T = pytest.importorskip("transformers")
    from rooflab import hf
    _, config = hf.build_model(M.load("gemma-2-2b"), "meta")
    assert config._attn_implementation == (
        "sdpa" if T.Gemma2ForCausalLM._supports_sdpa else "eager")
    assert hf.build_model(M.load("Llama-3.1-8B"), "meta")[1]._attn_implementation == "sdpa"
    assert hf.runnable_attention(T.Gemma2ForCausalLM, "rooflab") == "rooflab"
