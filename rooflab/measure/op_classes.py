"""Below the roofline: what one eager kernel of each class costs on this device, measured.

The roofline's two ceilings (matmul FLOP/s, copy bandwidth) are reached by large matmuls and by
contiguous, vectorized elementwise kernels. Two more things decide the time of the many small or
oddly laid-out kernels an eager layer launches, and both are measured here:

- a floor: the device time of a tiny kernel of each class (elementwise, generic, indexed,
  reduction, matmul, attention, select: top-k and sorts), replayed in a CUDA graph so launch
  gaps do not hide it; the generic loop's widening casts and strided reads have floors of their
  own (their kernels cost more than the broadcast multiply's: docs/predictions.md);
- the element rate of PyTorch's non-vectorized elementwise loops. TensorIterator runs an op as
  a vectorized kernel only when every operand is dense in the output's order and no input is
  narrower than the output. A broadcast operand (x * rms[..., None]), a transposed or sliced
  one (RoPE on a head-transposed q) or a cat of slices takes its generic loop, which computes an
  offset per element; a widening cast (bf16 -> fp32) takes an unrolled loop that converts per
  element. Both are limited by elements per second rather than by bytes ("generic" below). The
  rate is measured on a broadcast multiply, per element size, and again on a copy from a
  broadcast source (what repeat_kv's expand + reshape runs): the loop computes an offset per
  operand, and a copy has two operands where a multiply has three. torch.roll's kernel
  computes each source index with modulo arithmetic and is slower still: it has a rate of its
  own ("indexed").

Five kernels are generic loops of their own (LOOP_OPS): a gather of rows (x[idx], how a router
sends tokens to experts) reads nearly at the copy bandwidth, a fill under a broadcast boolean
mask is slower than the multiply, and so are RoPE's rotate_half on a head-transposed q (a cat
of two strided halves), its sum of two operands laid out in different orders, and a static
cache's write of a prefill's head-transposed k or v (index_copy_) (docs/predictions.md); each
has its rate, measured the same way. A top-k or sort
runs radix passes that step with its size and bit width: each shape met is timed alone
(measure_alone). So is a reduction to few rows (a decode's RMSNorm: 8-128 rows): PyTorch
reduces each row with a warp or a block whose passes follow the row's length, until a long
enough row is split over blocks; and on a GPU a GEMM of few rows (a decode's projections),
whose weight's read cuBLAS spreads over as many SMs as it has output tiles
(docs/predictions.md).

A counted op (count.OpRecord) is predicted to take
    floor[class or generic kind] (+ hbm_s where it reads a weight)
        + max(flops / peak, bytes / copy bandwidth, elements / rate of its class or loop),
the last term for the generic and indexed classes only; an op timed alone (a top-k, sort,
few-row reduction or few-row GEMM) takes its time. hbm_s is what an operand in HBM adds to a
small kernel over one in L2 (measured: a weight times rows, L2 flushed and not); at decode a
layer's weights pass through L2 once a step, so the norm's weight is never there when its small
multiply reads it (in a layer such a multiply takes its cold time: docs/predictions.md).
Matmuls and attention are left out: their bandwidth term already reads from HBM.
On a GPU, an elementwise, generic or reduction op's input that the op before it wrote and
that still fits in L2, with every byte moved since (count.OpRecord.fresh, OpCosts.in_l2), is
read at rates measured with the operands in L2: its bytes at the copy's L2 bandwidth, and the
generic loop's elements, for that share of the reads, at its L2 rate (docs/predictions.md).

Attention is one fused kernel whose speed depends on its backend, head dim, mask and phase far
more than a matmul's does: cuDNN's causal prefill at head dim 128 comes near the matmul peak,
while a prefill with an arbitrary (sliding-window) mask at head dim 256 reaches a third of it.
So each kind of attention op met (attention_key: backend op, head dim, element size, mask or
causal, prefill or decode) gets its own rate, measured once on a reference shape of that kind
(measure_attention): FLOP/s for a prefill, which replaces the peak, and bytes/s for a decode
(attention_bytes), which replaces the copy bandwidth. A prefill's reference fills the GPU. A
decode's reference is its own shapes: how a decode kernel splits a head's keys over programs is
its own. So is a prefill's of fewer programs (one per head and ATTENTION_TILE_ROWS queries)
than the GPU has SMs (under_filled): 4 heads of 512 tokens are 32 programs on 132 SMs, and
their time is the longest program's chain of key blocks, not a share of the full GPU's rate
(docs/predictions.md).

A mixture's grouped GEMM is measured the same way (grouped_key): at decode, bytes/s on as many
groups as it reads; at prefill, on its own groups as its router sent the rows (no model of tiles
or waves followed the kernel's time over routings: docs/predictions.md), or where they are
unknown (the meta device), on its average rows a group spread as a uniform router draws them
(uniform_draw). A prefill reference nearer the memory roof than the compute roof (a few rows a
group) prices an op by the matrices its routing reads, at the reference's bytes/s; one nearer
the compute roof by its FLOPs, at the reference's FLOP/s.
"""
from __future__ import annotations

import hashlib
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from rooflab import count, formulas
from rooflab.measure import profile as P
from rooflab.measure.timer import capture_graph, time_call
from rooflab.units import si

CLASSES = ("elementwise", "generic", "indexed", "reduction", "matmul", "attention", "select")
# the generic loop's kinds whose kernels differ from the broadcast multiply the generic floor
# is measured on: each has a floor of its own (a widening cast converts each element in an
# unrolled loop; a strided operand is read with an offset computed per element)
GENERIC_KINDS = ("widening", "strided")
FLOORS = CLASSES + tuple(f"generic {k}" for k in GENERIC_KINDS)
MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "linear", "_scaled_mm", "matmul", "_grouped_mm"}
# top-k and sorts: radix passes over each row, several kernels a call (a router's top 8 of 128
# experts takes two, a sort of 8 indices five), so their floor is measured on one such call
SELECT_OPS = {"topk", "sort", "argsort", "kthvalue", "msort"}
ROOFLAB_ATTENTION_OPS = {"flash_attention", "flash_decoding"}  # kernels/hf_attention.py's ops
ATTENTION_OPS = {p.__name__ for p in count.SDPA_OPS} | ROOFLAB_ATTENTION_OPS
REDUCTION_OPS = {p.__name__ for p in count.REDUCTIONS} | {"_softmax", "softmax", "_safe_softmax",
                                                           "_log_softmax"}
CONCAT_OPS = {"cat", "stack"}
COPY_OPS = {"clone", "copy_", "contiguous", "_to_copy"}
# kernels that compute each element's source index with modulo arithmetic (torch.roll, which a
# sliding-window cache runs at every step): limited by elements per second, at their own rate
INDEXED_OPS = {"roll"}
# ops (or op and path) whose generic loop is a kernel of its own, faster or slower per element
# than the broadcast multiply: a gather of rows (x[idx]: its index kernel reads a row per output
# row, at nearly the copy bandwidth), a fill under a broadcast boolean mask, a cat of strided
# parts (a copy into each half of the output: rows of half-width writes), a sum of operands
# in different orders (one of them read across its rows) and a copy of rows into a cache
LOOP_OPS = ("index", "masked_fill", "cat", "add strided", "index_copy")


def op_class(r: count.OpRecord) -> str:
    """The kernel class of a counted op (see the module docstring)."""
    if r.op in MATMUL_OPS:
        return "matmul"
    if r.op in INDEXED_OPS:
        return "indexed"
    if r.op in SELECT_OPS:
        return "select"
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
    # class (or "generic KIND") -> device time of one call of a tiny op of that class
    floor_s: dict[str, float]
    generic_elements_per_s: dict[int, float]  # element size (bytes) -> generic-loop rate
    # between two kernels of a CUDA graph the device idles a little (the next one's launch);
    # a stream of n kernels takes the sum of their times plus n of these
    gap_s: float = 0.0
    # element size -> the generic loop's rate on a copy (two operands), where measured
    generic_copy_elements_per_s: dict[int, float] = field(default_factory=dict)
    # attention_key -> {"bound", "flops_per_s", "bytes_per_s", "reference"}, where measured
    attention: dict[str, dict] = field(default_factory=dict)
    # element size -> torch.roll's rate (the indexed class), where measured
    indexed_elements_per_s: dict[int, float] = field(default_factory=dict)
    sm_count: int = 0  # programs a GPU runs side by side (its SMs); 0: not a GPU
    # grouped_key -> {"bound", "flops_per_s", "bytes_per_s", "reference"}, where measured
    grouped: dict[str, dict] = field(default_factory=dict)
    # what a small kernel's operand in HBM adds over one in L2: a weight times rows, timed with
    # L2 flushed before each call, less the same warm; paid by every op that reads a parameter,
    # matmuls and attention aside (their bandwidth term already reads it from HBM)
    hbm_s: float = 0.0
    # gemm_key -> device time a call of the kernels cuBLAS launches beside a GEMM's main one
    # (a split-K's reduction: with few output tiles for the SMs it cuts K and sums the parts in
    # a second kernel), profiled on that GEMM alone; GPUs only
    gemm_extra_s: dict[str, float] = field(default_factory=dict)
    # alone_key -> device time of one call of a top-k, sort, few-row reduction or (on a GPU)
    # few-row GEMM of that shape, timed alone (no one rate describes them: measure_alone)
    alone_s: dict[str, float] = field(default_factory=dict)
    # op -> element size -> the rate of an op whose generic loop is a kernel of its own (LOOP_OPS),
    # measured on a reference call; it replaces the broadcast multiply's rate for that op
    loop_elements_per_s: dict[str, dict[int, float]] = field(default_factory=dict)
    # an input still in L2 from the op that wrote it (count.OpRecord.fresh) is read at L2's
    # speed: what of the L2 such an input can fill, and measured with every operand in it, the
    # copy's bytes per second and the broadcast multiply's elements per second by element size
    # (GPUs only). A GPU's L2 is two partitions, each caching what the SMs beside it read
    # (NVIDIA's A100 and H100 whitepapers): an activation every SM reads fills half of it.
    l2_bytes: int = 0
    l2_bytes_per_s: float = 0.0
    generic_l2_elements_per_s: dict[int, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def generic_rate(self, itemsize: int, copy: bool = False) -> float:
        rates = (self.generic_copy_elements_per_s if copy and self.generic_copy_elements_per_s
                 else self.generic_elements_per_s)
        return _nearest(rates, itemsize)

    def in_l2(self, r: count.OpRecord) -> int:
        """Bytes of r's reads still in L2 where measured: inputs an earlier op wrote that fit in
        it with every byte read and written since (least recently used leaves first)."""
        if not self.l2_bytes_per_s:
            return 0
        return min(r.bytes_read, sum(b for b, since in r.fresh if b + since <= self.l2_bytes))

    def floor(self, r: count.OpRecord) -> float:
        """The measured floor of r's kind of kernel: its generic kind's where measured, else
        its class's (costs measured before a class had a floor of its own: the generic one)."""
        cls = op_class(r)
        f = self.floor_s
        return f.get(f"{cls} {path(r)}", f.get(cls, f["generic"]))

    def predict_s(self, r: count.OpRecord, peak_flops_per_s: float,
                  bandwidth_bytes_per_s: float) -> float:
        cls = op_class(r)
        if alone_kind(r) in self.alone_s:
            return self.alone_s[alone_kind(r)]
        a = (self.attention.get(attention_key(r, self.sm_count), {}) if cls == "attention" else
             self.grouped.get(grouped_key(r), {}) if r.op in GROUPED_OPS else {})
        a = a if "bound" in a else None  # unmeasured, or its reference could not run
        if a and r.op in GROUPED_OPS and a["bound"] == "compute" and \
                a["bytes_per_s"] / bandwidth_bytes_per_s > a["flops_per_s"] / peak_flops_per_s:
            a = {**a, "bound": "memory"}  # a prefill's few rows a group: its read bounds it
        if a and a["bound"] == "compute":
            peak_flops_per_s = a["flops_per_s"]
        hot = self.in_l2(r) if cls in ("elementwise", "generic", "reduction") else 0
        t = max(r.flops / peak_flops_per_s, (r.bytes - hot) / bandwidth_bytes_per_s
                + (hot / self.l2_bytes_per_s if hot else 0.0))
        if a and a["bound"] == "memory":
            read = attention_bytes(r) if cls == "attention" else r.bytes
            t = max(r.flops / peak_flops_per_s, read / a["bytes_per_s"])
        loops = self.loop_elements_per_s
        op = r.op.rstrip("_")
        own = loops.get(f"{op} {path(r)}", loops.get(op)) if cls == "generic" else None
        if own:
            t = max(t, r.out_elements / _nearest(own, r.itemsize))
        elif cls == "generic":
            copy = r.op in COPY_OPS and r.in_itemsize == r.itemsize  # not a widening cast
            per = 1 / self.generic_rate(r.itemsize, copy)
            if hot and not copy and self.generic_l2_elements_per_s:  # the read share in L2
                f = hot / r.bytes_read
                per = (1 - f) * per + f / _nearest(self.generic_l2_elements_per_s, r.itemsize)
            t = max(t, r.out_elements * per)
        if cls == "indexed" and self.indexed_elements_per_s:
            t = max(t, r.out_elements / _nearest(self.indexed_elements_per_s, r.itemsize))
        cold = self.hbm_s if r.reads_weight and cls not in ("matmul", "attention") else 0.0
        extra = self.gemm_extra_s.get(gemm_kind(r), 0.0)
        return self.floor(r) + cold + t + extra


def _dtype(itemsize: int) -> torch.dtype:
    """The floating dtype a reference call takes for an op's element size."""
    return {2: torch.bfloat16, 4: torch.float32}.get(itemsize, torch.float16)


def _nearest(rates: dict[int, float], itemsize: int) -> float:
    """The rate measured for the element size nearest ``itemsize`` (the smaller on a tie)."""
    return rates[min(sorted(rates), key=lambda s: (abs(s - itemsize), s))]


DECODE_MAX_Q = 16  # an attention op with at most this many queries per sequence is a decode


def attention_window(r: count.OpRecord) -> int | None:
    """The sliding window a causal prefill's count implies (fewer pairs than causal: rooflab's
    kernel with a window, formulas._sdpa), else None."""
    q, k, v = (torch.empty(s, device="meta") for s in r.shapes[:3])
    lq, lkv = q.shape[-2], k.shape[-2]
    if lq != lkv or r.macs >= formulas._sdpa(q, k, v, True)[0]:
        return None
    lo, hi = 1, lkv  # the pairs grow with the window: the least window that counts as many
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if formulas._sdpa(q, k, v, True, mid)[0] < r.macs else (lo, mid)
    return lo


def attention_key(r: count.OpRecord, sm_count: int = 0) -> str:
    """What decides an attention kernel's speed: the backend op, head dim, element size, mask
    (an attention-bias operand), causal (fewer MACs than dense), a sliding window, a softcap
    (FLOPs past the matmuls': formulas._sdpa_op), and phase;
    for a decode, and a prefill too small to fill ``sm_count`` SMs, its shapes too (how many
    programs share the GPU: see _attention_reference)."""
    lq, d = r.shapes[0][-2:]
    dense, _ = formulas._sdpa(*(torch.empty(s, device="meta") for s in r.shapes[:3]))  # every pair
    causal = r.macs < dense  # with a mask too: rooflab's kernel with a padded batch's keys
    # a mask: an operand past q, k, v of two or more dims (SDPA's bias, rooflab's kept keys;
    # not attention sinks, one logit a head)
    masked = any(len(s) >= 2 for s in r.shapes[3:])
    window = attention_window(r) if causal else None
    mask = " ".join(["causal"] * causal + ["mask"] * masked + [f"window {window}"] * bool(window)
                    + ["softcap"] * (r.flops > 2 * r.macs)) or "none"
    kind = f"{r.op} d{d} {8 * r.itemsize}-bit {mask}"
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    phase = "decode" if lq <= DECODE_MAX_Q else "prefill"
    if own_shapes(r, sm_count):
        return f"{kind} {phase} {shape(r.shapes[0])} q {shape(r.shapes[1])} k"
    return f"{kind} {phase}"


def attention_kind(r: count.OpRecord, sm_count: int = 0) -> str | None:
    """r's key in OpCosts.attention, None for an op of another class."""
    return attention_key(r, sm_count) if op_class(r) == "attention" else None


def attention_bytes(r: count.OpRecord) -> int:
    """Bytes of every operand as its shape says, views expanded: what a decode kernel streams.
    (Where K/V heads are a broadcast view, the counter's bytes hold one copy, but each query
    head's program reads its own: cuDNN's decode over 4 views of one KV head takes the time of
    4.)"""
    return sum(math.prod(s) for s in r.shapes) * r.itemsize + r.bytes_written


ATTENTION_TILE_ROWS = 64  # queries per program of a fused attention forward (FA2, cuDNN: 64-128)


def under_filled(r: count.OpRecord, sm_count: int) -> bool:
    """Whether an attention prefill has fewer programs (one per head and ATTENTION_TILE_ROWS
    queries) than ``sm_count`` SMs; never off a GPU (sm_count 0)."""
    (*lead, lq, _) = r.shapes[0]
    return math.prod(lead) * -(-lq // ATTENTION_TILE_ROWS) < sm_count


def own_shapes(r: count.OpRecord, sm_count: int) -> bool:
    """Whether an attention op's rate is measured on its own shapes: a decode's always, a
    prefill's where it is under_filled (see _attention_reference)."""
    return r.shapes[0][-2] <= DECODE_MAX_Q or under_filled(r, sm_count)


def _attention_reference(r: count.OpRecord, device: str, sm_count: int = 0) -> Callable:
    """A call of the same kind as ``r`` on a reference shape: a prefill's 32 query heads (at
    least one sequence) of 4096 tokens on a GPU, 256 on a CPU; a decode's own shapes (a decode
    kernel splits each head's keys over programs by rules of its own, and a decode of 8 x 16
    heads leaves SMs idle that 512 heads fill: docs/predictions.md), and so a prefill's too
    small to fill ``sm_count`` SMs; v as wide as r's (narrower than q and k in latent
    attention), a window as r's (attention_window).
    The same backend is forced; a mask is a float bias of zeros (the kernels read it whatever it
    holds)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q_shape, k_shape = r.shapes[0], r.shapes[1]
    heads, kv_heads, d = q_shape[-3], k_shape[-3], q_shape[-1]
    key = attention_key(r, sm_count)
    gpu = torch.device(device).type == "cuda"  # "cuda:1" on a tensor-parallel rank
    dtype = _dtype(r.itemsize)
    if own_shapes(r, sm_count):
        batch, lq, n = math.prod(q_shape[:-3]), q_shape[-2], k_shape[-2]
    else:
        n = lq = 4096 if gpu else 256
        batch = max(1, 32 // heads)
    q = torch.randn(batch, heads, lq, d, device=device, dtype=dtype)
    k = torch.randn(batch, kv_heads, n, d, device=device, dtype=dtype)
    v = torch.randn(batch, kv_heads, n, r.shapes[2][-1], device=device, dtype=dtype)
    mask = (torch.zeros(batch, 1, lq, n, device=device, dtype=dtype) if " mask " in key
            else None)
    causal = " causal " in key
    window = attention_window(r) if causal else None
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "flash": SDPBackend.FLASH_ATTENTION}
    chosen = [b for name, b in backend.items() if name in r.op] or list(backend.values())
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if r.op in ROOFLAB_ATTENTION_OPS:  # rooflab's own kernel, on the same reference shape
        from rooflab.kernels import hf_attention  # noqa: F401 - defines torch.ops.rooflab
        op = getattr(torch.ops.rooflab, r.op)
        extra = {"keep": torch.ones(batch, n, device=device, dtype=torch.bool)} if (
            mask is not None) else {}  # kept keys: the one mask the kernels take
        if window:
            extra["window"] = window
        if " softcap" in key:  # the cap's value does not change the work
            extra["softcap"] = 50.0
        return lambda: op(q, k, v, causal, d ** -0.5, **extra)

    def call():
        with sdpa_kernel(chosen):
            return sdpa(q, k, v, attn_mask=mask, is_causal=causal,
                        enable_gqa=kv_heads != heads)
    return call


def _timed_reference(call: Callable, device: str, name: str):
    """A reference call counted and timed (L2 flushed): (its records, device seconds), or
    (None, why not) where it cannot run here (out of memory, no kernel for the shape)."""
    try:
        with torch.no_grad(), count.Counter() as c:
            call()
        return c.records, time_call(call, warmup=3, budget_s=0.2, max_reps=50, flush_l2=True,
                                    wall=False, device=device, name=name).device_s
    except (RuntimeError, ValueError) as e:  # a kernel that refuses the shape says why
        return None, str(e).splitlines()[0][:160]


def measure_attention(costs: OpCosts, records: list[count.OpRecord], device: str) -> OpCosts:
    """Adds to ``costs`` the rate of each kind of attention op in ``records`` not yet measured:
    its reference call (_attention_reference) counted and timed (L2 flushed). A kind whose
    reference cannot run here (out of memory, a backend that refuses the shape) keeps the
    roofline's terms and says why."""
    def rate(key: str, refs: list[count.OpRecord], t: float) -> dict:
        refs = [x for x in refs if op_class(x) == "attention"]
        if len(refs) != 1:  # the reference fell back to separate matmuls and a softmax
            return {"error": "the reference ran no fused attention kernel"}
        ref = refs[0]
        return {"bound": "memory" if " decode " in key else "compute",
                "flops_per_s": ref.flops / t, "bytes_per_s": attention_bytes(ref) / t,
                "reference": f"{'x'.join(map(str, ref.shapes[0]))} q, {ref.shapes[1][-2]} keys"}
    n = costs.sm_count
    _measure_kinds(costs.attention, records, lambda r: attention_kind(r, n),
                   lambda r, device: _attention_reference(r, device, n), rate, device, "attention")
    return costs


def _measure_kinds(store: dict, records: list[count.OpRecord], key_of: Callable,
                   reference: Callable, rate: Callable, device: str, label: str) -> None:
    """For each kind (key_of) in ``records`` not yet in ``store``: its reference (reference(r,
    device)) counted and timed, and store[kind] = rate(kind, the reference's records, seconds),
    or {"error": why} where the reference cannot run here."""
    for r in records:
        key = key_of(r)
        if key is None or key in store:
            continue
        refs, t = _timed_reference(reference(r, device), device, f"{label} {key}")
        store[key] = {"error": t} if refs is None else rate(key, refs, t)


GROUPED_OPS = {"_grouped_mm"}


def groups_read(r: count.OpRecord) -> int:
    """How many of a grouped GEMM's matrices it reads: its bytes (formulas count the matrices of
    groups with rows) less rows and output, over one matrix's."""
    rows, (e, k, n) = r.shapes[0][0], r.shapes[1]
    matrices = r.bytes - rows * (k + n) * r.itemsize
    return max(1, min(e, round(matrices / (k * n * r.itemsize))))


def grouped_key(r: count.OpRecord) -> str:
    """What decides a grouped GEMM's speed: its matrices (K x N), element size and rows a group
    with rows: a decode's few (each expert's weights read for one or two tokens: bound by the
    read, at the rate the grouped kernel reaches on so few rows, which grows with the groups
    read side by side: a token's k experts, more for several tokens, to a power of two) or a
    prefill's many: its own groups where known (a tag of their sizes in order), else their
    average, which picks the kernel's tiles (PyTorch's dispatcher on Hopper takes 64 x 128 tiles
    where it is at most 128, else 128 x 256: ATen's GroupMM.cu)."""
    rows, (e, k, n) = r.shapes[0][0], r.shapes[1]
    used = groups_read(r)
    per = max(1, round(rows / used))
    if per > DECODE_MAX_Q:
        kind = f"_grouped_mm {k}x{n} {8 * r.itemsize}-bit prefill"
        if sum(r.group_rows):
            tag = hashlib.blake2s(repr(r.group_rows).encode(), digest_size=4).hexdigest()
            return f"{kind} {rows} rows as routed {tag}"
        return f"{kind} {max(1, rows // e)} rows"
    return f"_grouped_mm {k}x{n} {8 * r.itemsize}-bit {per} rows " \
           f"{min(e, 2 ** round(math.log2(used)))} groups"


def grouped_kind(r: count.OpRecord) -> str | None:
    """r's key in OpCosts.grouped, None for an op that is no grouped GEMM of 3-D matrices."""
    return grouped_key(r) if r.op in GROUPED_OPS and len(r.shapes[1]) == 3 else None


def uniform_draw(rows: int, groups: int) -> list[int]:
    """Rows a group as a uniform router sends them (a seeded multinomial draw): the spread a
    prefill's reference is timed at where its groups are unknown. Exactly even groups are a
    best case no router produces (their rows fill whole tiles: docs/predictions.md)."""
    gen = torch.Generator().manual_seed(0)
    return torch.multinomial(torch.ones(groups), rows, True, generator=gen).bincount(
        minlength=groups).tolist()


def _grouped_reference(r: count.OpRecord, device: str) -> Callable:
    """A grouped GEMM of r's kind: at decode its groups (a power of two) of its rows a group,
    every group alike; at prefill its own groups where known, else its average rows a group over
    all of its groups, spread as a uniform router draws them (uniform_draw). The matrices are a
    transposed view of (E, N, K), as a model's experts pass their weights."""
    (e, k, n), key = r.shapes[1], grouped_key(r)
    dtype = _dtype(r.itemsize)
    words = key.split()
    if key.endswith(" groups"):
        groups, per = int(words[-2]), int(words[-4])
        sizes = [per] * groups
    else:
        groups = e
        sizes = list(r.group_rows) if " as routed " in key else uniform_draw(e * int(words[-2]), e)
    a = torch.randn(sum(sizes), k, device=device, dtype=dtype)
    b = torch.randn(groups, n, k, device=device, dtype=dtype).transpose(-2, -1)
    offs = torch.tensor(sizes).cumsum(0).to(device=device, dtype=torch.int32)
    return lambda: torch._grouped_mm(a, b, offs=offs)


GEMM_OPS = {"mm", "addmm"}  # a projection as the counter sees it: x @ W^T (+ b)


def gemm_key(r: count.OpRecord) -> str:
    """A GEMM's shapes and element size: what cuBLAS picks its kernels by."""
    return f"{r.op} {'x'.join(map(str, r.shapes[-2]))} @ {'x'.join(map(str, r.shapes[-1]))} " \
           f"{8 * r.itemsize}-bit"


def gemm_kind(r: count.OpRecord) -> str | None:
    """r's key in OpCosts.gemm_extra_s, None for an op that is no 2-D GEMM."""
    return gemm_key(r) if r.op in GEMM_OPS and len(r.shapes[-1]) == 2 else None


def _gemm_reference(r: count.OpRecord, device: str) -> Callable:
    """The GEMM r is, alone: random x, a weight's transpose as a linear passes it, a bias for
    addmm."""
    (m, k), (_, n) = r.shapes[-2], r.shapes[-1]
    a, w, bias = (torch.randn(*s, device=device, dtype=_dtype(r.itemsize))
                  for s in ((m, k), (n, k), (n,)))
    return (lambda: torch.addmm(bias, a, w.t())) if r.op == "addmm" else (lambda: a @ w.t())


def measure_gemm_extra(costs: OpCosts, records: list[count.OpRecord], device: str) -> OpCosts:
    """For each GEMM shape in ``records`` not yet seen, on a GPU: the same GEMM alone
    (_gemm_reference) profiled, and the device time of every kernel but its longest, per call:
    what a split-K adds to the read of its weights."""
    if torch.device(device).type != "cuda":
        return costs
    for r in records:
        key = gemm_kind(r)
        if key is None or key in costs.gemm_extra_s:
            continue
        prof = P.profile(_gemm_reference(r, device), iters=3, warmup=2, device=device)
        main = max((x.total_us for x in prof.kernels), default=0.0)
        costs.gemm_extra_s[key] = max(0.0, prof.device_time_us - main) / prof.iters / 1e6
    return costs


FEW_ROWS = 1024  # a reduction to at most this many rows is timed alone (see the docstring)
GEMM_FEW_ROWS = 64  # a GEMM of at most this many rows (a decode's projection), on a GPU
ALONE_REDUCTIONS = {"mean": torch.mean, "sum": torch.sum, "amax": torch.amax}


def _few_row_gemm(r: count.OpRecord) -> bool:
    return gemm_kind(r) is not None and r.shapes[-2][0] <= GEMM_FEW_ROWS


def timed_alone(r: count.OpRecord) -> bool:
    """A top-k or sort, a reduction of the last dimension to at most FEW_ROWS rows, or a GEMM
    of at most GEMM_FEW_ROWS rows."""
    if op_class(r) == "select" or _few_row_gemm(r):
        return True
    shape = r.shapes[0] if r.shapes else ()
    return (r.op in ALONE_REDUCTIONS and len(shape) > 0 and 0 < r.out_elements <= FEW_ROWS
            and r.out_elements * shape[-1] == math.prod(shape))


def alone_key(r: count.OpRecord) -> str:
    """An op timed alone: its shape, output and element size, what its kernels step with (a
    GEMM: gemm_key)."""
    if r.op in GEMM_OPS:
        return gemm_key(r)
    return f"{r.op} {'x'.join(map(str, r.shapes[0]))} -> {r.out_elements} " \
           f"{8 * (r.in_itemsize or r.itemsize)}-bit"


def alone_kind(r: count.OpRecord) -> str | None:
    """r's key in OpCosts.alone_s, None for an op that is not timed alone."""
    return alone_key(r) if timed_alone(r) else None


def _alone_reference(r: count.OpRecord, device: str) -> Callable | None:
    """The same op on random data of r's shape and element size (integers for 8 bytes: a
    router's expert indices), along the last dimension; a GEMM as _gemm_reference makes it;
    None for an op of another kind."""
    if _few_row_gemm(r):
        return _gemm_reference(r, device)
    shape, size = r.shapes[0], r.in_itemsize or r.itemsize
    x = (torch.randint(0, 1 << 16, shape, device=device) if size == 8 else torch.randn(
        shape, device=device, dtype=_dtype(size)))
    if r.op == "topk":
        k = max(1, r.out_elements // (2 * math.prod(shape[:-1])))  # values and indices
        return lambda: torch.topk(x, k)
    if r.op in ALONE_REDUCTIONS:
        return lambda: ALONE_REDUCTIONS[r.op](x, -1, keepdim=True)
    return (lambda: torch.sort(x)) if r.op in ("sort", "argsort", "msort") else None


def measure_alone(costs: OpCosts, records: list[count.OpRecord], device: str) -> OpCosts:
    """Each top-k, sort and few-row reduction shape in ``records`` not yet timed, timed alone
    (warm: in a layer its input was just written); on a GPU each few-row GEMM shape too, L2
    flushed (a layer's weight is read from HBM), as cuBLAS spreads a narrow weight's read over
    few SMs (docs/predictions.md)."""
    gpu = torch.device(device).type == "cuda"
    for r in records:
        key = alone_kind(r) if gpu or r.op not in GEMM_OPS else None
        call = _alone_reference(r, device) if key and key not in costs.alone_s else None
        if call:
            costs.alone_s[key] = time_call(
                call, warmup=3, budget_s=0.1, max_reps=100, flush_l2=r.op in GEMM_OPS,
                wall=False, device=device, name=key).device_s
    return costs


def measure_rates(costs: OpCosts, records: list[count.OpRecord], device: str) -> OpCosts:
    """The measured rate of each kind of fused kernel in ``records``: attention
    (measure_attention) and grouped GEMMs (each kind's reference counted and timed, L2 flushed:
    bytes/s at decode, FLOP/s at prefill); what cuBLAS adds to each GEMM shape
    (measure_gemm_extra); and each top-k, sort, few-row reduction and few-row GEMM, timed alone
    (measure_alone)."""
    measure_attention(costs, records, device)
    measure_gemm_extra(costs, records, device)
    measure_alone(costs, records, device)

    def rate(key: str, refs: list[count.OpRecord], t: float) -> dict:
        (ref,) = [x for x in refs if x.op in GROUPED_OPS]
        return {"bound": "memory" if key.endswith(" groups") else "compute",
                "flops_per_s": ref.flops / t, "bytes_per_s": ref.bytes / t,
                "reference": f"{ref.shapes[0][0]} rows in {ref.shapes[2][0]} groups of "
                             f"{'x'.join(map(str, ref.shapes[1][1:]))}"
                             + ("" if key.endswith(" groups") else ", as routed"
                                if " as routed " in key else ", a uniform router's draw")}
    _measure_kinds(costs.grouped, records, grouped_kind, _grouped_reference, rate, device,
                   "grouped")
    return costs


def attention_summary(attention: dict[str, dict]) -> str:
    """The measured attention rates in words: 'KEY 271 TFLOP/s; KEY 3.5 TB/s' (FLOP/s for a
    prefill, bytes/s for a decode), or why a kind's reference could not run (it is then
    predicted on the roofline's ceilings)."""
    def rate(a: dict) -> str:
        if "bound" not in a:
            return f"not measured ({a.get('error', 'no reference')}): on the roofline"
        return (si(a["flops_per_s"], "FLOP/s") if a["bound"] == "compute"
                else si(a["bytes_per_s"], "B/s"))
    return "; ".join(f"{k} {rate(a)}" for k, a in sorted(attention.items()))


CHAIN = 8  # tiny kernels per measured chain


def _tiny_ops(device: str) -> dict[str, Callable]:
    """One tiny op per class and generic kind (FLOORS): on a GPU a decode step's 16 rows of 640,
    far below one wave; on a CPU smaller still, so that the floor is the op's fixed cost and not
    its arithmetic. The strided kind negates the second half of each 128 values (RoPE's rotate
    on a head-transposed q); select is a top 8 of each row."""
    gpu = device == "cuda"
    rows, cols, head_dim = (16, 640, 256) if gpu else (4, 64, 64)
    x, col = torch.randn(rows, cols, device=device), torch.randn(rows, 1, device=device)
    narrow = x.to(torch.bfloat16)
    half = 64 if gpu else 16
    strided = x.view(rows, -1, 2 * half)[..., half:]
    mm_dtype = torch.bfloat16 if gpu else torch.float32
    xm, w = x.to(mm_dtype), torch.randn(cols, cols, device=device, dtype=mm_dtype)
    q = torch.randn(rows, 4, 1, head_dim, device=device, dtype=mm_dtype)
    kv = torch.randn(rows, 4, 64 if gpu else 16, head_dim, device=device, dtype=mm_dtype)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {"elementwise": lambda: x * x, "generic": lambda: x * col,
            "reduction": lambda: x.mean(-1), "matmul": lambda: xm @ w,
            "attention": lambda: sdpa(q, kv, kv), "indexed": lambda: torch.roll(x, 1, 0),
            "select": lambda: torch.topk(x, 8), "generic widening": lambda: narrow.float(),
            "generic strided": lambda: -strided}


def tiny_kernel_s(fn, device: str) -> float:
    """Device time of one call of a tiny op: a chain of CHAIN calls, per call."""
    def chain():
        return [fn() for _ in range(CHAIN)]

    if device == "cuda":
        prof = P.profile(capture_graph(chain), iters=10, warmup=3, device=device)
        return prof.device_time_us / prof.iters / CHAIN / 1e6
    return time_call(chain, warmup=3, budget_s=0.05, device=device).median_s / CHAIN


def generic_rate(device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of a broadcast multiply (rows x 1024) * (rows x 1): generic loop."""
    a = torch.randn(elements // 1024, 1024, device=device, dtype=dtype)
    col = torch.randn(elements // 1024, 1, device=device, dtype=dtype)
    t = time_call(lambda: a * col, warmup=3, budget_s=0.2, device=device, name="broadcast multiply")
    return a.numel() / t.device_s


def generic_copy_rate(device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of a copy from a source broadcast 4 ways (rows, 1, 1024) ->
    (rows, 4, 1024), as repeat_kv expands KV heads: generic loop, two operands."""
    src = torch.randn(elements // 4096, 1, 1024, device=device, dtype=dtype)
    dst = torch.empty(elements // 4096, 4, 1024, device=device, dtype=dtype)
    wide = src.expand_as(dst)
    t = time_call(lambda: dst.copy_(wide), warmup=3, budget_s=0.2, device=device,
                  name="broadcast copy")
    return dst.numel() / t.device_s


def l2_rates(l2_bytes: int, dtypes, device: str = "cuda") -> tuple[float, dict[int, float]]:
    """On a GPU, with every operand in L2 (a chain of calls on the same tensors, together at
    most a quarter of ``l2_bytes``): a copy's bytes per second, and a broadcast multiply's
    elements per second by element size, each the slope between two sizes so the kernel's
    fixed cost drops out (0, and not used, where the larger did not take longer)."""
    def slope(make):
        (t1, w1), (t2, w2) = ((tiny_kernel_s(fn, device), work)
                              for fn, work in (make(l2_bytes // 16), make(l2_bytes // 4)))
        return (w2 - w1) / (t2 - t1) if t2 > t1 else 0.0

    def copy(n):  # n bytes moved: n / 2 read, n / 2 written
        src, dst = (torch.empty(n // 8, device=device, dtype=torch.float32) for _ in "sd")
        return (lambda: dst.copy_(src)), src.numel() * 8

    def multiply(dt):
        def make(n):  # n bytes moved: rows x 1024 read and written (and a column)
            rows = n // (2 * 1024 * torch.finfo(dt).bits // 8)
            a = torch.randn(rows, 1024, device=device, dtype=dt)
            col, out = torch.randn(rows, 1, device=device, dtype=dt), torch.empty_like(a)
            return (lambda: torch.mul(a, col, out=out)), a.numel()
        return make
    rates = {torch.finfo(dt).bits // 8: slope(multiply(dt)) for dt in dtypes}
    return slope(copy), {size: r for size, r in rates.items() if r}


def roll_rate(device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of torch.roll by one row of (batch, 512, 256), as a sliding-window
    cache rolls its keys: the indexed class."""
    a = torch.randn(elements // (512 * 256), 512, 256, device=device, dtype=dtype)
    t = time_call(lambda: torch.roll(a, -1, -2), warmup=3, budget_s=0.2, device=device, name="roll")
    return a.numel() / t.device_s


def loop_rate(op: str, device: str, dtype: torch.dtype, elements: int) -> float:
    """Elements per second of a LOOP_OPS op: a gather of rows (x[idx], 8 output rows per row of
    a table of 1024 columns, as a router sends each token to 8 experts), a fill of rows under
    a broadcast boolean mask (rows x 1024, a mask of rows x 1), or RoPE's on q of 8 heads of
    128 as transformers leaves it, (1, L, 8, 128) seen as (1, 8, L, 128): cat((-x2, x1), -1) of
    its halves and (q * cos) + (rotate_half(q) * sin), the first in q's order, the second not;
    or such a k written into the first L rows of a static cache of 2L (index_copy_)."""
    if op in ("cat", "add strided", "index_copy"):
        q = torch.randn(1, elements // 1024, 8, 128, device=device, dtype=dtype).transpose(1, 2)
        if op == "index_copy":
            cache = torch.zeros(1, 8, 2 * q.shape[2], 128, device=device, dtype=dtype)
            rows = torch.arange(q.shape[2], device=device)
            fn = lambda: cache.index_copy_(2, rows, q)  # noqa: E731
        elif op == "cat":
            x1, neg_x2 = q[..., :64], -q[..., 64:]
            fn = lambda: torch.cat((neg_x2, x1), dim=-1)  # noqa: E731
        else:
            a, b = q * 2.0, torch.randn(q.shape, device=device, dtype=dtype)
            fn = lambda: a + b  # noqa: E731
        return q.numel() / time_call(fn, warmup=3, budget_s=0.2, device=device,
                                     name=op).device_s
    rows = elements // 1024
    a = torch.randn(rows // 8 if op == "index" else rows, 1024, device=device, dtype=dtype)
    if op == "index":
        idx = torch.randint(0, a.shape[0], (rows,), device=device)
        fn = lambda: a[idx]  # noqa: E731
    else:
        mask = torch.rand(rows, 1, device=device) > 0.5
        fn = lambda: a.masked_fill(mask, 0.0)  # noqa: E731
    return rows * 1024 / time_call(fn, warmup=3, budget_s=0.2, device=device, name=op).device_s


def hbm_latency_s(device: str) -> float:
    """A decode's norm weight times its rows (640 values times 16 rows), timed with L2 flushed
    before each call and without, the difference (0 off a GPU: a CPU's caches are not flushed
    this way and its kernels are not latency-bound)."""
    if device != "cuda":
        return 0.0
    w = torch.randn(640, device=device, dtype=torch.bfloat16)
    x = torch.randn(16, 1, 640, device=device, dtype=torch.bfloat16)
    cold, warm = (time_call(lambda: w * x, warmup=5, budget_s=0.05, max_reps=200, flush_l2=f,
                            wall=False, device=device, name="weight times rows").device_s
                  for f in (True, False))
    return max(0.0, cold - warm)


def graph_gap_s(fn, kernels: int = 256) -> float:
    """Per kernel, the idle time between two kernels of a CUDA-graph replay of ``kernels`` tiny
    kernels, read from one replay's trace kernel to kernel: the figure a model's own graph
    replay gives (why not events around the replay: docs/predictions.md)."""
    replay = capture_graph(lambda: [fn() for _ in range(kernels)])
    warm_until = time.perf_counter() + 0.05  # an idle GPU's clocks ramp up first
    while time.perf_counter() < warm_until:
        replay()
        torch.cuda.synchronize()
    one = P.profile(replay, iters=1, warmup=1, device="cuda")
    return one.timeline["idle_us"] / max(1, one.launches - 1) / 1e6


def measure_op_costs(device: str) -> OpCosts:
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
    roll_rates = {torch.finfo(dt).bits // 8: roll_rate(device, dt, n) for dt in dtypes}
    loops = {op: {torch.finfo(dt).bits // 8: loop_rate(op, device, dt, n) for dt in dtypes}
             for op in LOOP_OPS}
    gap = (statistics.median(graph_gap_s(ops[c]) for c in CLASSES if c != "select")
           if device == "cuda" else 0.0)  # (a select launches several kernels a call)
    props = torch.cuda.get_device_properties(0) if device == "cuda" else None
    l2 = props.L2_cache_size // 2 if props else 0  # what one activation fills (OpCosts)
    l2_copy, l2_generic = l2_rates(l2, dtypes) if l2 else (0.0, {})
    return OpCosts(device, floors, rates, gap, copy_rates, indexed_elements_per_s=roll_rates,
                   sm_count=props.multi_processor_count if props else 0,
                   hbm_s=hbm_latency_s(device), loop_elements_per_s=loops, l2_bytes=l2,
                   l2_bytes_per_s=l2_copy, generic_l2_elements_per_s=l2_generic)
