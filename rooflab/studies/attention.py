"""Part 5: memory and time of standard attention, every SDPA backend and rooflab's Triton
FlashAttention, over sequence lengths; OOM is a recorded point and the sweep goes on."""
from __future__ import annotations

import contextlib
import math
import warnings

import torch

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.measure import profile as P
from rooflab.measure.dtypes import torch_dtype
from rooflab.measure.memory import free_bytes, is_oom, peak_memory, release
from rooflab.measure.timer import time_call

DTYPES = ("fp16", "bf16", "fp32")
IMPLS = ("standard", "math", "efficient", "flash", "cudnn", "triton", "flash_attn")
# decode (one query per head against a cache): the same, plus rooflab's flash-decoding kernel
DECODE_IMPLS = ("standard", "math", "efficient", "flash", "cudnn", "triton", "triton_decode")


def _sdpa(backend_name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "flash": SDPBackend.FLASH_ATTENTION,
               "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}[backend_name]
    if backend is None:
        return None

    def run(q, k, v, causal, mask=None):
        with sdpa_kernel([backend]):  # forced: raises if this backend cannot run the shape
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=k.shape[1] != q.shape[1])
    return run


@contextlib.contextmanager
def quiet_refusals():
    """A forced SDPA backend that cannot run a shape warns why (several lines each time) and
    then raises; the sweep records the error as that point's result, so the warnings go."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(kernel not used because|has been "
                                r"runtime disabled|fused kernels require)", category=UserWarning)
        yield


def implementation(name: str, device: str):
    """(callable(q, k, v, causal), None) or (None, why it cannot run here)."""
    if name == "standard":
        from rooflab.kernels.flash_attention import standard_attention
        return standard_attention, None
    if name in ("math", "efficient", "flash", "cudnn"):
        if device != "cuda" and name in ("efficient", "cudnn"):
            return None, f"SDPA's {name} backend needs CUDA"
        fn = _sdpa(name)
        return (fn, None) if fn else (None, f"this PyTorch has no {name} SDPA backend")
    if name in ("triton", "triton_decode"):
        if device != "cuda":
            return None, "rooflab's Triton kernel needs a GPU (CI checks it under the interpreter)"
        from rooflab.kernels import flash_attention as FA
        from rooflab.kernels import flash_decoding as FD
        if FA.triton is None:
            return None, FA.TRITON_MISSING
        kernel = FA.flash_attention if name == "triton" else FD.flash_decode
        return (lambda q, k, v, causal: kernel(q, k, v, causal)[0]), None
    if name == "flash_attn":
        try:
            from flash_attn import flash_attn_func
        except ImportError as e:
            return None, f"flash-attn is not installed ({e})"
        return (lambda q, k, v, causal: flash_attn_func(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)), None
    raise ValueError(f"unknown implementation {name!r}; choose from {', '.join(IMPLS)}")


def _inputs(b, h, hkv, n, d, dtype, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    mk = lambda heads: torch.randn(b, heads, n, d, device=device, dtype=dtype, generator=g)  # noqa: E731
    return mk(h), mk(hkv), mk(hkv)


# What one call needs beyond its inputs, to decide before running whether a point can fit.
# standard: S in the input dtype, S upcast to fp32, softmax's fp32 output (10 bytes per score in
# fp16, as measured on the H200); the math backend is alike. Fused kernels: the output and an
# fp32 log-sum-exp per row. Every implementation also writes O.
SCORE_BYTES_FP32 = 8  # S.float() and its softmax


def predicted_bytes(name: str, b: int, h: int, hkv: int, n: int, d: int, dtype: str) -> int:
    """Inputs (Q, K, V) plus the predicted extra peak of one call."""
    e = C.elem_bytes(dtype)
    inputs = e * b * n * d * (h + 2 * hkv)
    out = e * b * h * n * d
    if name in ("standard", "math"):
        return inputs + out + b * h * n * n * (e + SCORE_BYTES_FP32)
    return inputs + out + 4 * b * h * n


def point_floors_s(seqs, impls, batch: int, heads: int, head_dim: int, dtype: str,
                   causal: bool, peak_flops_per_s: float, bandwidth_bytes_per_s: float,
                   calls_per_point: int = 14) -> list[float]:
    """Each point's floor, in the sweep's order (every implementation at a length, then the
    next length): its roofline time floor (eager bytes for the implementations that
    materialise the scores) times the calls ``point`` makes when a call is long (2 warm-up,
    1 probe, 5 timed, 5 wall, 1 for memory)."""
    out = []
    for n in seqs:
        c = C.attention(batch, heads, n, n, head_dim, None, dtype, causal)
        for name in impls:
            nbytes = c.bytes if name in ("standard", "math") else c.bytes_fused
            out.append(calls_per_point * R.time_floor_s(
                R.Roof("", peak_flops_per_s, bandwidth_bytes_per_s), c.flops, nbytes))
    return out


def predicted_sweep_s(*args, **kw) -> float:
    """A floor on a sweep's duration: the sum of its points' floors (point_floors_s)."""
    return sum(point_floors_s(*args, **kw))


def point(name: str, fn, n: int, b: int, h: int, hkv: int, d: int, dtype: str, causal: bool,
          device: str) -> dict:
    """One (implementation, length): extra peak memory, latency, TFLOP/s, or OOM/unsupported.
    A point predicted not to fit in the free memory is recorded as such and not attempted."""
    row = {"impl": name, "seq": n}
    need, free = predicted_bytes(name, b, h, hkv, n, d, dtype), free_bytes(device)
    if free is not None and need > free:
        return {**row, "status": "oom", "attempted": False,
                "error": f"would not fit: needs ~{need / 2**30:.1f} GiB, "
                         f"{free / 2**30:.1f} GiB free (not attempted)"}
    try:
        q, k, v = _inputs(b, h, hkv, n, d, torch_dtype(dtype), device, seed=n)
    except Exception as e:  # noqa: BLE001 - the inputs themselves may not fit
        if not is_oom(e):
            raise
        release(device)
        return {**row, "status": "oom", "error": "inputs do not fit"}
    try:
        mem = peak_memory(fn, q, k, v, causal, device=device)
        if mem.oom:
            return {**row, "status": "oom", "error": mem.error}
        t = time_call(fn, q, k, v, causal, warmup=2, budget_s=0.2, max_reps=50, device=device)
    except Exception as e:  # noqa: BLE001 - a backend refusing a shape is a result
        release(device)
        if is_oom(e):
            return {**row, "status": "oom", "error": str(e).splitlines()[0][:200]}
        return {**row, "status": "unsupported", "error": str(e).splitlines()[0][:200]}
    finally:
        del q, k, v
    c = C.attention(b, h, n, n, d, hkv, dtype, causal=causal)
    return {**row, "status": "ok", "extra_peak_bytes": mem.extra_peak_bytes,
            "device_s": t.device_s, "cv": t.cv, "unstable": t.unstable,
            "tflops_per_s": c.flops / t.device_s / 1e12, "flops": c.flops, "bytes_eager": c.bytes, "bytes_fused": c.bytes_fused}


READS_ONLY = ("it only reads (the cache, once); the copy that sets the ceiling reads half and "
              "writes half, and reads alone stream faster than that mix")


def decode_point(name: str, fn, n: int, batch: int, heads: int, kv_heads: int, head_dim: int,
                 dtype: str, device: str, bandwidth_bytes_per_s: float | None) -> dict:
    """One (implementation, cache length) at decode: device time with the L2 flushed (each layer
    reads its own cache from memory) and the bandwidth reached on the bytes it must move."""
    row = {"impl": name, "kv_len": n}
    c = C.attention(batch, heads, 1, n, head_dim, kv_heads, dtype)
    try:
        g = torch.Generator(device=device).manual_seed(n)
        mk = lambda h, length: torch.randn(batch, h, length, head_dim, device=device,  # noqa: E731
                                           generator=g, dtype=torch_dtype(dtype))
        q, k, v = mk(heads, 1), mk(kv_heads, n), mk(kv_heads, n)
        t = time_call(fn, q, k, v, False, warmup=3, budget_s=0.2, max_reps=100, flush_l2=True,
                      wall=False, device=device)
    except Exception as ex:  # noqa: BLE001 - a backend refusing a shape is a result
        release(device)
        return {**row, "status": "oom" if is_oom(ex) else "unsupported",
                "error": str(ex).splitlines()[0][:200]}
    row.update(status="ok", device_s=t.device_s, cv=t.cv, unstable=t.unstable, flops=c.flops,
               bytes_fused=c.bytes_fused, bandwidth_bytes_per_s=c.bytes_fused / t.device_s,
               cache_bytes=2 * C.elem_bytes(dtype) * batch * kv_heads * n * head_dim)
    if bandwidth_bytes_per_s:
        row["fraction_of_copy_bw"] = row["bandwidth_bytes_per_s"] / bandwidth_bytes_per_s
        if row["fraction_of_copy_bw"] > 1:
            row["above_roof"] = READS_ONLY
    return row


def decode_sweep(kv_lens, impls=DECODE_IMPLS, batch=8, heads=32, kv_heads=8, head_dim=128,
                 dtype="bf16", device="cuda", bandwidth_bytes_per_s=None, progress=None) -> dict:
    """One new token per sequence against a cache of each length, every implementation. One
    query sees the whole cache, so no mask is needed (SDPA's is_causal would align it top-left)."""
    rows, skipped = [], {}
    with quiet_refusals():
        for name in impls:
            fn, why = implementation(name, device)
            if fn is None:
                skipped[name] = why
            for n in kv_lens:
                if fn is not None:
                    rows.append(decode_point(name, fn, n, batch, heads, kv_heads, head_dim,
                                             dtype, device, bandwidth_bytes_per_s))
                if progress:
                    progress()
    return {"batch": batch, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "dtype": dtype, "device": device, "kv_lens": list(kv_lens), "rows": rows,
            "skipped": skipped}


def fit_slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else None


def sweep(seqs, impls=IMPLS, batch=1, heads=16, kv_heads=None, head_dim=128, dtype="fp16",
          causal=False, device="cuda", progress=None) -> dict:
    hkv = kv_heads or heads
    rows, skipped = [], {}
    runnable = {}
    for name in impls:
        fn, why = implementation(name, device)
        if fn is None:
            skipped[name] = why
        else:
            runnable[name] = fn
    stopped: set[str] = set()
    with quiet_refusals():
        for n in seqs:
            for name, fn in runnable.items():
                if name in stopped:  # past its OOM length, longer sequences cannot fit either
                    rows.append({"impl": name, "seq": n, "status": "oom", "error": "after OOM"})
                else:
                    r = point(name, fn, n, batch, heads, hkv, head_dim, dtype, causal, device)
                    rows.append(r)
                    if r["status"] == "oom":
                        stopped.add(name)
                if progress:
                    progress()
            for _ in skipped:  # keep a progress bar's total honest
                if progress:
                    progress()
    return {"batch": batch, "heads": heads, "kv_heads": hkv, "head_dim": head_dim,
            "dtype": dtype, "causal": causal, "device": device, "seqs": list(seqs),
            "rows": rows, "skipped": skipped, "analysis": analyze(rows, batch, heads, device)}


def analyze(rows: list[dict], batch: int, heads: int, device: str) -> dict:
    """Memory slope per implementation, standard attention's OOM length here, and predicted for
    every GPU in the table from the measured bytes per score."""
    out: dict = {"memory_slope": {}, "oom_seq": {}}
    for impl in {r["impl"] for r in rows}:
        ok = [(r["seq"], r["extra_peak_bytes"]) for r in rows
              if r["impl"] == impl and r["status"] == "ok"]
        big = sorted(ok)[len(ok) // 2:] if len(ok) >= 4 else ok  # the longer half: N^2 dominates
        out["memory_slope"][impl] = fit_slope(big)
        oom = [r["seq"] for r in rows if r["impl"] == impl and r["status"] == "oom"]
        out["oom_seq"][impl] = min(oom) if oom else None
    std = [(r["seq"], r["extra_peak_bytes"]) for r in rows
           if r["impl"] == "standard" and r["status"] == "ok"]
    if std:
        n, extra = max(std)
        per_score = extra / (batch * heads * n * n)  # bytes per (query, key) pair
        out["standard_bytes_per_score"] = per_score
        out["predicted_standard_oom_seq"] = {
            hw.name: int(math.sqrt(hw.mem_bytes / (per_score * batch * heads)))
            for hw in H.PRESETS.values() if hw.mem_bytes}
    return out


def profile_view(n: int, device: str, impls=("standard", "flash", "triton"), batch=1, heads=16,
                 head_dim=128, dtype="fp16", trace_dir: str | None = None) -> list[dict]:
    """Kernels each implementation launches at one length (standard: several; flash: one)."""
    out = []
    for name in impls:
        fn, why = implementation(name, device)
        if fn is None:
            out.append({"impl": name, "skipped": why})
            continue
        q, k, v = _inputs(batch, heads, heads, n, head_dim, torch_dtype(dtype), device, 0)
        try:
            path = f"{trace_dir}/attention_{name}_{n}.json" if trace_dir else None
            prof = P.profile(fn, q, k, v, False, iters=2, warmup=1, device=device,
                             trace_path=path)
        except Exception as e:  # noqa: BLE001
            release(device)
            out.append({"impl": name, "skipped": str(e).splitlines()[0][:200]})
            continue
        out.append({"impl": name, "seq": n, "kernels_per_call": prof.launches_per_iter,
                    "kernels": [k.name for k in prof.kernels], "trace": prof.trace_path})
    return out
