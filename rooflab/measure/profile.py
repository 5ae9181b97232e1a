"""The profiler recipe: one wrapper over torch.profiler, read back from its Chrome trace.

The trace is the source of truth (as HTA reads it): kernels ("kernel" events on the GPU timeline),
the runtime calls that launched them ("cuda_runtime", same "correlation" id) and the aten ops
("cpu_op") and user ranges ("user_annotation") that enclose those calls on the CPU thread. From it:
a kernel table, each aten op's kernels ("which kernel does torch.matmul call"), kernel
categories, launch counts, and the idle gaps between kernels on the timeline. On CPU there are no
kernels: the leaf aten ops take their place.
"""
from __future__ import annotations

import bisect
import contextlib
import gzip
import json
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from rooflab.measure.timer import _call, _check, device_of

ANNOTATION_PREFIX = "rooflab::"
UNTIMED = ANNOTATION_PREFIX + "(untimed)"  # what runs between profiled calls (an L2 flush)

# First match wins. Names are matched lower-cased.
CATEGORY_RULES: list[tuple[str, re.Pattern]] = [
    ("memcpy/memset", re.compile(r"memcpy|memset|copy_kernel|catarray|fill_kernel|\bcopy\b")),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|mha")),
    ("gemm", re.compile(r"gemm|gemv|cutlass|cublas|nvjet|xmma|wgmma|matmul|splitk|triton_tem|"
                        r"triton_mm|aten::(mm|addmm|bmm|baddbmm|linear)\b")),
    ("reduction/norm", re.compile(r"reduce|norm|softmax|welford|rms|sum|mean|amax|triton_red|"
                                  r"triton_per|logsumexp")),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi|gelu|tanh|"
                               r"silu|sigmoid|aten::(add|mul|sub|div|pow|exp|neg|rsqrt)")),
]


def categorize(kernel_name: str) -> str:
    """gemm, elementwise, reduction/norm, attention, memcpy/memset or other."""
    n = kernel_name.lower()
    for cat, rx in CATEGORY_RULES:
        if rx.search(n):
            return cat
    return "other"


@dataclass
class KernelRow:
    name: str
    category: str
    calls: int
    total_us: float
    mean_us: float
    share: float  # of device (kernel) time

    def as_dict(self) -> dict:
        return {"name": self.name, "category": self.category, "calls": self.calls,
                "total_us": self.total_us, "mean_us": self.mean_us, "share": self.share}


@dataclass
class ProfileResult:
    device: str
    iters: int
    kernels: list[KernelRow]
    op_kernels: dict[str, list[str]]  # aten op -> names of the kernels it launched
    by_category_us: dict[str, float]
    by_annotation_us: dict[str, float]  # user range (e.g. a component) -> device time
    launches: int
    device_time_us: float
    timeline: dict  # span_us, busy_us, idle_us, gaps (count), largest_gap_us
    notes: list[str] = field(default_factory=list)
    trace_path: str | None = None
    annotation_kernels: dict[str, list] = field(default_factory=dict)  # range -> [name, us]
    by_op_us: dict[str, float] = field(default_factory=dict)  # op_key -> device time
    by_op_launches: dict[str, int] = field(default_factory=dict)  # op_key -> kernels launched

    @property
    def launches_per_iter(self) -> float:
        return self.launches / self.iters

    def as_dict(self) -> dict:
        return {"device": self.device, "iters": self.iters, "launches": self.launches,
                "launches_per_iter": self.launches_per_iter,
                "device_time_us": self.device_time_us,
                "device_time_per_iter_us": self.device_time_us / self.iters,
                "kernels": [k.as_dict() for k in self.kernels], "op_kernels": self.op_kernels,
                "by_category_us": self.by_category_us, "by_annotation_us": self.by_annotation_us,
                "timeline": self.timeline, "notes": self.notes, "trace_path": self.trace_path}


def op_key(name: str, dims) -> str:
    """An op and the shapes of its tensor arguments, as the profiler and the counter both see
    them: 'mm(16384x640,640x1024)'. The namespace is left out (the profiler's 'aten::mm' or
    'rooflab::flash_decoding', the counter's 'mm' or 'flash_decoding'), and so are non-tensor
    and 0-dim arguments."""
    flat = []
    for d in dims:  # a tensor list (cat's) comes as a list of shapes
        flat += d if d and isinstance(d[0], (list, tuple)) else [d]
    shapes = ",".join("x".join(str(n) for n in d) for d in flat if d)
    return f"{name.split('::')[-1]}({shapes})"


def load_trace(path: str) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _complete(events, cat: str) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == cat and "dur" in e]


def _contains(r: dict, ts) -> bool:
    return r["ts"] <= ts <= r["ts"] + r["dur"]


class _Enclosing:
    """Enclosing CPU ranges (cpu_op or user_annotation) of a point on one thread. A thread's
    ranges nest, so each has a parent (the innermost range open at its start) and a point's
    ranges are the last one to start before it, or its nearest ancestor that contains the
    point, and that one's ancestors: a lookup walks the nesting, not every earlier range."""

    def __init__(self, ranges: list[dict]):
        self.by_tid = defaultdict(list)
        for r in ranges:
            self.by_tid[r.get("tid")].append(r)
        self.parent = {}
        for tid, rs in self.by_tid.items():
            rs.sort(key=lambda r: (r["ts"], -r["dur"]))  # an outer range before its first child
            parent, open_ = [], []
            for j, r in enumerate(rs):
                while open_ and rs[open_[-1]]["ts"] + rs[open_[-1]]["dur"] < r["ts"]:
                    open_.pop()
                parent.append(open_[-1] if open_ else -1)
                open_.append(j)
            self.parent[tid] = parent
        self.starts = {t: [r["ts"] for r in rs] for t, rs in self.by_tid.items()}

    def chain(self, tid, ts) -> list[dict]:
        """All ranges on ``tid`` that contain ``ts``, outermost first."""
        rs, parent = self.by_tid.get(tid, []), self.parent.get(tid, [])
        i = bisect.bisect_right(self.starts.get(tid, []), ts) - 1
        while i >= 0 and not _contains(rs[i], ts):
            i = parent[i]
        out = []
        while i >= 0:
            out.append(rs[i])
            i = parent[i]
        return [r for r in reversed(out) if _contains(r, ts)]  # a range that only overlapped


TRIVIAL_OPS = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resolve_conj",
               "aten::resolve_neg", "aten::view", "aten::as_strided", "aten::expand",
               "aten::transpose", "aten::t", "aten::reshape", "aten::_reshape_alias",
               "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::permute",
               "aten::detach", "aten::alias", "aten::lift_fresh", "aten::_unsafe_view"}


def _self_time_ops(ops: list[dict]) -> list[dict]:
    """On CPU, each op that does work, with its self time (its duration less that of the
    non-trivial ops nested in it) as "dur": the CPU's counterpart of a kernel."""
    out = []
    by_tid = defaultdict(list)
    for op in ops:
        if op["name"] not in TRIVIAL_OPS:
            by_tid[op.get("tid")].append(op)
    for rs in by_tid.values():
        rs.sort(key=lambda r: (r["ts"], -r["dur"]))
        stack: list[dict] = []
        for r in rs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= r["ts"]:
                stack.pop()
            mine = {**r, "self": float(r["dur"])}
            if stack:
                stack[-1]["self"] -= r["dur"]
            stack.append(mine)
            out.append(mine)
    return [{**o, "dur": max(o.pop("self"), 0.0)} for o in out
            if o["self"] > 0 and _is_cpu_work(o)]


def _is_cpu_work(op: dict) -> bool:
    """A namespaced op (aten::, mkldnn::) on real tensors, or inductor's compiled code; not
    framework bookkeeping (dynamo cache lookups, wrappers) nor conversions of Python scalars."""
    name = op["name"]
    if name.startswith("inductor compiled graph"):
        return True
    if "::" not in name:
        return False
    dims = op.get("args", {}).get("Input Dims")
    return not (dims and all(d in ([], None) for d in dims))


def _timeline(kernels: list[dict], gap_min_us: float = 1.0, untimed: list[dict] = ()) -> dict:
    """The kernels' span, busy and idle time and gaps; ``untimed`` kernels (run between profiled
    calls) fill their place in the stream, neither idle nor counted."""
    if not kernels:
        return {"span_us": 0.0, "busy_us": 0.0, "idle_us": 0.0, "gaps": 0, "largest_gap_us": 0.0}
    left_out = sum(float(k["dur"]) for k in untimed)
    ks = sorted([*kernels, *untimed], key=lambda e: e["ts"])
    busy, end, gaps, largest = 0.0, ks[0]["ts"], 0, 0.0
    for k in ks:
        s, e = k["ts"], k["ts"] + k["dur"]
        if s > end:
            gap = s - end
            gaps += gap >= gap_min_us
            largest = max(largest, gap)
        busy += max(0.0, e - max(s, end))
        end = max(end, e)
    span, busy = end - ks[0]["ts"] - left_out, busy - left_out
    return {"span_us": span, "busy_us": busy, "idle_us": span - busy, "gaps": gaps,
            "largest_gap_us": largest}


def analyze_trace(events: list[dict], device: str = "cuda", iters: int = 1) -> ProfileResult:
    """Everything the recipe reports, from Chrome-trace events."""
    cpu_ops = _complete(events, "cpu_op")
    annotations = [e for e in _complete(events, "user_annotation")
                   if e["name"].startswith(ANNOTATION_PREFIX)]
    kernels = _complete(events, "kernel") + [e for e in _complete(events, "gpu_memcpy")] + \
        [e for e in _complete(events, "gpu_memset")]
    notes = []
    if not kernels:  # CPU: leaf aten ops stand in for kernels
        compiled = [{**a, "name": "inductor compiled graph (generated C++)"}
                    for a in _complete(events, "user_annotation")
                    if a["name"].startswith("## Call CompiledFxGraph")]
        kernels = _self_time_ops(cpu_ops + compiled)
        launchers = {id(k): k for k in kernels}
        notes.append("CPU trace: no device kernels; each aten op's self time is listed instead")
    else:
        # cuBLAS on Hopper launches through the driver API (cuLaunchKernelEx): both count
        runtime = {e.get("args", {}).get("correlation"): e
                   for e in _complete(events, "cuda_runtime") + _complete(events, "cuda_driver")}
        launchers = {id(k): runtime.get(k.get("args", {}).get("correlation")) for k in kernels}
    enclosing = _Enclosing(cpu_ops + annotations)
    untimed = [k for k in kernels if launchers.get(id(k)) and any(
        r["name"] == UNTIMED for r in enclosing.chain(launchers[id(k)].get("tid"),
                                                      launchers[id(k)]["ts"]))]
    kernels = [k for k in kernels if id(k) not in {id(u) for u in untimed}]
    table: dict[str, list[float]] = defaultdict(list)
    op_kernels: dict[str, set] = defaultdict(set)
    by_ann: dict[str, float] = defaultdict(float)
    ann_k: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    by_op: dict[str, float] = defaultdict(float)
    launches: dict[str, int] = defaultdict(int)
    for k in kernels:
        table[k["name"]].append(float(k["dur"]))
        launch = launchers.get(id(k))
        if launch is None:
            continue
        chain = enclosing.chain(launch.get("tid"), launch["ts"])
        ops = [r for r in chain if r.get("cat") == "cpu_op"]
        if ops:
            op_kernels[ops[0]["name"]].add(k["name"])  # outermost op: what the user called
        # every op on the way down (aten::to -> aten::_to_copy -> aten::copy_) gets the time,
        # so a counted op finds its kernels whichever level of dispatch it was recorded at
        for key in {op_key(r["name"], r.get("args", {}).get("Input Dims") or []) for r in ops}:
            by_op[key] += float(k["dur"])
            launches[key] += 1
        anns = [r for r in chain if r.get("cat") == "user_annotation"]
        if anns:
            ann = anns[-1]["name"][len(ANNOTATION_PREFIX):]
            by_ann[ann] += float(k["dur"])
            ann_k[ann][k["name"]] += float(k["dur"])
    total = sum(sum(v) for v in table.values()) or 1.0
    rows = sorted((KernelRow(n, categorize(n), len(v), sum(v), sum(v) / len(v), sum(v) / total)
                   for n, v in table.items()), key=lambda r: -r.total_us)
    by_cat: dict[str, float] = defaultdict(float)
    for r in rows:
        by_cat[r.category] += r.total_us
    names = " ".join(e.get("name", "") for e in events)
    if "cudaGraphLaunch" in names:
        notes.append("CUDA graph replay: the kernels inside a graph are launched by one "
                     "cudaGraphLaunch, so they are not attributed to aten ops or module ranges")
    if "triton_" in names or "CompiledFunction" in names or "CompiledFxGraph" in names:
        notes.append("torch.compile: generated kernels (triton_*) are attributed to the compiled "
                     "region, not to the aten ops they replaced; fused kernels cover several ops")
    ann_top = {a: sorted(([n[:120], us / iters] for n, us in ks.items()), key=lambda x: -x[1])
               for a, ks in ann_k.items()}
    return ProfileResult(device, iters, rows, {k: sorted(v) for k, v in op_kernels.items()},
                         dict(by_cat), dict(by_ann), sum(r.calls for r in rows),
                         sum(r.total_us for r in rows),
                         _timeline(kernels, untimed=untimed), notes, annotation_kernels=ann_top,
                         by_op_us=dict(by_op), by_op_launches=dict(launches))


@contextlib.contextmanager
def annotate_modules(module: torch.nn.Module, names: dict[str, str]):
    """Wrap each named submodule's forward in a profiler range 'rooflab::<label>'.

    ``names`` maps module paths to labels (e.g. 'self_attn.q_proj' -> 'attn.q_proj').
    """
    hooks, open_ranges = [], {}
    mods = dict(module.named_modules())
    for path, label in names.items():
        m = mods.get(path)
        if m is None:
            continue

        def pre(mod, args, label=label):
            r = torch.profiler.record_function(ANNOTATION_PREFIX + label)
            r.__enter__()
            open_ranges.setdefault(id(mod), []).append(r)

        def post(mod, args, out):
            open_ranges[id(mod)].pop().__exit__(None, None, None)

        hooks += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def profile(fn, *args, iters: int = 3, warmup: int = 2, device: str | None = None,
            trace_path: str | None = None, name: str = "", between=None,
            **kwargs) -> ProfileResult:
    """Profile ``iters`` calls of fn after ``warmup`` untimed ones; keep the trace if asked.
    ``between()`` runs before each call, under the UNTIMED range, whose kernels are left out."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    _check(fn)
    dev = device_of(device)
    for _ in range(warmup):
        _call(fn, args, kwargs, name)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with tprofile(activities=acts, record_shapes=True) as prof:
        for _ in range(iters):
            if between is not None:
                with torch.profiler.record_function(UNTIMED):
                    between()
            _call(fn, args, kwargs, name)
        if dev == "cuda":
            torch.cuda.synchronize()
    path = trace_path
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    prof.export_chrome_trace(path)
    result = analyze_trace(load_trace(path), dev, iters)
    if trace_path is None:
        os.unlink(path)
    else:
        result.trace_path = path
    return result


def augment_trace(path: str, costs: dict[str, dict], out_path: str | None = None) -> str:
    """Add counted FLOPs and bytes (and achieved FLOP/s, GB/s) to matching kernel events.

    ``costs`` maps a kernel name (or a substring of it) to {"flops": int, "bytes": int} per call.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    for e in events:
        if e.get("cat") not in ("kernel", "cpu_op") or not e.get("dur"):
            continue
        match = next((c for key, c in costs.items() if key in e.get("name", "")), None)
        if match:
            secs = e["dur"] / 1e6
            e.setdefault("args", {}).update({
                "rooflab flops": match["flops"], "rooflab bytes": match["bytes"],
                "achieved TFLOP/s": round(match["flops"] / secs / 1e12, 3),
                "achieved GB/s": round(match["bytes"] / secs / 1e9, 1)})
    out_path = out_path or path
    with (gzip.open if str(out_path).endswith(".gz") else open)(out_path, "wt") as f:
        json.dump(data, f)  # a .gz name gets gzip, as load_trace expects
    return out_path
