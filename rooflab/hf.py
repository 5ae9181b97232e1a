"""The real transformers decoder layer, built from a ModelConfig with random weights.

transformers is imported lazily and feature-detected (4.5x and 5.x differ in the cache argument's
name, the rotary-embedding API and the layer's return type), never version-compared. Rotary cos/sin
are computed here (they are model-level, not part of the layer), so no rotary API is needed.
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch

from rooflab.errors import RooflabError
from rooflab.measure.dtypes import torch_dtype
from rooflab.models import ModelConfig

CLASSES = {  # family -> (module, config class, decoder-layer class, causal-LM class)
    "gemma3": ("gemma3", "Gemma3TextConfig", "Gemma3DecoderLayer", "Gemma3ForCausalLM"),
    "gemma2": ("gemma2", "Gemma2Config", "Gemma2DecoderLayer", "Gemma2ForCausalLM"),
    "llama": ("llama", "LlamaConfig", "LlamaDecoderLayer", "LlamaForCausalLM"),
    "mistral": ("mistral", "MistralConfig", "MistralDecoderLayer", "MistralForCausalLM"),
    "qwen2": ("qwen2", "Qwen2Config", "Qwen2DecoderLayer", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3Config", "Qwen3DecoderLayer", "Qwen3ForCausalLM"),
    "phi3": ("phi3", "Phi3Config", "Phi3DecoderLayer", "Phi3ForCausalLM"),
    "deepseek_v2": ("deepseek_v2", "DeepseekV2Config", "DeepseekV2DecoderLayer",
                    "DeepseekV2ForCausalLM"),
    "mixtral": ("mixtral", "MixtralConfig", "MixtralDecoderLayer", "MixtralForCausalLM"),
    "qwen3_moe": ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeDecoderLayer", "Qwen3MoeForCausalLM"),
    "gpt_oss": ("gpt_oss", "GptOssConfig", "GptOssDecoderLayer", "GptOssForCausalLM"),
}


class HFUnavailable(RooflabError):
    """transformers is missing or lacks the family's classes."""


def _classes(family: str, causal_lm: bool = False):
    try:
        import importlib

        mod = importlib.import_module(f"transformers.models.{CLASSES[family][0]}.modeling_"
                                      f"{CLASSES[family][0]}")
        import transformers
    except ImportError as e:
        raise HFUnavailable(f"transformers is not installed ({e}); pip install 'rooflab[hf]'") from None
    return (getattr(transformers, CLASSES[family][1]),
            getattr(mod, CLASSES[family][3 if causal_lm else 2]))


def hf_fields(cfg: ModelConfig, layer_type: str | None) -> dict:
    """Fields of a one-layer HF config of ``layer_type`` (layer_idx 0 has that type), or of the
    whole model with every layer in its type when ``layer_type`` is None."""
    kinds = [layer_type] if layer_type else list(cfg.layer_types)
    d = dict(
        hidden_size=cfg.hidden, intermediate_size=cfg.intermediate, num_hidden_layers=len(kinds),
        num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_dim,
        vocab_size=cfg.vocab, max_position_embeddings=cfg.max_positions,
        rms_norm_eps=cfg.rms_norm_eps, rope_theta=cfg.rope_theta, attention_bias=cfg.attn_bias,
        tie_word_embeddings=cfg.tie_embeddings,
        layer_types=["sliding_attention" if k == "sliding" else "full_attention" for k in kinds],
        sliding_window=cfg.sliding_window if "sliding" in kinds else None,
    )
    if cfg.family in ("gemma2", "gemma3"):
        d.update(hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh",
                 query_pre_attn_scalar=cfg.query_pre_attn_scalar or cfg.head_dim,
                 sliding_window=cfg.sliding_window or 4096)
        if cfg.rope_local_theta:
            d["rope_local_base_freq"] = cfg.rope_local_theta
        d.update(attn_logit_softcapping=cfg.attn_softcap,
                 final_logit_softcapping=cfg.final_softcap)
    else:
        d["hidden_act"] = "silu"
    if cfg.family == "qwen2" and "sliding" in kinds:
        d["use_sliding_window"] = True
    if cfg.family == "mixtral":
        d.update(num_local_experts=cfg.experts, num_experts_per_tok=cfg.experts_per_token,
                 intermediate_size=cfg.expert_intermediate)
    if cfg.family == "deepseek_v2":
        d.update(n_routed_experts=cfg.experts, num_experts_per_tok=cfg.experts_per_token,
                 moe_intermediate_size=cfg.expert_intermediate,
                 n_shared_experts=cfg.shared_experts,
                 first_k_dense_replace=cfg.dense_layers if layer_type is None else 0,
                 q_lora_rank=cfg.q_lora_rank or None, kv_lora_rank=cfg.kv_lora_rank,
                 qk_rope_head_dim=cfg.qk_rope_dim, qk_nope_head_dim=cfg.head_dim - cfg.qk_rope_dim,
                 v_head_dim=cfg.v_head_dim, head_dim=cfg.qk_rope_dim, topk_method="greedy")
    if cfg.family == "gpt_oss":  # its YaRN scaling as gpt-oss-20b's: 32x a 32nd of the context
        d.update(num_local_experts=cfg.experts, num_experts_per_tok=cfg.experts_per_token,
                 intermediate_size=cfg.expert_intermediate, rope_parameters={
                     "rope_type": "yarn", "rope_theta": cfg.rope_theta, "factor": 32.0,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                     "original_max_position_embeddings": max(1, cfg.max_positions // 32)})
        d.pop("rope_theta")
    if cfg.family == "qwen3_moe":
        d.update(num_experts=cfg.experts, num_experts_per_tok=cfg.experts_per_token,
                 moe_intermediate_size=cfg.expert_intermediate, norm_topk_prob=cfg.norm_topk_prob,
                 decoder_sparse_step=1, mlp_only_layers=[])
    return d


@contextlib.contextmanager
def _made_in(device, dtype: torch.dtype):
    """Parameters made on ``device`` in ``dtype`` from the start: Mixtral-8x7B's 47 B parameters
    are 93 GB in bf16 and would be 187 GB if made in fp32 and cast after."""
    before = torch.get_default_dtype()
    if dtype.is_floating_point and dtype.itemsize >= 2:  # fp8 is not a default dtype: cast after
        torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(before)


def runnable_attention(model_cls, attn: str) -> str:
    """``attn``, or where it is SDPA and the model runs without it (Gemma 2 in transformers 5),
    its eager attention, as transformers picks."""
    return "eager" if attn == "sdpa" and not getattr(model_cls, "_supports_sdpa", True) else attn


def build_model(cfg: ModelConfig, device="meta", dtype=None, attn: str = "sdpa"):
    """(model, hf_config): the family's causal LM (every layer, embedding, final norm, lm_head)
    with random weights made on ``device`` (no host copy); SDPA asked of a model transformers
    runs without it (Gemma 2 in transformers 5) is its eager attention, as transformers picks."""
    config_cls, model_cls = _classes(cfg.family, causal_lm=True)
    config = config_cls(**hf_fields(cfg, None))
    config._attn_implementation = runnable_attention(model_cls, attn)
    torch.manual_seed(0)
    with _made_in(device, dtype or torch_dtype(cfg.dtype)):
        model = model_cls(config)
    return model.to(dtype or torch_dtype(cfg.dtype)).eval(), config


def build_layer(cfg: ModelConfig, layer_type: str = "full", device="meta", dtype=None,
                attn: str = "eager"):
    """(layer, hf_config): the family's decoder layer with random weights on ``device``."""
    config_cls, layer_cls = _classes(cfg.family)
    config = config_cls(**hf_fields(cfg, layer_type))
    config._attn_implementation = attn
    if cfg.experts and hasattr(torch.ops.aten, "_grouped_mm"):  # as a whole model runs them:
        config._experts_implementation = "grouped_mm"  # one grouped GEMM (the layer's config
        # is not resolved by a model; the eager per-expert loop also needs data, not meta)
    torch.manual_seed(0)
    with _made_in(device, dtype or torch_dtype(cfg.dtype)):
        layer = layer_cls(config, 0)
        if device != "meta":
            _init_as_model(layer, config, _classes(cfg.family, causal_lm=True)[1])
    layer = layer.to(dtype or torch_dtype(cfg.dtype)).eval()
    return layer, config


def _init_as_model(layer, config, model_cls) -> None:
    """Initialises ``layer`` as its model would: HF initialises weights in the model's
    ``_init_weights``, not in the layers, so a layer made alone keeps torch.empty's contents in
    the parameters made that way (a router's: every token then goes to the same experts)."""
    pre = next(c for c in model_cls.__mro__ if c.__name__.endswith("PreTrainedModel")
               and "_init_weights" in vars(c))
    owner = object.__new__(pre)  # _init_weights reads only self.config
    owner.__dict__["config"] = config
    with torch.no_grad():
        for module in layer.modules():
            pre._init_weights(owner, module)


def _rope_angles(theta: float, d: int, positions: torch.Tensor) -> torch.Tensor:
    """position * theta^(-2i / d) for i < d / 2: (B, L, d / 2) in fp32, as HF's rotary modules."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=positions.device) / d))
    return positions[..., None].float() * inv


def rope_cos_sin(cfg: ModelConfig, layer_type: str, positions: torch.Tensor, dtype):
    """cos, sin of shape (B, L, head_dim) for ``positions`` (B, L), as HF's rotary module
    (gpt-oss's: (B, L, head_dim / 2), each half of a head rotated by the same angles)."""
    theta = cfg.rope_local_theta if (layer_type == "sliding" and cfg.rope_local_theta) else cfg.rope_theta
    freqs = _rope_angles(theta, cfg.head_dim, positions)
    emb = freqs if cfg.family == "gpt_oss" else torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rope_freqs_cis(cfg: ModelConfig, positions: torch.Tensor) -> torch.Tensor:
    """e^(i * angle), (B, L, qk_rope_dim / 2) complex: a latent attention's position
    embeddings, as DeepSeek-V2's rotary module gives them."""
    freqs = _rope_angles(cfg.rope_theta, cfg.qk_rope_dim, positions)
    return torch.polar(torch.ones_like(freqs), freqs)


class ConcatCache:
    """A KV cache of kv_len - 1 past positions that concatenates the new K/V each step, as
    HF's DynamicCache does (so the past is copied every step), but keeps no state: every call
    sees the same kv_len, which makes a decode step repeatable for timing."""

    def __init__(self, k_past: torch.Tensor, v_past: torch.Tensor):
        self.k, self.v = k_past, v_past

    def update(self, key_states, value_states, layer_idx=0, *args, **kwargs):
        return torch.cat([self.k, key_states], dim=-2), torch.cat([self.v, value_states], dim=-2)


class StaticKV:
    """A preallocated cache: the new position is written in place, nothing else is copied."""

    def __init__(self, k_buf: torch.Tensor, v_buf: torch.Tensor):
        self.k, self.v = k_buf, v_buf

    def update(self, key_states, value_states, layer_idx=0, *args, **kwargs):
        self.k[..., -1:, :].copy_(key_states)
        self.v[..., -1:, :].copy_(value_states)
        return self.k, self.v


def _cache_kwarg(layer) -> str:
    params = inspect.signature(layer.forward).parameters
    for name in ("cache", "past_key_values", "past_key_value"):
        if name in params:
            return name
    raise HFUnavailable("this transformers version's decoder layer takes no KV-cache argument")


def _pos_kwargs(layer, cos_sin) -> dict:
    params = inspect.signature(layer.forward).parameters
    if "position_embeddings_global" in params:  # gemma3 on transformers 4.5x
        return {"position_embeddings_global": cos_sin, "position_embeddings_local": cos_sin}
    return {"position_embeddings": cos_sin}


@dataclass
class LayerCall:
    """A ready-to-run forward of one layer: call() runs it once."""

    layer: torch.nn.Module
    kwargs: dict
    hidden: torch.Tensor

    def __call__(self):
        out = self.layer(self.hidden, **self.kwargs)
        return out[0] if isinstance(out, tuple) else out


def prepare(cfg: ModelConfig, layer_type: str, phase, device="meta", attn: str = "eager",
            cache: str = "concat", layer=None) -> LayerCall:
    """Inputs for one prefill or decode forward of the layer; random activations and cache."""
    if layer is None:
        layer, _ = build_layer(cfg, layer_type, device, attn=attn)
    dtype = next(layer.parameters()).dtype
    b, q_len = phase.batch, phase.seq
    window = cfg.sliding_window if layer_type == "sliding" else None
    kv_len = min(phase.kv_len, window) if (window and phase.kind == "decode") else phase.kv_len
    hidden = torch.randn(b, q_len, cfg.hidden, device=device, dtype=dtype)
    positions = torch.arange(kv_len - q_len, kv_len, device=device).expand(b, q_len)
    latent = bool(cfg.kv_lora_rank)  # the cache holds the latent and the rope keys
    kwargs = _pos_kwargs(layer, rope_freqs_cis(cfg, positions) if latent
                         else rope_cos_sin(cfg, layer_type, positions, dtype))
    kwargs["attention_mask"] = None  # prefill: causal from the backend; decode: sees all of kv
    if "position_ids" in inspect.signature(layer.forward).parameters:
        kwargs["position_ids"] = positions
    if phase.kind == "decode":
        n = kv_len - 1 if cache == "concat" else kv_len
        k_dim, v_dim = (cfg.kv_lora_rank, cfg.qk_rope_dim) if latent else (cfg.head_dim,) * 2
        heads = 1 if latent else cfg.kv_heads
        k = torch.randn(b, heads, n, k_dim, device=device, dtype=dtype)
        v = torch.randn(b, heads, n, v_dim, device=device, dtype=dtype)
        kwargs[_cache_kwarg(layer)] = ConcatCache(k, v) if cache == "concat" else StaticKV(k, v)
    return LayerCall(layer, kwargs, hidden)


# HF module names -> rooflab component names (per family; Llama's "post_attention_layernorm"
# is the norm before the MLP)
def component_of(module_path: str, family: str) -> str | None:
    last = module_path.split(".")[-1] if module_path else ""
    parent = module_path.split(".")[-2] if module_path.count(".") >= 1 else ""
    if parent == "self_attn" and last in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
        return f"attn.{last}"
    if parent == "mlp" and last in ("gate_proj", "up_proj", "down_proj", "act_fn"):
        return "mlp.act" if last == "act_fn" else f"mlp.{last}"
    if module_path == "self_attn":  # ops in the attention forward outside its projections
        return "attn.core+rope"
    if module_path == "mlp":  # act(gate) * up, in the MLP's own forward
        return "mlp.mul"
    if module_path == "":  # ops in the layer's own forward: the residual adds
        return "residuals"
    sandwich = family in ("gemma2", "gemma3")
    names = {"input_layernorm": "input_norm", "pre_feedforward_layernorm": "pre_ffn_norm",
             "post_feedforward_layernorm": "post_ffn_norm",
             "post_attention_layernorm": "post_attn_norm" if sandwich else "pre_ffn_norm"}
    return names.get(last)
