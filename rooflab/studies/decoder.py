"""Part 3: a real decoder layer. Per-component costs, sweeps on the roofline, and the measured
layer (wall time, profiled kernel time) against the roofline prediction."""
from __future__ import annotations

import dataclasses

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import models as M
from rooflab import parallel as TP
from rooflab import precision as Q
from rooflab import roofline as R

DECODE_BATCHES = (1, 4, 16, 64)
PREFILL_LENGTHS = (64, 256, 1024, 4096)


def row(c: C.Cost, roof: R.Roof | None) -> dict:
    d = c.as_dict()
    if roof is not None:
        p = R.place(roof, c)
        d.update(bound=p.bound, time_floor_s=p.time_floor_s,
                 attainable_flops_per_s=p.attainable_flops_per_s)
    return d


def analyze(cfg: M.ModelConfig, phase: M.Phase, layer_type: str, roof: R.Roof | None = None,
            tp: int = 1, hw: H.Hardware | None = None,
            precision: Q.Precision | None = None) -> dict:
    """The `rooflab layer` result: components, groups, total (placed under ``roof`` if given).
    Under ``tp``-way tensor parallelism: one GPU's share, and the all-reduces on ``hw``'s link;
    with a ``precision``: each tensor role's bytes in its own dtype."""
    full, cfg = cfg, TP.shard(cfg, tp)
    parts = M.layer_costs(cfg, phase, layer_type, precision)
    core = next(p for p in parts if p.name == "attn.core")
    return {
        "model": cfg.name, "layer_type": layer_type, "phase": phase.kind, "batch": phase.batch,
        "seq": phase.seq, "kv_len": phase.kv_len, "kv_attended": core.detail["kv_positions"],
        "dtype": cfg.dtype,
        "roof": roof.label if roof else None,
        "components": [row(p, roof) for p in parts],
        "groups": {k: row(v, roof) for k, v in M.groups(parts).items()},
        "total": row(C.total(parts, "layer"), roof),
        "kv_cache_read_bytes": core.detail["kv_cache_read_bytes"],
        "kv_cache_write_bytes": core.detail["kv_cache_write_bytes"],
        "causal": {"macs": core.detail["macs_causal"], "flops": core.detail["flops_causal"]},
        "tp": tp, "communication": _comms(full, phase, tp, 1, hw, precision and precision.act),
        "precision": precision.label if precision else None,
        **({"latent_ways": M.latent_ways(cfg, phase, precision)} if cfg.kv_lora_rank else {}),
    }


def recipes(cfg: M.ModelConfig, hw: H.Hardware, batches=(1, 64), kv_len: int = 1024,
            layer_type: str | None = None) -> list[dict]:
    """The MLP at decode under each serving recipe (W16A16, W8A8, W4A16, FP8) on ``hw``'s
    datasheet roof for the recipe's compute dtype: intensity, bound and time floor per token.
    A card without bf16 (a T4) runs the 16-bit recipes in fp16: the same bytes, its fp16 peak."""
    lt = layer_type or M.layer_type_of(cfg)
    rows = []
    half = "bf16" not in hw.peak_flops_per_s and "fp16" in hw.peak_flops_per_s
    for name, p in Q.RECIPES.items():
        if half:
            p = dataclasses.replace(p, **{role: "fp16" for role in ("weight", "act", "kv")
                                          if getattr(p, role) == "bf16"})
        if p.act not in hw.peak_flops_per_s:
            continue  # the card has no such peak: the recipe does not apply
        roof = R.Roof.of(hw, p.act)
        weights = 3 * C.weight_bytes(cfg.hidden * cfg.intermediate, p.weight, p.group_size)
        for b in batches:
            mlp = M.groups(M.layer_costs(cfg, M.Phase.decode(b, kv_len), lt, p))["mlp"]
            pl = R.place(roof, mlp)
            rows.append({"recipe": name, "precision": p.label, "batch": b,
                         "intensity": pl.intensity, "bound": pl.bound, "ridge": roof.ridge,
                         "time_floor_s": pl.time_floor_s,
                         "time_floor_per_token_s": pl.time_floor_s / b,
                         "weight_bytes": weights, "activation_bytes": mlp.bytes - weights,
                         # the term that sets the floor: the FLOPs, or the larger of the bytes
                         "decides": "compute" if pl.bound == "compute" else
                         "weight bytes" if 2 * weights >= mlp.bytes else "activation bytes"})
    return rows


def _comms(cfg: M.ModelConfig, phase: M.Phase, tp: int, layers: int,
           hw: H.Hardware | None, act_dtype: str | None = None,
           vocab_parallel: bool = False) -> dict:
    """On the collectives measured here (rooflab collectives) when the GPUs asked about are the
    ones present, else on the datasheet link."""
    measured = None
    if tp > 1:
        from rooflab.measure import collectives as K
        if K.gpu_count() >= tp and (hw is None or hw.name == H.detect().name):
            measured = K.cached("cuda", tp)
    return TP.communication(cfg, phase, tp, layers, hw.link_bytes_per_s if hw else None,
                           hw.link_source if hw else "", measured, act_dtype, vocab_parallel)


def model_summary(cfg: M.ModelConfig, phase: M.Phase, roof: R.Roof | None = None, tp: int = 1,
                  hw: H.Hardware | None = None, precision: Q.Precision | None = None) -> dict:
    """Whole-model totals for one GPU; under tensor parallelism its share: the layers', and the
    embedding's and lm_head's vocabulary slice, while the final norm runs whole on every GPU
    (``models.model_costs`` says what a ``precision`` applies to)."""
    full, cfg = cfg, TP.shard_model(cfg, tp)
    mc = M.model_costs(cfg, phase, precision)
    return {"model": cfg.name, "config": cfg.as_dict(), "phase": phase.kind, "batch": phase.batch,
            "seq": phase.seq, "kv_len": phase.kv_len, "params": mc["params"],
            "kv_cache_bytes": mc["kv_cache_bytes"], "layers_by_type": mc["layers_by_type"],
            "parts": [row(p, roof) for p in mc["parts"]], "total": row(mc["total"], roof),
            "tp": tp, "replicated": ["final_norm"] if tp > 1 else [],
            "vocab_parallel": tp > 1,
            "precision": precision.label if precision else None,
            "communication": _comms(full, phase, tp, full.layers, hw,
                                    precision and precision.act, vocab_parallel=True),
            **({"active_params": mc["active_params"],
                "experts_at_decode": experts_at_decode(cfg, roof, precision=precision)}
               if cfg.experts else {})}


EXPERT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def experts_at_decode(cfg: M.ModelConfig, roof: R.Roof | None, kv_len: int = 1024,
                      precision: Q.Precision | None = None) -> dict:
    """A mixture's experts at decode, batch 1 to 256: the experts the batch's tokens reach
    (expected, uniform routing), their FLOPs and bytes a layer and their point on the roof; the
    first batch at which they stop being bound by the weights they read, if any does."""
    rows = []
    for b in EXPERT_BATCHES:
        parts = [c for c in M.layer_costs(cfg, M.Phase.decode(b, kv_len), precision=precision)
                 if c.name.startswith("mlp.experts.")]
        c = C.total(parts, "experts")
        p = R.place(roof, c) if roof else None
        rows.append({"batch": b, "experts_hit": M.experts_hit(cfg, b), "flops": c.flops,
                     "bytes": c.bytes, "intensity": c.intensity,
                     "bound": p.bound if p else None})
    compute = [r["batch"] for r in rows if r["bound"] == "compute"]
    return {"rows": rows, "ridge": roof.ridge if roof else None,
            "compute_bound_from_batch": compute[0] if compute else None}


def sweeps(cfg: M.ModelConfig, roof: R.Roof, kv_len: int = 1024, prefill_batch: int = 32,
           layer_type: str | None = None) -> list[dict]:
    """Decode at batch 1..64 and prefill at length 64..4096: MLP and whole-layer points."""
    lt = layer_type or M.layer_type_of(cfg)
    phases = [(f"decode B={b}", M.Phase.decode(b, kv_len)) for b in DECODE_BATCHES]
    phases += [(f"prefill L={n}", M.Phase.prefill(prefill_batch, n)) for n in PREFILL_LENGTHS]
    out = []
    for label, ph in phases:
        parts = M.layer_costs(cfg, ph, lt)
        for what, c in (("mlp", M.groups(parts)["mlp"]), ("layer", C.total(parts, "layer"))):
            p = R.place(roof, c)
            out.append({"label": label, "what": what, "phase": ph.kind, "batch": ph.batch,
                        "seq": ph.seq, "flops": c.flops, "bytes": c.bytes,
                        "intensity": p.intensity, "attainable_flops_per_s": p.attainable_flops_per_s,
                        "bound": p.bound, "time_floor_s": p.time_floor_s})
    return out
