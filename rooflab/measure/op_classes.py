"""Below the roofline: what one eager kernel of each class costs on this device, measured.

The roofline's two ceilings (matmul FLOP/s, copy bandwidth) are reached by large matmuls and by
contiguous, vectorized elementwise kernels. Two more things decide the time of the many small or
oddly laid-out kernels an eager layer launches, and both are measured here:

- a floor: the device time of a tiny kernel of each class (elementwise, generic, reduction,
  matmul, attention), replayed in a CUDA graph so launch gaps do not hide it;
- the element rate of PyTorch's non-vectorized elementwise loops. TensorIterator runs an op as
  a vectorized kernel only when every operand is dense in the output's order and no input is
  narrower than the output. A broadcast operand (x * rms[..., None]), a transposed or sliced
  one (RoPE on a head-transposed q) or a cat of slices takes its generic loop, which computes an
  offset per element; a widening cast (bf16 -> fp32) takes an unrolled loop that converts per
  element. Both are limited by elements per second rather than by bytes ("generic" below). The
  rate is measured on a broadcast multiply, per element size, and again on a copy from a
  broadcast source (what repeat_kv's expand + reshape runs): the loop computes an offset per
  operand, and a copy has two operands where a multiply has three.

A counted op (count.OpRecord) is predicted to take
    floor[class] + max(flops / peak, bytes / copy bandwidth, elements / generic rate),
the last term for the generic class only.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from rooflab import count
from rooflab.measure import profile as P
from rooflab.measure.timer import capture_graph, time

CLASSES = ("elementwise", "generic", "reduction", "matmul", "attention")
MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "linear", "_scaled_mm", "matmul"}
ATTENTION_OPS = {p.__name__ for p in count.SDPA_OPS}
REDUCTION_OPS = {p.__name__ for p in count.REDUCTIONS} | {"_softmax", "softmax", "_safe_softmax",
                                                           "_log_softmax"}
CONCAT_OPS = {"cat", "stack"}
COPY_OPS = {"clone", "copy_", "contiguous", "_to_copy"}


def op_class(r: count.OpRecord) -> str:
    """The kernel class of a counted op (see the module docstring)."""
    if r.op in MATMUL_OPS:
        return "matmul"
    if r.op in ATTENTION_OPS:
        return "attention"
    if r.op in REDUCTION_OPS:
        return "reduction"
    if r.op in CONCAT_OPS:  # parts of the output, not broadcast: generic only for slices
        return "generic" if r.layout == "strided" else "elementwise"
    if r.layout != "contiguous" or 0 < r.in_itemsize < r.itemsize:  # or a widening cast
        return "generic"
    return "elementwise"


def path(r: count.OpRecord) -> str:
    """Why an elementwise op takes the loop it takes: 'vectorized', or the generic loop's
    reason ('broadcast', 'strided', 'widening'); '' for matmuls, attention and reductions."""
    cls = op_class(r)
    if cls == "generic":
        return r.layout if r.layout != "contiguous" else "widening"
    return "vectorized" if cls == "elementwise" else ""


@dataclass
class OpCosts:
    device: str
    floor_s: dict[str, float]  # class -> device time of one tiny kernel of that class
    generic_elements_per_s: dict[int, float]  # element size (bytes) -> generic-loop rate
    # between two kernels of a CUDA graph the device idles a little (the next one's launch);
    # a stream of n kernels takes the sum of their times plus n of these
    gap_s: float = 0.0
    # element size -> the generic loop's rate on a copy (two operands), where measured
    generic_copy_elements_per_s: dict[int, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def generic_rate(self, itemsize: int, copy: bool = False) -> float:
        rates = (self.generic_copy_elements_per_s if copy and self.generic_copy_elements_per_s
                 else self.generic_elements_per_s)
        near = min(sorted(rates), key=lambda s: (abs(s - itemsize), s))
        return rates[near]

    def predict_s(self, r: count.OpRecord, peak_flops_per_s: float,
                  bandwidth_bytes_per_s: float) -> float:
        cls = op_class(r)
        t = max(r.flops / peak_flops_per_s, r.bytes / bandwidth_bytes_per_s)
        if cls == "generic":
            copy = r.op in COPY_OPS and r.in_itemsize == r.itemsize  # not a widening cast
            t = max(t, r.out_elements / self.generic_rate(r.itemsize, copy))
        return self.floor_s[cls] + t


CHAIN = 8  # tiny kernels per measured chain


def _tiny_ops(device: str) -> dict[str, Callable]:
    """One tiny op per class: on a GPU a decode step's 16 rows of 640, far below one wave; on a
    CPU smaller still, so that the floor is the op's fixed cost and not its arithmetic."""
    gpu = device == "cuda"
    rows, cols, head_dim = (16, 640, 256) if gpu else (4, 64, 64)
    x, col = torch.randn(rows, cols, device=device), torch.randn(rows, 1, device=device)
    mm_dtype = torch.bfloat16 if gpu else torch.float32
    xm, w = x.to(mm_dtype), torch.randn(cols, cols, device=device, dtype=mm_dtype)
    q = torch.randn(rows, 4, 1, head_dim, device=device, dtype=mm_dtype)
    kv = torch.randn(rows, 4, 64 if gpu else 16, head_dim, device=device, dtype=mm_dtype)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {"elementwise": lambda: x * x, "generic": lambda: x * col,
            "reduction": lambda: x.mean(-1), "matmul": lambda: xm @ w,
            "attention": lambda: sdpa(q, kv, kv)}


def tiny_kernel_s(fn, device: str) -> float:
    """Device time of one call of a tiny op: a chain of CHAIN calls, per call."""
    def chain():
        return [fn() for _ in range(CHAIN)]

    if device == "cuda":
        prof = P.profile(capture_graph(chain), iters=10, warmup=3, device=device)
        return prof.device_time_us / prof.iters / CHAIN / 1e6
    return time(chain, warmup=3, budget_s=0.05, device=device).median_s / CHAIN


def generic_rate(device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of a broadcast multiply (rows x 1024) * (rows x 1): generic loop."""
    a = torch.randn(elements // 1024, 1024, device=device, dtype=dtype)
    col = torch.randn(elements // 1024, 1, device=device, dtype=dtype)
    t = time(lambda: a * col, warmup=3, budget_s=0.2, device=device, name="broadcast multiply")
    return a.numel() / t.device_s


def generic_copy_rate(device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of a copy from a source broadcast 4 ways (rows, 1, 1024) ->
    (rows, 4, 1024), as repeat_kv expands KV heads: generic loop, two operands."""
    src = torch.randn(elements // 4096, 1, 1024, device=device, dtype=dtype)
    dst = torch.empty(elements // 4096, 4, 1024, device=device, dtype=dtype)
    wide = src.expand_as(dst)
    t = time(lambda: dst.copy_(wide), warmup=3, budget_s=0.2, device=device,
             name="broadcast copy")
    return dst.numel() / t.device_s


def graph_gap_s(fn, kernels: int = 256) -> float:
    """Per kernel, one CUDA-graph replay of ``kernels`` tiny kernels timed by a pair of events
    (the span, gaps included), less the kernels' own time (the profiler's): the idle time
    between two kernels. (The timer would time so short a call by CUPTI, which leaves the gaps
    out by design.)"""
    def chain():
        return [fn() for _ in range(kernels)]

    replay = capture_graph(chain)
    spans = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        replay()
        end.record()
        torch.cuda.synchronize()
        spans.append(start.elapsed_time(end) / 1e3)
    busy = P.profile(replay, iters=3, warmup=1, device="cuda")
    return max(0.0, statistics.median(spans) - busy.device_time_us / busy.iters / 1e6) / kernels


def measure(device: str) -> OpCosts:
    """The floors (median of three chains per class), the generic-loop rates and, on a GPU, the
    gap between kernels, here; a few seconds, measured afresh each time (they are cheap beside
    the layer they explain)."""
    floors = {}
    ops = _tiny_ops(device)
    for cls, fn in ops.items():
        floors[cls] = statistics.median(tiny_kernel_s(fn, device) for _ in range(3))
    n = (1 << 26) if device == "cuda" else (1 << 22)  # GPU: 128 MB+ per operand, past any L2
    dtypes = (torch.float32, torch.bfloat16)
    rates = {torch.finfo(dt).bits // 8: generic_rate(device, dt, n) for dt in dtypes}
    copy_rates = {torch.finfo(dt).bits // 8: generic_copy_rate(device, dt, n) for dt in dtypes}
    gap = (statistics.median(graph_gap_s(fn) for fn in ops.values()) if device == "cuda"
           else 0.0)
    return OpCosts(device, floors, rates, gap, copy_rates)
