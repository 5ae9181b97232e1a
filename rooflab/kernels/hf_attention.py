"""rooflab's attention kernels inside a real transformers model: an attention implementation named
"rooflab" (transformers' AttentionInterface) that runs FlashAttention at prefill and
flash-decoding at decode, and SDPA where a shape or mask is outside them, counting how often
(the model's eager attention where it passes what SDPA does not apply: eager_only()). The kernels
apply a sliding layer's window and a padded batch's kept keys where those are the mask's only
patterns (mask()), and take q and k wider than v (latent attention), gpt-oss's attention sinks and
Gemma 2's softcapped scores.

The kernels run as torch ops (``torch.ops.rooflab.flash_attention``, ``...flash_decoding``), so
the dispatch counter sees them as one attention op each, with SDPA's formula (formulas.py), and
the prediction measures their rate as it does a backend's (measure/op_classes.py).

    from rooflab.kernels import register_hf_attention
    register_hf_attention()
    model = AutoModelForCausalLM.from_config(config, attn_implementation="rooflab")
"""
from __future__ import annotations

import sys
from collections import Counter

import torch

from rooflab import formulas
from rooflab.kernels.inputs import dims_error
from rooflab.kernels.flash_decoding import MAX_ROWS  # query rows one decode program holds
from rooflab.measure.op_classes import DECODE_MAX_Q  # at most this many queries: a decode

NAME = "rooflab"
# what a model passes that leaves the attention's math to q, k, v, the mask and the scale (and
# the window, which attention_forward applies): any other argument given is one only the model's
# own eager attention applies (T5's position bias, sparse indices, ...), or the kernels (TAKEN)
IGNORED = {"dropout", "scaling", "is_causal", "sliding_window", "position_ids", "cache_position",
           "use_cache", "output_attentions", "output_hidden_states", "return_dict",
           "past_key_values", "layer_idx", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q",
           "max_length_k", "deterministic"}
NAMED = {"softcap": "softcapping", "s_aux": "attention sinks", "sinks": "attention sinks"}
TAKEN = {"softcap", "s_aux"}  # Gemma 2's softcap and gpt-oss's sinks: the kernels apply them
CALLS: Counter = Counter()  # which path each call took: a kernel, or "sdpa (why)", "eager (why)"
# FlashAttention's kernels by module (routing.which()), as CALLS names them
KERNELS = {"flash_attention": "Triton", "flash_attention_sm90": "Gluon",
           "flash_attention_sm90_ws": "Gluon, warp-specialized"}


# --- the kernels as torch ops -------------------------------------------------------------------
@torch.library.custom_op("rooflab::flash_attention", mutates_args=())
def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
                       scale: float, kernel: str = "", window: int = 0,
                       keep: torch.Tensor | None = None,
                       sinks: torch.Tensor | None = None, softcap: float = 0.0) -> torch.Tensor:
    """``kernel``: routing.which()'s module for these inputs, where the caller has it;
    ``window`` (0: none): the last keys each query sees, itself included; ``keep``: (B, Lkv)
    the keys each batch row attends to (a padded batch); ``sinks``: (H,) attention sinks;
    ``softcap`` (0: none): scores s become softcap * tanh(s / softcap)."""
    from rooflab.kernels import flash_attention as FA, routing
    window = window or None
    kernel = kernel or routing.which(q, k, v, is_causal, window=window, keep=keep, sinks=sinks,
                                     softcap=softcap)
    return (routing.gluon(q, k, v, is_causal, scale, None, kernel)
            or FA.flash_attention(q, k, v, is_causal, scale, cfg={}, window=window, keep=keep,
                                  sinks=sinks, softcap=softcap))[0]


@torch.library.custom_op("rooflab::flash_decoding", mutates_args=())
def flash_decoding_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
                      scale: float, keep: torch.Tensor | None = None,
                      sinks: torch.Tensor | None = None, softcap: float = 0.0) -> torch.Tensor:
    from rooflab.kernels.flash_decoding import flash_decode
    return flash_decode(q, k, v, is_causal, scale, keep=keep, sinks=sinks, softcap=softcap)[0]


for _name, _op in (("flash_attention", flash_attention_op), ("flash_decoding", flash_decoding_op)):
    # out: (B, H, Lq, D of v), on the meta device and under torch.compile too
    _op.register_fake(lambda q, k, v, *args: q.new_empty(*q.shape[:-1], v.shape[-1]))
    formulas.register_attention(getattr(torch.ops.rooflab, _name))


def kept_keys(mask, lq: int):
    """A decode's boolean mask (B, 1, 1, Lkv), one query a row (a static or padded cache), as
    the (B, Lkv) keys each row attends to; None for any other mask."""
    if (mask is None or mask.dtype != torch.bool or mask.dim() != 4 or lq != 1
            or mask.shape[1] != 1 or mask.shape[2] != 1):
        return None
    keep = mask[:, 0, 0, :]
    return keep if keep.stride(-1) == 1 else keep.contiguous()


# --- the attention implementation ---------------------------------------------------------------
def eager_only(kwargs: dict) -> str:
    """The first argument given that SDPA does not apply (not IGNORED; the kernels take those in
    TAKEN), as the reason for a fallback to eager; '' where there is none."""
    for arg, value in kwargs.items():
        if arg not in IGNORED and value is not None and value is not False:
            return NAMED.get(arg, f"argument {arg}")
    return ""


def outside(module, query, key, value, attention_mask, dropout: float, kwargs: dict) -> str:
    """Why the kernels do not take this call ('' where they do). q (B, H, Lq, D), k and v
    (B, Hkv, Lkv, D), as transformers passes them."""
    h, lq, d = query.shape[1:]
    hkv, lkv = key.shape[1:3]
    if attention_mask is not None and kept_keys(attention_mask, lq) is None:
        return "a mask other than a decode's kept keys"
    if dropout:
        return "dropout"
    if why := eager_only(kwargs):
        return why
    if query.dtype not in (torch.float16, torch.bfloat16) or key.dtype != query.dtype:
        return f"dtype {query.dtype}"
    if dims_error(d, value.shape[-1]):
        return f"head dim {d}" + (f", v's {value.shape[-1]}" if value.shape[-1] != d else "")
    if h % hkv:
        return "K/V heads that do not divide the query heads"
    if lq <= DECODE_MAX_Q and (h // hkv) * lq > MAX_ROWS:
        return "more rows a KV head than flash-decoding holds"
    return ""


def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                      scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    """transformers' attention contract: (B, Lq, H, D) output and no weights. Causal is SDPA's
    (what transformers asks for when it leaves the mask out): aligned at the top left, query i
    sees keys 0..i; with fewer queries than keys that is a static cache's prefill from empty,
    whose keys past Lq are slots not yet written. Without a mask, a sliding layer sees its last
    ``sliding_window`` keys (mask() left the window out for this). A prefill's mask that mask()
    read as causal, a window and a padded batch's kept keys runs FlashAttention on those, at
    any number of queries: its rows that see no key (a padded row's) get zeros, as SDPA's do."""
    lq, lkv = query.shape[2], key.shape[2]
    padded = padding(attention_mask) if lq > 1 else None
    sinks, softcap = kwargs.get("s_aux"), kwargs.get("softcap") or 0.0  # the kernels take them
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    # one new token sees the whole cache; a mask padding() reads is causal
    causal = padded is not None or (causal and lq > 1 and attention_mask is None)
    why = outside(module, query, key, value, None if padded else attention_mask, dropout,
                  {a: x for a, x in kwargs.items() if a not in TAKEN}
                  ) or ("causal, more queries than keys" if causal and lq > lkv else "")
    if why and attention_mask is not None:  # the mask says it all: the fallback takes it as is
        return fallback(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                        False, None, why, kwargs)
    keep, shift, window = padded or (None, 0, kwargs.get("sliding_window"))
    if causal and lq + shift < lkv:  # keys past the last query's are never seen (a view);
        # without a mask that is SDPA's top left: a static cache's slots not yet written
        key, value, lkv = key[:, :, :lq + shift], value[:, :, :lq + shift], lq + shift
        keep = keep[:, :lkv] if keep is not None else None
    window = window if (causal or lq == 1) and window and window < lkv else None
    if why:
        return fallback(module, query, key, value, None, dropout, scaling, is_causal, causal,
                        window, why, kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if lq <= DECODE_MAX_Q and not padded and not (window and lq > 1):  # a window over
        # several queries: FlashAttention's, whose rows each have their own
        keep = kept_keys(attention_mask, lq)
        if window:  # one query, the last: the window's keys are the last ones
            keep = (torch.arange(lkv, device=key.device) >= lkv - window).expand(len(key), lkv)
        extras = ", ".join(what for what, x in (("kept keys", keep is not None),
                                                ("sinks", sinks is not None),
                                                ("softcap", softcap)) if x)
        CALLS["flash_decoding" + (f" ({extras})" if extras else "")] += 1
        out = torch.ops.rooflab.flash_decoding(query, key, value, causal, scale, keep, sinks,
                                               softcap)
    else:
        from rooflab.kernels.routing import which
        kernel = which(query, key, value, causal, window=window, keep=keep, sinks=sinks,
                       softcap=softcap)
        extras = "".join(f", {what}" for what, x in (("sliding window", window),
                                                     ("kept keys", keep is not None),
                                                     ("sinks", sinks is not None),
                                                     ("softcap", softcap)) if x)
        CALLS[f"flash_attention ({KERNELS[kernel]}{extras})"] += 1
        out = torch.ops.rooflab.flash_attention(query, key, value, causal, scale, kernel,
                                                window or 0, keep, sinks, softcap)
    return out.transpose(1, 2).contiguous(), None


def padding(attention_mask):
    """(kept keys (B, Lkv), shift, window) of a mask mask() read as a prefill's causal pattern,
    a sliding window and a padded batch (query i sits at key i + shift); else None."""
    keep = getattr(attention_mask, "rooflab_keys", None)
    return None if keep is None else (keep, attention_mask.rooflab_shift,
                                      attention_mask.rooflab_window)


def fallback(module, query, key, value, attention_mask, dropout, scaling, is_causal,
             causal: bool, window, why: str, kwargs: dict):
    """SDPA, or where the model passes what only its eager attention applies (eager_only()) and
    defines one, that attention, counted in CALLS. Where the mask was left out for the kernels (a
    sliding window; causal, which eager does not apply itself) it is made here."""
    forward = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    eager = bool(eager_only(kwargs)) and forward is not None
    CALLS[f"{'eager' if eager else 'sdpa'} ({why})"] += 1
    mask = attention_mask
    if mask is None and (window or causal and eager):
        from rooflab.kernels.flash_attention import seen
        mask = seen(query.shape[2], key.shape[2], window, query.device)[None, None]
        is_causal = False
    if eager:  # eager adds its mask to the scores: a boolean one becomes 0 or -inf
        if mask is not None and mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=query.dtype, device=mask.device).masked_fill(
                ~mask, torch.finfo(query.dtype).min)
        return forward(module, query, key, value, mask, dropout=dropout, scaling=scaling,
                       **kwargs)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return sdpa_attention_forward(module, query, key, value, mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal, **kwargs)


def mask(*args, **kwargs):
    """transformers' SDPA mask (sdpa_mask: boolean, or None where SDPA's is_causal does the
    work), with two readings for the kernels where the mask's only patterns are causal, the
    config's sliding window and a padded batch (transformers' own test before it skips a mask:
    allow_is_causal_skip, no chunks, no bidirectional part):
    - a sliding layer's is left out wherever a causal one would be (no padding, a prefill from
      empty or one query): attention_forward applies the window;
    - where it is made and its offsets can be read (on_host()), its kept keys (B, Lkv) of the
      2D padding mask, the query's offset into the keys and the window ride on it (padding()),
      for a prefill of a padded batch."""
    from transformers.masking_utils import prepare_padding_mask, sdpa_mask
    config, local = kwargs.get("config"), kwargs.get("local_size")
    sliding = (local is not None and local == getattr(config, "sliding_window", None)
               and getattr(config, "attention_chunk_size", None) is None)
    plain = (kwargs.get("allow_is_causal_skip", True) and not kwargs.get(
        "allow_is_bidirectional_skip") and (local is None or sliding))
    if plain and sliding:
        kwargs["local_size"] = None
    made = sdpa_mask(*args, **kwargs)
    pad = kwargs.get("attention_mask")
    if made is None or not plain or pad is None or pad.dim() != 2:
        return made
    q_offset = kwargs.get("q_offset")  # a static cache's is a tensor; transformers 4.x passes
    if q_offset is None and kwargs.get("cache_position") is not None:  # the queries' positions
        q_offset = kwargs["cache_position"][:1]
    q_offset, kv_offset, kv_length = (on_host(x) for x in (q_offset, kwargs.get("kv_offset"),
                                                          kwargs.get("kv_length")))
    if None not in (q_offset, kv_offset, kv_length):
        keep = prepare_padding_mask(pad, kv_length, kv_offset)[:, kv_offset:kv_offset + kv_length]
        made.rooflab_keys = keep.bool().contiguous()
        made.rooflab_shift = q_offset - kv_offset  # query i sits at key i + shift
        made.rooflab_window = local if sliding else None
    return made


def on_host(x):
    """``x`` as a Python int: an int, or a one-element tensor where reading it is allowed (not
    under torch.compile, which puts no attributes on its tensors either, nor while a CUDA graph
    is captured); else None."""
    if isinstance(x, int) and not torch.compiler.is_compiling():
        return x
    if (not isinstance(x, torch.Tensor) or x.numel() != 1 or torch.compiler.is_compiling()
            or x.is_cuda and torch.cuda.is_current_stream_capturing()):
        return None
    return int(x)


def register() -> str:
    """Register "rooflab" with transformers (attention, and its masks: mask()); its name."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, mask)
    return NAME
