"""Part 4: see the kernels, then merge them. GeLU four ways, the MLP under torch.compile's modes,
and a decode step eager vs replayed from a CUDA graph."""
from __future__ import annotations

import contextlib
import os
import time as _time

import torch

from rooflab.kernels import gelu as G
from rooflab.units import noise
from rooflab.measure import profile as P
from rooflab.measure.dtypes import torch_dtype
from rooflab.measure.memory import release
from rooflab.measure.timer import overhead, time_call
from rooflab.units import secs

DTYPES = ("fp32", "fp16", "bf16")
AUTOTUNE_MIN_SMS = 68  # below this, inductor skips GEMM autotuning in max-autotune


def _compiled(fn, mode: str | None = None):
    return torch.compile(fn, mode=mode, dynamic=False)


@contextlib.contextmanager
def quiet_autotune():
    """max-autotune prints a table of every GEMM candidate to stderr and logs each candidate
    that does not fit the GPU (too much shared memory) as an error with a traceback, then skips
    it and goes on. The study reports the kernels chosen; inside it, that chatter is off."""
    import logging

    try:
        from torch._inductor import select_algorithm as sa
    except ImportError:  # pragma: no cover - a torch without inductor
        yield
        return
    logger = logging.getLogger(sa.__name__)
    printed, level = getattr(sa, "PRINT_AUTOTUNE", None), logger.level
    sa.PRINT_AUTOTUNE = False
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        sa.PRINT_AUTOTUNE = printed
        logger.setLevel(level)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"


def gelu_variants(device: str) -> dict:
    v = {"unfused (basic ops)": G.gelu_unfused, "F.gelu (PyTorch fused)": G.gelu_torch,
         "torch.compile(unfused)": _compiled(G.gelu_unfused)}
    if device == "cuda":
        v["rooflab Triton kernel"] = G.gelu_triton
    return v


def gelu_needs_bytes(numel: int, dtype: str) -> int:
    """What gelu_study holds at once, at most: the input, the output and the basic-ops
    version's three live intermediates."""
    from rooflab.cost import elem_bytes

    return 5 * numel * elem_bytes(dtype)


def gelu_study(numel: int, dtype: str, device: str, copy_bw: float | None,
               trace_dir: str | None = None, note=None) -> dict:
    """Each variant: latency, kernels launched, predicted bytes, achieved bandwidth, error.
    ``note(line)`` is told as each variant starts."""
    x = torch.randn(numel, device=device, dtype=torch_dtype(dtype))
    rows, skipped = [], []
    if device != "cuda":
        skipped.append({"variant": "rooflab Triton kernel",
                        "reason": "Triton kernels need a GPU (CI checks them under the interpreter)"})
    for name, fn in gelu_variants(device).items():
        if note:
            note(f"GeLU over {numel:,} {dtype} elements: {name}")
        row = {"variant": name}
        try:
            t0 = _time.perf_counter()
            fn(x)  # first call: compiles where there is something to compile
            row["first_call_s"] = _time.perf_counter() - t0
            t = time_call(fn, x, warmup=3, budget_s=0.3, device=device, name=name)
            trace = os.path.join(trace_dir, f"gelu_{_slug(name)}.json") if trace_dir else None
            prof = P.profile(fn, x, iters=3, warmup=1, device=device, trace_path=trace)
        except Exception as e:  # noqa: BLE001 - a variant that cannot run is a result
            rows.append({**row, "error": _error_text(e)})
            release(device)
            continue
        fused = name != "unfused (basic ops)"
        c = G.cost(numel, dtype, fused=fused)
        if prof.trace_path and prof.launches_per_iter == 1:  # one kernel: it did all the work
            P.augment_trace(prof.trace_path, {prof.kernels[0].name: {"flops": c.flops,
                                                                      "bytes": c.bytes}})
        err = G.max_error(fn, min(numel, 1 << 20), x.dtype, device)
        row.update(device_s=t.device_s, cv=t.cv, unstable=t.unstable,
                   kernels_per_call=prof.launches_per_iter,
                   kernel_names=[k.name for k in prof.kernels], flops=c.flops,
                   bytes_predicted=c.bytes,
                   bytes_per_kernel=c.bytes / max(prof.launches_per_iter, 1),
                   achieved_bandwidth_bytes_per_s=c.bytes / t.device_s,
                   fraction_of_copy_bw=(c.bytes / t.device_s / copy_bw) if copy_bw else None,
                   max_abs_err=err, trace=prof.trace_path)
        rows.append(row)
    return {"numel": numel, "dtype": dtype, "device": device, "rows": rows, "skipped": skipped,
            "explanation": explain_gelu(rows) + noise(rows, lambda r: r["variant"])}


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_").lower()


def explain_gelu(rows: list[dict]) -> str:
    """Where the gap comes from, in this run's numbers: kernel count x bytes per kernel."""
    ok = {r["variant"]: r for r in rows if "device_s" in r}
    u, f = ok.get("unfused (basic ops)"), ok.get("F.gelu (PyTorch fused)")
    if not (u and f):
        return "Not enough variants ran to compare."
    traffic = u["bytes_predicted"] / f["bytes_predicted"]
    text = (
        f"The unfused GeLU launched {u['kernels_per_call']:.0f} kernels per call and moved "
        f"{u['bytes_predicted'] / 1e6:.1f} MB (about {u['bytes_per_kernel'] / 1e6:.1f} MB per "
        f"kernel: each one reads its inputs from memory and writes its result back); F.gelu "
        f"launched {f['kernels_per_call']:.0f} and moved {f['bytes_predicted'] / 1e6:.1f} MB. "
        f"Traffic ratio {traffic:.1f}x; measured time ratio {u['device_s'] / f['device_s']:.1f}x "
        f"({secs(u['device_s'])} vs {secs(f['device_s'])}). ")
    frac = f.get("fraction_of_copy_bw")
    ratio = u["device_s"] / f["device_s"]
    if frac is None or frac >= 0.6:
        return text + ("Both are memory-bound (8 FLOPs per element against 2 elements of "
                       "traffic), so the time follows the bytes: fusion keeps the intermediates "
                       "in registers instead of memory.")
    limit = (f"F.gelu reaches only {frac:.0%} of the measured copy bandwidth here: on this "
             "device its tanh arithmetic, not memory, limits it")
    if ratio <= traffic:
        return text + limit + ", so the time ratio stays below the traffic ratio."
    return text + limit + (", and the basic ops lose more than their extra bytes explain: each "
                           "of their kernels also pays its own launch and pass over the data.")


class GatedMLP(torch.nn.Module):
    """down(act(gate(x)) * up(x)), as in Gemma (GeLU-tanh) and Llama (SiLU)."""

    def __init__(self, hidden: int, intermediate: int, act: str = "gelu_tanh"):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = torch.nn.Linear(intermediate, hidden, bias=False)
        self.act = (lambda t: torch.nn.functional.gelu(t, approximate="tanh")) \
            if act == "gelu_tanh" else torch.nn.functional.silu

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


MLP_MODES = ("eager", "default", "max-autotune-no-cudagraphs", "max-autotune")


def mlp_study(hidden: int, intermediate: int, tokens: int, dtype: str, device: str,
              modes=MLP_MODES, trace_dir: str | None = None, note=None) -> dict:
    """The MLP eager vs torch.compile modes: kernels before/after, device time per call (what
    the kernels compare by), wall time per call (what the caller waits: the lesson on overhead),
    profiled kernel time and the rest (launches, guards, Python), compile time."""
    torch.manual_seed(0)
    mlp = GatedMLP(hidden, intermediate).to(device, torch_dtype(dtype)).eval()
    x = torch.randn(tokens, hidden, device=device, dtype=torch_dtype(dtype))
    notes = []
    if device == "cuda":
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        if sms < AUTOTUNE_MIN_SMS:
            notes.append(f"this GPU has {sms} SMs (< {AUTOTUNE_MIN_SMS}): max-autotune does not "
                         "autotune the GEMMs here; only the elementwise fusion changes")
    rows = []
    for mode in modes:
        if note:
            note(f"MLP, {tokens} tokens: {mode}" + ("" if mode == "eager" else
                                                     " (compiling first)"))
        if mode == "max-autotune" and device != "cuda":
            rows.append({"mode": mode, "error": "skipped: CUDA graphs need a GPU"})
            continue
        fn = mlp if mode == "eager" else _compiled(mlp, mode)
        try:
            with torch.no_grad(), quiet_autotune():
                t0 = _time.perf_counter()
                fn(x)
                if device == "cuda":
                    torch.cuda.synchronize()
                first = _time.perf_counter() - t0
                t = time_call(fn, x, warmup=3, budget_s=0.3, device=device, name=mode)
                trace = os.path.join(trace_dir, f"mlp_{_slug(mode)}.json") if trace_dir else None
                prof = P.profile(fn, x, iters=3, warmup=1, device=device, trace_path=trace)
        except Exception as e:  # noqa: BLE001 - e.g. no C compiler for inductor on CPU
            rows.append({"mode": mode, "error": _error_text(e)})
            release(device)
            continue
        # GPU time in kernels, profiled (a CPU has no kernels apart from its ops' own time)
        kernel_s = prof.device_time_us / prof.iters / 1e6 if device == "cuda" else None
        rows.append({"mode": mode, "first_call_s": first, "device_s": t.device_s,
                     "wall_s": t.wall_s, "cv": t.cv, "unstable": t.unstable,
                     "kernel_s": kernel_s,
                     **overhead(t.wall_s, kernel_s),
                     "kernels_per_call": prof.launches_per_iter,
                     "kernels": [{"name": k.name, "category": k.category, "calls": k.calls,
                                  "us_per_call": k.total_us / prof.iters}
                                 for k in prof.kernels],
                     "notes": prof.notes, "trace": prof.trace_path})
        torch._dynamo.reset()
    return {"hidden": hidden, "intermediate": intermediate, "tokens": tokens, "dtype": dtype,
            "device": device, "rows": rows, "notes": notes}
