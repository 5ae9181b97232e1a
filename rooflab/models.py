"""Decoder configs (embedded presets or any local HF config.json) -> per-component Costs.

Standard library only: the analytic path needs neither torch nor transformers. Counting follows
the conventions in rooflab/cost.py. Per layer, with T tokens entering it (prefill: T = B*L;
decode: T = B, one new token per sequence):

  input_norm       RMSNorm(T, hidden)
  attn.q_proj      linear(T, hidden, heads*head_dim)      (+ bias add where the family has one)
  attn.k_proj/v    linear(T, hidden, kv_heads*head_dim)   decode: only the new token
  attn.q_norm/k    RMSNorm over head_dim (Gemma 3, Qwen 3)
  attn.rope        RoPE over q and k heads
  attn.core        QK^T, softmax, PV; decode reads the KV cache (kv_len positions, incl. the new
                   one; sliding layers at most `window`); detail holds the causal count and the
                   KV-cache bytes read and written
  attn.o_proj      linear(T, heads*head_dim, hidden)
  post_attn_norm   (Gemma 2/3)          residual.attn   x + attn(x): read 2, write 1
  pre_ffn_norm     RMSNorm before the MLP (Llama's "post_attention_layernorm")
  mlp.gate/up      linear(T, hidden, intermediate)        mlp.act   GeLU-tanh or SiLU
  mlp.mul          act(gate) * up                         mlp.down  linear(T, intermediate, hidden)
  post_ffn_norm    (Gemma 2/3)          residual.mlp

Groups follow the model's modules: `attention` = the attn.* components (what self_attn runs, its
q/k norms included), `mlp` = the mlp.* components (what the MLP module runs: gate, up, act, mul,
down), `norms_residuals` = what the layer's own forward runs around them (norms, residual adds).
A group's bytes_fused is the sum of its components' fused-ideal bytes.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from rooflab import cost as C
from rooflab.errors import RooflabError, read_json
from rooflab.precision import Precision



class ModelError(RooflabError, ValueError):
    """Unsupported or malformed model config."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    family: str  # gemma3 gemma2 llama mistral qwen2 qwen3 phi3 mixtral qwen3_moe deepseek_v2
    #              gpt_oss
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layer_types: tuple[str, ...]  # "full" | "sliding", one per layer
    sliding_window: int | None = None
    act: str = "silu"  # "gelu_tanh" | "silu" | "swiglu_clamp" (gpt-oss's experts, _experts)
    qk_norm: bool = False
    sandwich_norm: bool = False  # post-attention and post-FFN norms (Gemma 2/3)
    attn_bias: bool = False
    tie_embeddings: bool = False
    dtype: str = "bf16"
    rope_theta: float = 10000.0
    rope_local_theta: float | None = None
    max_positions: int = 8192
    query_pre_attn_scalar: float | None = None
    rms_norm_eps: float = 1e-6
    # a mixture of experts in every layer's MLP (experts = 0: a dense MLP of ``intermediate``):
    # a router picks experts_per_token of ``experts`` for each token, each expert a gated MLP
    # of expert_intermediate; norm_topk_prob: the picked weights renormalised to sum to 1
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    norm_topk_prob: bool = False
    fused_projections: bool = False  # q, k, v as one linear and gate, up as one (Phi-3)
    # tanh softcapping (Gemma 2): scores, and the final logits, become c * tanh(x / c)
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # DeepSeek-V2: shared experts beside the routed ones (a gated MLP of shared_experts *
    # expert_intermediate), the first dense_layers layers dense; multi-head latent attention
    # (kv_lora_rank > 0): K and V come from a latent of kv_lora_rank per token (the cache),
    # head_dim = the q and k head size (qk_rope_dim of it rotated), v_head_dim V's
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    # gpt-oss: o_proj's bias beside q, k and v's; a learned sink logit a head in every
    # softmax's sum; biases on the router's and every expert's projections
    o_bias: bool = False
    attn_sinks: bool = False
    expert_bias: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _gemma3_types(n: int, pattern: int = 6) -> tuple[str, ...]:
    return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n))


PRESETS: dict[str, ModelConfig] = {c.name: c for c in [
    # google/gemma-3-270m-it config.json
    ModelConfig("gemma-3-270m-it", "gemma3", hidden=640, intermediate=2048, layers=18, heads=4,
                kv_heads=1, head_dim=256, vocab=262144, layer_types=_gemma3_types(18),
                sliding_window=512, act="gelu_tanh", qk_norm=True, sandwich_norm=True,
                tie_embeddings=True, dtype="bf16", rope_theta=1e6, rope_local_theta=1e4,
                max_positions=32768, query_pre_attn_scalar=256),
    # google/gemma-2-2b config.json (transformers' Gemma2Config defaults): every score and the
    # final logits softcapped, sliding and full layers in turn
    ModelConfig("gemma-2-2b", "gemma2", hidden=2304, intermediate=9216, layers=26, heads=8,
                kv_heads=4, head_dim=256, vocab=256000,
                layer_types=("sliding", "full") * 13, sliding_window=4096, act="gelu_tanh",
                sandwich_norm=True, tie_embeddings=True, dtype="bf16", rope_theta=1e4,
                max_positions=8192, query_pre_attn_scalar=256, attn_softcap=50.0,
                final_softcap=30.0),
    # meta-llama/Llama-3.1-8B config.json
    ModelConfig("Llama-3.1-8B", "llama", hidden=4096, intermediate=14336, layers=32, heads=32,
                kv_heads=8, head_dim=128, vocab=128256, layer_types=("full",) * 32,
                rope_theta=500000.0, max_positions=131072, rms_norm_eps=1e-5),
    # Qwen/Qwen2.5-7B config.json (q/k/v projections carry a bias)
    ModelConfig("Qwen2.5-7B", "qwen2", hidden=3584, intermediate=18944, layers=28, heads=28,
                kv_heads=4, head_dim=128, vocab=152064, layer_types=("full",) * 28,
                attn_bias=True, rope_theta=1e6, max_positions=131072),
    # Qwen/Qwen3-8B config.json (per-head RMSNorm on q and k)
    ModelConfig("Qwen3-8B", "qwen3", hidden=4096, intermediate=12288, layers=36, heads=32,
                kv_heads=8, head_dim=128, vocab=151936, layer_types=("full",) * 36,
                qk_norm=True, rope_theta=1e6, max_positions=40960, rms_norm_eps=1e-6),
    # mistralai/Mistral-7B-v0.3 config.json
    ModelConfig("Mistral-7B", "mistral", hidden=4096, intermediate=14336, layers=32, heads=32,
                kv_heads=8, head_dim=128, vocab=32768, layer_types=("full",) * 32,
                rope_theta=1e6, max_positions=32768, rms_norm_eps=1e-5),
    # microsoft/Phi-3-mini-4k-instruct config.json: q, k, v and gate, up fused; a window of 2047
    ModelConfig("Phi-3-mini", "phi3", hidden=3072, intermediate=8192, layers=32, heads=32,
                kv_heads=32, head_dim=96, vocab=32064, layer_types=("sliding",) * 32,
                sliding_window=2047, max_positions=4096, rms_norm_eps=1e-5,
                fused_projections=True),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts of 14336, 2 a token
    ModelConfig("Mixtral-8x7B", "mixtral", hidden=4096, intermediate=14336, layers=32, heads=32,
                kv_heads=8, head_dim=128, vocab=32000, layer_types=("full",) * 32,
                rope_theta=1e6, max_positions=32768, rms_norm_eps=1e-5, experts=8,
                experts_per_token=2, expert_intermediate=14336),
    # deepseek-ai/DeepSeek-V2-Lite config.json: latent attention (a 512 latent + 64 rotated
    # dims a token), 64 routed experts of 1408 (6 a token) and 2 shared, the first layer dense
    ModelConfig("DeepSeek-V2-Lite", "deepseek_v2", hidden=2048, intermediate=10944, layers=27,
                heads=16, kv_heads=16, head_dim=192, vocab=102400, layer_types=("full",) * 27,
                max_positions=163840, experts=64, experts_per_token=6,
                expert_intermediate=1408, shared_experts=2, dense_layers=1, kv_lora_rank=512,
                qk_rope_dim=64, v_head_dim=128),
    # openai/gpt-oss-20b config.json (transformers' GptOssConfig defaults are gpt-oss-120b's,
    # 36 layers of 128 experts): 32 experts of 2880, 4 a token, their biases and clamped SwiGLU;
    # attention sinks, every projection biased; a window of 128 and full layers in turn
    ModelConfig("gpt-oss-20b", "gpt_oss", hidden=2880, intermediate=2880, layers=24, heads=64,
                kv_heads=8, head_dim=64, vocab=201088, layer_types=("sliding", "full") * 12,
                sliding_window=128, act="swiglu_clamp", attn_bias=True, o_bias=True,
                attn_sinks=True, rope_theta=150000.0, max_positions=131072, rms_norm_eps=1e-5,
                experts=32, experts_per_token=4, expert_intermediate=2880, expert_bias=True),
    # Qwen/Qwen3-30B-A3B config.json: 128 experts of 768, 8 a token, renormalised
    ModelConfig("Qwen3-30B-A3B", "qwen3_moe", hidden=2048, intermediate=6144, layers=48,
                heads=32, kv_heads=4, head_dim=128, vocab=151936, layer_types=("full",) * 48,
                qk_norm=True, rope_theta=1e6, max_positions=40960, rms_norm_eps=1e-6,
                experts=128, experts_per_token=8, expert_intermediate=768, norm_topk_prob=True),
]}

FAMILIES = {"gemma3": "gemma3", "gemma3_text": "gemma3", "gemma2": "gemma2", "llama": "llama",
            "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "mixtral": "mixtral",
            "qwen3_moe": "qwen3_moe", "phi3": "phi3", "deepseek_v2": "deepseek_v2",
            "gpt_oss": "gpt_oss"}


def _req(d: dict, key: str, origin: str) -> int:
    v = _positive(d, key, origin, integer=True)
    if v is None:
        raise ModelError(f"{origin}: config has no {key!r}")
    return v


def _positive(d: dict, key: str, origin: str, default=None, integer: bool = False):
    """d[key] where it is a positive (finite) number, an integer where ``integer``; ``default``
    where the config leaves it out or null; else a ModelError that names it."""
    v = d.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or not (
            0 < v < float("inf")):
        raise ModelError(f"{origin}: {key} must be a positive {'integer' if integer else 'number'}"
                         f", got {v!r}")
    return v


def from_hf_dict(d: dict, name: str = "custom", origin: str = "config") -> ModelConfig:
    """A ModelConfig from the fields of a Hugging Face config.json."""
    if not isinstance(d, dict):
        raise ModelError(f"{origin}: expected a JSON object")
    if isinstance(d.get("text_config"), dict):  # multimodal wrapper (e.g. gemma3)
        d = {**d["text_config"], "model_type": d["text_config"].get("model_type", "gemma3_text")}
    mt = d.get("model_type")
    if not isinstance(mt, str) or mt not in FAMILIES:
        raise ModelError(f"{origin}: model_type {mt!r} is not supported "
                         f"(supported: {', '.join(sorted(FAMILIES))})")
    fam = FAMILIES[mt]
    hidden, heads = _req(d, "hidden_size", origin), _req(d, "num_attention_heads", origin)
    n = _req(d, "num_hidden_layers", origin)
    # absent (None) takes the default; a value given must be a positive integer (0 is an error)
    kv = _req(d, "num_key_value_heads", origin) if d.get("num_key_value_heads") is not None \
        else heads
    head_dim = _req(d, "head_dim", origin) if d.get("head_dim") is not None else hidden // heads
    if fam == "deepseek_v2":  # q and k: the unrotated and the rotated dims
        head_dim = _req(d, "qk_nope_head_dim", origin) + _req(d, "qk_rope_head_dim", origin)
    if heads % kv:
        raise ModelError(f"{origin}: num_key_value_heads ({kv}) must divide heads ({heads})")
    window = d.get("sliding_window")
    if fam == "qwen2" and not d.get("use_sliding_window", False):
        window = None
    if isinstance(d.get("layer_types"), list):
        types = tuple("sliding" if "sliding" in str(t) else "full" for t in d["layer_types"])
    elif fam == "gemma3":
        types = _gemma3_types(n, d.get("sliding_window_pattern", 6))
    elif fam == "gemma2":
        types = tuple("sliding" if i % 2 == 0 else "full" for i in range(n))
    else:
        types = ("sliding" if window else "full",) * n
    if len(types) != n:
        raise ModelError(f"{origin}: layer_types has {len(types)} entries for {n} layers")
    if "sliding" in types and not window:
        raise ModelError(f"{origin}: sliding layers but no sliding_window")
    # transformers' defaults where a config leaves the activation out: Gemma's GeLU-tanh
    default_act = "gelu_pytorch_tanh" if fam.startswith("gemma") else "silu"
    act_name = str(d.get("hidden_activation") or d.get("hidden_act") or default_act)
    act = "gelu_tanh" if "gelu" in act_name else "silu" if act_name in ("silu", "swish") else None
    if fam == "gpt_oss":  # its experts' own gate (GptOssExperts), whatever hidden_act says
        act = "swiglu_clamp"
    if act is None:
        raise ModelError(f"{origin}: MLP activation {act_name!r} is not supported")
    rope = d.get("rope_parameters") or {}  # one set of fields, or one a kind of layer
    full, sliding = (rope.get("full_attention", rope), rope.get("sliding_attention", {})) if (
        isinstance(rope, dict)) else (None, None)
    if not (isinstance(full, dict) and isinstance(sliding, dict)):
        raise ModelError(f"{origin}: rope_parameters must be an object of rope fields, "
                         f"got {rope!r}")
    theta = _positive(d, "rope_theta", origin) or _positive(full, "rope_theta", origin, 10000.0)
    local = _positive(d, "rope_local_base_freq", origin) or _positive(sliding, "rope_theta",
                                                                      origin)
    dtype = str(d.get("torch_dtype") or d.get("dtype") or "bfloat16")
    moe = _checked_moe(_moe_fields(d, fam, origin), origin)
    partial = d.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1, 1.0):
        raise ModelError(f"{origin}: partial_rotary_factor {partial} is not modelled")
    return ModelConfig(
        name=name, family=fam, hidden=hidden, intermediate=_req(d, "intermediate_size", origin),
        layers=n, heads=heads, kv_heads=kv, head_dim=head_dim,
        vocab=_req(d, "vocab_size", origin), layer_types=types, sliding_window=window, act=act,
        qk_norm=fam in ("gemma3", "qwen3", "qwen3_moe"),
        sandwich_norm=fam in ("gemma2", "gemma3"),
        attn_bias=bool(d.get("attention_bias", fam in ("qwen2", "gpt_oss"))),
        o_bias=fam == "gpt_oss" and bool(d.get("attention_bias", True)),
        attn_sinks=fam == "gpt_oss", expert_bias=fam == "gpt_oss",
        tie_embeddings=bool(d.get("tie_word_embeddings", fam.startswith("gemma"))),
        dtype=C.dtype_name(dtype), rope_theta=float(theta),
        rope_local_theta=float(local) if local else None,
        max_positions=_positive(d, "max_position_embeddings", origin, 8192, integer=True),
        query_pre_attn_scalar=_positive(d, "query_pre_attn_scalar", origin),
        rms_norm_eps=float(_positive(d, "rms_norm_eps", origin, 1e-6)),
        fused_projections=fam == "phi3",
        # transformers' defaults where a config leaves them out (Gemma 2's 50 and 30); null: none
        attn_softcap=_positive(d, "attn_logit_softcapping", origin) if (
            "attn_logit_softcapping" in d) else 50.0 if fam == "gemma2" else None,
        final_softcap=_positive(d, "final_logit_softcapping", origin) if (
            "final_logit_softcapping" in d) else 30.0 if fam == "gemma2" else None,
        **moe,
    )


def _moe_fields(d: dict, fam: str, origin: str) -> dict:
    """The experts of a Mixtral or Qwen3-MoE config.json; a field that would change the math
    and is not modelled is an error that names it, never silence."""
    if fam == "mixtral":
        return dict(experts=_req(d, "num_local_experts", origin),
                    experts_per_token=_req(d, "num_experts_per_tok", origin),
                    expert_intermediate=_req(d, "intermediate_size", origin),
                    norm_topk_prob=True)  # Mixtral's router always renormalises its top k
    if fam == "deepseek_v2":
        return _deepseek_fields(d, origin)
    if fam == "gpt_oss":  # the router's softmax is over the top k logits: they sum to 1
        return dict(experts=_req(d, "num_local_experts", origin),
                    experts_per_token=_req(d, "num_experts_per_tok", origin),
                    expert_intermediate=_req(d, "intermediate_size", origin))
    if fam != "qwen3_moe":
        return {}
    if d.get("mlp_only_layers") or d.get("decoder_sparse_step", 1) != 1:
        raise ModelError(f"{origin}: dense layers among the experts (mlp_only_layers, "
                         "decoder_sparse_step) are not modelled")
    return dict(experts=_req(d, "num_experts", origin),
                experts_per_token=_req(d, "num_experts_per_tok", origin),
                expert_intermediate=_req(d, "moe_intermediate_size", origin),
                norm_topk_prob=bool(d.get("norm_topk_prob", False)))


def _deepseek_fields(d: dict, origin: str) -> dict:
    """DeepSeek-V2's latent attention and experts (its router, as transformers runs it, picks
    the top k by softmax score, group-limited or not, and scales them without renormalising)."""
    if d.get("moe_layer_freq", 1) != 1:
        raise ModelError(f"{origin}: moe_layer_freq {d['moe_layer_freq']} is not modelled")
    q_rank = d.get("q_lora_rank")
    return dict(experts=_req(d, "n_routed_experts", origin),
                experts_per_token=_req(d, "num_experts_per_tok", origin),
                expert_intermediate=_req(d, "moe_intermediate_size", origin),
                shared_experts=int(d.get("n_shared_experts") or 0),
                dense_layers=int(d.get("first_k_dense_replace") or 0),
                q_lora_rank=_req(d, "q_lora_rank", origin) if q_rank is not None else 0,
                kv_lora_rank=_req(d, "kv_lora_rank", origin),
                qk_rope_dim=_req(d, "qk_rope_head_dim", origin),
                v_head_dim=_req(d, "v_head_dim", origin))


def _checked_moe(fields: dict, origin: str) -> dict:
    if fields and fields["experts_per_token"] > fields["experts"]:
        raise ModelError(f"{origin}: num_experts_per_tok ({fields['experts_per_token']}) is more "
                         f"than the experts ({fields['experts']})")
    return fields


def load(name_or_path: str | None = None) -> ModelConfig:
    """A preset by name (case-insensitive) or a local config.json; default gemma-3-270m-it."""
    name_or_path = name_or_path or "gemma-3-270m-it"
    for key, cfg in PRESETS.items():
        if key.lower() == str(name_or_path).lower():
            return cfg
    if not str(name_or_path).endswith(".json"):
        raise ModelError(f"unknown model {name_or_path!r}; presets: {', '.join(PRESETS)}, "
                         "or a path to a config.json")
    data = read_json(name_or_path, ModelError)
    return from_hf_dict(data, name=config_name(name_or_path, data), origin=name_or_path)


def config_name(path: str, data: dict) -> str:
    """The config's own name (_name_or_path), else the file's stem, else (a file called
    config.json, as in a downloaded model folder) its folder's name."""
    import os

    own = data.get("_name_or_path") if isinstance(data, dict) else None
    if isinstance(own, str) and own.strip():
        return os.path.basename(own.rstrip("/")) or own
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem != "config":
        return stem
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return folder or "custom"


@dataclass(frozen=True)
class Phase:
    """prefill: batch sequences of seq tokens. decode: batch sequences, one new token each,
    attending kv_len positions (the new one included)."""

    kind: str  # "prefill" | "decode"
    batch: int
    seq: int = 1
    kv_len: int = 1

    @classmethod
    def prefill(cls, batch: int, seq: int) -> "Phase":
        C._sizes(batch=batch, seq=seq)
        return cls("prefill", batch, seq, seq)

    @classmethod
    def decode(cls, batch: int, kv_len: int) -> "Phase":
        C._sizes(batch=batch, kv_len=kv_len)
        return cls("decode", batch, 1, kv_len)

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


def _proj(name: str, t: int, d_in: int, d_out: int, dtype: str, bias: bool,
          p: Precision | None = None) -> C.Cost:
    if p and p.group_size and d_in % p.group_size:  # a model's groups run along the input
        raise C.CostError(f"a group size of {p.group_size} does not divide {name}'s input width "
                          f"{d_in}; choose one that divides every projection's, such as 32, 64 "
                          "or 128")
    c = C.linear(t, d_in, d_out, dtype, p.weight if p else None, p.group_size if p else None)
    if bias:  # y += b: one add per output, read the bias vector once
        c = replace(c, flops=c.flops + t * d_out, bytes=c.bytes + C.elem_bytes(dtype) * d_out,
                    bytes_fused=c.bytes_fused + C.elem_bytes(dtype) * d_out)
    return c.named(name)


def _core(cfg: ModelConfig, ph: Phase, layer_type: str, dtype: str, kv_dtype: str) -> C.Cost:
    window = cfg.sliding_window if layer_type == "sliding" else None
    kv_len = min(ph.kv_len, window) if (window and ph.kind == "decode") else ph.kv_len
    args = (ph.batch, cfg.heads, ph.seq, kv_len, cfg.head_dim, cfg.kv_heads, dtype)
    dense = C.attention(*args, kv_dtype=kv_dtype)
    causal = C.attention(*args, causal=True, window=window if ph.kind == "prefill" else None,
                         kv_dtype=kv_dtype)
    kv_token = 2 * ph.batch * cfg.kv_heads * cfg.head_dim * C.elem_bytes(kv_dtype)  # K and V
    detail = {
        "macs_causal": causal.macs, "flops_causal": causal.flops, "bytes_causal": causal.bytes,
        "kv_positions": kv_len,
        "kv_cache_read_bytes": kv_token * (kv_len - 1) if ph.kind == "decode" else 0,
        "kv_cache_write_bytes": kv_token * ph.seq,
    }
    return replace(dense, name="attn.core", detail=detail)


def layer_costs(cfg: ModelConfig, ph: Phase, layer_type: str = "full",
                precision: Precision | None = None, dense: bool = False) -> list[C.Cost]:
    """Every component of one decoder layer of ``layer_type`` in phase ``ph``, in order; with a
    ``precision``, the weights, activations and KV cache in their own dtypes; ``dense``: one of
    a mixture's first dense layers (DeepSeek's first_k_dense_replace)."""
    if layer_type not in ("full", "sliding"):
        raise ModelError(f"layer type must be 'full' or 'sliding', got {layer_type!r}")
    p = precision
    t, h, dt = ph.tokens, cfg.hidden, p.act if p else cfg.dtype
    offset = cfg.family.startswith("gemma")  # Gemma's norms scale by (1 + w)
    norm = lambda name: C.rmsnorm(t, h, dt, offset).named(name)  # noqa: E731
    residual = lambda name: C.elementwise(t * h, dt, 2, 1, 1).named(name)  # noqa: E731
    parts = [norm("input_norm")]
    parts += (_latent_attention(cfg, ph, dt, p) if cfg.kv_lora_rank
              else _attention(cfg, ph, layer_type, dt, p))
    if cfg.sandwich_norm:
        parts.append(norm("post_attn_norm"))
    parts += [residual("residual.attn"), norm("pre_ffn_norm")]
    if cfg.experts and not dense:
        parts += _experts(cfg, t, dt, p)
        if cfg.shared_experts:  # beside the routed experts, on every token, then added
            parts += _gated_mlp("mlp.shared", cfg, t, cfg.shared_experts
                                * cfg.expert_intermediate, dt, p)
            parts.append(C.elementwise(t * h, dt, 2, 1, 1).named("mlp.shared.add"))
    else:
        parts += _gated_mlp("mlp", cfg, t, cfg.intermediate, dt, p)
    if cfg.sandwich_norm:
        parts.append(norm("post_ffn_norm"))
    parts.append(residual("residual.mlp"))
    return parts


def _attention(cfg: ModelConfig, ph: Phase, layer_type: str, dt: str,
               p: Precision | None) -> list[C.Cost]:
    """Multi-head attention (GQA): q, k and v projected (one read of x where they are one
    linear), normed per head where the family does, rotated, attended, projected back.
    Attention sinks (gpt-oss) add one logit to each row's Lkv: left out of the core."""
    t, h, offset = ph.tokens, cfg.hidden, cfg.family.startswith("gemma")
    q_out, kv_out = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    parts = [_proj("attn.qkv_proj", t, h, q_out + 2 * kv_out, dt, cfg.attn_bias, p)] \
        if cfg.fused_projections else [
        _proj("attn.q_proj", t, h, q_out, dt, cfg.attn_bias, p),
        _proj("attn.k_proj", t, h, kv_out, dt, cfg.attn_bias, p),
        _proj("attn.v_proj", t, h, kv_out, dt, cfg.attn_bias, p)]
    if cfg.qk_norm:
        parts += [C.rmsnorm(t * cfg.heads, cfg.head_dim, dt, offset).named("attn.q_norm"),
                  C.rmsnorm(t * cfg.kv_heads, cfg.head_dim, dt, offset).named("attn.k_norm")]
    core = _core(cfg, ph, layer_type, dt, p.kv if p else dt)
    scores = ph.batch * cfg.heads * ph.seq * core.detail["kv_positions"]
    return parts + [
        C.rope(t, cfg.heads + cfg.kv_heads, cfg.head_dim, dt).named("attn.rope"),
        core,
        *([_softcap(scores, dt).named("attn.softcap")] if cfg.attn_softcap else []),
        _proj("attn.o_proj", t, q_out, h, dt, cfg.o_bias, p),
    ]


def kv_per_token(cfg: ModelConfig) -> int:
    """Elements a layer caches per token: K and V of every KV head, or latent attention's latent
    and rotated key (transformers caches the latent and expands it at every step)."""
    return (cfg.kv_lora_rank + cfg.qk_rope_dim if cfg.kv_lora_rank
            else 2 * cfg.kv_heads * cfg.head_dim)


def _latent_attention(cfg: ModelConfig, ph: Phase, dt: str, p: Precision | None) -> list[C.Cost]:
    """DeepSeek-V2's multi-head latent attention as transformers runs it: q projected (through
    a low-rank q_a/q_b pair where the config has one); one linear to a latent of kv_lora_rank
    plus the qk_rope_dim rotated key dims shared by all heads (what the cache keeps), normed;
    then, every step, the whole cached latent expanded by kv_b_proj into every head's
    unrotated K and V, the keys assembled, and attention over head dims head_dim (q, k) and
    v_head_dim (v)."""
    t, h, heads, rope = ph.tokens, cfg.hidden, cfg.heads, cfg.qk_rope_dim
    nope, r, dv = cfg.head_dim - rope, cfg.kv_lora_rank, cfg.v_head_dim
    kv_rows = ph.batch * ph.kv_len  # the latent of every cached position, expanded again
    q = [_proj("attn.q_proj", t, h, heads * cfg.head_dim, dt, cfg.attn_bias, p)] \
        if not cfg.q_lora_rank else [
        _proj("attn.q_a_proj", t, h, cfg.q_lora_rank, dt, cfg.attn_bias, p),
        C.rmsnorm(t, cfg.q_lora_rank, dt).named("attn.q_a_norm"),
        _proj("attn.q_b_proj", t, cfg.q_lora_rank, heads * cfg.head_dim, dt, False, p)]
    args = (ph.batch, heads, ph.seq, ph.kv_len, cfg.head_dim, heads, dt)
    core = C.attention(*args, kv_dtype=p.kv if p else dt, v_dim=dv)
    causal = C.attention(*args, causal=True, kv_dtype=p.kv if p else dt, v_dim=dv)
    latent = C.elem_bytes(p.kv if p else dt) * (r + rope)
    core = replace(core, name="attn.core", detail={
        "macs_causal": causal.macs, "flops_causal": causal.flops, "bytes_causal": causal.bytes,
        "kv_positions": ph.kv_len, "kv_cache_write_bytes": latent * ph.batch * ph.seq,
        "kv_cache_read_bytes": latent * ph.batch * (ph.kv_len - 1) if ph.kind == "decode" else 0})
    return q + [
        _proj("attn.kv_a_proj", t, h, r + rope, dt, cfg.attn_bias, p),
        C.rmsnorm(t, r, dt).named("attn.kv_a_norm"),
        C.rope(t, heads + 1, rope, dt).named("attn.rope"),
        _proj("attn.kv_b_proj", kv_rows, r, heads * (nope + dv), dt, False, p),
        C.elementwise(kv_rows * heads * cfg.head_dim, dt, 1, 1, 0).named("attn.assemble_k"),
        C.elementwise(t * heads * cfg.head_dim, dt, 1, 1, 0).named("attn.assemble_q"),
        core,
        _proj("attn.o_proj", t, heads * dv, h, dt, cfg.attn_bias, p),
    ]


def latent_attention_absorbed(cfg: ModelConfig, ph: Phase, dt: str,
                              p: Precision | None = None) -> list[C.Cost]:
    """The other way to run latent attention, with kv_b_proj absorbed (as DeepSeek's own and
    vLLM's decode do; transformers does not): each head's unrotated query taken into the latent
    (q_absorb: q_nope @ W_UK, a matrix a head), every head attending over the cached latent and
    rope keys as one shared KV head (head dim kv_lora_rank + qk_rope_dim; the values are the
    latent itself, read once with the keys), each head's output taken out of the latent
    (o_absorb: @ W_UV) before o_proj. Nothing is expanded: the bytes follow the latent cache,
    the MACs the latent's width. Same names as _latent_attention where the op is the same."""
    heads, rope = cfg.heads, cfg.qk_rope_dim
    nope, r, dv, t = cfg.head_dim - rope, cfg.kv_lora_rank, cfg.v_head_dim, ph.tokens
    kv = p.kv if p else dt
    same = {"attn.q_proj", "attn.q_a_proj", "attn.q_a_norm", "attn.q_b_proj", "attn.kv_a_proj",
            "attn.kv_a_norm", "attn.rope"}
    expanded = _latent_attention(cfg, ph, dt, p)
    args = (ph.batch, heads, ph.seq, ph.kv_len, r + rope, 1, dt)
    values = C.elem_bytes(kv) * ph.batch * ph.kv_len * r  # V is K's first r values: not read twice

    def shared(c: C.Cost) -> C.Cost:
        return replace(c, bytes=c.bytes - values, bytes_fused=c.bytes_fused - values)
    core, causal = (shared(C.attention(*args, causal=cz, kv_dtype=kv, v_dim=r))
                    for cz in (False, True))
    old = next(c for c in expanded if c.name == "attn.core")
    core = replace(core, name="attn.core", detail={
        **old.detail, "macs_causal": causal.macs, "flops_causal": causal.flops,
        "bytes_causal": causal.bytes})
    return [c for c in expanded if c.name in same] + [
        C.bmm(heads, t, nope, r, dt).named("attn.q_absorb"), core,
        C.bmm(heads, t, r, dv, dt).named("attn.o_absorb"),
        next(c for c in expanded if c.name == "attn.o_proj")]


def latent_ways(cfg: ModelConfig, ph: Phase, p: Precision | None = None) -> dict:
    """A latent attention's two ways at one phase: 'expand' (the whole cache through kv_b_proj
    every step, as transformers runs it) and 'absorb'; each the attention's MACs and bytes
    (causal at prefill, as the kernels count it)."""
    dt = p.act if p else cfg.dtype

    def totals(parts: list[C.Cost]) -> dict:
        causal = ph.kind == "prefill"
        macs = sum(c.detail["macs_causal"] if causal and c.name == "attn.core" else c.macs
                   for c in parts)
        return {"macs": macs, "bytes": sum(c.detail.get("bytes_causal", c.bytes) if causal
                                           else c.bytes for c in parts),
                "bytes_fused": sum(c.bytes_fused for c in parts)}
    return {"expand": totals(_latent_attention(cfg, ph, dt, p)),
            "absorb": totals(latent_attention_absorbed(cfg, ph, dt, p))}


def _act(cfg: ModelConfig, numel: int, dt: str) -> C.Cost:
    """The MLP's activation over ``numel`` elements: GeLU-tanh or SiLU, one kernel."""
    return (C.gelu_tanh(numel, dt) if cfg.act == "gelu_tanh"
            else C.elementwise(numel, dt, 1, 1, C.SILU_FLOPS))


def _gated_mlp(name: str, cfg: ModelConfig, t: int, inter: int, dt: str,
               p: Precision | None) -> list[C.Cost]:
    """act(x W_gate) * (x W_up), then W_down (gate and up one linear where fused)."""
    h, act = cfg.hidden, _act(cfg, t * inter, dt)
    gate_up = [_proj(f"{name}.gate_up_proj", t, h, 2 * inter, dt, False, p)] \
        if cfg.fused_projections else [
        _proj(f"{name}.gate_proj", t, h, inter, dt, False, p),
        _proj(f"{name}.up_proj", t, h, inter, dt, False, p)]
    return gate_up + [act.named(f"{name}.act"),
                      C.elementwise(t * inter, dt, 2, 1, 1).named(f"{name}.mul"),
                      _proj(f"{name}.down_proj", t, inter, h, dt, False, p)]


def _softcap(numel: int, dt: str) -> C.Cost:
    """c * tanh(x / c) as transformers runs it: three kernels (divide, tanh, multiply), each
    reading and writing every score (or logit), one FLOP an element each. On the attention it
    forces the eager path: the scores are a full matrix, every key of every query."""
    one = C.elementwise(numel, dt, 1, 1, 1)
    return replace(one, flops=C.SOFTCAP_FLOPS * one.flops, bytes=3 * one.bytes,
                   bytes_fused=one.bytes_fused, kernels=3)


def experts_hit(cfg: ModelConfig, tokens: int) -> float:
    """Distinct experts a layer's ``tokens`` reach, expected under uniform routing: each expert
    is missed by one token with probability 1 - k/E, by all of them with (1 - k/E)^T."""
    e, k = cfg.experts, cfg.experts_per_token
    return e * (1 - (1 - k / e) ** tokens)


def _experts(cfg: ModelConfig, t: int, dt: str, p: Precision | None) -> list[C.Cost]:
    """A mixture-of-experts MLP as transformers runs it: the router (a linear to E logits, a
    softmax in fp32, the top k, renormalised where the config says; gpt-oss: the top k logits,
    then their softmax), then each expert hit runs its gated MLP (gate and up as one linear) on
    the rows routed to it, T * k rows in all, and its output, scaled by the router's weight, is
    added back into the token's row. MACs do not depend on the routing; the weights read do:
    those of the experts hit (experts_hit). gpt-oss's experts add their biases (each row's
    gathered, then added) and gate by its clamped SwiGLU (_swiglu_clamp)."""
    h, i, k, e = cfg.hidden, cfg.expert_intermediate, cfg.experts_per_token, cfg.experts
    rows, hit = t * k, experts_hit(cfg, t)

    def expert_linear(name: str, d_in: int, d_out: int) -> C.Cost:
        one = _proj(name, rows, d_in, d_out, dt, False, p)  # activations, one expert's weights
        w = C.weight_bytes(d_in * d_out, p.weight if p else dt, p.group_size if p else None)
        more = round((hit - 1) * w)  # the other experts' weights
        return replace(one, bytes=one.bytes + more, bytes_fused=one.bytes_fused + more,
                       detail={"experts_hit": hit, "rows": rows})

    def bias(name: str, width: int) -> list[C.Cost]:  # each row's expert bias, gathered, added
        return [C.elementwise(rows * width, dt, 1, 1, 0).named(f"{name}_bias_gather"),
                C.elementwise(rows * width, dt, 2, 1, 1).named(f"{name}_bias")] \
            if cfg.expert_bias else []

    router = _proj("mlp.router", t, h, e, dt, cfg.expert_bias, p)
    if cfg.family == "gpt_oss":  # the top k logits, then their softmax
        parts = [router, C.elementwise(t * e, dt, 1, 0, 0).named("mlp.router_topk"),
                 C.softmax(t, k, dt).named("mlp.router_softmax")]
    else:
        parts = [router, C.softmax(t, e, "fp32").named("mlp.router_softmax"),
                 C.elementwise(t * e, "fp32", 1, 0, 0).named("mlp.router_topk")]
    if cfg.norm_topk_prob:  # a sum and a divide over each token's k weights
        parts.append(C.elementwise(t * k, "fp32", 1, 1, 2).named("mlp.router_norm"))
    gate = [_swiglu_clamp(rows * i, dt).named("mlp.experts.act")] if cfg.act == "swiglu_clamp" \
        else [_act(cfg, rows * i, dt).named("mlp.experts.act"),
              C.elementwise(rows * i, dt, 2, 1, 1).named("mlp.experts.mul")]
    return parts + [
        C.elementwise(rows * h, dt, 1, 1, 0).named("mlp.experts.gather"),
        expert_linear("mlp.experts.gate_up", h, 2 * i), *bias("mlp.experts.gate_up", 2 * i),
        *gate,
        expert_linear("mlp.experts.down", i, h), *bias("mlp.experts.down", h),
        C.elementwise(rows * h, dt, 2, 1, 1).named("mlp.experts.weight"),
        C.elementwise(rows * h, dt, 2, 1, 1).named("mlp.experts.combine"),
    ]


def _swiglu_clamp(numel: int, dt: str) -> C.Cost:
    """gpt-oss's gate on ``numel`` (rows x I) outputs, from gate and up interleaved in one
    (rows, 2I) tensor: g = min(gate, 7), u = clamp(up, -7, 7), (u + 1) * g * sigmoid(1.702 g),
    as transformers runs it: seven pointwise kernels (clamp, clamp, scale, sigmoid, multiply,
    add, multiply), one FLOP an output element each, as the counter counts them; nine reads and
    seven writes of numel elements in all, one write and the two inputs' read fused."""
    one = C.elementwise(numel, dt, 1, 1, 1)
    return replace(one, flops=7 * numel, bytes=C.elem_bytes(dt) * 16 * numel,
                   bytes_fused=C.elem_bytes(dt) * 3 * numel, kernels=7)


def groups(parts: list[C.Cost]) -> dict[str, C.Cost]:
    """The layer's components by the module that runs them (see the module docstring)."""
    attn = [p for p in parts if p.name.startswith("attn.")]
    mlp = [p for p in parts if p.name.startswith("mlp.")]
    rest = [p for p in parts if p not in attn and p not in mlp]
    return {"attention": C.total(attn, "attention"), "mlp": C.total(mlp, "mlp"),
            "norms_residuals": C.total(rest, "norms_residuals")}


def mlp_one_kernel_bytes(cfg: ModelConfig, tokens: int) -> int:
    """The MLP fused into one kernel: x read once, the three weights read, y written."""
    return C.elem_bytes(cfg.dtype) * (2 * tokens * cfg.hidden + 3 * cfg.hidden * cfg.intermediate)


def layer_type_of(cfg: ModelConfig, index: int | None = None, kind: str | None = None) -> str:
    """The type of layer ``index``, or ``kind`` itself, or the first layer's type."""
    if index is not None:
        if not 0 <= index < cfg.layers:
            raise ModelError(f"layer must be in 0..{cfg.layers - 1}, got {index}")
        return cfg.layer_types[index]
    if kind is not None:
        if kind not in cfg.layer_types:
            raise ModelError(f"{cfg.name} has no {kind} layers")
        return kind
    return cfg.layer_types[0]


def model_costs(cfg: ModelConfig, ph: Phase, precision: Precision | None = None) -> dict:
    """All layers by type + embedding + final norm + lm_head, and the KV-cache size.

    The embedding is a gather (read T rows, write T rows); the lm_head projects every token
    entering it (HF's default forward computes logits for all positions). A ``precision``
    applies to the layers and the KV cache; the embedding, final norm and lm_head stay in the
    activation dtype, as quantised models usually keep them.
    """
    dt = precision.act if precision else cfg.dtype
    t, e = ph.tokens, C.elem_bytes(dt)
    per_type = {}
    for lt in sorted(set(cfg.layer_types)):
        n = cfg.layer_types.count(lt) - (cfg.dense_layers if cfg.experts else 0)
        per_type[lt] = (n, C.total(layer_costs(cfg, ph, lt, precision), f"{lt} layer"))
    if cfg.experts and cfg.dense_layers:  # a mixture's first layers, dense (one type: full)
        per_type["dense"] = (cfg.dense_layers, C.total(layer_costs(
            cfg, ph, cfg.layer_types[0], precision, dense=True), "dense layer"))
    emb = C.Cost("embedding", 0, 0, 2 * t * cfg.hidden * e, 2 * t * cfg.hidden * e)
    head = C.linear(t, cfg.hidden, cfg.vocab, dt).named("lm_head")
    if cfg.final_softcap:  # the logits capped: three more passes over them
        head = C.total([head, _softcap(t * cfg.vocab, dt)], "lm_head")
    final = C.rmsnorm(t, cfg.hidden, dt).named("final_norm")
    layers = C.total([c.scaled(n) for n, c in per_type.values()], "layers")
    kv_bytes, ke = 0, C.elem_bytes(precision.kv if precision else dt)
    for lt in cfg.layer_types:
        pos = min(ph.kv_len, cfg.sliding_window) if lt == "sliding" else ph.kv_len
        kv_bytes += ph.batch * kv_per_token(cfg) * pos * ke
    return {
        "layers_by_type": {lt: {"count": n, **c.as_dict()} for lt, (n, c) in per_type.items()},
        "parts": [layers, emb, final, head],
        "total": C.total([layers, emb, final, head], "model"),
        "kv_cache_bytes": kv_bytes,
        "params": param_count(cfg),
        **({"active_params": param_count(cfg, active=True)} if cfg.experts else {}),
    }


def param_count(cfg: ModelConfig, active: bool = False) -> int:
    """Weights of the model (the independent check on the projection shapes); ``active``: those
    one token runs through (its k experts of a mixture, not all of them)."""
    h, q, kv, i = cfg.hidden, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.intermediate
    attn = (h * q + 2 * h * kv + q * h + (q + 2 * kv if cfg.attn_bias else 0)
            + (h if cfg.o_bias else 0) + (cfg.heads if cfg.attn_sinks else 0))
    if cfg.kv_lora_rank:  # latent attention: q (low-rank or not), the latent, its expansion, o
        r, rope, dv = cfg.kv_lora_rank, cfg.qk_rope_dim, cfg.v_head_dim
        q_params = (h * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * q
                    if cfg.q_lora_rank else h * q)
        attn = (q_params + h * (r + rope) + r + r * cfg.heads * (cfg.head_dim - rope + dv)
                + cfg.heads * dv * h)
    norms = h * (4 if cfg.sandwich_norm else 2) + (2 * cfg.head_dim if cfg.qk_norm else 0)
    dense = 3 * h * i
    moe = dense
    if cfg.experts:  # the router, the experts' gated MLPs (and biases), the shared ones
        one = 3 * h * cfg.expert_intermediate + (
            2 * cfg.expert_intermediate + h if cfg.expert_bias else 0)
        moe = (h * cfg.experts + (cfg.experts if cfg.expert_bias else 0) + one * (
            cfg.experts_per_token if active else cfg.experts)
            + 3 * h * cfg.expert_intermediate * cfg.shared_experts)
    n_dense = cfg.dense_layers if cfg.experts else 0
    layers = cfg.layers * (attn + norms) + n_dense * dense + (cfg.layers - n_dense) * moe
    emb = cfg.vocab * h * (1 if cfg.tie_embeddings else 2)
    return layers + emb + h
