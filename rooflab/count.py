"""Count the FLOPs and bytes of any module, per aten op, with a TorchDispatchMode.

FLOPs come from formulas.py's registry of shape-only formulas (like torch.utils.flop_counter's),
one per aten op family, with cost.py's per-element constants (SiLU, GeLU, softmax, norms);
listed pointwise ops count one FLOP per output element and reductions one per input element.
An op in none of these lists is *unsupported*: it counts 0 FLOPs and is listed in
``Counter.unsupported`` (as fvcore does), never silently given a default.

Bytes are what each op reads and writes in eager mode (cost.py's "eager" convention): each
distinct tensor argument once (``x + x`` reads x once; an expanded tensor counts its storage,
not its logical size) plus every output. An op that overwrites its destination (copy_, fill_,
zero_, ...) does not read it. Gathers (embedding, index_select, index) read the rows they touch,
not their whole source; index_put_ and index_copy_ write the rows they touch (formulas.py).
View ops, in place or not (view, transpose, t_, unsqueeze_, ...), move no bytes and launch no
kernel. Count under torch.no_grad(): inference mode is refused, because there composite ops
(reshape, scaled_dot_product_attention) arrive whole and a copying reshape would read as a view.
Each record carries the module path it ran under. Works on the meta device, so a 70B-class layer
is counted with no weights and no memory.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rooflab.errors import RooflabError
from rooflab.formulas import (ALLOC_OPS, BYTE_FORMULAS, FLOP_FORMULAS,  # noqa: F401
                              group_rows, NO_FLOP_OPS, NAMED_OPS, OVERWRITE_OPS, POINTWISE,
                              REDUCTIONS, SDPA_OPS, VIEW_OPS,
                              _named_args, flops_of, register, register_bytes)

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
    # an operand is a module's parameter: at decode the weights stream through L2 once a step,
    # so a small kernel reading one waits on HBM (op_classes' hbm_s)
    reads_weight: bool = False
    group_rows: tuple = ()  # a grouped GEMM's rows in each group, where its offsets hold data
    # (bytes, distance) of each input an earlier counted op wrote: the bytes every op between
    # them read and wrote. An input whose bytes and distance fit in a GPU's L2 is still there
    # when this op reads it (op_classes' l2 rates)
    fresh: tuple = ()

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


def _tensor_bytes(t: torch.Tensor) -> int:
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return logical


def _storage(t: torch.Tensor) -> int:
    """Where t's memory starts (0 where it has none: a meta tensor)."""
    try:
        return t.untyped_storage().data_ptr() if t.device.type != "meta" else 0
    except (RuntimeError, NotImplementedError):
        return 0


def _distinct(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each tensor once: the same object, or the same memory seen the same way, is read once."""
    seen, out = set(), []
    for t in ts:
        ptr = _storage(t)
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


class CountError(RooflabError):
    """The counter cannot count honestly here."""


# In inference mode the dispatcher hands composite ops over whole: a reshape that copies reads
# as a view, scaled_dot_product_attention as one op with no FLOPs and no backend.
INFERENCE_MODE = ("count under torch.no_grad(), not torch.inference_mode(): in inference mode "
                  "composite ops (reshape, scaled_dot_product_attention) reach the counter "
                  "undecomposed and are miscounted")


class Counter(TorchDispatchMode):
    """with Counter(model) as c: model(x)  ->  c.records, c.total_flops ... (predict.py groups the
    records by op, module, layer or component)"""

    def __init__(self, module: torch.nn.Module | None = None):
        super().__init__()
        self.records: list[OpRecord] = []
        self.unsupported: dict[str, int] = defaultdict(int)  # op -> calls with no FLOP formula
        self._stack: list[str] = []
        self._hooks = []
        self._traffic = 0  # bytes every counted op so far read and wrote
        self._written: dict[int, int] = {}  # storage -> self._traffic when an op last wrote it
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

    def __enter__(self):
        if torch.is_inference_mode_enabled():
            for h in self._hooks:
                h.remove()
            raise CountError(INFERENCE_MODE)
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.is_inference_mode_enabled():  # entered inside the counted code
            raise CountError(INFERENCE_MODE)
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        in_ids = {id(t) for t in ins}
        inplace = packet.__name__.endswith("_")
        if packet in VIEW_OPS or packet in ALLOC_OPS or (
                outs and not inplace and all(id(t) in in_ids for t in outs)):
            read = written = 0  # a view, an allocation, or an op that returned its input
        elif packet in BYTE_FORMULAS:
            read, written = BYTE_FORMULAS[packet](args, outs)
        else:
            distinct = _distinct(ins[1:] if packet in OVERWRITE_OPS else ins)
            read = sum(_tensor_bytes(t) for t in distinct)
            written = sum(_tensor_bytes(t) for t in outs)
            if inplace and outs and id(outs[0]) in in_ids:
                written = _tensor_bytes(outs[0])  # in place: the write lands in an input
        named = _named_args(func, args, kwargs) if packet in NAMED_OPS else None
        counted = flops_of(packet, args, outs, named)
        if counted is None:
            self.unsupported[packet.__name__] += 1
            counted = (0, 0)
        macs, flops = counted
        shapes = [tuple(t.shape) for t in ins]
        fresh = tuple((_tensor_bytes(t), self._traffic - self._written[p])
                      for t in _distinct(ins) if (p := _storage(t)) and p in self._written)
        if read or written:
            self._traffic += read + written
            self._written.update((p, self._traffic) for t in outs if (p := _storage(t)))
        elements = sum(t.numel() for t in outs)
        if packet in BYTE_FORMULAS and outs:  # a scatter writes the rows it touches, no more
            elements = min(elements, written // outs[0].element_size())
        self.records.append(OpRecord(
            packet.__name__, self._stack[-1] if self._stack else "", macs, flops, read, written,
            shapes, elements, layout_of(ins, outs),
            max((t.element_size() for t in ins if t.numel() > 1), default=0),
            outs[0].element_size() if outs else 0,
            any(isinstance(t, torch.nn.Parameter) for t in ins),
            group_rows(args) if packet.__name__ == "_grouped_mm" else (), fresh))
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
