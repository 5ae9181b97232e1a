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
    roof = R.Roof.from_ceilings(ceilings, dtype)
    try:
        with torch.no_grad(), count.Counter(module) as counter:
            module(*inputs)
    except Exception as e:  # noqa: BLE001 - the module does not take these inputs: the user's
        raise TargetError(f"{type(module).__name__} on inputs "
                          f"{', '.join(str(tuple(t.shape)) for t in inputs)} raised "
                          f"{type(e).__name__}: {e}") from None
    measured: dict[str, float] = {}
    by_module_us: dict[str, float] = {}
    total_measured = None
    if profile:
        names = {path: path for path, _ in module.named_modules() if path}
        with torch.no_grad(), P.annotate_modules(module, names):
            prof = P.profile(module, *inputs, iters=iters, warmup=2, device=device)
        measured = {k: us / prof.iters / 1e6 for k, us in prof.by_op_us.items()}
        by_module_us = {k: us / prof.iters for k, us in prof.by_annotation_us.items()}
        total_measured = prof.device_time_us / prof.iters / 1e6

    times = PR.op_times(counter.records, roof, None)
    modules_of: dict[str, dict] = {}  # op -> the modules it ran under, in order, once each
    for t in times:
        modules_of.setdefault(PR.by_op(t.record), {})[t.record.module] = None
    ops = {key: {"op": key, "calls": d["kernels"], "macs": d["macs"], "flops": d["flops"],
                 "bytes": d["bytes"], "modules": list(modules_of[key])}
           for key, d in PR.group(times, PR.by_op).items()}
    for d in ops.values():
        d["intensity"] = d["flops"] / d["bytes"]
        d["measured_s"] = measured.get(d["op"])
    # the roof this run's ops respect: raised where the cached ceilings were slow, and every op
    # left above it with its reason (the on-chip cache, noise)
    roof, roof_notes, why = R.hold(roof, [(d["op"], d["intensity"], d["flops"] / d["measured_s"],
                                           d["bytes"]) for d in ops.values() if d["measured_s"]],
                                   ceilings.cache_bytes)
    for d in ops.values():
        d["bound"] = R.bound(roof, d["intensity"])
        d["floor_s"] = R.time_floor_s(roof, d["flops"], d["bytes"])
        if d["measured_s"]:
            d["achieved_flops_per_s"] = d["flops"] / d["measured_s"]
            d["achieved_bytes_per_s"] = d["bytes"] / d["measured_s"]
            d["fraction_of_roof"] = d["floor_s"] / d["measured_s"]
            d["lost_s"] = d["measured_s"] - d["floor_s"]
            if d["op"] in why:
                d["above_roof"] = why[d["op"]]
    rows = sorted(ops.values(), key=lambda d: -(d.get("lost_s") or 0))

    tree: dict[str, dict] = defaultdict(lambda: {"macs": 0, "flops": 0, "bytes": 0, "ops": 0})
    for r in counter.records:
        parts = r.module.split(".") if r.module else []
        for depth in range(len(parts) + 1):
            node = tree[".".join(parts[:depth])]
            node["macs"] += r.macs
            node["flops"] += r.flops
            node["bytes"] += r.bytes
            node["ops"] += r.bytes > 0
    kinds = {path: type(m).__name__ for path, m in module.named_modules()}
    modules = []
    for path in sorted(tree, key=lambda p: [n for n in p.split(".")] if p else []):
        node = {"module": path or "(root)", "type": kinds.get(path, ""),
                "depth": path.count(".") + 1 if path else 0, **tree[path]}
        if profile:  # each kernel counts in the innermost module around it; roll up
            node["measured_s"] = total_measured if not path else sum(
                us for name, us in by_module_us.items()
                if name == path or name.startswith(path + ".")) / 1e6
        modules.append(node)
    return {
        "module": type(module).__name__, "device": device, "dtype": dtype,
        "inputs": [list(t.shape) for t in inputs],
        "roof": {"label": roof.label, "peak_flops_per_s": roof.peak_flops_per_s,
                 "mem_bandwidth_bytes_per_s": roof.mem_bandwidth_bytes_per_s,
                 "ridge": roof.ridge, "measured": True},
        "total": {"macs": counter.total_macs, "flops": counter.total_flops,
                  "bytes": counter.total_bytes,
                  "floor_s": sum(d["floor_s"] for d in ops.values()),
                  "measured_s": total_measured,
                  "ops_matched_s": sum(d["measured_s"] or 0 for d in ops.values())},
        "ops": rows, "modules": modules, "unsupported_ops": counter.unsupported_ops(),
        "roof_notes": roof_notes,
    }

