"""Analytic cost of the operations the lab talks about. Standard library only.

Counting conventions (stated once; every formula in rooflab obeys them)
-----------------------------------------------------------------------
* 1 MAC (multiply-accumulate) = 2 FLOPs. ``macs`` and ``flops`` are separate exact integers;
  ``flops`` = 2 * macs + the non-MAC work (elementwise, softmax, norms). Elementwise work has
  FLOPs but 0 MACs.
* Bytes are HBM (device memory) traffic, ``elem_bytes`` per element of the dtype in use
  (fp64 8, fp32/tf32 4, bf16/fp16 2, fp8/int8 1).
* ``bytes`` is eager ("unfused") I/O: every kernel reads each of its inputs from HBM and writes
  each output, so a chain of kernels pays for every intermediate.
  ``bytes_fused`` is fused-ideal I/O: each distinct tensor crosses HBM once.
* GEMM C(M,N) = A(M,K) @ B(K,N): MACs = M*K*N, bytes = elem * (M*K + K*N + M*N). GEMV is N = 1.
* Attention core, q (B,H,Lq,D), k/v (B,Hkv,Lkv,D): QK^T and PV are 2 * B*H*Lq*Lkv*D MACs.
  Eager bytes = elem * [(q + k + S)  QK^T reads Q, K, writes S
                        + 5 * S       softmax, the lab's five passes over S
                        + (P + v + o)] PV reads P, V, writes O
  with S = P = B*H*Lq*Lkv scores. Fused-ideal bytes = elem * (q + k + v + o).
  K and V are counted with Hkv heads (GQA/MQA read the shared heads once).
* Causal / sliding-window attention: ``dense`` counts every (query, key) pair, which is what an
  eager kernel computes (the lab's convention); ``causal=True`` counts only the allowed pairs,
  which is what a block-skipping kernel needs.
* Non-MAC FLOPs per element: GeLU-tanh 8, SiLU 5, softmax 5 (max, subtract, exp, sum, divide),
  RMSNorm 4 (square, sum, scale, weight) + 2 per row (+ eps, rsqrt) (+ 1 per weight element
  where the weight is applied as 1 + w, as Gemma does), LayerNorm 7, RoPE 3.5
  (x*cos + rot(x)*sin: 3, and rotate_half negates half the elements), the attention scale
  1 per score, a softcap 3 per score (c * tanh(x / c): divide, tanh, multiply), BatchNorm 4
  (subtract, divide, scale, shift) + 2 per channel (+ eps, sqrt) and, in training, 4 more to
  take the batch's mean and variance, add/mul 1; a reduction 1 per element reduced; an LSTM
  cell 9 per hidden unit (3 sigmoids, 2 tanh, 3 multiplies, 1 add) and one add a gate to join
  the input's and the state's projections.
  Norms, softmax and RoPE are modelled as one kernel each, the way a framework's norm kernel runs.

Each formula is a small shape-only function; the dispatch counter's per-op formulas (formulas.py)
are the registry.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rooflab.errors import RooflabError

DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32", "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "float8": "fp8", "fp8_e4m3": "fp8", "float8_e4m3fn": "fp8",
}

GELU_TANH_FLOPS = 8
SILU_FLOPS = 5  # x * sigmoid(x): negate, exp, add, divide, multiply
SOFTMAX_FLOPS = 5
SCALE_FLOPS = 1  # per score: S * 1/sqrt(D)
SOFTCAP_FLOPS = 3  # per score or logit: c * tanh(x / c)
SOFTMAX_PASSES = 5
RMSNORM_FLOPS = 4
RMSNORM_ROW_FLOPS = 2  # per row: + eps, rsqrt
LAYERNORM_FLOPS = 7
BATCHNORM_FLOPS = 4
BATCHNORM_CHANNEL_FLOPS = 2  # per channel: + eps, sqrt
BATCHNORM_STATS_FLOPS = 4  # training: the batch's mean (add) and variance (subtract, square, add)
LSTM_CELL_FLOPS = 9  # per hidden unit and step: i, f, o sigmoids, g and c tanh, 3 muls, 1 add
ROPE_FLOPS = 3


# weights may be stored narrower than any activation: int4 packs two per byte, and with a group
# size each group of that many weights carries one fp16 scale
WEIGHT_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
SCALE_BYTES = 2


class CostError(RooflabError, ValueError):
    """Bad input to a cost formula (a size that is not a positive integer, an unknown dtype)."""


def dtype_name(dtype: str) -> str:
    """Canonical dtype name ('bf16', ...) from a name or alias; CostError if unknown."""
    key = str(dtype).lower().replace("torch.", "").strip()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise CostError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    return key


def elem_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype_name(dtype)]


def _sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CostError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class Cost:
    """What one operation (or a sum of them) costs: exact integers, units in the names."""

    name: str
    macs: int
    flops: int
    bytes: int
    bytes_fused: int
    kernels: int = 1
    detail: dict = field(default_factory=dict, compare=False)

    @property
    def intensity(self) -> float:
        """FLOPs per eager byte."""
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def intensity_fused(self) -> float:
        return self.flops / self.bytes_fused if self.bytes_fused else math.inf

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(
            f"{self.name}+{other.name}", self.macs + other.macs, self.flops + other.flops,
            self.bytes + other.bytes, self.bytes_fused + other.bytes_fused,
            self.kernels + other.kernels,
        )

    def named(self, name: str) -> "Cost":
        return replace(self, name=name)

    def scaled(self, times: int) -> "Cost":
        """The same op run ``times`` times (e.g. once per layer)."""
        return Cost(self.name, self.macs * times, self.flops * times, self.bytes * times,
                    self.bytes_fused * times, self.kernels * times)

    def as_dict(self) -> dict:
        return {
            "name": self.name, "macs": self.macs, "flops": self.flops, "bytes": self.bytes,
            "bytes_fused": self.bytes_fused, "intensity": self.intensity,
            "intensity_fused": self.intensity_fused, "kernels": self.kernels, **self.detail,
        }


def total(costs, name: str = "total") -> Cost:
    """Sum of costs. bytes_fused of a sum is the sum of each part fused on its own."""
    costs = list(costs)
    out = Cost(name, 0, 0, 0, 0, 0)
    for c in costs:
        out = out + c
    return out.named(name)


def gemm(m: int, k: int, n: int, dtype: str = "fp32") -> Cost:
    """C(M,N) = A(M,K) @ B(K,N). MACs = M*K*N; bytes = e*(M*K + K*N + M*N).

    e.g. m=k=n=2, fp32: macs 8, flops 16, bytes 4*(4+4+4) = 48.
    """
    _sizes(m=m, k=k, n=n)
    e = elem_bytes(dtype)
    io = e * (m * k + k * n + m * n)
    return Cost("gemm", m * k * n, 2 * m * k * n, io, io)


def gemv(m: int, k: int, dtype: str = "fp32") -> Cost:
    """y(M) = A(M,K) @ x(K): GEMM with N = 1. MACs = M*K; bytes = e*(M*K + K + M)."""
    return gemm(m, k, 1, dtype).named("gemv")


def bmm(batch: int, m: int, k: int, n: int, dtype: str = "fp32") -> Cost:
    """``batch`` independent GEMMs: MACs = b*M*K*N; bytes = e*b*(M*K + K*N + M*N)."""
    _sizes(batch=batch)
    return gemm(m, k, n, dtype).scaled(batch).named("bmm")


def weight_bytes(n: int, dtype: str, group_size: int | None = None) -> int:
    """n weights stored in ``dtype`` (int4 included), plus an fp16 scale per group if grouped."""
    if dtype not in WEIGHT_BITS:
        raise CostError(f"weights are stored in one of {', '.join(WEIGHT_BITS)}, got {dtype!r}")
    scales = math.ceil(n / group_size) * SCALE_BYTES if group_size else 0
    return math.ceil(n * WEIGHT_BITS[dtype] / 8) + scales


def linear(tokens: int, d_in: int, d_out: int, dtype: str = "fp32",
           weight_dtype: str | None = None, group_size: int | None = None) -> Cost:
    """x(T, d_in) @ W^T(d_in, d_out): a GEMM with M = tokens, K = d_in, N = d_out; x and y in
    ``dtype``, the weights in ``weight_dtype`` (default the same) with optional group scales.
    bytes = e*(T*d_in + T*d_out) + weight_bytes(d_in*d_out)."""
    c = gemm(tokens, d_in, d_out, dtype).named("linear")
    if weight_dtype is None and group_size is None:
        return c
    io = elem_bytes(dtype) * tokens * (d_in + d_out) + weight_bytes(
        d_in * d_out, weight_dtype or dtype_name(dtype), group_size)
    return replace(c, bytes=io, bytes_fused=io)


def elementwise(numel: int, dtype: str = "fp32", reads: int = 1, writes: int = 1,
                flops_per_elem: int = 1) -> Cost:
    """One kernel over ``numel`` elements: bytes = e*numel*(reads + writes), 0 MACs.

    e.g. x + y on 10 fp32 elements: reads 2, writes 1 -> 120 bytes, 10 FLOPs.
    """
    _sizes(numel=numel)
    io = elem_bytes(dtype) * numel * (reads + writes)
    return Cost("elementwise", 0, numel * flops_per_elem, io, io)


def gelu_tanh(numel: int, dtype: str = "fp32") -> Cost:
    """0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))) as one kernel: 8 FLOPs, read 1, write 1."""
    return elementwise(numel, dtype, 1, 1, GELU_TANH_FLOPS).named("gelu_tanh")


def rmsnorm(rows: int, hidden: int, dtype: str = "fp32", weight_offset: bool = False) -> Cost:
    """y = x / sqrt(mean(x^2) + eps) * w over rows of ``hidden``: 4 FLOPs per element and 2 per
    row; ``weight_offset`` (Gemma's 1 + w) adds one per weight element.

    bytes = e*(rows*hidden read + hidden weight + rows*hidden write).
    """
    _sizes(rows=rows, hidden=hidden)
    io = elem_bytes(dtype) * (2 * rows * hidden + hidden)
    flops = RMSNORM_FLOPS * rows * hidden + RMSNORM_ROW_FLOPS * rows + hidden * weight_offset
    return Cost("rmsnorm", 0, flops, io, io)


def layernorm(rows: int, hidden: int, dtype: str = "fp32") -> Cost:
    """(x - mean)/sqrt(var + eps) * w + b: 7 FLOPs per element; reads x, w, b, writes y."""
    _sizes(rows=rows, hidden=hidden)
    io = elem_bytes(dtype) * (2 * rows * hidden + 2 * hidden)
    return Cost("layernorm", 0, LAYERNORM_FLOPS * rows * hidden, io, io)


def softmax(rows: int, cols: int, dtype: str = "fp32") -> Cost:
    """Row softmax: 5 FLOPs per element. Eager: the lab's 5 passes over the matrix
    (read for max, read + write exp, read + write normalised); fused: read once, write once.
    """
    _sizes(rows=rows, cols=cols)
    n = rows * cols
    e = elem_bytes(dtype)
    return Cost("softmax", 0, SOFTMAX_FLOPS * n, e * SOFTMAX_PASSES * n, e * 2 * n)


def rope(tokens: int, heads: int, head_dim: int, dtype: str = "fp32") -> Cost:
    """Rotary embedding of (tokens, heads, head_dim): x*cos + rotate_half(x)*sin, 3 FLOPs per
    element, and rotate_half negates half of them: 3.5.

    bytes = e*(2 * tokens*heads*head_dim  (read x, write out) + 2 * tokens*head_dim  (cos, sin)).
    """
    _sizes(tokens=tokens, heads=heads, head_dim=head_dim)
    n = tokens * heads * head_dim
    io = elem_bytes(dtype) * (2 * n + 2 * tokens * head_dim)
    return Cost("rope", 0, ROPE_FLOPS * n + n // 2, io, io)


def attention_pairs(q_len: int, kv_len: int, causal: bool = False, window: int | None = None) -> int:
    """Number of (query, key) pairs computed per (batch, head).

    Queries are the last ``q_len`` of ``kv_len`` positions (prefill: q_len == kv_len; decode: 1).
    Dense: q_len*kv_len. Causal: query i (0-based) sees kv_len - q_len + i + 1 keys, at most
    ``window`` of them. e.g. q_len = kv_len = 4, causal: 1+2+3+4 = 10.
    """
    _sizes(q_len=q_len, kv_len=kv_len)
    if not causal and window is None:
        return q_len * kv_len  # any shapes, cross-attention included
    if q_len > kv_len:
        raise CostError(f"causal attention needs q_len ({q_len}) <= kv_len ({kv_len})")
    first = kv_len - q_len + 1  # keys visible to the first query under the causal mask
    if window is None:
        return q_len * first + q_len * (q_len - 1) // 2
    _sizes(window=window)
    # keys of query i: min(first + i, window); those below the window grow by one per query
    grow = max(0, min(q_len, window - first + 1))
    pairs = grow * first + grow * (grow - 1) // 2
    return pairs + (q_len - grow) * window


def attention(batch: int, heads: int, q_len: int, kv_len: int, head_dim: int,
              kv_heads: int | None = None, dtype: str = "fp32", causal: bool = False,
              window: int | None = None, kv_dtype: str | None = None,
              v_dim: int | None = None) -> Cost:
    """softmax(Q K^T * scale) V with q (B,H,Lq,D), k/v (B,Hkv,Lkv,D); ``v_dim``: V's and the
    output's head size where it differs from D (latent attention: 192 for q and k, 128 for v).

    pairs P = B*H*(scores per head) (dense: Lq*Lkv), MACs = 2*P*D, FLOPs = 2*MACs + 6*P
    (softmax 5, the scale 1).
    Eager bytes = e*[(q + k + P) + 5*P + (P + v + o)]; fused = e*(q + k + v + o),
    with q = o = B*H*Lq*D and k = v = B*Hkv*Lkv*D.
    e.g. B=H=1, Lq=Lkv=2, D=4, fp32: MACs 2*4*4 = 32; eager 4*[(8+8+4) + 20 + (4+8+8)] = 240.
    """
    kv_heads = heads if kv_heads is None else kv_heads
    _sizes(batch=batch, heads=heads, head_dim=head_dim, kv_heads=kv_heads)
    if heads % kv_heads:
        raise CostError(f"kv_heads ({kv_heads}) must divide heads ({heads})")
    scores = batch * heads * attention_pairs(q_len, kv_len, causal, window)
    e, ek = elem_bytes(dtype), elem_bytes(kv_dtype or dtype)  # K and V may be stored apart
    dv = v_dim or head_dim
    q, o = batch * heads * q_len * head_dim, batch * heads * q_len * dv
    k, v = batch * kv_heads * kv_len * head_dim, batch * kv_heads * kv_len * dv
    macs = scores * (head_dim + dv)  # Q K^T, then P V
    eager = e * ((q + scores) + SOFTMAX_PASSES * scores + (scores + o)) + ek * (k + v)
    flops = 2 * macs + (SOFTMAX_FLOPS + SCALE_FLOPS) * scores
    return Cost("attention", macs, flops, eager, e * (q + o) + ek * (k + v),
                kernels=3)
