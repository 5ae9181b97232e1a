"""Counted ops and measured op costs -> predicted time. The one place a prediction is made.

Every counted op that moves bytes is one kernel (a view moves none). Its predicted time is
measure.op_classes' cost on a measured roof: the roofline time on the ceilings (or the rate
measured for its kind of attention kernel), the generic elementwise loop's element rate where
the op takes that path, plus the measured floor of a tiny kernel of its class. ``roofline_s``
beside it is the plain roofline (no floors, one bandwidth), to show what the rest adds. A
whole-model prediction adds ``gap_s`` once per kernel: the device's idle time between two kernels
of a CUDA-graph replay, read from a replay's trace (op_classes.graph_gap_s).

Views group the same op times by a key: by_op (op and shapes, as the profiler names kernels'
ops), by_module (the module the op ran under), by_layer (layer i, embedding, lm_head, final
norm) and by_component(family) (q_proj, attention core, mlp, ...).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from rooflab import hf, roofline
from rooflab.count import OpRecord
from rooflab.measure import op_classes as OC
from rooflab.measure.profile import op_key
from rooflab.roofline import Roof

SUMS = ("kernels", "macs", "flops", "bytes", "kernels_s", "predicted_s", "roofline_s", "floors_s")


@dataclass(frozen=True)
class OpTime:
    """One kernel: its counted op, its class and its predicted times."""

    record: OpRecord
    cls: str
    predicted_s: float   # floor + the time at its class's rate
    roofline_s: float    # max(FLOPs / peak, bytes / bandwidth)
    floor_s: float       # the measured floor of a tiny kernel of its class


def op_times(records: list[OpRecord], roof: Roof, costs: OC.OpCosts | None) -> list[OpTime]:
    """Each counted op that moves bytes, costed on ``roof`` (a measured one: Roof.from_ceilings);
    without ``costs``, on the plain roofline alone (no floors, no class rates)."""
    out = []
    for r in records:
        if not r.bytes:
            continue  # a view: no kernel
        floor = roofline.time_floor_s(roof, r.flops, r.bytes)
        cls = OC.op_class(r)
        out.append(OpTime(r, cls, costs.predict_s(r, roof.peak_flops_per_s,
                                                  roof.mem_bandwidth_bytes_per_s)
                          if costs else floor, floor, costs.floor(r) if costs else 0.0))
    return out


def group(times: list[OpTime], key: Callable[[OpRecord], str], gap_s: float = 0.0
          ) -> dict[str, dict]:
    """Sums per key: kernels, MACs, FLOPs, bytes, kernels_s (the kernels alone), predicted_s
    (and ``gap_s`` a kernel), roofline_s and floors_s; in the order the keys first ran."""
    out: dict[str, dict] = {}
    for t in times:
        d = out.setdefault(key(t.record), dict.fromkeys(SUMS, 0))
        r = t.record
        for k, v in (("kernels", 1), ("macs", r.macs), ("flops", r.flops), ("bytes", r.bytes),
                     ("kernels_s", t.predicted_s), ("predicted_s", t.predicted_s + gap_s),
                     ("roofline_s", t.roofline_s), ("floors_s", t.floor_s)):
            d[k] += v
    return out


def total(groups: dict[str, dict]) -> dict:
    return {k: sum(d[k] for d in groups.values()) for k in SUMS}


# ops whose indices come as a list of optional tensors, whose shapes the profiler does not record
_INDEX_LISTS = {"index": lambda s: s[:1], "index_put_": lambda s: [s[0], s[-1]],
                "index_put": lambda s: [s[0], s[-1]]}


def by_op(r: OpRecord) -> str:
    """The op and the shapes of its tensor arguments as the profiler records them."""
    return op_key(r.op, _INDEX_LISTS.get(r.op, list)(r.shapes))


def by_module(r: OpRecord) -> str:
    return r.module


def by_layer(r: OpRecord) -> str:
    m = re.search(r"layers\.(\d+)\.", r.module + ".")
    if m:
        return f"layer {m.group(1)}"
    for key, name in (("embed", "embedding"), ("lm_head", "lm_head"), ("norm", "final norm")):
        if key in r.module:
            return name
    return "other"


def by_component(family: str) -> Callable[[OpRecord], str]:
    return lambda r: hf.component_of(r.module, family) or f"other ({r.module})"


def basis(ceilings, costs: OC.OpCosts, records: list[OpRecord] | None = None) -> dict:
    """What a prediction rests on, rate by rate, so that it can be told from a fit: the
    ceilings (measured this run, or cached and checked by a probe), the op floors and element
    rates (measured this run), each kind of attention kernel and grouped GEMM (timed this run on
    a reference shape, or the roofline's ceilings where its reference could not run), the GEMM
    shapes profiled alone, and the top-k, sorts, few-row reductions and GEMMs timed alone; with
    ``records``, only the kinds and shapes they hold (costs shared by several models list every
    model's)."""
    def used(store: dict, key_of) -> dict:
        keys = None if records is None else {key_of(r) for r in records}
        return {k: v for k, v in store.items() if keys is None or k in keys}

    def timed(rates: dict[str, dict]) -> dict[str, str]:
        return {k: (f"timed this run on {a['reference']}" if "bound" in a else
                    f"the roofline's ceilings ({a.get('error', 'not measured')})")
                for k, a in sorted(rates.items())}

    attention = used(costs.attention, lambda r: OC.attention_kind(r, costs.sm_count))
    grouped = used(costs.grouped, OC.grouped_kind)
    gemms = used(costs.gemm_extra_s, OC.gemm_kind)
    alone = used(costs.alone_s, OC.alone_kind)
    out = {"ceilings": (f"cached from {ceilings.date}, checked by a short probe this run"
                        if ceilings.cached else f"measured this run ({ceilings.date})"),
           "op_costs": f"kernel floors and element rates measured this run on {costs.device}",
           "attention": timed(attention)}
    if grouped:
        out["grouped"] = timed(grouped)
    if gemms:
        split = sum(s > 0 for s in gemms.values())
        out["gemms"] = (f"{len(gemms)} GEMM shapes profiled alone this run, {split} "
                        f"with kernels beside the main one (a split-K's reduction)")
    if alone:
        out["alone"] = (f"{len(alone)} top-k, sort, few-row reduction and few-row GEMM shapes "
                        f"timed alone this run")
    return out
