"""Your own module, op by op: counted FLOPs and bytes (the dispatch counter), profiled time (the
profiler, per op and shapes), each op placed on this device's measured roofline, sorted by the
time it loses against its roof; and per module, a tree with roll-ups (like FlopCounterMode's).

    rooflab analyze my_model.py:build      # build() returns (module, (tensor, ...))
    analyze(module, inputs, device="cuda") # the Python API

An op's roof is its floor on the measured ceilings: max(FLOPs / peak, bytes / bandwidth). What
it takes beyond that is "lost": launch and fixed costs, a kernel that does not reach the roof, or
bytes counted as moved once that the kernel moves more often.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from collections import defaultdict

import torch

from rooflab import count
from rooflab import predict as PR
from rooflab import roofline as R
from rooflab.errors import RooflabError
from rooflab.measure import profile as P
from rooflab.cost import dtype_name


class TargetError(RooflabError):
    """FILE.py:FUNCTION cannot be loaded, or FUNCTION does not return (module, inputs)."""


def load_target(spec: str):
    """(module, inputs) from 'path/to/file.py:function'."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not func:
        raise TargetError(f"expected FILE.py:FUNCTION, got {spec!r}")
    if not os.path.isfile(path):
        raise TargetError(f"no such file: {path}")
    mod_spec = importlib.util.spec_from_file_location("rooflab_target", path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # its own imports resolve
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: its error, in one line
        raise TargetError(f"{path} failed to import: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise TargetError(f"{path} has no function {func!r}")
    try:
        got = fn()
    except Exception as e:  # noqa: BLE001 - the user's function: its error, in one line
        raise TargetError(f"{spec}: {func}() raised {type(e).__name__}: {e}") from None
    if (not isinstance(got, tuple) or len(got) != 2 or not isinstance(got[0], torch.nn.Module)
            or not isinstance(got[1], (tuple, list))
            or not all(isinstance(t, torch.Tensor) for t in got[1])):
        raise TargetError(f"{func}() must return (torch.nn.Module, (tensor, ...)); got "
                          f"{type(got).__name__}")
    return got[0], tuple(got[1])


def analyze(module: torch.nn.Module, inputs, device: str = "cpu", ceilings=None,
            profile: bool = True, iters: int = 5) -> dict:
    """Counted, profiled and placed: see the module docstring. ``ceilings``: this device's
    measured ceilings (measure.ceilings.get(device) when None)."""
    if ceilings is None:
        from rooflab.measure import ceilings as CE
        ceilings = CE.get(device)
    module = module.to(device).eval()
    inputs = tuple(t.to(device) for t in inputs)
    params = [p for p in module.parameters()] or list(inputs)
    dtype = dtype_name(str(params[0].dtype))
    counter = _count(module, inputs)
    prof = _profile(module, inputs, device, iters) if profile else None
    measured_roof = R.Roof.from_ceilings(ceilings, dtype)
    ops = _ops(counter.records, measured_roof, prof["by_op_s"] if prof else {},
               set(counter.unsupported_ops()))
    counted = [d for d in ops if d["counted"]]  # an op with no formula is never on a roof
    # the roof this run's ops respect: raised where the cached ceilings were slow, and every op
    # left above it with its reason (the on-chip cache, noise)
    roof, roof_notes, why = R.hold(measured_roof,
                                   [(d["op"], d["intensity"], d["flops"] / d["measured_s"],
                                     d["bytes"]) for d in counted if d["measured_s"]],
                                   ceilings.cache_bytes)
    for d in counted:
        _place(d, roof, why)
    total_measured = prof["total_s"] if prof else None
    no_formula_s = sum(d["measured_s"] or 0 for d in ops if not d["counted"])
    return {
        "module": type(module).__name__, "device": device, "dtype": dtype,
        "inputs": [list(t.shape) for t in inputs],
        "roof": {"label": roof.label, "peak_flops_per_s": roof.peak_flops_per_s,
                 "mem_bandwidth_bytes_per_s": roof.mem_bandwidth_bytes_per_s,
                 "ridge": roof.ridge, "measured": True},
        "total": {"macs": counter.total_macs, "flops": counter.total_flops,
                  "bytes": counter.total_bytes, "floor_s": sum(d["floor_s"] for d in counted),
                  "measured_s": total_measured,
                  "ops_matched_s": sum(d["measured_s"] or 0 for d in ops),
                  # every op has a formula; where not, the share of the time they took
                  "complete": not counter.unsupported_ops(),
                  "no_formula_measured_s": no_formula_s if prof else None,
                  "no_formula_share": no_formula_s / total_measured if total_measured else None},
        "ops": sorted(ops, key=lambda d: -(d.get("lost_s") or 0)),
        "modules": _module_tree(module, counter.records, prof),
        "unsupported_ops": counter.unsupported_ops(), "roof_notes": roof_notes,
    }


def _count(module, inputs) -> count.Counter:
    try:
        with torch.no_grad(), count.Counter(module) as counter:
            module(*inputs)
    except Exception as e:  # noqa: BLE001 - the module does not take these inputs: the user's
        raise TargetError(f"{type(module).__name__} on inputs "
                          f"{', '.join(str(tuple(t.shape)) for t in inputs)} raised "
                          f"{type(e).__name__}: {e}") from None
    return counter


def _profile(module, inputs, device: str, iters: int) -> dict:
    """Seconds a call: per op and shapes, per module (innermost), in all."""
    names = {path: path for path, _ in module.named_modules() if path}
    with torch.no_grad(), P.annotate_modules(module, names):
        prof = P.profile(module, *inputs, iters=iters, warmup=2, device=device)
    return {"by_op_s": {k: us / prof.iters / 1e6 for k, us in prof.by_op_us.items()},
            "by_module_s": {k: us / prof.iters / 1e6 for k, us in prof.by_annotation_us.items()},
            "total_s": prof.device_time_us / prof.iters / 1e6}


def _ops(records, roof: R.Roof, measured: dict[str, float], no_formula: set[str]) -> list[dict]:
    """The counted ops by op and shapes (predict.by_op), with their profiled seconds; those
    the counter has no formula for say so (``counted``: False)."""
    times = PR.op_times(records, roof, None)
    modules_of: dict[str, dict] = {}  # op -> the modules it ran under, in order, once each
    name_of: dict[str, str] = {}
    for t in times:
        modules_of.setdefault(PR.by_op(t.record), {})[t.record.module] = None
        name_of[PR.by_op(t.record)] = t.record.op
    return [{"op": key, "calls": d["kernels"], "macs": d["macs"], "flops": d["flops"],
             "bytes": d["bytes"], "modules": list(modules_of[key]),
             "intensity": d["flops"] / d["bytes"], "measured_s": measured.get(key),
             "counted": name_of[key] not in no_formula}
            for key, d in PR.group(times, PR.by_op).items()]


def _place(d: dict, roof: R.Roof, why: dict[str, str]) -> None:
    """An op on the run's roof: its bound and floor, and where profiled, what it reached."""
    d["bound"] = R.bound(roof, d["intensity"])
    d["floor_s"] = R.time_floor_s(roof, d["flops"], d["bytes"])
    if d["measured_s"]:
        d["achieved_flops_per_s"] = d["flops"] / d["measured_s"]
        d["achieved_bytes_per_s"] = d["bytes"] / d["measured_s"]
        d["fraction_of_roof"] = d["floor_s"] / d["measured_s"]
        d["lost_s"] = d["measured_s"] - d["floor_s"]
        if d["op"] in why:
            d["above_roof"] = why[d["op"]]


def _module_tree(module, records, prof: dict | None) -> list[dict]:
    """Every module with the counts of the ops under it, rolled up, and its profiled time
    (each kernel counts in the innermost module around it)."""
    tree: dict[str, dict] = defaultdict(lambda: {"macs": 0, "flops": 0, "bytes": 0, "ops": 0})
    for r in records:
        parts = r.module.split(".") if r.module else []
        for depth in range(len(parts) + 1):
            node = tree[".".join(parts[:depth])]
            node["macs"] += r.macs
            node["flops"] += r.flops
            node["bytes"] += r.bytes
            node["ops"] += r.bytes > 0
    kinds = {path: type(m).__name__ for path, m in module.named_modules()}
    out = []
    for path in sorted(tree, key=lambda p: p.split(".") if p else []):
        node = {"module": path or "(root)", "type": kinds.get(path, ""),
                "depth": path.count(".") + 1 if path else 0, **tree[path]}
        if prof:
            node["measured_s"] = prof["total_s"] if not path else sum(
                s for name, s in prof["by_module_s"].items()
                if name == path or name.startswith(path + "."))
        out.append(node)
    return out
