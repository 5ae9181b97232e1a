"""rooflab's attention inside a transformers model (kernels/hf_attention.py), on the CPU under
TRITON_INTERPRET=1 and on a GPU where there is one: the same logits and tokens as SDPA,
FlashAttention at prefill and flash-decoding at decode, SDPA where a mask is given (counted),
sliding windows and attention sinks applied by the kernels, softcapped scores by the model's
eager attention, and the counter sees each kernel as one attention op with SDPA's formula (a
window's pairs only). On transformers 4.x too (.ci/run), whose masks differ (OLD_MASKS)."""
import copy
import inspect

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed")
transformers = pytest.importorskip("transformers")

from rooflab.count import count  # noqa: E402
from rooflab.kernels import hf_attention as HA  # noqa: E402
from rooflab.kernels import register_hf_attention  # noqa: E402
from rooflab.measure import op_classes as OC  # noqa: E402
from transformers.masking_utils import sdpa_mask  # noqa: E402

pytestmark = pytest.mark.on_device
B, L, H, HKV, D = 2, 40, 4, 2, 32
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the kernels compile, or are interpreted
# transformers 4.x makes masks from the queries' positions (no q_offset) and hands a static
# cache's prefill a mask it marks not to be skipped: rooflab's attention leaves that one to SDPA
OLD_MASKS = "q_offset" not in inspect.signature(sdpa_mask).parameters
STATIC_PREFILL = ("sdpa (a mask other than a decode's kept keys)" if OLD_MASKS
                  else "flash_attention (Triton)")


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


def test_a_padded_batch_runs_the_kernels_with_its_kept_keys(models):
    """A left-padded row: the prefill's mask is causal and the padding (mask() reads it so),
    FlashAttention takes the kept keys, and its padded queries, which see no key, get zeros as
    SDPA gives them; the decode step takes its mask's kept keys; SDPA's first token, and the
    logits of both steps within bf16 rounding of SDPA's."""
    ref, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(2)).to(DEV)
    mask = torch.ones(B, L, dtype=torch.long, device=DEV)
    mask[0, :5] = 0
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids, attention_mask=mask).logits.float(), ours(ids, attention_mask=mask).logits
        for row, first in ((0, 5), (1, 0)):  # a padded query's logits are no answer (SDPA's
            x, y = a[row, first:], b[row, first:].float()  # differ on a GPU and a CPU)
            assert float((x - y).norm() / x.norm()) < 2e-2
        assert dict(HA.CALLS) == {"flash_attention (Triton, kept keys)": 2}
        kw = dict(attention_mask=mask, max_new_tokens=2, do_sample=False, pad_token_id=0,
                  output_scores=True, return_dict_in_generate=True)
        HA.CALLS.clear()
        want, got = ref.generate(ids, **kw), ours.generate(ids, **kw)
    assert torch.equal(want.sequences[:, :L + 1], got.sequences[:, :L + 1])  # the same first
    for a, b in zip(want.scores, got.scores):  # and the decode step's logits on it (greedy picks
        assert float((a - b).norm() / a.norm()) < 2e-2  # between near ties flip with rounding)
    assert dict(HA.CALLS) == {"flash_attention (Triton, kept keys)": 2,
                              "flash_decoding (kept keys)": 2}
    HA.CALLS.clear()  # from a static cache, whose query offset is a tensor read on the host
    with torch.no_grad():
        want, got = (m.generate(ids, **kw, cache_implementation="static") for m in (ref, ours))
    for a, b in zip(want.scores, got.scores):
        assert float((a - b).norm() / a.norm()) < 2e-2
    assert dict(HA.CALLS) == {("sdpa (a mask other than a decode's kept keys)" if OLD_MASKS
                               else "flash_attention (Triton, kept keys)"): 2,
                              "flash_decoding (kept keys)": 2}


def test_a_padded_prompt_of_a_few_queries_runs_flash_attention(models):
    """A padded prompt as short as a decode (8 queries): FlashAttention with its kept keys, whose
    padded rows see no key and get zeros (flash-decoding wants a key in every row), not SDPA;
    the prompt's logits within bf16 rounding of SDPA's."""
    ref, ours = models
    ids = torch.randint(0, 128, (B, 8), generator=torch.Generator().manual_seed(4)).to(DEV)
    mask = torch.ones(B, 8, dtype=torch.long, device=DEV)
    mask[0, :3] = 0
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids, attention_mask=mask).logits.float(), ours(ids, attention_mask=mask).logits
    for row, first in ((0, 3), (1, 0)):
        x, y = a[row, first:], b[row, first:].float()
        assert float((x - y).norm() / x.norm()) < 2e-2
    assert torch.isfinite(b).all()
    assert dict(HA.CALLS) == {"flash_attention (Triton, kept keys)": 2}


def test_a_mask_the_kernels_cannot_read_falls_back_to_sdpa_and_is_counted(models):
    """A 4D mask of the caller's own (transformers passes it as given): SDPA, bit for bit."""
    ref, ours = models
    ids = torch.randint(0, 128, (B, L), generator=torch.Generator().manual_seed(12)).to(DEV)
    mask = torch.ones(B, 1, L, L, dtype=torch.bool, device=DEV).tril()
    mask[1, :, :, :3] = False  # every query of row 1 blind to its first 3 keys
    mask[1, :, :3, 0] = True   # but for the first 3 queries' first key
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids, attention_mask=mask).logits, ours(ids, attention_mask=mask).logits
    assert torch.equal(a, b)
    assert dict(HA.CALLS) == {"sdpa (a mask other than a decode's kept keys)": 2}


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
    assert dict(HA.CALLS) == {STATIC_PREFILL: 2, "flash_decoding (kept keys)": 2 * 3}


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
    assert dynamic == {((True, L, D), (False, L, D), (False, L, D))}
    if OLD_MASKS:  # the static cache's prefill went to SDPA (STATIC_PREFILL)
        assert not seen
        return
    ((q, k, v),) = set(seen)
    assert q == (True, L, D) and k == v and k[0] is False and k[1] > L


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
                                    ({"position_bias": torch.zeros(1)}, "argument position_bias")])
def test_what_the_kernels_do_not_take(kw, why):
    q = torch.randn(1, H, L, D, dtype=torch.bfloat16)
    k = torch.randn(1, HKV, L, D, dtype=torch.bfloat16)
    dropout = kw.pop("dropout", 0.0)
    assert HA.outside(None, q, k, k, None, dropout, kw).startswith(why)
    assert HA.outside(None, q.float(), k.float(), k.float(), None, 0.0, {}) == \
        "dtype torch.float32"
    assert HA.outside(None, q, k, k, None, 0.0, {}) == ""


@pytest.mark.parametrize("seed", range(12))
def test_drawn_models_and_batches_match_sdpa(seed):
    """Models and batches nobody picked: a seeded draw of the family (Llama; Qwen3, its q and k
    normed; gemma 3, a sliding window of drawn length), heads, KV heads (groups of 1-3), head
    dim, batch, prompt length, each row's left padding and the cache (dynamic or static); the
    prompt's logits (its padded positions are no answer), and generate's first step, logits and
    token, against SDPA's on the same weights, within bf16 rounding, every call on a kernel."""
    import transformers as T

    register_hf_attention()
    r = torch.Generator().manual_seed(seed)
    pick = lambda xs: xs[int(torch.randint(len(xs), (1,), generator=r))]  # noqa: E731
    family, hkv, group, d = pick(["llama", "qwen3", "gemma3"]), pick([1, 2]), pick([1, 2, 3]), \
        pick([16, 32, 64])
    b, n, cache = pick([1, 2, 3]), int(torch.randint(3, 50, (1,), generator=r)), \
        pick(["dynamic", "static"])
    common = dict(vocab_size=128, hidden_size=16 * hkv * group, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=hkv * group, num_key_value_heads=hkv,
                  head_dim=d, max_position_embeddings=128)
    window = int(torch.randint(2, n + 6, (1,), generator=r))
    cfg, model = {
        "llama": (lambda: T.LlamaConfig(**common), lambda: T.LlamaForCausalLM),
        "qwen3": (lambda: T.Qwen3Config(**common), lambda: T.Qwen3ForCausalLM),
        "gemma3": (lambda: T.Gemma3TextConfig(**common, sliding_window=window, layer_types=[
            "sliding_attention", "full_attention"]), lambda: T.Gemma3ForCausalLM)}[family]
    cfg, model = cfg(), model()
    torch.manual_seed(seed)
    ref, ours = (model._from_config(copy.deepcopy(cfg), attn_implementation=impl,
                                    dtype=torch.bfloat16).eval().to(DEV)
                 for impl in ("sdpa", "rooflab"))
    ours.load_state_dict(ref.state_dict())
    ids = torch.randint(0, 128, (b, n), generator=r).to(DEV)
    pads = [int(torch.randint(0, n - 1, (1,), generator=r)) if i else 0 for i in range(b)]
    mask = torch.ones(b, n, dtype=torch.long, device=DEV)
    for row, pad in enumerate(pads):
        mask[row, :pad] = 0
    drawn = dict(family=family, hkv=hkv, group=group, d=d, b=b, n=n, pads=pads, cache=cache,
                 window=window if family == "gemma3" else None)
    HA.CALLS.clear()
    with torch.no_grad():
        a, c = ref(ids, attention_mask=mask).logits.float(), ours(ids, attention_mask=mask).logits
        for row, pad in enumerate(pads):
            x, y = a[row, pad:], c[row, pad:].float()
            assert float((x - y).norm() / x.norm()) < 2e-2, drawn
        kw = dict(attention_mask=mask, max_new_tokens=2, do_sample=False, pad_token_id=0,
                  output_scores=True, return_dict_in_generate=True, cache_implementation=cache)
        want, got = ref.generate(ids, **kw), ours.generate(ids, **kw)
    x, y = want.scores[0].float(), got.scores[0].float()
    assert float((x - y).norm() / x.norm()) < 2e-2, drawn
    # the first new token SDPA's, or one SDPA's logits tie with it within bf16 rounding (greedy
    # picks between near ties flip: the second step's input may differ so)
    first = got.sequences[:, n]
    near = x.gather(1, first[:, None])[:, 0] >= x.max(1).values - 1e-2 * x.abs().amax(1)
    assert torch.equal(want.sequences[:, :n], got.sequences[:, :n]) and bool(near.all()), drawn
    # every call on a kernel, but where transformers 4.x marks a static cache's padded prompt's
    # mask not to be read (STATIC_PREFILL)
    fell = {k for k in HA.CALLS if not k.startswith(("flash_attention", "flash_decoding"))}
    assert fell <= ({STATIC_PREFILL} if cache == "static" and OLD_MASKS else set()), (
        dict(HA.CALLS), drawn)
    assert any(k.startswith("flash_decoding") for k in HA.CALLS), (dict(HA.CALLS), drawn)


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


def _same_weights(model, cfg, ref_impl: str = "sdpa", init=None):
    """A tiny ``model`` of ``cfg`` under ``ref_impl`` and the same weights under rooflab's
    attention, both on DEV in eval mode; ``init(ref)`` changes the reference's weights first."""
    register_hf_attention()
    torch.manual_seed(0)
    ref = model._from_config(copy.deepcopy(cfg), attn_implementation=ref_impl,
                             dtype=torch.bfloat16)
    if init is not None:
        init(ref)
    ours = model._from_config(copy.deepcopy(cfg), attn_implementation="rooflab",
                              dtype=torch.bfloat16)
    ours.load_state_dict(ref.state_dict())
    return ref.eval().to(DEV), ours.eval().to(DEV)


def _tiny_deepseek(hidden: int, lora: int, nope: int, rope: int, v: int, positions: int = 256):
    """A DeepSeek-V2 config of two layers (a dense one, then experts), two heads of latent
    attention: q and k ``nope`` + ``rope`` wide, v ``v``, a latent of ``lora``."""
    import transformers as T
    return T.DeepseekV2Config(vocab_size=128, hidden_size=hidden, intermediate_size=hidden,
                              moe_intermediate_size=hidden // 4, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=2, n_routed_experts=4,
                              num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                              kv_lora_rank=lora, q_lora_rank=None, qk_nope_head_dim=nope,
                              qk_rope_head_dim=rope, v_head_dim=v,
                              max_position_embeddings=positions)


# --- sliding windows and softcapping (gemma 3 and gemma 2) --------------------------------------
def _pair(family: str, dtype, window: int = 8):
    """A tiny model of ``family`` (gemma3_text or gemma2) under SDPA or eager (gemma2's
    softcapping), and the same weights under rooflab's attention: sliding layers of ``window``
    keys and one full layer. Gemma 2's softcap of 2 and q, k projections of std 0.5 put its
    scores where the cap bends them (the logits 90% off without it)."""
    import transformers as T
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                  sliding_window=window, max_position_embeddings=256,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    if family == "gemma2":
        cfg, model, ref_impl = (T.Gemma2Config(**common, attn_logit_softcapping=2.0),
                                T.Gemma2ForCausalLM, "eager")
    else:
        cfg, model, ref_impl = T.Gemma3TextConfig(**common), T.Gemma3ForCausalLM, "sdpa"
    register_hf_attention()
    torch.manual_seed(0)
    ref = model._from_config(copy.deepcopy(cfg), attn_implementation=ref_impl, dtype=dtype)
    for name, p in ref.named_parameters():
        if family == "gemma2" and name.endswith(("q_proj.weight", "k_proj.weight")):
            torch.nn.init.normal_(p, std=0.5)
    ours = model._from_config(copy.deepcopy(cfg), attn_implementation="rooflab", dtype=dtype)
    ours.load_state_dict(ref.state_dict())
    return ref.eval().to(DEV), ours.eval().to(DEV)


def test_gemma3s_sliding_layers_run_the_kernel_with_their_window():
    """20 tokens, a window of 8: the two sliding layers run FlashAttention with the window (no
    mask made), the full one without; decoding from a dynamic and a static cache gives SDPA's
    tokens; a padded batch runs the kernel with its kept keys and the window."""
    ref, ours = _pair("gemma3_text", torch.bfloat16)
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(6)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits.float(), ours(ids).logits.float()
        assert float((a - b).norm() / a.norm()) < 2e-2
        assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window)": 2,
                                  "flash_attention (Triton)": 1}
        for cache in ("dynamic", "static"):
            kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                      pad_token_id=0, **({"cache_implementation": cache}
                                         if cache == "static" else {}))
            HA.CALLS.clear()
            assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw)), cache
            fallbacks = {c: n for c, n in HA.CALLS.items() if c.startswith("sdpa")}
            assert fallbacks == ({STATIC_PREFILL: 3} if OLD_MASKS and cache == "static"
                                 else {}), (cache, dict(HA.CALLS))
        padded = torch.ones_like(ids)
        padded[0, :3] = 0
        HA.CALLS.clear()
        a, b = ref(ids, attention_mask=padded).logits, ours(ids, attention_mask=padded).logits
    for row, first in ((0, 3), (1, 0)):  # a padded query's logits are no answer
        x, y = a[row, first:].float(), b[row, first:].float()
        assert float((x - y).norm() / x.norm()) < 2e-2
    assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, kept keys)": 2,
                              "flash_attention (Triton, kept keys)": 1}


@pytest.mark.parametrize("family", ["gemma3_text", "gemma2"])
def test_where_the_kernels_cannot_run_the_fallback_keeps_the_window(family):
    """fp32: SDPA, or Gemma 2's eager attention where it softcaps (which SDPA does not, and
    eager adds its mask): where the window was left out of the mask for the kernels, the
    fallback makes it; the logits are the reference's, bit for bit."""
    ref, ours = _pair(family, torch.float32)
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(7)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits, ours(ids).logits
    assert torch.equal(a, b)
    assert set(HA.CALLS) == {("sdpa" if family == "gemma3_text" else "eager")
                             + " (dtype torch.float32)"}


def test_gemma2s_softcapped_scores_on_the_kernels():
    """Gemma 2 softcaps every score (softcap * tanh(s / softcap)): FlashAttention applies it at
    the prefill, with the sliding layers' window, and flash-decoding at decode. Against the
    model in fp32, rooflab's bf16 logits are as close as eager's own bf16 ones."""
    ref, ours = _pair("gemma2", torch.bfloat16)
    f32 = copy.deepcopy(ref).float()
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(6)).to(DEV)
    rel = lambda x, y: float((x.float() - y.float()).norm() / x.float().norm())  # noqa: E731
    HA.CALLS.clear()
    with torch.no_grad():
        want, a, b = f32(ids).logits, ref(ids).logits, ours(ids).logits
        assert rel(want, b) <= 1.5 * rel(want, a), (rel(want, b), rel(want, a))
        assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, softcap)": 2,
                                  "flash_attention (Triton, softcap)": 1}
        ops = [r for r in count(lambda: ours(ids), module=ours).records
               if r.op == "flash_attention"]
        # the cap's 3 FLOPs on each pair the kernel computes, B x H = 4 rows of pairs: a
        # window of 8 over 20 tokens 1 + 2 + ... + 8 + 12 * 8 = 132 pairs, causal 20 * 21 / 2
        assert sorted(r.flops - 2 * r.macs for r in ops) == [3 * 4 * 132] * 2 + [3 * 4 * 210]
        assert sorted(OC.attention_key(r).split(" 16-bit ")[1] for r in ops) == [
            "causal softcap prefill", "causal window 8 softcap prefill",
            "causal window 8 softcap prefill"]
        HA.CALLS.clear()  # decode steps after a prompt of 17
        caches = [m(ids[:, :17], use_cache=True).past_key_values for m in (f32, ref, ours)]
        for t in range(17, 20):
            want, a, b = (m(ids[:, t:t + 1], past_key_values=c).logits
                          for m, c in zip((f32, ref, ours), caches))
            assert rel(want, b) <= 1.5 * rel(want, a), (t, rel(want, b), rel(want, a))
    assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, softcap)": 2,
                              "flash_attention (Triton, softcap)": 1,
                              "flash_decoding (softcap)": 3 * 3}
    pad = torch.ones_like(ids)
    pad[0, :3] = 0  # a padded batch's prefill: kept keys beside the cap
    HA.CALLS.clear()
    with torch.no_grad():
        want, a, b = (m(ids, attention_mask=pad).logits for m in (f32, ref, ours))
    for row, first in ((0, 3), (1, 0)):  # a padded query's logits are no answer
        x, y, z = (t[row, first:] for t in (want, a, b))
        assert rel(x, z) <= 1.5 * rel(x, y), (row, rel(x, z), rel(x, y))
    assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, kept keys, softcap)": 2,
                              "flash_attention (Triton, kept keys, softcap)": 1}


def test_attention_sinks_on_the_kernels():
    """gpt-oss adds a learned logit a head to each softmax's denominator (s_aux): FlashAttention
    takes it at the prefill, flash-decoding at decode, the logits within bf16 rounding of eager's
    (a kernel that ignored the sinks was 34% off); a mask the kernels do not read sends the call
    to the model's eager attention, which applies the sinks itself."""
    import transformers as T
    cfg = T.GptOssConfig(vocab_size=128, hidden_size=64, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, sliding_window=8, num_local_experts=4,
                         num_experts_per_tok=2, max_position_embeddings=256,
                         layer_types=["sliding_attention", "full_attention"])

    def sinks(ref):  # far from their zero init, so that they matter
        for m in ref.modules():
            if hasattr(m, "sinks"):
                torch.nn.init.normal_(m.sinks)
    ref, ours = _same_weights(T.GptOssForCausalLM, cfg, "eager", sinks)
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(10)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits.float(), ours(ids).logits.float()
        assert float((a - b).norm() / a.norm()) < 2e-2
        assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, sinks)": 1,
                                  "flash_attention (Triton, sinks)": 1}
        c = count(lambda: ours(ids), module=ours)
        # counted as attention without a mask: the sinks are one logit a head, not a mask
        assert sorted(OC.attention_key(r).split(" 16-bit ")[1] for r in c.records
                      if r.op == "flash_attention") == ["causal prefill", "causal window 8 prefill"]
        HA.CALLS.clear()  # decode steps after a prompt of 17 (the sliding layers' caches
        # hold their window's keys)
        cache_ref = ref(ids[:, :17], use_cache=True).past_key_values
        cache_ours = ours(ids[:, :17], use_cache=True).past_key_values
        for t in range(17, 20):
            a = ref(ids[:, t:t + 1], past_key_values=cache_ref).logits.float()
            b = ours(ids[:, t:t + 1], past_key_values=cache_ours).logits.float()
            assert float((a - b).norm() / a.norm()) < 2e-2, t
        assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, sinks)": 1,
                                  "flash_attention (Triton, sinks)": 1,
                                  "flash_decoding (sinks)": 6}
        pad = torch.ones_like(ids)
        pad[0, :3] = 0  # a padded batch's prefill: its mask's kept keys
        HA.CALLS.clear()
        a = ref(ids, attention_mask=pad).logits.float()
        b = ours(ids, attention_mask=pad).logits.float()
    for x, y in ((a[0, 3:], b[0, 3:]), (a[1], b[1])):  # a padded query's row is no answer
        assert float((x - y).norm() / x.norm()) < 2e-2
    assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window, kept keys, sinks)": 1,
                              "flash_attention (Triton, kept keys, sinks)": 1}


def test_latent_attention_runs_the_kernels_with_q_and_k_wider_than_v():
    """DeepSeek-V2's attention: q and k of 32 + 16 rotary dims, v of 32. The prefill runs
    FlashAttention (SDPA's logits within bf16 rounding), counted as the analytic layer model
    counts it; decode runs flash-decoding; the tokens are SDPA's."""
    import transformers as T
    from rooflab import models as M
    cfg = _tiny_deepseek(hidden=64, lora=32, nope=32, rope=16, v=32)
    ref, ours = _same_weights(T.DeepseekV2ForCausalLM, cfg)
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(11)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits.float(), ours(ids).logits.float()
        assert float((a - b).norm() / a.norm()) < 2e-2
        assert dict(HA.CALLS) == {"flash_attention (Triton)": 2}
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                  pad_token_id=0)
        HA.CALLS.clear()
        assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw))
        assert dict(HA.CALLS) == {"flash_attention (Triton)": 2, "flash_decoding": 2 * 2}
        c = count(lambda: ours(ids), module=ours)
    ops = [r for r in c.records if r.op == "flash_attention"]
    core = next(x for x in M.layer_costs(M.from_hf_dict(cfg.to_dict(), "tiny-dsv2"),
                                         M.Phase.prefill(2, 20)) if x.name == "attn.core")
    # 20 * 21 / 2 causal pairs a head, each 48 MACs for the score and 32 for P V
    assert [r.macs for r in ops] == [2 * 2 * 210 * (48 + 32)] * 2
    assert ops[0].macs == core.detail["macs_causal"]


@pytest.mark.gpu
def test_deepseek_v2s_prefill_reads_its_v_where_it_lies_on_hopper(monkeypatch):
    """DeepSeek-V2 at its own head dims (q and k 128 + 64 rotary, v 128): transformers passes
    v as each head's last 128 of 256 columns, tokens first; on sm_90 the warp-specialized
    kernel reads it there (no copy in the dispatch), and the logits are SDPA's within bf16
    rounding."""
    import transformers as T

    from rooflab.kernels import flash_attention_sm90 as F9
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels are for sm_90")
    cfg = _tiny_deepseek(hidden=256, lora=64, nope=128, rope=64, v=128, positions=1024)
    ref, ours = _same_weights(T.DeepseekV2ForCausalLM, cfg)
    seen, real = [], F9.layout
    monkeypatch.setattr(F9, "layout", lambda t: seen.append(real(t)) or seen[-1])
    ids = torch.randint(0, 128, (2, 300), generator=torch.Generator().manual_seed(3)).cuda()
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = ref(ids).logits.float(), ours(ids).logits.float()
    assert float((a - b).norm() / a.norm()) < 2e-2
    assert dict(HA.CALLS) == {"flash_attention (Gluon, warp-specialized)": 2}
    assert (True, 300, 256) in seen  # v, tokens first, heads 256 columns apart


@pytest.mark.parametrize("head_dim", [32, pytest.param(128, marks=pytest.mark.gpu)])
def test_a_fused_projections_v_runs_where_it_lies(monkeypatch, head_dim):
    """GPT-NeoX projects a token's q, k and v into one row (a head's q, k and v side by side)
    and rotates q and k into tensors of their own: without a cache (a cache's first update
    concatenates it into a tensor of its own), v reaches the kernel as a third of each head's
    columns, tokens first, and runs there with no copy (at head dim 128 on sm_90, 300 keys, on
    the plain Gluon kernel, as routing sends short rows); the logits are SDPA's within bf16
    rounding."""
    import transformers as T

    from rooflab.kernels import routing
    if head_dim == 128 and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels are for sm_90")
    cfg = T.GPTNeoXConfig(vocab_size=128, hidden_size=2 * head_dim, num_attention_heads=2,
                          intermediate_size=128, num_hidden_layers=2, rotary_pct=0.25,
                          max_position_embeddings=256)
    ref, ours = _same_weights(T.GPTNeoXForCausalLM, cfg)
    strides, real = [], routing.which  # what the prefill hands the kernels, which picks one
    monkeypatch.setattr(routing, "which", lambda q, k, v, *a, **kw: strides.append(
        v.stride()) or real(q, k, v, *a, **kw))
    n = 40 if head_dim == 32 else 300
    ids = torch.randint(0, 128, (2, n), generator=torch.Generator().manual_seed(7)).to(DEV)
    HA.CALLS.clear()
    with torch.no_grad():
        a, b = (m(ids, use_cache=False).logits.float() for m in (ref, ours))
    assert float((a - b).norm() / a.norm()) < 2e-2
    if OLD_MASKS:  # transformers 4.x makes a no-cache prefill's causal mask whole: SDPA's
        assert dict(HA.CALLS) == {"sdpa (a mask other than a decode's kept keys)": 2}
        return
    kernel = "Triton" if head_dim == 32 else "Gluon"
    assert dict(HA.CALLS) == {f"flash_attention ({kernel})": 2}
    row = 2 * 3 * head_dim  # two heads' q, k and v
    assert strides == [(n * row, 3 * head_dim, row, 1)] * 2


def test_the_ops_shapes_without_running_them_are_vs_width():
    """On the meta device (a count with no weights) and under torch.compile, the ops' outputs
    have v's head dim, as the kernels' do (latent attention's 128 under q and k's 192)."""
    q = torch.empty(2, 4, 8, 48, device="meta", dtype=torch.bfloat16)
    v = torch.empty(2, 4, 8, 32, device="meta", dtype=torch.bfloat16)
    assert torch.ops.rooflab.flash_attention(q, q, v, True, 0.1).shape == (2, 4, 8, 32)
    assert torch.ops.rooflab.flash_decoding(q[:, :, :1], q, v, False, 0.1).shape == (2, 4, 1, 32)


def test_the_mask_function_reads_only_causal_a_window_and_padding():
    """mask(): a sliding layer's window left to the kernels and a padded batch's keys handed on
    only where transformers itself would call the mask causal (allow_is_causal_skip); a chunked
    layer's (a config with attention_chunk_size) and a bidirectional one's are SDPA's as made."""
    from types import SimpleNamespace
    from transformers.masking_utils import (and_masks, causal_mask_function,
                                            sliding_window_overlay)
    sliding = and_masks(sliding_window_overlay(4), causal_mask_function)
    pad = torch.ones(2, 12, dtype=torch.long)
    pad[0, :3] = 0
    kw = dict(batch_size=2, kv_length=12, kv_offset=0, mask_function=sliding, local_size=4,
              allow_is_causal_skip=True, **({"cache_position": torch.arange(12)} if OLD_MASKS
                                            else {"q_length": 12, "q_offset": 0}))
    for config, skipped in ((SimpleNamespace(sliding_window=4), True),  # the config's window
                            (SimpleNamespace(sliding_window=None, attention_chunk_size=4), False)):
        assert (HA.mask(**kw, config=config) is None) is skipped  # no padding: left out or made
        made = HA.mask(**kw, config=config, attention_mask=pad)
        assert torch.equal(made, sdpa_mask(**kw, attention_mask=pad))  # SDPA's mask, as made
        assert hasattr(made, "rooflab_keys") is skipped
    made = HA.mask(**kw, config=SimpleNamespace(sliding_window=4), attention_mask=pad)
    assert made.rooflab_keys.tolist() == pad.bool().tolist() and made.rooflab_shift == 0
    assert made.rooflab_window == 4
    bidirectional = HA.mask(**{**kw, "allow_is_causal_skip": False,
                               "allow_is_bidirectional_skip": True},
                            config=SimpleNamespace(sliding_window=4), attention_mask=pad)
    assert bidirectional is not None and not hasattr(bidirectional, "rooflab_keys")


def test_offsets_are_read_on_the_host_only_where_that_is_allowed(monkeypatch):
    """A static cache's query offset is a one-element tensor: read, but not under torch.compile
    (nor while a CUDA graph is captured), where the padded prefill goes to SDPA instead."""
    assert HA.on_host(7) == HA.on_host(torch.tensor([7])) == 7
    assert HA.on_host(torch.arange(3)) is None and HA.on_host(None) is None
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert HA.on_host(7) is None and HA.on_host(torch.tensor([7])) is None


def test_a_window_over_few_queries_runs_a_kernel():
    """A decode with no mask and more cached keys than the window (a sliding layer over a full
    cache): flash-decoding keeps the window's keys, the last ones. A few queries, each with a
    window of its own: FlashAttention."""
    from types import SimpleNamespace
    module = SimpleNamespace(is_causal=True, num_key_value_groups=H // HKV, training=False)
    g = torch.Generator().manual_seed(8)
    q = torch.randn(2, H, 1, D, generator=g).to(DEV, torch.bfloat16)
    k, v = (torch.randn(2, HKV, 30, D, generator=g).to(DEV, torch.bfloat16) for _ in "kv")
    HA.CALLS.clear()
    out, _ = HA.attention_forward(module, q, k, v, None, sliding_window=8)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), *(t[:, :, -8:].float().repeat_interleave(H // HKV, 1) for t in (k, v)))
    assert dict(HA.CALLS) == {"flash_decoding (kept keys)": 1}
    assert float((out.float() - want.transpose(1, 2)).abs().max()) < 3e-2  # bf16
    # a prompt of 12 tokens under a window of 5: few queries, each its own window, FlashAttention
    from rooflab.kernels.flash_attention import seen
    q, k, v = (torch.randn(2, n, 12, D, generator=g).to(DEV, torch.bfloat16) for n in (H, HKV, HKV))
    HA.CALLS.clear()
    out, _ = HA.attention_forward(module, q, k, v, None, sliding_window=5)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), *(t.float().repeat_interleave(H // HKV, 1) for t in (k, v)),
        attn_mask=seen(12, 12, 5, DEV))
    assert dict(HA.CALLS) == {"flash_attention (Triton, sliding window)": 1}
    assert float((out.float() - want.transpose(1, 2)).abs().max()) < 3e-2


def test_the_counter_counts_a_windows_pairs_and_its_kind_names_the_window():
    """Against a hand count (each query sees min(i + 1, window) keys) and the analytic layer
    model's causal count; the op's kind for its measured rate carries the window, recovered from
    the count."""
    from rooflab import models as M
    _, ours = _pair("gemma3_text", torch.bfloat16)
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(9)).to(DEV)
    with torch.no_grad():
        c = count(lambda: ours(ids), module=ours)
    ops = sorted((r for r in c.records if r.op == "flash_attention"), key=lambda r: r.macs)
    assert len(ops) == 3 and not c.unsupported_ops()
    by_hand = [sum(min(i + 1, w) for i in range(20)) for w in (8, 8, 20)]
    assert [r.macs for r in ops] == [2 * 2 * n * 2 * 32 for n in by_hand]
    cfg = M.from_hf_dict(ours.config.to_dict(), "tiny-gemma3")
    analytic = [next(c for c in M.layer_costs(cfg, M.Phase.prefill(2, 20), kind)
                     if c.name == "attn.core").detail["macs_causal"]
                for kind in ("sliding", "sliding", "full")]
    assert [r.macs for r in ops] == analytic
    assert [OC.attention_window(r) for r in ops] == [8, 8, None]
    assert " causal window 8 prefill" in OC.attention_key(ops[0])
    assert " causal prefill" in OC.attention_key(ops[2])
