"""What the attention kernels (flash_attention.py, flash_decoding.py) take, checked before a
launch: ranks, devices, dtypes, head dims, batches, GQA grouping, lengths, kept keys, sinks and a
sliding window; where they cannot take an input, the one-line reason (ValueError or TypeError),
never a launch that reads past a tensor."""
from __future__ import annotations

import torch

HEAD_DIMS = (16, 32, 64, 128, 256)


def dims_error(d_qk: int, d_v: int) -> str:
    """Why these head dims are not the kernels' ('' where they are): v's one of HEAD_DIMS, q and
    k's the same or wider by one of them up to v's (latent attention's 128 + 64 rotary dims)."""
    extra = d_qk - d_v
    if d_v not in HEAD_DIMS or not (extra == 0 or extra in HEAD_DIMS and extra <= d_v):
        return (f"head_dim must be one of {', '.join(map(str, HEAD_DIMS))}, q and k's the same "
                f"or wider by one of them up to v's (got {d_qk} for q and k, {d_v} for v)")
    return ""


def checked(q, k, v, causal: bool, name: str):
    """q (B, H, Lq, D), k (B, Hkv, Lkv, D), v (B, Hkv, Lkv, Dv) as the kernels take them (unit
    stride in the head dim; k and v of one batch row broadcast to q's batch, as SDPA does, by
    a stride of 0: no copy)."""
    if any(t.dim() != 4 for t in (q, k, v)):
        raise ValueError(f"{name} takes 4-D (B, H, L, D) q, k, v, got "
                         f"{', '.join(f'{t.dim()}-D' for t in (q, k, v))}")
    if len({t.device for t in (q, k, v)}) > 1:
        raise ValueError(f"{name} takes q, k, v on one device, got "
                         f"{', '.join(str(t.device) for t in (q, k, v))}")
    b, h, n_q, d = q.shape
    hkv, n_kv = k.shape[1:3]
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"{name} takes fp16 or bf16 q, k, v of one dtype, got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}")
    why = dims_error(d, v.shape[-1]) or (
        "" if k.shape[-1] == d else f"q and k must have one head dim (got {d} and {k.shape[-1]})")
    if why:
        raise ValueError(why)
    if {k.shape[0], v.shape[0]} - {b, 1}:
        raise ValueError(f"k and v take q's batch or one row (got {b}, {k.shape[0]}, "
                         f"{v.shape[0]})")
    if h < 1 or hkv < 1 or h % hkv or v.shape[1] != hkv or v.shape[2] != n_kv:
        raise ValueError(f"kv heads ({hkv}) must divide heads ({h}), one or more; k and v "
                         f"must match")
    if n_kv < 1:
        raise ValueError("attention needs at least one key (got kv_len 0)")
    if causal and n_q > n_kv:
        raise ValueError("causal attention needs q_len <= kv_len")
    k, v = (t.expand(b, -1, -1, -1) for t in (k, v))  # a broadcast row: batch stride 0
    return (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))


def kept(keep, b: int, n_kv: int):
    """Kept keys as the kernels read them, (B, Lkv) bytes of unit stride, or None."""
    if keep is None:
        return None
    if keep.shape != (b, n_kv) or keep.dtype != torch.bool or keep.stride(-1) != 1:
        raise ValueError(f"keep is a (B, Lkv) = ({b}, {n_kv}) bool tensor, rows contiguous; "
                         f"got {tuple(keep.shape)} {keep.dtype}")
    return keep.view(torch.uint8)


def sink_logits(sinks, h: int):
    """Attention sinks as the kernels read them, (H,) fp32, or None."""
    if sinks is None:
        return None
    if sinks.shape != (h,):
        raise ValueError(f"sinks holds a logit a query head: ({h},), got {tuple(sinks.shape)}")
    return sinks.float().contiguous()


def cap(softcap: float) -> float:
    """A softcap as the kernels take it: 0 for none, else positive and finite."""
    if not (softcap == 0 or 0 < softcap < float("inf")):
        raise ValueError(f"softcap must be positive and finite, or 0 for none (got {softcap})")
    return float(softcap)


def local(window: int | None, n_kv: int) -> int | None:
    """A sliding window that hides keys (shorter than n_kv), else None."""
    return window if window is not None and window < n_kv else None
