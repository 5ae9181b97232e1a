"""rooflab's attention inside a transformers model (kernels/hf_attention.py), on the CPU under
TRITON_INTERPRET=1 and on a GPU where there is one: the same logits and tokens as SDPA, FlashAttention at prefill and
flash-decoding at decode, SDPA where a mask is given (counted), and the counter sees each kernel
as one attention op with SDPA's formula."""
import copy

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed")
transformers = pytest.importorskip("transformers")

from rooflab.count import count  # noqa: E402
from rooflab.kernels import hf_attention as HA  # noqa: E402
from rooflab.kernels import register_hf_attention  # noqa: E402
from rooflab.measure import op_classes as OC  # noqa: E402

pytestmark = pytest.mark.on_device
B, L, H, HKV, D = 2, 40, 4, 2, 32
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the kernels compile, or are interpreted


@pytest.fixture(scope="module")
def models():
    from transformers import LlamaConfig, LlamaForCausalLM

    assert register_hf_attention() == "rooflab"
    cfg = LlamaConfig(vocab_size=128, hidden_size=H * D, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=H, num_key_value_heads=HKV,
                      head_dim=D, max_position_embeddings=256)
    torch.manual_seed(0)  # a config each: the implementation is set on the config object
    ref = LlamaForCausalLM._from_config(copy.deepcopy(cfg), attn_implementation="sdpa",
                                        dtype=torch.bfloat16)
    ours = LlamaForCausalLM._from_config(copy.deepcopy(cfg), attn_implementation="rooflab",
                                         dtype=torch.bfloat16)
    assert ref.config._attn_implementation == "sdpa"
    ours.load_state_dict(ref.state_dict())
    return ref.eval().to(DEV), ours.eval().to(DEV)


def test_prefill_and_decode_run_the_kernels_and_match_sdpa(models):
    ref, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(1)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits.float(), ours(ids).logits.float()
        assert float((a - b).norm() / a.norm()) < 2e-2  # bf16 rounding, not a different answer
        # one a layer; at head dim 32 no Gluon kernel, on any GPU
        assert dict(HA.CALLS) == {"flash_attention (Triton)": 2}
        HA.CALLS.clear()
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                  pad_token_id=0)  # no padding: the mask is skipped, as SDPA skips it
        want, got = ref.generate(ids, **kw), ours.generate(ids, **kw)
    assert torch.equal(want, got)
    # 2 decode steps
    assert dict(HA.CALLS) == {"flash_attention (Triton)": 2, "flash_decoding": 2 * 2}


def test_a_mask_falls_back_to_sdpa_and_is_counted(models):
    ref, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(2)).to(DEV)
    mask = torch.ones(B, L, dtype=torch.long, device=DEV)
    mask[0, :5] = 0  # a left-padded row
    HA.CALLS.clear()
    with torch.no_grad():
        a = ref(ids, attention_mask=mask).logits
        b = ours(ids, attention_mask=mask).logits
    assert torch.equal(a, b) and dict(HA.CALLS) == {"sdpa (a mask other than a decode's kept keys)": 2}


def test_a_static_cache_decodes_with_its_kept_keys(models):
    """A static cache hands every decode step a mask of its valid slots: flash-decoding takes
    it as kept keys. Its prefill from empty comes without a mask, causal as SDPA's (top left):
    the queries see none of the slots past them."""
    ref, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(4)).to(DEV)
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False,
              pad_token_id=0, cache_implementation="static")
    HA.CALLS.clear()
    with torch.no_grad():
        want, got = ref.generate(ids, **kw), ours.generate(ids, **kw)
    assert torch.equal(want, got)
    assert dict(HA.CALLS) == {"flash_attention (Triton)": 2, "flash_decoding (kept keys)": 2 * 3}


def test_the_layouts_a_model_hands_flash_attention(models, monkeypatch):
    """What transformers passes at prefill, as the Gluon kernel reads it (its layout()): q tokens
    first, k and v heads first: contiguous from a dynamic cache, and from a static cache the
    first L rows of its buffer, the buffer's length their pitch. No two of the three in one
    layout: before layout(), each of these prefills went to the Triton kernel."""
    from rooflab.kernels import flash_attention as FA
    from rooflab.kernels import flash_attention_sm90_ws as F9W
    seen, real = [], FA.flash_attention

    def spy(q, k, v, *args, **kwargs):
        seen.append(tuple(F9W.layout(t) for t in (q, k, v)))
        return real(q, k, v, *args, **kwargs)
    monkeypatch.setattr(FA, "flash_attention", spy)
    _, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(5)).to(DEV)
    with torch.no_grad():
        ours(ids)
        dynamic = set(seen)
        seen.clear()
        ours.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3,
                      do_sample=False, pad_token_id=0, cache_implementation="static")
    assert dynamic == {((True, L), (False, L), (False, L))}
    ((q, k, v),) = set(seen)
    assert q == (True, L) and k == v and k[0] is False and k[1] > L


def test_kept_keys_only_from_a_decodes_boolean_mask():
    m = torch.ones(B, 1, 1, 48, dtype=torch.bool)
    assert HA.kept_keys(m, 1).shape == (B, 48)
    assert HA.kept_keys(m.expand(B, 1, 2, 48), 2) is None      # two queries: rows differ
    assert HA.kept_keys(m.float(), 1) is None                    # an additive bias
    assert HA.kept_keys(m.expand(B, H, 1, 48), 1) is None        # a mask per head
    assert HA.kept_keys(None, 1) is None


def test_the_counter_sees_each_kernel_as_one_attention_op(models):
    _, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(3)).to(DEV)
    with torch.no_grad():
        c = count(lambda: ours(ids), module=ours)
    ops = [r for r in c.records if r.op == "flash_attention"]
    assert len(ops) == 2 and not c.unsupported_ops()
    # causal, Lq == Lkv: the 40 * 41 / 2 allowed pairs, QK^T and PV, over B * H heads
    assert ops[0].macs == B * H * (L * (L + 1) // 2) * 2 * D
    assert OC.op_class(ops[0]) == "attention" and "causal prefill" in OC.attention_key(ops[0])


@pytest.mark.parametrize("kw,why", [({"dropout": 0.1}, "dropout"),
                                    ({"softcap": 50.0}, "softcapping"),
                                    ({"sliding_window": 16}, "a sliding window")])
def test_what_the_kernels_do_not_take(kw, why):
    q = torch.randn(1, H, L, D, dtype=torch.bfloat16)
    k = torch.randn(1, HKV, L, D, dtype=torch.bfloat16)
    dropout = kw.pop("dropout", 0.0)
    assert HA.outside(None, q, k, k, None, dropout, kw).startswith(why)
    assert HA.outside(None, q.float(), k.float(), k.float(), None, 0.0, {}) == \
        "dtype torch.float32"
    assert HA.outside(None, q, k, k, None, 0.0, {}) == ""


def test_causal_is_sdpas_top_left_with_fewer_or_more_queries_than_keys():
    """transformers leaves the mask out and asks for SDPA's causal (aligned at the top left):
    fewer queries than keys run the kernel on the keys they can see; more go to SDPA."""
    from types import SimpleNamespace
    module = SimpleNamespace(is_causal=True, num_key_value_groups=H // HKV, training=False)
    g = torch.Generator().manual_seed(5)
    more = "sdpa (causal, more queries than keys)"
    for lq, lkv, path in ((20, 32, "flash_attention (Triton)"), (32, 20, more)):
        q = torch.randn(1, H, lq, D, generator=g).to(DEV, torch.bfloat16)
        k, v = (torch.randn(1, HKV, lkv, D, generator=g).to(DEV, torch.bfloat16) for _ in "kv")
        HA.CALLS.clear()
        out, _ = HA.attention_forward(module, q, k, v, None, is_causal=True)
        want = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float().repeat_interleave(H // HKV, 1),
            v.float().repeat_interleave(H // HKV, 1), is_causal=True).transpose(1, 2)
        assert dict(HA.CALLS) == {path: 1}
        assert float((out.float() - want).abs().max()) < 3e-2  # bf16
