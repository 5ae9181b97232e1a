"""Self-checks for the notebook's exercises: a student's function against the lab's rules and
rooflab's own answer, on the lab's public cases and on odd shapes nobody tuned for. Each returns
(ok, message), never raises for a wrong answer, and names the slip where a known convention
explains it (selfcheck.judge); rooflab's value is shown only with ``reveal=True``."""
from __future__ import annotations

import json
import math
import os
import time as _time

import torch

from rooflab.lab import selfcheck as S

# What the lab forbids in a triple-loop GEMM: every matmul API, by the names it is called by.
MATMUL_NAMES = {"matmul", "mm", "bmm", "einsum", "tensordot", "addmm", "baddbmm", "addbmm",
                "mv", "dot", "linear", "chain_matmul", "multi_dot", "inner"}
GELU_NAMES = {"gelu", "GELU"}
SDPA_NAMES = {"scaled_dot_product_attention", "flash_attn_func", "multi_head_attention_forward"}


def _raised(e: BaseException) -> tuple[bool, str]:
    return False, f"your function raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _codes(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            yield from _codes(c)


def forbidden(fn, names: set[str], matmul_operator: bool = False) -> list[str]:
    """The forbidden names ``fn`` calls or reads (``torch.matmul``, ``x.mm``, ...), and the ``@``
    operator if asked, read from its compiled code (nested functions too), so a function typed
    at a prompt, with no source file, is read as well."""
    import dis

    code = getattr(fn, "__code__", None)
    if code is None:
        return []  # a builtin: the numbers decide
    found = set()
    for c in _codes(code):
        found |= set(c.co_names) & names
        if matmul_operator and any(i.opname == "BINARY_MATRIX_MULTIPLY" or
                                   (i.opname == "BINARY_OP" and i.argrepr in ("@", "@="))
                                   for i in dis.get_instructions(c)):
            found.add("the @ operator")
    return sorted(found)


def _first_wrong(qid: str, cases, reveal: bool) -> tuple[bool, str] | None:
    """cases: (description, the student's value or an exception, settings)."""
    for what, got, settings in cases:
        if isinstance(got, Exception):
            return _raised(got)
        r = S.judge(qid, got, **settings)
        if r["verdict"] == "missing":
            return False, f"{what}: your function returned None"
        if r["verdict"] == "wrong":
            return False, f"{what}: {S.message(r, reveal)}"
        if r["verdict"] == "convention":
            return True, f"{what}: {S.message(r, reveal)}"
    return None


def _call(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - a student's bug is reported, not raised
        return e


# --- part 1 -----------------------------------------------------------------------------------
GEMM_SHAPES = [(3, 4, 2), (37, 64, 51), (1, 7, 1), (16, 1, 5)]  # (N, K, M): odd on purpose


def check_gemm(fn) -> tuple[bool, str]:
    """1.1: a triple loop (no matmul API, read from its source) equal to A @ B in fp32."""
    bad = forbidden(fn, MATMUL_NAMES, matmul_operator=True)
    if bad:
        return False, f"uses {', '.join(bad)}: write the three loops yourself"
    g = torch.Generator().manual_seed(int(_time.time()))
    for n, k, m in GEMM_SHAPES:
        a, b = torch.randn(n, k, generator=g), torch.randn(k, m, generator=g)
        got = _call(fn, a, b)
        if isinstance(got, Exception):
            return _raised(got)
        got = torch.as_tensor(got, dtype=torch.float32)
        if got.shape != (n, m):
            return False, f"({n}x{k}) @ ({k}x{m}) should be {n}x{m}, got {tuple(got.shape)}"
        if not torch.allclose(got, a @ b, rtol=1e-4, atol=1e-4):
            return False, f"({n}x{k}) @ ({k}x{m}): values differ from A @ B (largest " \
                          f"difference {float((got - a @ b).abs().max()):.3g})"
    return True, f"correct on {len(GEMM_SHAPES)} odd shapes, no matmul API"


def check_latency(latency) -> tuple[bool, str]:
    """1.2: latency(fn, warmup, repeat) calls fn warmup + repeat times and returns the mean
    seconds of the timed calls."""
    calls = []

    def probe():
        calls.append(1)
        _time.sleep(0.002)

    got = _call(latency, probe, warmup=3, repeat=7)
    if isinstance(got, Exception):
        return _raised(got)
    if len(calls) != 10:
        return False, f"with warmup=3, repeat=7 it called fn {len(calls)} times, not 10"
    if not isinstance(got, (int, float)) or not math.isfinite(got):
        return False, f"return a number of seconds, got {got!r}"
    if 1.5 <= got <= 30:
        return False, "that reads as milliseconds; return seconds"
    if 7 * 0.0015 <= got <= 7 * 0.03:
        return False, "that is the total of the timed calls; return the mean (divide by repeat)"
    if not 0.0015 <= got <= 0.03:
        return False, f"{got:.3g} s for a function that sleeps 2 ms: time only the repeat calls"
    return True, f"calls fn warmup + repeat times; {got * 1e3:.2f} ms for a 2 ms sleep"


PUBLIC_MAC = [((512, 512), (512, 512), 134217728), ((512, 256), (256, 512), 67108864)]
PUBLIC_IO = [((512, 512), (512, 512), 3145728), ((512, 256), (256, 512), 2097152),
             ((128, 256), (256, 512), 917504)]


def _meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def check_gemm_mac(fn, reveal: bool = False) -> tuple[bool, str]:
    """1.3: gemm_mac(A, B) = N*K*M, on the lab's public cases, odd shapes and a GEMV."""
    cases = [(f"the lab's check {a} x {b}", _call(fn, _meta(*a), _meta(*b)),
              dict(N=a[0], K=a[1], M=b[1])) for a, b, _ in PUBLIC_MAC]
    cases += [(f"({n}x{k}) @ ({k}x{m})", _call(fn, _meta(n, k), _meta(k, m)), dict(N=n, K=k, M=m))
              for n, k, m in GEMM_SHAPES + [(4096, 4096, 1)]]
    return _first_wrong("1.3.gemm_mac", cases, reveal) or \
        (True, "correct on the lab's checks, odd shapes and a GEMV (M = 1)")


def check_gemm_io(fn, reveal: bool = False) -> tuple[bool, str]:
    """1.4: gemm_io(A, B) = e (N*K + K*M + N*M) bytes, fp32 the lab's case; bf16 inputs are
    checked too, and 4 bytes there is named (it holds for the lab's fp32 only)."""
    cases = [(f"the lab's check {a} x {b}", _call(fn, _meta(*a), _meta(*b)),
              dict(N=a[0], K=a[1], M=b[1], dtype="fp32")) for a, b, _ in PUBLIC_IO]
    cases += [(f"({n}x{k}) @ ({k}x{m}) fp32", _call(fn, _meta(n, k), _meta(k, m)),
               dict(N=n, K=k, M=m, dtype="fp32")) for n, k, m in GEMM_SHAPES]
    wrong = _first_wrong("1.4.gemm_io", cases, reveal)
    if wrong:
        return wrong
    got = _call(fn, _meta(64, 32, dtype=torch.bfloat16), _meta(32, 16, dtype=torch.bfloat16))
    r = S.judge("1.4.gemm_io", got, N=64, K=32, M=16, dtype="bf16") \
        if not isinstance(got, Exception) else None
    if r is None or r["verdict"] != "ok":
        return True, ("correct for the lab's fp32; with bf16 tensors it gives another figure: "
                      "A.element_size() is the bytes an element of any dtype")
    return True, "correct on the lab's checks and odd shapes, fp32 and bf16"


# --- part 2 -----------------------------------------------------------------------------------
def check_roofline(point, gpu: str = "RTX A6000", reveal: bool = False) -> tuple[bool, str]:
    """2.1.1: point(n, peak_flops_per_s, bandwidth_bytes_per_s) -> (intensity, attainable
    FLOP/s) of an fp32 GEMM with M = N = K = n."""
    from rooflab import cost as C
    from rooflab import hardware as H
    from rooflab import roofline as R

    roof = R.Roof.of(H.lookup(gpu), "fp32")
    for n in (1024, 2048, 4096, 8192, 300, 77):
        got = _call(point, n, roof.peak_flops_per_s, roof.mem_bandwidth_bytes_per_s)
        if isinstance(got, Exception):
            return _raised(got)
        try:
            i, perf = got
        except (TypeError, ValueError):
            return False, f"return (intensity, attainable FLOP/s), got {got!r}"
        r = S.judge("2.1.1.gemm_intensity", i, n=n, dtype="fp32")
        if r["verdict"] in ("wrong", "missing"):
            return False, f"intensity at n = {n}: {S.message(r, reveal)}"
        want = R.place(roof, C.gemm(n, n, n, "fp32")).attainable_flops_per_s
        if not isinstance(perf, (int, float)) or not math.isclose(perf, want, rel_tol=S.RATIO_TOL):
            uncapped = roof.mem_bandwidth_bytes_per_s * i
            why = ("above the ridge the roof is the peak: min(peak, bandwidth x intensity)"
                   if isinstance(perf, (int, float)) and math.isclose(perf, uncapped, rel_tol=0.01)
                   else f"attainable FLOP/s at n = {n}: min(peak, bandwidth x intensity)")
            return False, why + (f" (rooflab: {want:.4g})" if reveal else "")
    return True, "intensity and attainable FLOP/s correct on both sides of the ridge"


# --- part 3 -----------------------------------------------------------------------------------
def check_sdpa(fn, reveal: bool = False) -> tuple[bool, str]:
    """3.1: softmax(q k^T / sqrt(D)) v from scratch, fp32, against F.scaled_dot_product_attention
    (rtol 1e-4, atol 1e-5) on the lab's (1, 4, 1024, 128), odd shapes, Lq != Lkv, and a mask."""
    bad = forbidden(fn, SDPA_NAMES)
    if bad:
        return False, f"uses {', '.join(bad)}: write softmax(q k^T / sqrt(D)) v yourself"
    F = torch.nn.functional
    g = torch.Generator().manual_seed(int(_time.time()))
    for shape in ((1, 4, 1024, 128, 1024), (2, 3, 37, 64, 37), (1, 2, 5, 32, 17)):
        b, h, lq, d, lkv = shape
        q = torch.randn(b, h, lq, d, generator=g)
        k, v = torch.randn(b, h, lkv, d, generator=g), torch.randn(b, h, lkv, d, generator=g)
        got = _call(fn, q, k, v)
        if isinstance(got, Exception):
            return _raised(got)
        want = F.scaled_dot_product_attention(q, k, v)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False, f"q {tuple(q.shape)}, k/v {tuple(k.shape)}: return a tensor of shape " \
                          f"{tuple(want.shape)}"
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            err = float((got - want).abs().max())
            hint = " (scale by 1/sqrt(D)?)" if not torch.allclose(
                got, F.scaled_dot_product_attention(q, k, v, scale=1.0), atol=1e-4) else \
                ": you did not scale the scores by 1/sqrt(D)"
            return False, f"q {tuple(q.shape)}, k/v {tuple(k.shape)}: largest difference " \
                          f"{err:.3g}" + hint
    mask = torch.ones(5, 17, dtype=torch.bool).tril(diagonal=12)
    got = _call(fn, q, k, v, attn_mask=mask)
    if isinstance(got, Exception):
        return True, "correct on 3 shapes; attn_mask not taken (it is optional in the lab)"
    if not torch.allclose(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                          rtol=1e-4, atol=1e-5):
        return False, "with a boolean attn_mask (True: attend) the result differs: mask the " \
                      "scores with -inf where it is False, before the softmax"
    return True, "correct on 3 shapes (Lq != Lkv too) and with a boolean mask"


def check_attn_mac(fn, reveal: bool = False) -> tuple[bool, str]:
    """3.1: calc_attn_mac(B, H, Lq, Lkv, D) = 2 B H Lq Lkv D (Q K^T and P V)."""
    shapes = [(1, 4, 173, 256, 128), (2, 3, 1, 1000, 64), (8, 16, 77, 77, 96)]
    cases = [(f"calc_attn_mac{s}", _call(fn, *s), dict(zip(("B", "H", "Lq", "Lkv", "D"), s)))
             for s in shapes]
    return _first_wrong("3.1.attn_mac", cases, reveal) or \
        (True, "correct on the lab's check and 2 more shapes (decode too)")


def check_attn_io(fn, reveal: bool = False) -> tuple[bool, str]:
    """3.2: calc_attn_io(B, H, Lq, Lkv, D, bytes_per_elem=4, softmax_passes=5, fused=False):
    the lab's eager I/O with its defaults, other assumptions through the parameters."""
    keys = ("B", "H", "Lq", "Lkv", "D")
    cases = []
    for s in ((1, 4, 173, 256, 128), (2, 3, 1, 1000, 64)):
        cases.append((f"calc_attn_io{s}", _call(fn, *s), dict(zip(keys, s))))
    try:
        for e, passes in ((2, 5), (4, 3)):
            s = (2, 8, 64, 512, 64)
            got = fn(*s, bytes_per_elem=e, softmax_passes=passes)
            cases.append((f"bytes_per_elem={e}, softmax_passes={passes}", got,
                          {**dict(zip(keys, s)), "bytes_per_elem": e, "softmax_passes": passes}))
        fused = fn(1, 4, 173, 256, 128, fused=True)
    except TypeError:
        return False, ("write your assumptions as parameters: calc_attn_io(B, H, Lq, Lkv, D, "
                       "bytes_per_elem=4, softmax_passes=5, fused=False)")
    except Exception as e:  # noqa: BLE001
        return _raised(e)
    wrong = _first_wrong("3.2.attn_io", cases, reveal)
    if wrong:
        return wrong
    want = S._attn_io({**S.ATTN, "bytes_per_elem": 4}, fused=True)
    if fused != want:
        return False, "fused=True: Q, K, V read once and O written once, no score matrix" + (
            f" (rooflab: {want:,})" if reveal else "")
    return True, "correct, eager and fused, with the parameters you chose"


def check_mlp(mac, flops, io, reveal: bool = False) -> tuple[bool, str]:
    """3.4: the worked example's MLP, mlp_mac/flops/io(B, L, D, I) (io in bf16), against the
    gemma layer's counted MLP at the lab's points (prefill B=8 L=2048, decode B=8 L=1) and
    another width."""
    from rooflab import models as M

    cfg = M.load("gemma-3-270m-it")
    for b, l in ((8, 2048), (8, 1), (3, 5)):
        args = (b, l, cfg.hidden, cfg.intermediate)
        got = [_call(f, *args) for f in (mac, flops, io)]
        for g in got:
            if isinstance(g, Exception):
                return _raised(g)
            if isinstance(g, bool) or not isinstance(g, (int, float)):
                return False, f"at B={b}, L={l}: return numbers, got {g!r}"
        want = M.groups(M.layer_costs(cfg, M.Phase.prefill(b, l), "sliding"))["mlp"]
        if got[0] != want.macs:
            return False, f"MACs at B={b}, L={l}: " + (
                "that is FLOPs: 1 MAC = 2 FLOPs" if got[0] == 2 * want.macs else
                "the MLP is three projections, 3 B L D I" if got[0] == want.macs // 3 else
                f"off by {(got[0] - want.macs) / want.macs:+.1%}")
        if got[1] != want.flops:
            return False, f"FLOPs at B={b}, L={l}: " + (
                "add GeLU's 8 FLOPs and the product's 1 an element of (B, L, I): + 9 B L I"
                if got[1] == 2 * want.macs else f"off by {(got[1] - want.flops) / want.flops:+.1%}")
        if not isinstance(got[2], (int, float)) or got[1] / got[2] <= 0:
            return False, f"I/O at B={b}, L={l}: return a positive number of bytes"
        r = S.judge("3.4.mlp_intensity", got[1] / got[2], model=cfg.name, batch=b, seq=l)
        if r["verdict"] != "ok":
            return False, f"I/O at B={b}, L={l} (its intensity): {S.message(r, reveal)}"
    return True, "MACs, FLOPs and eager I/O correct at prefill, decode and an odd shape"


# --- part 4 -----------------------------------------------------------------------------------
def check_kernel_name(name: str, device: str) -> tuple[bool, str]:
    """4.1: the kernel (on a CPU, the op) that a 128 x 128 matmul runs, named from a profile."""
    from rooflab.measure import profile as P

    if not isinstance(name, str) or len(name.strip()) < 4:
        return False, "name it: a part of the kernel's name as the profiler's table prints it"
    dt = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(128, 128, device=device, dtype=dt)
    kernels = [k.name for k in P.profile(torch.matmul, a, a, iters=2, device=device).kernels]
    if any(name.strip().lower() in k.lower() for k in kernels):
        return True, f"yes: {next(k for k in kernels if name.strip().lower() in k.lower())[:80]}"
    return False, f"no kernel of this matmul's profile is named {name!r} ({len(kernels)} ran)"


def check_trace(path: str, ranges=("gate_proj", "up_proj", "down_proj")) -> tuple[bool, str]:
    """4.2: a Chrome trace on disk with the MLP's annotated ranges in it."""
    if not os.path.exists(path):
        return False, f"no file {path}: call prof.export_chrome_trace({path!r})"
    try:
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    except (ValueError, AttributeError):
        return False, f"{path} is not a Chrome trace (JSON with traceEvents)"
    names = {e.get("name") for e in events if isinstance(e, dict)}
    missing = [r for r in ranges if r not in names]
    if missing:
        return False, f"the trace has no range named {', '.join(missing)}: wrap each projection " \
                      "in torch.profiler.record_function(name)"
    return True, f"{len(events):,} events, ranges {', '.join(ranges)} present: open it in Perfetto"


def check_gelu(fn, device: str = "cpu") -> tuple[bool, str]:
    """4.3.1: GeLU-tanh from basic ops (no gelu API, read from its source) against
    F.gelu(approximate='tanh'): float64 to 1e-9, and the lab's fp32 shapes to 1e-5."""
    bad = forbidden(fn, GELU_NAMES)
    if bad:
        return False, f"uses {', '.join(bad)}: build it from tanh, +, * and ** yourself"
    F = torch.nn.functional
    x = torch.randn(10_000, dtype=torch.float64, device=device) * 3
    got = _call(fn, x)
    if isinstance(got, Exception):
        return _raised(got)
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return False, "return a tensor of the input's shape"
    err = float((got - F.gelu(x, approximate="tanh")).abs().max())
    if err > 1e-9:
        exact = float((got - F.gelu(x)).abs().max())
        return False, ("that is the exact (erf) GeLU; the lab's is the tanh approximation"
                       if exact < 1e-9 else f"largest difference {err:.3g}: check the formula")
    for shape in ((1_000_000,), (100, 200), (10, 200, 300)):
        x = torch.randn(shape, device=device)
        got = _call(fn, x)
        if isinstance(got, Exception):
            return _raised(got)
        if got.dtype != x.dtype or got.shape != x.shape:
            return False, f"an fp32 input of shape {shape} should give fp32 of that shape"
        if not torch.allclose(got, F.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-5):
            return False, f"fp32 {shape}: differs from F.gelu by more than 1e-5"
    return True, f"correct (float64 error {err:.1e}; the lab's three fp32 shapes)"


# --- part 5 -----------------------------------------------------------------------------------
def check_memory(rows, heads: int = 16, bytes_per_elem: int = 2) -> tuple[bool, str]:
    """5.1: (seq, peak bytes or None for out of memory) per length: every length has a row, and
    each peak that ran holds at least its attention matrix (heads x L^2 x e bytes)."""
    try:
        rows = [(int(n), p) for n, p in rows]
    except (TypeError, ValueError):
        return False, "give a list of (seq_len, peak bytes), None where it ran out of memory"
    if not any(p is not None for _, p in rows):
        return False, "no length measured yet (None is for out of memory)"
    for n, p in rows:
        if p is None:
            continue
        if not isinstance(p, (int, float)) or p < heads * n * n * bytes_per_elem:
            return False, (f"at L = {n} the peak {p!r} is below the attention matrix's own "
                           f"{heads} x L^2 x {bytes_per_elem} bytes: reset the peak before the "
                           "call and read it after")
    ooms = [n for n, p in rows if p is None]
    return True, f"{len(rows)} lengths" + (f", out of memory from L = {min(ooms):,}" if ooms
                                           else ", none ran out of memory")
