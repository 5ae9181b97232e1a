"""The real transformers layer, measured: wall time (the one timer), kernel time (the profiler,
per component through module ranges), and the prediction from counted ops on measured ceilings.

On a GPU each timed call starts with L2 flushed, as a layer runs in a model: a model's step
reads every layer in turn, so a layer's weights and cache have left L2 by its next step, while a
small layer called in a loop would find them there (docs/predictions.md).

Prediction: every counted op that moves bytes is one kernel, costed by op_classes: the roofline
time on this device's measured ceilings, the generic elementwise loop's measured element rate
where the op takes that path (broadcast, strided, widening), plus the measured floor of a tiny
kernel of its class, which no kernel goes below. The layer's prediction is the sum. Beside it,
``roofline_s`` is the plain roofline sum (no floors, one bandwidth), to show what the rest adds.
"""
from __future__ import annotations

import torch

from rooflab import count, hf
from rooflab import predict as PR
from rooflab import models as M
from rooflab.measure import op_classes as OC
from rooflab.measure import profile as P
from rooflab.measure.ceilings import Ceilings
from rooflab.measure.dtypes import torch_dtype
from rooflab.measure.timer import capture_graph, l2_flusher, overhead, time_call
from rooflab.roofline import Roof
from rooflab.units import si

MISS = 1.25  # a component whose kernel time is over 1.25x its prediction gets an explanation


def _component_names(layer, family: str) -> dict[str, str]:
    names = {}
    for path, _ in layer.named_modules():
        comp = hf.component_of(path, family)
        if comp:
            names[path] = comp
    return names


def predict(records: list[count.OpRecord], ceil: Ceilings, dtype: str, costs: OC.OpCosts,
            family: str, kv_past: int = 0) -> dict[str, dict]:
    """Per component (via the module each op ran under): predict.py's sums, and what explain()
    reads: the ops, those on the generic loop, the kinds of attention kernel, the bytes of a
    cache concatenated whole."""
    times = PR.op_times(records, Roof.from_ceilings(ceil, dtype), costs)
    key = PR.by_component(family)
    out = PR.group(times, key)
    for d in out.values():
        d.update(ops=[], generic=[], cache_copy_bytes=0, attention_kinds=[])
    for t in times:
        r, d = t.record, out[key(t.record)]
        d["ops"].append(r.op)
        kind = OC.attention_kind(r, costs.sm_count)
        if kind and kind not in d["attention_kinds"]:
            d["attention_kinds"].append(kind)
        if t.cls == "generic":
            d["generic"].append(f"{r.op} ({OC.path(r)})")
        if r.op == "cat" and kv_past and any(len(s) == 4 and s[-2] == kv_past for s in r.shapes):
            d["cache_copy_bytes"] += r.bytes  # cat(past K/V, new K/V): the whole cache moves
    return out


def by_op(records: list[count.OpRecord], ceil: Ceilings, dtype: str, costs: OC.OpCosts,
          prof: P.ProfileResult) -> list[dict]:
    """Counted ops grouped by op and shapes, each with its class, predicted time and the
    profiled kernel time and launches of the same op and shapes (None where the profile has no
    such op, e.g. inside a CUDA graph); slowest measured first. An op predicted as one kernel a
    call that launches more (a split-K GEMM's reduction, a backend's helper kernels) shows it as
    launches above calls."""
    times = PR.op_times(records, Roof.from_ceilings(ceil, dtype), costs)
    first, elements = {}, {}
    for t in times:
        key = PR.by_op(t.record)
        first.setdefault(key, t.record)
        elements[key] = elements.get(key, 0) + t.record.out_elements
    rows = []
    for key, d in PR.group(times, PR.by_op).items():
        us, n = prof.by_op_us.get(key), prof.by_op_launches.get(key)
        rows.append({"op": key, "class": OC.op_class(first[key]), "path": OC.path(first[key]),
                     "calls": d["kernels"], "bytes": d["bytes"], "elements": elements[key],
                     "predicted_s": d["predicted_s"],
                     "kernel_s": us / prof.iters / 1e6 if us is not None else None,
                     "launches": n / prof.iters if n is not None else None})
    return sorted(rows, key=lambda d: -(d["kernel_s"] or 0))


def explain(comp: str, d: dict, costs: OC.OpCosts, tokens: int, measured_s: float,
            ceil: Ceilings, dtype: str) -> str:
    """Why a component's kernels took longer than predicted, from its counted ops and how far
    they got towards the measured ceilings."""
    peak = Roof.from_ceilings(ceil, dtype).peak_flops_per_s
    reasons = []
    if d["cache_copy_bytes"]:
        reasons.append(f"the KV cache is concatenated (copied whole) every step: "
                       f"{d['cache_copy_bytes'] / 1e6:.1f} MB moved by cat")
    if any(op in OC.ATTENTION_OPS for op in d["ops"]):
        kinds = {k: costs.attention[k] for k in d["attention_kinds"] if k in costs.attention}
        reasons.append(f"the fused attention kernel and rope reached "
                       f"{si(d['flops'] / measured_s, 'FLOP/s')}, "
                       f"{d['flops'] / measured_s / peak:.1%} of the measured matmul peak"
                       + (f" (the attention kernel alone, timed on a shape of its kind that "
                          f"fills the device: {OC.attention_summary(kinds)})" if kinds else ""))
    if any(op in OC.MATMUL_OPS for op in d["ops"]) and tokens < 64:
        reasons.append(f"a GEMM with only {tokens} token rows cannot fill the device")
    if d["floors_s"] >= 0.5 * d["predicted_s"]:
        reasons.append(f"its {d['kernels']} kernel(s) are near their measured floors "
                       f"({d['floors_s'] * 1e6:.1f} us in all)")
    if d["kernels"] > 3 and not any(op in OC.MATMUL_OPS for op in d["ops"]):
        reasons.append(f"{d['kernels']} separate elementwise/reduction kernels, each "
                       "round-tripping memory (unfused)")
    if d["generic"]:
        reasons.append(f"{len(d['generic'])} op(s) take PyTorch's generic (non-vectorized) "
                       f"elementwise loop: {', '.join(sorted(set(d['generic'])))}")
    ridge = peak / ceil.mem_bandwidth_bytes_per_s  # the measured ridge, FLOP/byte
    if not d["flops"] or d["flops"] / d["bytes"] < ridge:  # memory-bound on this device
        reasons.append(f"moved {d['bytes'] / 1e6:.1f} MB at "
                       f"{d['bytes'] / measured_s / 1e9:.0f} GB/s, "
                       f"{d['bytes'] / measured_s / ceil.mem_bandwidth_bytes_per_s:.0%} of the "
                       "measured copy bandwidth")
    return "; ".join(reasons) or "no counted-op explanation: see the trace"


def measure_layer(cfg: M.ModelConfig, phase: M.Phase, layer_type: str, ceil: Ceilings,
            device: str, graph: bool = False, costs: OC.OpCosts | None = None,
            trace_path: str | None = None, dtype: str | None = None) -> dict:
    """One configuration: wall time, profiled kernel time and the prediction, per component."""
    tdtype = torch_dtype(dtype or cfg.dtype)
    layer, _ = hf.build_layer(cfg, layer_type, device, dtype=tdtype, attn="sdpa")
    cold = torch.device(device).type == "cuda"  # a CPU's caches are not flushed
    call = hf.prepare(cfg, layer_type, phase, device, cache="static" if graph else "concat",
                      layer=layer)
    costs = costs or OC.measure_op_costs(device)
    with torch.no_grad(), count.Counter(layer) as counter:  # no_grad: composites decompose
        call()
    OC.measure_rates(costs, counter.records, device)
    with torch.inference_mode():
        wall = time_call(call, warmup=3, budget_s=0.3, device=device, cuda_graph=graph,
                         flush_l2=cold, name=f"{phase.kind} layer")
        flush = l2_flusher(device, cold) if cold else None
        if graph:
            fn = capture_graph(call)
            prof = P.profile(fn, iters=5, warmup=1, device=device, trace_path=trace_path,
                             between=flush)
        else:
            with P.annotate_modules(layer, _component_names(layer, cfg.family)):
                prof = P.profile(call, iters=5, warmup=1, device=device, trace_path=trace_path,
                                 between=flush)
    kv_past = (min(phase.kv_len, cfg.sliding_window) if layer_type == "sliding" and
               cfg.sliding_window else phase.kv_len) - 1 if phase.kind == "decode" else 0
    per = predict(counter.records, ceil, dtype or cfg.dtype, costs, cfg.family, kv_past)
    kernel_s = prof.device_time_us / prof.iters / 1e6
    predicted_s = sum(d["predicted_s"] for d in per.values())
    roofline_s = sum(d["roofline_s"] for d in per.values())
    ops = by_op(counter.records, ceil, dtype or cfg.dtype, costs, prof)
    comps = []
    for comp, d in per.items():
        measured = prof.by_annotation_us.get(comp)
        m_s = measured / prof.iters / 1e6 if measured is not None else None
        row = {"component": comp, "kernels_counted": d["kernels"], "flops": d["flops"],
               "bytes": d["bytes"], "predicted_s": d["predicted_s"],
               "roofline_s": d["roofline_s"], "kernel_s": m_s,
               "generic_ops": len(d["generic"]), "cache_copy_bytes": d["cache_copy_bytes"]}
        row["top_kernels"] = prof.annotation_kernels.get(comp, [])[:4]
        if m_s is not None and m_s > MISS * d["predicted_s"]:
            row["why"] = explain(comp, d, costs, phase.tokens, m_s, ceil, dtype or cfg.dtype)
        comps.append(row)
    return {
        "model": cfg.name, "layer_type": layer_type, "phase": phase.kind, "batch": phase.batch,
        "seq": phase.seq, "kv_len": phase.kv_len, "mode": "cuda_graph" if graph else "eager",
        "dtype": dtype or cfg.dtype, "device": device,
        "wall_s": wall.wall_s if wall.wall_s is not None else wall.device_s,
        "device_s": wall.device_s, "device_cv": wall.cv, "device_unstable": wall.unstable,
        "kernel_s": kernel_s,
        "predicted_s": predicted_s, "roofline_s": roofline_s, "op_costs": costs.as_dict(),
        "rests_on": PR.basis(ceil, costs, counter.records),
        "predicted_over_kernel": predicted_s / kernel_s if kernel_s else None,
        **overhead(wall.wall_s if wall.wall_s is not None else wall.device_s, kernel_s),
        "launches_per_iter": prof.launches_per_iter,
        "kernels_counted": sum(d["kernels"] for d in per.values()),
        "timeline": prof.timeline, "components": comps, "ops": ops,
        "ops_matched_s": sum(o["kernel_s"] or 0 for o in ops), "notes": prof.notes,
        "trace_path": prof.trace_path, "l2_flushed": cold,
    }

