"""Per-aten-op formulas for the dispatch counter (count.py): FLOPs from shapes alone (as
torch.utils.flop_counter registers them), bytes where an op touches less than its arguments
(gathers, scatters), and the op sets: views, ops without FLOPs, reductions, pointwise ops.
Per-element constants come from cost.py, so both paths count alike. Register your own with
``register`` / ``register_bytes``; a second registration for one op is refused."""
from __future__ import annotations

import math
from typing import Callable

import torch

from rooflab.cost import (BATCHNORM_CHANNEL_FLOPS, BATCHNORM_FLOPS, BATCHNORM_STATS_FLOPS,
                          GELU_TANH_FLOPS, LAYERNORM_FLOPS, LSTM_CELL_FLOPS, RMSNORM_FLOPS,
                          RMSNORM_ROW_FLOPS, SILU_FLOPS, SOFTCAP_FLOPS, SOFTMAX_FLOPS,
                          attention_pairs)

aten = torch.ops.aten

# --- the registry ---------------------------------------------------------------------------

FLOP_FORMULAS: dict[object, Callable[..., tuple[int, int]]] = {}  # packet -> (macs, flops)
BYTE_FORMULAS: dict[object, Callable[..., tuple[int, int]]] = {}  # packet -> (read, written)


def _registrar(table: dict, what: str):
    def register(*packets):
        def wrap(fn):
            for p in packets:
                if p in table:
                    raise ValueError(f"a {what} for {p} is already registered")
                table[p] = fn
            return fn

        return wrap

    return register


# register a shape-only (args, out) -> (macs, flops) formula for aten op packets
register = _registrar(FLOP_FORMULAS, "formula")
# register an (args, outs) -> (bytes read, bytes written) formula for aten op packets
register_bytes = _registrar(BYTE_FORMULAS, "byte formula")


def _shape(x) -> tuple[int, ...]:
    return tuple(x.shape)


def _ops(*names):
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


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


@register(*_ops("_grouped_mm"))
def _grouped_mm(args, out):
    """A mixture's experts as one grouped GEMM: rows of ``self`` in groups (offs), each group
    times its own matrix of ``mat2``. Every row meets one matrix, so MACs = rows x K x N
    whatever the grouping (2-D x 3-D, 3-D x 3-D); 2-D x 2-D groups the contraction instead."""
    a, b = args[0], args[1]
    if a.dim() == 2 and b.dim() == 2:  # (M, K total) x (K total, N): K cut into groups
        macs = _shape(a)[0] * _shape(a)[1] * _shape(b)[1]
    else:
        macs = out[0].numel() * _shape(a)[-1]
    return macs, 2 * macs


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
    # reached only where composite ops are not decomposed (count.Counter refuses inference
    # mode, where they are not; a tracer may still hand one over)
    x, w = args[0], args[1]
    rows, (n, k) = x.numel() // x.shape[-1], _shape(w)
    bias = rows * n if len(args) > 2 and args[2] is not None else 0
    return rows * k * n, 2 * rows * k * n + bias


def _sdpa(q, k, v, causal: bool = False, window: int | None = None) -> tuple[int, int]:
    """QK^T and PV. Dense, as FlopCounterMode counts; with is_causal and Lq == Lkv, the causal
    pairs only, which is what the fused kernels compute (they skip masked blocks), at most
    ``window`` a query where a kernel takes a sliding window (rooflab's)."""
    *lead, lq, d = _shape(q)
    lkv, dv = _shape(k)[-2], _shape(v)[-1]
    pairs = lq * (lq + 1) // 2 if (causal and lq == lkv) else lq * lkv
    if causal and window:
        pairs = attention_pairs(lq, lkv, True, window)
    macs = math.prod(lead) * pairs * (d + dv)
    return macs, 2 * macs


SDPA_OPS = [getattr(aten, n) for n in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_flash_attention_forward", "_efficient_attention_forward") if hasattr(aten, n)]


@register(*SDPA_OPS)
def _sdpa_op(args, out, named=None):
    named = named or {}
    macs, flops = _sdpa(args[0], args[1], args[2], bool(named.get("is_causal", False)),
                        named.get("window"))
    if named.get("softcap"):  # rooflab's kernels cap every score they compute
        flops += SOFTCAP_FLOPS * macs // (_shape(args[0])[-1] + _shape(args[2])[-1])
    return macs, flops


NAMED_OPS = set(SDPA_OPS)  # formulas that read arguments by name (flags, or keywords)


def register_named(*packets):
    """``register`` for a formula that reads its arguments by name: (args, out, named)."""
    NAMED_OPS.update(packets)
    return register(*packets)


@register_named(*_ops("_native_multi_head_attention"))
def _native_mha(args, out, named=None):
    """nn.MultiheadAttention's fused path (eval, no grad; (B, L, E) batch-first): the q, k, v
    and output projections with their biases and the attention core, counted as the unfused
    path counts them (linear, SDPA), so that both paths of one module count alike."""
    n = named or {}
    q, k = n["query"], n["key"]
    (b, lq, e), lk = _shape(q), _shape(k)[1]

    proj = b * lq * e * e + 2 * b * lk * e * e + b * lq * e * e  # q; k, v; out
    core = 2 * b * lq * lk * e  # QK^T and PV over heads x head_dim = E
    biases = (b * lq * e + 2 * b * lk * e) * (n.get("qkv_bias") is not None) + b * lq * e * (
        n.get("proj_bias") is not None)
    return proj + core, 2 * (proj + core) + biases


@register_named(*_ops("mkldnn_rnn_layer"))
def _mkldnn_rnn_layer(args, out, named=None):
    """One layer and direction of nn.LSTM on a CPU (oneDNN): per step, the input's and the
    state's projections onto the G = 4 gates, their biases, the gates joined, and the cell; as
    the same LSTM counts op by op where it runs unfused. Other cells have no formula yet."""
    n = named or {}
    x, w_ih, hidden = n["input"], n["weight0"], int(n["hidden_size"])
    gates = _shape(w_ih)[0] // hidden
    if gates != 4:
        return None
    steps_x_batch = x.numel() // _shape(x)[-1]  # T x B, whichever comes first
    macs = steps_x_batch * (_shape(x)[-1] + hidden) * gates * hidden
    biases = 2 * steps_x_batch * gates * hidden * bool(n.get("has_biases", True))
    cell = steps_x_batch * hidden * (gates + LSTM_CELL_FLOPS)
    return macs, 2 * macs + biases + cell


@register_named(*_ops("native_batch_norm", "_native_batch_norm_legit",
                      "_native_batch_norm_legit_no_training"))
def _batch_norm(args, out, named=None):
    """(x - mean) / sqrt(var + eps) * weight + bias over (N, C, ...); in training, the batch's
    mean and variance first."""
    x = args[0]
    channels = _shape(x)[1] if x.dim() > 1 else _shape(x)[0]
    training = bool((named or {}).get("training", False))
    per = BATCHNORM_FLOPS + BATCHNORM_STATS_FLOPS * training
    return 0, x.numel() * per + channels * BATCHNORM_CHANNEL_FLOPS


@register_named(*_ops("_embedding_bag", "_embedding_bag_forward_only"))
def _embedding_bag(args, out, named=None):
    """Each bag reduces its rows: one FLOP an element of the rows gathered (a reduction), one
    more where per-sample weights scale them, and a divide an output element for a mean."""
    n = named or {}
    weight, idx = n["weight"], n["indices"]
    rows = idx.numel() * _shape(weight)[1]
    weighted = rows if n.get("per_sample_weights") is not None else 0
    mean = out[0].numel() if int(n.get("mode", 0)) == 1 else 0
    return 0, rows + weighted + mean


def register_attention(packet) -> None:
    """Count ``packet``, an attention op of SDPA's contract (q, k, v, then is_causal by name),
    as SDPA is counted, and a softcap's FLOPs where it takes one: rooflab's own kernels as torch
    ops (kernels/hf_attention.py)."""
    if packet not in SDPA_OPS:
        register_named(packet)(_sdpa_op)
        SDPA_OPS.append(packet)


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
    "view_as_complex", "view_as_real",
    "transpose_", "as_strided_", "swapdims_", "swapaxes_", "detach_") if hasattr(aten, n)}
# allocations: memory handed out, nothing read or written, no kernel
ALLOC_OPS = {getattr(aten, n) for n in ("empty", "empty_like", "empty_strided", "new_empty",
                                        "new_empty_strided") if hasattr(aten, n)}
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
    "index_copy_", "resize_", "_index_put_impl_", "index_add", "isnan", "isinf", "sort", "topk",
    "constant_pad_nd", "flip", "roll", "nonzero", "scatter_") if hasattr(aten, n)}
POINTWISE = {getattr(aten, n) for n in (
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "exp", "exp_", "log",
    "tanh", "tanh_", "sigmoid", "sigmoid_", "rsqrt", "sqrt", "pow", "reciprocal", "abs", "clamp",
    "clamp_", "clamp_min", "clamp_max", "maximum", "minimum", "sin", "cos", "erf", "relu",
    "relu_", "addcmul", "addcdiv", "lerp", "rsub", "square", "sign", "log1p", "expm1", "floor",
    "ceil", "round", "remainder", "fmod", "threshold", "hardtanh", "leaky_relu", "elu",
    "softplus", "mish", "exp2", "log2", "atan", "round_", "floor_divide", "cumsum", "polar")
    if hasattr(aten, n)}
REDUCTIONS = {getattr(aten, n) for n in (
    "sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean", "prod", "norm",
    "linalg_vector_norm", "logsumexp", "argmax", "all", "any", "histc") if hasattr(aten, n)}


def flops_of(packet, args, out_tensors, named: dict | None = None) -> tuple[int, int] | None:
    """(macs, flops) of one op, or None where rooflab has no formula for it."""
    if packet in NAMED_OPS:
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


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


@register_bytes(aten.embedding)
def _embedding_bytes(args, outs):
    return _nbytes(args[1]) + _nbytes(outs[0]), _nbytes(outs[0])  # ids + the rows gathered


@register_bytes(*_ops("_embedding_bag", "_embedding_bag_forward_only"))
def _embedding_bag_bytes(args, outs):
    """The rows the bags gather, not the table: indices, offsets, per-sample weights and a row
    an index read; every output written (the sums and the bookkeeping tensors)."""
    weight, idx = args[0], args[1]
    row = _shape(weight)[1] * weight.element_size()
    extra = sum(_nbytes(a) for a in args[2:] if isinstance(a, torch.Tensor))
    return _nbytes(idx) + extra + idx.numel() * row, sum(_nbytes(t) for t in outs)


@register_bytes(aten.index_select)
def _index_select_bytes(args, outs):
    return _nbytes(args[2]) + _nbytes(outs[0]), _nbytes(outs[0])


@register_bytes(*[getattr(aten, n) for n in ("index", "_unsafe_index") if hasattr(aten, n)])
def _index_bytes(args, outs):
    idx = sum(_nbytes(i) for i in args[1] if i is not None)
    return idx + _nbytes(outs[0]), _nbytes(outs[0])


@register(*_ops("index_add_", "index_add"))
def _index_add(args, out):
    return 0, args[3].numel()  # dst.index_add_(dim, index, src): one add a source element


@register_bytes(*_ops("index_add_", "index_add"))
def _index_add_bytes(args, outs):
    """dst.index_add_(dim, index, src) (a mixture's experts adding back into their tokens'
    rows): read the index, src and the rows it adds to; write those rows."""
    return _nbytes(args[2]) + 2 * _nbytes(args[3]), _nbytes(args[3])


@register(*_ops("aminmax"))
def _aminmax(args, out):
    return 0, 2 * args[0].numel()  # a comparison an element for each of min and max


def group_rows(args) -> tuple[int, ...]:
    """The rows of each group of a grouped GEMM (2-D rows x 3-D matrices), read from its offsets
    where they hold data; () on the meta device or without offsets."""
    offs = args[2] if len(args) > 2 and isinstance(args[2], torch.Tensor) else None
    if offs is None or offs.device.type == "meta" or args[1].dim() != 3 or args[0].dim() != 2:
        return ()
    ends = offs.tolist()
    return tuple(e - s for s, e in zip([0] + ends[:-1], ends))


@register_bytes(*_ops("_grouped_mm"))
def _grouped_mm_bytes(args, outs):
    """Rows, offsets and output, and only the matrices of groups that have rows (the experts a
    batch reaches): counted from the offsets where they hold data, else (meta) at most one a
    row."""
    a, b = args[0], args[1]
    offs = args[2] if len(args) > 2 and isinstance(args[2], torch.Tensor) else None
    if b.dim() != 3 or offs is None:
        return sum(_nbytes(x) for x in args if isinstance(x, torch.Tensor)), _nbytes(outs[0])
    if offs.device.type == "meta":
        used = min(_shape(b)[0], _shape(a)[0])
    else:
        ends = offs.tolist()
        used = sum(e > s for s, e in zip([0] + ends[:-1], ends))
    rest = sum(_nbytes(x) for x in args[3:] if isinstance(x, torch.Tensor))  # a bias
    return _nbytes(a) + _nbytes(offs) + used * _nbytes(b) // _shape(b)[0] + rest, \
        _nbytes(outs[0])


@register_bytes(aten.index_copy_)
def _index_copy_bytes(args, outs):
    """dst.index_copy_(dim, index, src) (a KV cache written at its new positions): read the
    index and src, write as many elements as src has."""
    return _nbytes(args[2]) + _nbytes(args[3]), _nbytes(args[3])


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
