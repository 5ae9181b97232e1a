"""Tensor parallelism, analytically: one decoder layer split over ``tp`` GPUs, and what it costs
in collectives. Standard library only.

Megatron's split: q/k/v and gate/up are column-parallel (each GPU holds 1/tp of their output
columns: its heads, its slice of the intermediate), o and down are row-parallel (each GPU holds
the matching rows and produces a partial sum of the full hidden output). Query heads divide by
tp; KV heads divide too, or, when there are fewer KV heads than GPUs, each GPU keeps a copy of
the one its query heads use. Norms and residual adds run whole on every GPU. So a GPU's share is
the same layer with heads/tp, kv_heads/tp (at least 1) and intermediate/tp: ``models`` counts it.

Each forward pass of a layer then needs two all-reduces of the row-parallel outputs (after o and
after down), each of T x hidden elements. ``all_reduce_bytes`` is their sum per layer, per GPU:
the message sizes, as nccl-tests counts a message. A ring all-reduce moves 2(N-1)/N of a message
through each GPU's link each way, so its time floor is 2(N-1)/N x bytes / (one direction's
bandwidth); nccl-tests calls bytes / time the algorithm bandwidth and that times 2(N-1)/N the bus
bandwidth. Without a measured bus bandwidth the floor uses the datasheet link (half of the
datasheet's both-directions figure each way) and no latency floor, and says so.

Over the whole model the embedding and the lm_head are vocabulary-parallel, as Megatron and vLLM
shard them: each GPU holds vocab/tp rows (padded up). The embedding then needs one all-reduce of
the embedded tokens (T x hidden) and the logits one all-gather (T x vocab) before sampling; the
final norm runs whole on every GPU.
"""
from __future__ import annotations

from dataclasses import replace

from rooflab import cost as C
from rooflab import models as M
from rooflab.errors import RooflabError

ALL_REDUCES_PER_LAYER = 2  # after o_proj and after down_proj (forward pass)


class ParallelError(RooflabError):
    """A split that the model's shapes do not allow."""


def shard(cfg: M.ModelConfig, tp: int) -> M.ModelConfig:
    """One GPU's share of every layer of ``cfg`` under ``tp``-way tensor parallelism."""
    C._sizes(tp=tp)
    if cfg.heads % tp:
        raise ParallelError(f"--tp {tp} must divide the {cfg.heads} query heads of {cfg.name}")
    if cfg.kv_heads % tp and tp % cfg.kv_heads:
        raise ParallelError(f"--tp {tp} and the {cfg.kv_heads} KV heads of {cfg.name}: one must "
                            "divide the other")
    if cfg.intermediate % tp:
        raise ParallelError(f"--tp {tp} must divide the MLP width {cfg.intermediate}")
    if cfg.experts and cfg.expert_intermediate % tp:
        raise ParallelError(f"--tp {tp} must divide the experts' width {cfg.expert_intermediate}")
    # a mixture's experts are split along their width as a dense MLP is (each GPU holds 1/tp
    # of every expert); the router runs whole on each
    return replace(cfg, heads=cfg.heads // tp, kv_heads=max(cfg.kv_heads // tp, 1),
                   intermediate=cfg.intermediate // tp,
                   expert_intermediate=cfg.expert_intermediate // tp)


def shard_model(cfg: M.ModelConfig, tp: int) -> M.ModelConfig:
    """One GPU's share of the whole model: every layer's (``shard``), and vocab/tp rows of the
    embedding and the lm_head."""
    return replace(shard(cfg, tp), vocab=-(-cfg.vocab // tp)) if tp > 1 else cfg


def all_reduce_s(message_bytes: int, n_gpus: int, bus_bandwidth_bytes_per_s: float,
                 latency_s: float = 0.0) -> float:
    """Ring all-reduce time: latency + 2(N-1)/N x bytes / bus bandwidth; 0 on one GPU."""
    if n_gpus == 1:
        return 0.0
    return latency_s + 2 * (n_gpus - 1) / n_gpus * message_bytes / bus_bandwidth_bytes_per_s


def collective_time_s(measured: dict, op: str, message_bytes: int) -> float:
    """One ``op`` on ``message_bytes`` from a collective measurement (measure/collectives.py):
    the measured time, interpolated linearly between the two sizes around it; the smallest
    size's time (the latency floor) below it and the largest size's bus bandwidth above it."""
    pts = sorted((r["message_bytes"], r["time_s"]) for r in measured["rows"] if r["op"] == op)
    if not pts:
        raise ParallelError(f"no {op} in this measurement")
    if message_bytes <= pts[0][0]:
        return pts[0][1]
    for (s0, t0), (s1, t1) in zip(pts, pts[1:]):
        if message_bytes <= s1:
            return t0 + (t1 - t0) * (message_bytes - s0) / (s1 - s0)
    s, t = pts[-1]
    return t * message_bytes / s


def communication(cfg: M.ModelConfig, phase: M.Phase, tp: int, layers: int = 1,
                  link_bytes_per_s: float | None = None, link_source: str = "",
                  measured: dict | None = None, act_dtype: str | None = None,
                  vocab_parallel: bool = False) -> dict:
    """The all-reduces of ``layers`` layers under ``tp``-way tensor parallelism, per GPU, and
    their time: on a collective measurement of ``tp`` ranks (measure/collectives.py) where one
    is given, else the floor on the datasheet link where one is known. The partial sums are
    activations: sized in ``act_dtype`` (a quantised what-if's), else the model's dtype. With
    ``vocab_parallel`` (a whole model), the embedding's all-reduce and the logits' all-gather."""
    act = act_dtype or cfg.dtype
    e = C.elem_bytes(act)
    message = phase.tokens * cfg.hidden * e  # (T, hidden) partial sums
    n = ALL_REDUCES_PER_LAYER * layers + vocab_parallel if tp > 1 else 0
    gathers = 1 if tp > 1 and vocab_parallel else 0
    logits = phase.tokens * cfg.vocab * e  # (T, vocab) gathered from the vocab shards
    out = {"tp": tp, "all_reduces": n, "message_bytes": message, "dtype": act,
           "all_reduce_bytes": n * message, "all_gathers": gathers,
           "all_gather_bytes": gathers * logits, "predicted_s": None, "link": None}
    if tp > 1 and measured and measured["world_size"] == tp:
        out["predicted_s"] = n * collective_time_s(measured, "all_reduce", message) + (
            _gather_s(measured, logits) if gathers else 0.0)
        out["link"] = (f"measured: {measured['backend']} all-reduce on {tp} x "
                       f"{measured['device_name']} ({measured['date']}), latency floor "
                       f"{measured['latency_floor_s']['all_reduce'] * 1e6:.1f} us")
    elif tp > 1 and link_bytes_per_s:
        one_way = link_bytes_per_s / 2
        out["predicted_s"] = n * all_reduce_s(message, tp, one_way) + (
            gathers * all_gather_s(logits, tp, one_way))
        out["link"] = (f"{link_source}; {one_way / 1e9:.0f} GB/s each way as the bus bandwidth, "
                       "no latency floor (nothing measured)")
    return out


def _gather_s(measured: dict, message_bytes: int) -> float:
    """One all-gather on a measurement; where it has none, half an all-reduce of the same size
    (a ring all-gather moves (N-1)/N of the result, an all-reduce twice that)."""
    try:
        return collective_time_s(measured, "all_gather", message_bytes)
    except ParallelError:
        return collective_time_s(measured, "all_reduce", message_bytes) / 2


def all_gather_s(message_bytes: int, n_gpus: int, bus_bandwidth_bytes_per_s: float) -> float:
    """Ring all-gather of a ``message_bytes`` result: (N-1)/N x bytes / bus bandwidth."""
    return (n_gpus - 1) / n_gpus * message_bytes / bus_bandwidth_bytes_per_s if n_gpus > 1 else 0.0
