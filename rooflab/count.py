"""Count the FLOPs and bytes of any module, per aten op, with a TorchDispatchMode.

FLOPs come from a registry of shape-only formulas (like torch.utils.flop_counter's), one per aten
op family, with cost.py's per-element constants (SiLU, GeLU, softmax, norms); listed pointwise
ops count one FLOP per output element and reductions one per input element. An op in none of
these lists is *unsupported*: it counts 0 FLOPs and is listed in ``Counter.unsupported`` (as
fvcore does), never silently given a default.

Bytes are what each op reads and writes in eager mode (cost.py's "eager" convention): each
distinct tensor argument once (``x + x`` reads x once; an expanded tensor counts its storage,
not its logical size) plus every output. An op that overwrites its destination (copy_, fill_,
zero_, ...) does not read it. Gathers (embedding, index_select, index) read the rows they touch,
not their whole source; index_put_ writes the rows it touches (``BYTE_FORMULAS``). View ops,
in place or not (view, transpose, t_, unsqueeze_, ...), move no bytes and launch no kernel.
Each record carries the module path it ran under. Works on the meta device, so a 70B-class layer
is counted with no weights and no memory.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rooflab.cost import (GELU_TANH_FLOPS, LAYERNORM_FLOPS, RMSNORM_FLOPS, RMSNORM_ROW_FLOPS,
                          SILU_FLOPS, SOFTMAX_FLOPS)

aten = torch.ops.aten

# --- the registry ---------------------------------------------------------------------------

FLOP_FORMULAS: dict[object, Callable[..., tuple[int, int]]] = {}  # packet -> (macs, flops)


def register(*packets):
    """Register a shape-only (args, out) -> (macs, flops) formula for aten op packets."""

    def wrap(fn):
        for p in packets:
            if p in FLOP_FORMULAS:
                raise ValueError(f"a formula for {p} is already registered")
            FLOP_FORMULAS[p] = fn
        return fn

    return wrap


def _shape(x) -> tuple[int, ...]:
    return tuple(x.shape)


@register(aten.mm)
def _mm(args, out):
    (m, k), (_, n) = _shape(args[0]), _shape(args[1])
    return m * k * n, 2 * m * k * n


@register(aten.addmm)
def _addmm(args, out):
    (m, k), (_, n) = _shape(args[1]), _shape(args[2])
    return m * k * n, 2 * m * k * n + m * n  # the bias add


@register(aten.bmm)
def _bmm(args, out):
    (b, m, k), (_, _, n) = _shape(args[0]), _shape(args[1])
    return b * m * k * n, 2 * b * m * k * n


@register(aten.baddbmm)
def _baddbmm(args, out):
    (b, m, k), (_, _, n) = _shape(args[1]), _shape(args[2])
    return b * m * k * n, 2 * b * m * k * n + b * m * n


@register(aten.mv)
def _mv(args, out):
    m, k = _shape(args[0])
    return m * k, 2 * m * k


@register(aten.addmv)
def _addmv(args, out):
    m, k = _shape(args[1])
    return m * k, 2 * m * k + m  # the bias add


@register(*[getattr(aten, n) for n in ("dot", "vdot") if hasattr(aten, n)])
def _dot(args, out):
    n = args[0].numel()
    return n, 2 * n


@register(*[getattr(aten, n) for n in ("_scaled_mm",) if hasattr(aten, n)])
def _scaled_mm(args, out):
    (m, k), (_, n) = _shape(args[0]), _shape(args[1])
    return m * k * n, 2 * m * k * n  # fp8: the scales multiply the output, counted as MACs' own


@register(aten.convolution)
def _convolution(args, out, named=None):
    """Each output element of a convolution is a dot product over (C_in / groups) * kernel
    elements; a transposed convolution scatters each input element over C_out / groups *
    kernel. The bias adds one FLOP per output element."""
    x, w, bias = args[0], args[1], args[2]
    transposed, groups = bool(args[6]), int(args[8])
    kernel = math.prod(_shape(w)[2:])
    if transposed:  # w: (C_in, C_out / groups, *k)
        macs = x.numel() * _shape(w)[1] * kernel
    else:  # w: (C_out, C_in / groups, *k)
        macs = out[0].numel() * _shape(w)[1] * kernel
    del groups  # already in the weight's shape
    return macs, 2 * macs + (out[0].numel() if bias is not None else 0)


@register(aten.linear)
def _linear(args, out):
    # reached only where composite ops are not decomposed (e.g. under inference_mode)
    x, w = args[0], args[1]
    rows, (n, k) = x.numel() // x.shape[-1], _shape(w)
    bias = rows * n if len(args) > 2 and args[2] is not None else 0
    return rows * k * n, 2 * rows * k * n + bias


def _sdpa(q, k, v, causal: bool = False) -> tuple[int, int]:
    """QK^T and PV. Dense, as FlopCounterMode counts; with is_causal and Lq == Lkv, the causal
    pairs only, which is what the fused kernels compute (they skip masked blocks)."""
    *lead, lq, d = _shape(q)
    lkv, dv = _shape(k)[-2], _shape(v)[-1]
    pairs = lq * (lq + 1) // 2 if (causal and lq == lkv) else lq * lkv
    macs = math.prod(lead) * pairs * (d + dv)
    return macs, 2 * macs


SDPA_OPS = [getattr(aten, n) for n in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_flash_attention_forward", "_efficient_attention_forward") if hasattr(aten, n)]


@register(*SDPA_OPS)
def _sdpa_op(args, out, named=None):
    return _sdpa(args[0], args[1], args[2], bool((named or {}).get("is_causal", False)))


def _named_args(func, args, kwargs) -> dict:
    """Arguments by schema name (for formulas that need flags such as is_causal)."""
    names = [a.name for a in func._schema.arguments]
    return {**dict(zip(names, args)), **kwargs}


@register(aten.gelu)
def _gelu(args, out):
    return 0, GELU_TANH_FLOPS * args[0].numel()


@register(aten.silu, aten.silu_)
def _silu(args, out):
    return 0, SILU_FLOPS * args[0].numel()


@register(aten._softmax, aten.softmax, aten._log_softmax)
def _softmax(args, out):
    return 0, SOFTMAX_FLOPS * args[0].numel()


@register(aten.native_layer_norm)
def _layer_norm(args, out):
    return 0, LAYERNORM_FLOPS * args[0].numel()  # cost.py's convention: 7 FLOPs per element


@register(*[getattr(aten, n) for n in ("_fused_rms_norm", "rms_norm") if hasattr(aten, n)])
def _rms_norm(args, out):
    rows = args[0].numel() // args[0].shape[-1]
    return 0, RMSNORM_FLOPS * args[0].numel() + RMSNORM_ROW_FLOPS * rows


VIEW_OPS = {getattr(aten, n) for n in (
    "view", "_unsafe_view", "reshape", "transpose", "t", "permute", "expand", "slice", "select",
    "unsqueeze", "squeeze", "as_strided", "alias", "detach", "split", "split_with_sizes",
    "unbind", "chunk", "narrow", "unflatten", "flatten", "lift_fresh", "_reshape_alias",
    "view_as", "expand_as", "diagonal", "lift_fresh_copy", "squeeze_", "unsqueeze_", "t_",
    "transpose_", "as_strided_", "swapdims_", "swapaxes_", "detach_") if hasattr(aten, n)}
# ops that overwrite their first argument without reading it
OVERWRITE_OPS = {getattr(aten, n) for n in (
    "copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_", "exponential_")
    if hasattr(aten, n)}
NO_FLOP_OPS = {getattr(aten, n) for n in (
    "copy_", "_to_copy", "clone", "cat", "stack", "empty", "empty_like", "zeros", "ones", "full",
    "zeros_like", "ones_like", "full_like", "arange", "index", "index_select", "embedding",
    "contiguous", "fill_", "zero_", "new_empty", "new_zeros", "scalar_tensor", "empty_strided",
    "_local_scalar_dense", "index_put_", "masked_fill", "masked_fill_", "where", "tril", "triu",
    "sym_size", "sym_stride", "sym_numel", "repeat", "_assert_async", "lt", "le", "gt", "ge",
    "eq", "ne", "bitwise_and", "bitwise_or", "logical_and", "logical_not", "scatter", "gather",
    "_unsafe_index", "slice_scatter", "select_scatter", "randn", "rand", "normal_", "uniform_",
    "bernoulli_", "native_dropout", "logical_or", "random_", "exponential_", "index_copy",
    "resize_", "_index_put_impl_", "index_add", "isnan", "isinf", "sort", "topk",
    "constant_pad_nd", "flip", "roll") if hasattr(aten, n)}
POINTWISE = {getattr(aten, n) for n in (
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "exp", "exp_", "log",
    "tanh", "tanh_", "sigmoid", "sigmoid_", "rsqrt", "sqrt", "pow", "reciprocal", "abs", "clamp",
    "clamp_", "clamp_min", "clamp_max", "maximum", "minimum", "sin", "cos", "erf", "relu",
    "relu_", "addcmul", "addcdiv", "lerp", "rsub", "square", "sign", "log1p", "expm1", "floor",
    "ceil", "round", "remainder", "fmod", "threshold", "hardtanh", "leaky_relu", "elu",
    "softplus", "mish", "exp2", "log2", "atan", "round_", "floor_divide") if hasattr(aten, n)}
REDUCTIONS = {getattr(aten, n) for n in (
    "sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean", "prod", "norm",
    "linalg_vector_norm", "logsumexp", "argmax") if hasattr(aten, n)}


def flops_of(packet, args, out_tensors, named: dict | None = None) -> tuple[int, int] | None:
    """(macs, flops) of one op, or None where rooflab has no formula for it."""
    if packet in SDPA_OPS:
        return FLOP_FORMULAS[packet](args, out_tensors, named)
    if packet in FLOP_FORMULAS:
        return FLOP_FORMULAS[packet](args, out_tensors)
    if packet in VIEW_OPS or packet in NO_FLOP_OPS:
        return 0, 0
    if packet in REDUCTIONS:
        ins = [a for a in args if isinstance(a, torch.Tensor)]
        return 0, ins[0].numel() if ins else 0
    if packet in POINTWISE:
        return 0, sum(t.numel() for t in out_tensors)  # one FLOP per output element
    return None


# --- bytes: what a gather or scatter touches, not what it could --------------------------------

BYTE_FORMULAS: dict[object, Callable[..., tuple[int, int]]] = {}  # packet -> (read, written)


def register_bytes(*packets):
    """Register an (args, outs) -> (bytes read, bytes written) formula for aten op packets."""

    def wrap(fn):
        for p in packets:
            if p in BYTE_FORMULAS:
                raise ValueError(f"a byte formula for {p} is already registered")
            BYTE_FORMULAS[p] = fn
        return fn

    return wrap


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


@register_bytes(aten.embedding)
def _embedding_bytes(args, outs):
    return _nbytes(args[1]) + _nbytes(outs[0]), _nbytes(outs[0])  # ids + the rows gathered


@register_bytes(aten.index_select)
def _index_select_bytes(args, outs):
    return _nbytes(args[2]) + _nbytes(outs[0]), _nbytes(outs[0])


@register_bytes(*[getattr(aten, n) for n in ("index", "_unsafe_index") if hasattr(aten, n)])
def _index_bytes(args, outs):
    idx = sum(_nbytes(i) for i in args[1] if i is not None)
    return idx + _nbytes(outs[0]), _nbytes(outs[0])


@register_bytes(*[getattr(aten, n) for n in ("index_put_", "index_put", "_index_put_impl_")
                  if hasattr(aten, n)])
def _index_put_bytes(args, outs):
    """dst[indices] = values: read the indices and values (and, when accumulating, the rows
    touched), write the rows touched."""
    idx = sum(_nbytes(i) for i in args[1] if i is not None)
    vals = args[2]
    touched = _nbytes(vals) * (math.prod(_shape(outs[0])) // max(vals.numel(), 1)
                               if vals.numel() == 1 else 1)
    accumulate = len(args) > 3 and bool(args[3])
    return idx + _nbytes(vals) + touched * accumulate, touched


# --- the mode -------------------------------------------------------------------------------


@dataclass
class OpRecord:
    op: str
    module: str
    macs: int
    flops: int
    bytes_read: int
    bytes_written: int
    shapes: list = field(default_factory=list)
    out_elements: int = 0
    layout: str = "contiguous"  # how its operands lie in memory: see layout_of
    in_itemsize: int = 0  # bytes per element of its widest input (of more than one element)
    itemsize: int = 0  # bytes per element of its first output

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


def _tensor_bytes(t: torch.Tensor) -> int:
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return logical


def _distinct(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each tensor once: the same object, or the same memory seen the same way, is read once."""
    seen, out = set(), []
    for t in ts:
        try:
            ptr = t.untyped_storage().data_ptr() if t.device.type != "meta" else 0
        except (RuntimeError, NotImplementedError):
            ptr = 0
        key = (ptr, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype) if ptr else id(t)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _dims(t: torch.Tensor) -> list[tuple[int, int]]:
    """(stride, size) of the dims that matter: those of more than one element."""
    return [(st, n) for n, st in zip(t.shape, t.stride()) if n > 1]


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense in some order of its dims (a transpose of a contiguous tensor
    is; a slice or an expanded tensor is not)."""
    expected = 1
    for st, n in sorted(_dims(t)):
        if st != expected:
            return False
        expected *= n
    return True


def layout_of(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> str:
    """How an op's operands lie in memory, relative to its first output:
    "broadcast": some input is an expanded view (a zero stride) or, in an op whose output has
    more elements than that input, is read repeatedly (x * w, x * rms[..., None]; for cat or
    stack, the inputs are the parts of the output);
    "strided": some operand is not dense (a slice) or is laid out in another order than the
    output (a transposed view);
    "contiguous": every operand of more than one element is dense, in the output's order."""
    if not outs:
        return "contiguous"
    o = outs[0]
    big = [t for t in (*ins, *outs) if t.numel() > 1]
    if any(st == 0 for t in big for st, _ in _dims(t)):
        return "broadcast"
    if any(not _dense(t) for t in big) or any(
            tuple(t.shape) == tuple(o.shape) and _dims(t) != _dims(o) for t in big):
        return "strided"
    if any(t.numel() < o.numel() for t in ins if t.numel() > 1):
        return "broadcast"
    return "contiguous"


class Counter(TorchDispatchMode):
    """with Counter(model) as c: model(x)  ->  c.records, c.by_module(), c.total_flops ..."""

    def __init__(self, module: torch.nn.Module | None = None):
        super().__init__()
        self.records: list[OpRecord] = []
        self.unsupported: dict[str, int] = defaultdict(int)  # op -> calls with no FLOP formula
        self._stack: list[str] = []
        self._hooks = []
        if module is not None:
            for name, m in module.named_modules():
                self._hooks.append(m.register_forward_pre_hook(self._enter(name)))
                self._hooks.append(m.register_forward_hook(self._leave))

    def _enter(self, name):
        def hook(mod, args):
            self._stack.append(name)
        return hook

    def _leave(self, mod, args, out):
        if self._stack:
            self._stack.pop()

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        in_ids = {id(t) for t in ins}
        inplace = packet.__name__.endswith("_")
        if packet in VIEW_OPS or (outs and not inplace and all(id(t) in in_ids for t in outs)):
            read = written = 0  # a view, or an op that returned its input (x.to(x.dtype))
        elif packet in BYTE_FORMULAS:
            read, written = BYTE_FORMULAS[packet](args, outs)
        else:
            distinct = _distinct(ins[1:] if packet in OVERWRITE_OPS else ins)
            read = sum(_tensor_bytes(t) for t in distinct)
            written = sum(_tensor_bytes(t) for t in outs)
            if inplace and outs and id(outs[0]) in in_ids:
                written = _tensor_bytes(outs[0])  # in place: the write lands in an input
        named = _named_args(func, args, kwargs) if packet in SDPA_OPS else None
        counted = flops_of(packet, args, outs, named)
        if counted is None:
            self.unsupported[packet.__name__] += 1
            counted = (0, 0)
        macs, flops = counted
        shapes = [tuple(t.shape) for t in ins]
        self.records.append(OpRecord(
            packet.__name__, self._stack[-1] if self._stack else "", macs, flops, read, written,
            shapes, sum(t.numel() for t in outs), layout_of(ins, outs),
            max((t.element_size() for t in ins if t.numel() > 1), default=0),
            outs[0].element_size() if outs else 0))
        return out

    # --- summaries ---

    @property
    def total_flops(self) -> int:
        return sum(r.flops for r in self.records)

    @property
    def total_macs(self) -> int:
        return sum(r.macs for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.records)

    def matmul_flops(self) -> int:
        return sum(2 * r.macs for r in self.records)

    def by_module(self) -> dict[str, dict]:
        agg: dict[str, dict] = defaultdict(lambda: {"macs": 0, "flops": 0, "bytes": 0, "ops": 0})
        for r in self.records:
            a = agg[r.module]
            a["macs"] += r.macs
            a["flops"] += r.flops
            a["bytes"] += r.bytes
            a["ops"] += r.op not in {p.__name__ for p in VIEW_OPS}
        return dict(agg)

    def unsupported_ops(self) -> dict[str, int]:
        return dict(self.unsupported)

    def kernels(self) -> list[OpRecord]:
        """Records that would launch a kernel in eager mode (views launch none)."""
        return [r for r in self.records if r.bytes > 0]


def count(fn, *args, module: torch.nn.Module | None = None, **kwargs) -> Counter:
    """Run fn(*args, **kwargs) under a Counter (no grad) and return it."""
    with torch.no_grad(), Counter(module) as c:
        fn(*args, **kwargs)
    return c
