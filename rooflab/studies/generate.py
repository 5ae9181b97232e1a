"""A whole model generating tokens, measured and predicted.

Measured (random weights made on the device, a static KV cache, greedy tokens):
- time to first token (TTFT): one prefill of B sequences of L tokens, logits for the last
  position only (what generation needs) or for all of them (what a plain forward does), eager
  and replayed as a CUDA graph where the model can be captured (a host-bound eager prefill
  pays the host's Python for every kernel; the graph pays it once, at capture);
- time per output token (TPOT): one decode step at the end of the prompt, eager and replayed as
  a CUDA graph where the model can be captured, and a real loop of N steps;
- tokens per second (B / TPOT) and the peak memory of the run.
The kernels' own time (the profiler's) is kept beside the device time: where a step is bound by
the host, its device time counts the host's time too.
Predicted: every op the model ran, counted by rooflab's dispatch counter, costed on this device's
measured ceilings and op floors (measure/op_classes.py, as for one layer), summed layer by layer,
plus the measured idle gap between two kernels once per kernel (a whole model launches about
1,800 kernels per decode step; its measured times are device times of back-to-back kernels,
not kernel durations alone); beside it the plain roofline sum. Memory: weights + KV cache + the
largest prefill transient.
"""
from __future__ import annotations

import contextlib
import inspect
import re
import time as _time

import torch

from rooflab import count, hf
from rooflab import predict as PR
from rooflab import cost as C
from rooflab import models as M
from rooflab.errors import RooflabError
from rooflab.measure import op_classes as OC
from rooflab.measure import profile as P
from rooflab.measure.ceilings import Ceilings
from rooflab.measure.dtypes import runnable, torch_dtype
from rooflab.measure.memory import free_bytes
from rooflab.measure.timer import capture_graph, time_call
from rooflab.roofline import Roof

LM_HEAD = ("last", "all")
HOST_BOUND = 0.8  # kernels busy under this fraction of a call's device time: the host's pace
STEPS = 8  # op costs, build, count, prefill, step, kernel profiles, loop, CUDA graph


class DoesNotFit(RooflabError):
    """The model, its cache and its activations need more memory than the device has free."""


def predicted_memory(cfg: M.ModelConfig, batch: int, seq: int, new_tokens: int, dtype: str,
                     lm_head: str = "last") -> dict:
    """Bytes: weights (every parameter), the static KV cache (sliding layers keep a window; latent
    attention caches its latent), and the largest prefill transient: four hidden-size tensors of
    the residual stream, the logits kept (in the dtype and again in fp32) and the largest MLP's:
    a dense one's gate, up and product (3 x I a token), or the experts' routed rows, k a token
    (transformers' grouped path holds the rows gathered (H), gate+up and its masked copy (2 x 2
    I_e): H + 4 I_e a row)."""
    e = C.elem_bytes(dtype)
    max_len = seq + new_tokens
    kv = sum(batch * M.kv_per_token(cfg) * e *
             (min(max_len, cfg.sliding_window) if lt == "sliding" and cfg.sliding_window
              else max_len) for lt in cfg.layer_types)
    rows = batch * seq
    logits = batch * (seq if lm_head == "all" else 1) * cfg.vocab * (e + 4)
    dense = 3 * cfg.intermediate if not cfg.experts or cfg.dense_layers else 0
    routed = cfg.experts_per_token * (cfg.hidden + 4 * cfg.expert_intermediate)
    activations = rows * (max(dense, routed) + 4 * cfg.hidden) * e + logits
    weights = M.param_count(cfg) * e
    return {"weights_bytes": weights, "kv_cache_bytes": kv, "activation_bytes": activations,
            "total_bytes": weights + kv + activations}


def default_dtype(cfg: M.ModelConfig, device: str) -> str:
    """The config's dtype as this device runs it (dtypes.runnable): fp32 on a CPU, whose
    measured roof is fp32 (its bf16 matmuls are emulated, far below it); fp16 for bf16 on a
    GPU without native bf16."""
    return runnable(cfg.dtype, device)


def check_fits(cfg: M.ModelConfig, batch: int, seq: int, new_tokens: int, device: str,
               dtype: str, lm_head: str = "last", built=None) -> dict:
    """The predicted memory, or DoesNotFit in one line when it exceeds what the device has free
    (weights already ``built`` are present, not needed again)."""
    mem = predicted_memory(cfg, batch, seq, new_tokens, dtype, lm_head)
    free = free_bytes(device)
    need = mem["total_bytes"] - (mem["weights_bytes"] if built else 0)
    if free is not None and need > free:
        raise DoesNotFit(
            f"{cfg.name} at batch {batch}, {seq}+{new_tokens} tokens needs ~"
            f"{mem['total_bytes'] / 2**30:.1f} GiB (weights {mem['weights_bytes'] / 2**30:.1f}, "
            f"KV cache {mem['kv_cache_bytes'] / 2**30:.1f}, activations "
            f"{mem['activation_bytes'] / 2**30:.1f}); {free / 2**30:.1f} GiB free here")
    return mem


def _static_cache(config, batch: int, max_len: int, device: str, dtype):
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": config, "max_cache_len": max_len}
    for name, value in (("max_batch_size", batch), ("device", device), ("dtype", dtype)):
        if name in params:
            kw[name] = value
    return StaticCache(**kw)


class Generation:
    """A model, its static cache and its inputs. prefill() and step() are repeatable: each first
    rewinds the cache to where it starts (one small fill kernel, counted with the call);
    advance() moves on by one greedy token."""

    def __init__(self, cfg: M.ModelConfig, batch: int, seq: int, new_tokens: int, device: str,
                 dtype: str, lm_head: str = "last", built=None, attn: str = "sdpa"):
        tdt = torch_dtype(dtype)
        if attn == "rooflab":
            from rooflab.kernels import register_hf_attention
            register_hf_attention()
        self.model, self.config = built or hf.build_model(cfg, device, tdt, attn=attn)
        self.cache = _static_cache(self.config, batch, seq + new_tokens, device, tdt)
        g = torch.Generator(device="cpu").manual_seed(0)
        self.ids = torch.randint(cfg.vocab, (batch, seq), generator=g).to(device)
        self.tok = torch.randint(cfg.vocab, (batch, 1), generator=g).to(device)
        self.prompt_pos = torch.arange(seq, device=device)
        self.pos = torch.tensor([seq], device=device)  # a buffer: a CUDA graph reads it
        self.seq = seq
        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in 5.x
        keep = 1 if lm_head == "last" else 0  # 0: every position
        self.keep = next(({k: keep} for k in ("logits_to_keep", "num_logits_to_keep")
                          if k in params), {})
        self._forward_prefill()  # the cache allocates itself on its first update
        # The cache counts its own length per layer (a device tensor, or a Python int for
        # sliding layers). The tensors become views of one buffer, so a rewind is one kernel.
        self.layers = getattr(self.cache, "layers", [])
        counted = [la for la in self.layers if torch.is_tensor(getattr(la, "cumulative_length",
                                                                             None))]
        self.counters = torch.zeros(len(counted), dtype=torch.long, device=device)
        for i, la in enumerate(counted):
            la.cumulative_length = self.counters[i]

    def rewind(self, position: int):
        if len(self.counters):
            self.counters.fill_(position)
        for la in self.layers:
            if hasattr(la, "cumulative_length_int"):
                la.cumulative_length_int = position
        self.pos.fill_(position)

    def _forward_prefill(self):
        return self.model(input_ids=self.ids, use_cache=True, cache_position=self.prompt_pos,
                          **{self.cache_kw: self.cache}, **self.keep).logits

    def _forward_step(self):
        return self.model(input_ids=self.tok, use_cache=True, cache_position=self.pos,
                          **{self.cache_kw: self.cache}).logits

    def prefill(self):
        self.rewind(0)
        return self._forward_prefill()

    def step(self):
        self.rewind(self.seq)
        return self._forward_step()

    def advance(self):
        self.tok.copy_(self._forward_step()[:, -1:].argmax(-1))
        self.pos.add_(1)


@contextlib.contextmanager
def constants_made_once():
    """Inside: torch.tensor(small Python data, device=GPU) returns the tensor made the first
    time for the same data, dtype and device. During CUDA-graph capture a tensor made from
    Python data is a copy from pageable host memory, which capture refuses; HF's sliding-window
    cache makes one (index = torch.tensor([-1], device=...)) at every step once its window is
    full. The first call (the warm-up before capture) makes it, capture reuses it; HF never
    writes to it. Larger data is not cached."""
    made: dict = {}
    real = torch.tensor

    def tensor(data, *args, **kwargs):
        small = isinstance(data, (list, tuple)) and len(data) <= 16 and all(
            isinstance(x, (int, float, bool)) for x in data)
        if not small or kwargs.get("device") is None or args:
            return real(data, *args, **kwargs)
        key = (tuple(data), repr(sorted(kwargs.items())))  # the data, dtype, device, ...
        if key not in made:
            made[key] = real(data, *args, **kwargs)
        return made[key]

    torch.tensor = tensor
    try:
        yield made
    finally:
        torch.tensor = real


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


@contextlib.contextmanager
def mask_decisions_made_before_capture():
    """Inside: HF's choice between SDPA's is_causal and an explicit mask, made while a CUDA
    graph is captured, is the one made for the same shape in the warm-up before it. At prefill
    that choice reads the cache's offset (a device tensor) with ``.item()``, which capture
    refuses; the warm-up runs the same prompt at the same offset (0), so the captured graph
    launches what the eager prefill launches. Outside capture every call decides afresh.
    (A transformers without this function is left as it is: capture then records its error.)"""
    try:
        from transformers import masking_utils as MU
        real = MU._ignore_causal_mask_sdpa
    except (ImportError, AttributeError):
        yield
        return
    made: dict = {}

    def decide(*args, **kwargs):
        key = tuple(x if isinstance(x, (int, bool, type(None))) else type(x).__name__
                    for x in (*args, *sorted(kwargs.items())))
        if key not in made or not _capturing():
            made[key] = real(*args, **kwargs)
        return made[key]

    MU._ignore_causal_mask_sdpa = decide
    try:
        yield made
    finally:
        MU._ignore_causal_mask_sdpa = real


def predict(records: list[count.OpRecord], ceil: Ceilings, dtype: str,
            costs: OC.OpCosts) -> dict:
    """Counted ops on measured costs, with the gap between kernels: the total, the plain
    roofline sum, and per layer."""
    times = PR.op_times(records, Roof.from_ceilings(ceil, dtype), costs)
    groups = PR.group(times, PR.by_layer, gap_s=costs.gap_s)
    return {**PR.total(groups), "groups": groups}


def _kernels(fn, device: str) -> tuple[float, float]:
    """A call's kernel time (the profiler's) and its kernel launches."""
    prof = P.profile(fn, iters=3, warmup=1, device=device)
    return prof.device_time_us / prof.iters / 1e6, prof.launches_per_iter


def _loop_s(fn, n: int, device: str) -> float:
    """Host clock around n calls, synchronized at both ends: per call."""
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = _time.perf_counter()
    for _ in range(n):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (_time.perf_counter() - t0) / n


def measure_generation(cfg: M.ModelConfig, batch: int, seq: int, new_tokens: int,
                       ceil: Ceilings, device: str, dtype: str | None = None,
                       lm_head: str = "last", graph: bool = True,
                       costs: OC.OpCosts | None = None, built=None, progress=None,
                       attn: str = "sdpa") -> dict:
    """Measure and predict one (batch, prompt length); ``built`` reuses a (model, config) from
    hf.build_model for several shapes (the memory check then counts the weights as present);
    ``progress()`` is called after each of its STEPS steps; ``attn``: transformers' attention
    implementation (ATTN), "rooflab" for rooflab's kernels (the paths they took are counted)."""
    tick = progress or (lambda: None)
    dtype = dtype or default_dtype(cfg, device)
    mem = check_fits(cfg, batch, seq, new_tokens, device, dtype, lm_head, built)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        # the peak is measured from what was allocated before (the weights, when reused)
        base = torch.cuda.memory_allocated() - (mem["weights_bytes"] if built else 0)
    costs = costs or OC.measure_op_costs(device)
    tick()
    out: dict = {"model": cfg.name, "device": device, "dtype": dtype, "batch": batch,
                 "seq": seq, "new_tokens": new_tokens, "lm_head": lm_head, "attn": attn,
                 "memory_predicted": mem}
    paths = _attention_paths() if attn == "rooflab" else None
    with torch.no_grad():  # not inference_mode: the counter needs composite ops decomposed
        gen = Generation(cfg, batch, seq, new_tokens, device, dtype, lm_head, built, attn)
        out["attn"] = gen.config._attn_implementation  # what ran (hf.build_model)
        tick()
        with count.Counter(gen.model) as c:
            gen.prefill()
        pre_records = c.records
        with count.Counter(gen.model) as c:
            gen.step()
        OC.measure_rates(costs, pre_records + c.records, device)
        if device == "cuda":  # the rates' reference tensors are no part of this model's peak;
            torch.cuda.reset_peak_memory_stats()  # prefill and decode run again below
        pre, dec = (predict(rs, ceil, dtype, costs) for rs in (pre_records, c.records))
        out["op_costs"] = costs.as_dict()  # with the attention rates just measured
        out["attention_summary"] = OC.attention_summary(costs.as_dict().get("attention", {}))
        if cfg.experts:
            out["experts"] = experts_execution(c.records, cfg, ceil, dtype, costs)
            out["experts"]["prefill_routing"] = experts_routing(pre_records)
        out["rests_on"] = PR.basis(ceil, costs, pre_records + c.records)
        tick()
        ttft = time_call(gen.prefill, warmup=2, budget_s=0.5, max_reps=20, device=device,
                         name="prefill")
        tick()
        step = time_call(gen.step, warmup=2, budget_s=0.5, max_reps=50, device=device,
                         name="decode step")
        tick()
        # the kernels' own time, from the profiler: the figure that stays meaningful where a
        # step is bound by the host (its device time then counts the host's time too)
        kernels = {name: _kernels(fn, device)[0]
                   for name, fn in (("prefill", gen.prefill), ("decode", gen.step))}
        tick()
        gen.rewind(seq)
        loop_eager = _loop_s(gen.advance, new_tokens, device)
        tick()
        if device == "cuda":
            torch.cuda.synchronize()
            out["memory_measured_peak_bytes"] = torch.cuda.max_memory_allocated() - base
        out["prefill"] = {"wall_s": ttft.wall_s, "device_s": ttft.device_s, "cv": ttft.cv,
                          "unstable": ttft.unstable,
                          "kernel_s": kernels["prefill"],
                          "predicted_s": pre["predicted_s"], "roofline_s": pre["roofline_s"],
                          "predicted_kernels_s": pre["kernels_s"],
                          "flops": pre["flops"], "bytes": pre["bytes"],
                          "kernels_counted": pre["kernels"]}
        out["decode"] = {"eager_wall_s": step.wall_s, "eager_device_s": step.device_s,
                         "eager_cv": step.cv, "eager_unstable": step.unstable,
                         "kernel_s": kernels["decode"],
                         "eager_loop_s": loop_eager, "predicted_s": dec["predicted_s"],
                         "predicted_kernels_s": dec["kernels_s"],
                         "roofline_s": dec["roofline_s"], "flops": dec["flops"],
                         "bytes": dec["bytes"], "kernels_counted": dec["kernels"]}
        if graph and device == "cuda":
            _graphs(gen, seq, new_tokens, device, out)
        tick()
    _ratios(out, batch, mem)
    if paths is not None:  # each attention call's path: a kernel, or SDPA and why
        out["attention_paths"] = dict(_attention_paths() - paths)
    out["layers_predicted"] = {
        "prefill": {k: v["predicted_s"] for k, v in pre["groups"].items()},
        "decode": {k: v["predicted_s"] for k, v in dec["groups"].items()}}
    del gen
    return out


def experts_execution(records: list[count.OpRecord], cfg: M.ModelConfig, ceil: Ceilings,
                      dtype: str, costs: OC.OpCosts) -> dict:
    """How transformers ran a mixture's routed experts in one decode step (the ops counted
    under each layer's ``mlp.experts``), their kernels and predicted time, against the active
    floor: the weights of experts_per_token experts a token, every mixture layer, read once at
    the copy bandwidth."""
    ex = [r for r in records if re.search(r"\.experts(\.|$)", r.module)]
    ops = {r.op for r in ex}
    how = ("one grouped GEMM a projection (grouped_mm)" if "_grouped_mm" in ops else
           "batched matmuls over every expert" if ops & {"bmm", "baddbmm"} else
           "a loop over the experts hit, a GEMM each")
    times = PR.op_times(ex, Roof.from_ceilings(ceil, dtype), costs)
    layers = cfg.layers - cfg.dense_layers
    active = (layers * cfg.experts_per_token * 3 * cfg.hidden * cfg.expert_intermediate
              * C.elem_bytes(dtype))
    return {"how": how, "kernels": len(times), "bytes": sum(t.record.bytes for t in times),
            "predicted_s": sum(t.predicted_s for t in times),
            "active_bytes": active, "active_floor_s": active / ceil.mem_bandwidth_bytes_per_s}


def experts_routing(records: list[count.OpRecord]) -> dict | None:
    """How evenly a prefill's router spread the rows over the experts, from its grouped GEMMs'
    groups (None where they are unknown: no grouped GEMM, or the meta device): the largest group
    over the mean, lowest and highest over the layers, beside the same for a uniform router's
    draw of the same rows (OC.uniform_draw), highest over the shapes (None where every group took
    a decode's few rows: their reference is even), and how many were timed as routed."""
    grouped = [r for r in records if r.op in OC.GROUPED_OPS and r.group_rows and sum(r.group_rows)]
    if not grouped:
        return None

    def skew(sizes) -> float:
        return max(sizes) * len(sizes) / sum(sizes)
    skews = [skew(r.group_rows) for r in grouped]
    draws = {(sum(r.group_rows), len(r.group_rows)) for r in grouped
             if " prefill " in OC.grouped_key(r)}
    return {"largest_over_mean": [min(skews), max(skews)], "reference_largest_over_mean":
            max((skew(OC.uniform_draw(n, e)) for n, e in draws), default=None),
            "grouped_ops": len(grouped),
            "as_routed": sum(" as routed " in OC.grouped_key(r) for r in grouped)}


ATTN = ("sdpa", "eager", "rooflab")


def _attention_paths():
    from rooflab.kernels.hf_attention import CALLS
    return CALLS.copy()


def _graphs(gen: Generation, seq: int, new_tokens: int, device: str, out: dict) -> None:
    """The prefill, the decode step and the decode loop as CUDA graphs, into ``out``; a model
    that cannot be captured is a result (its error kept)."""
    torch.cuda.empty_cache()  # the eager run's cached blocks: a graph has its own pool
    try:
        with constants_made_once(), mask_decisions_made_before_capture():
            replay = capture_graph(gen.prefill)
        g = time_call(replay, warmup=2, budget_s=0.5, max_reps=20, device=device,
                      name="prefill (graph)")
        out["prefill"].update(graph_wall_s=g.wall_s, graph_device_s=g.device_s,
                              graph_cv=g.cv, graph_unstable=g.unstable)
        del replay
        torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - a model that cannot be captured is a result
        out["prefill"]["graph_error"] = str(e).splitlines()[0][:200]
    try:
        with constants_made_once():
            replay = capture_graph(gen.step)
        g = time_call(replay, warmup=2, budget_s=0.3, max_reps=100, device=device,
                      name="decode step (graph)")
        out["decode"].update(graph_wall_s=g.wall_s, graph_device_s=g.device_s)
        # the replay's own kernels (the eager profile's can run slower or faster than the
        # graph's: docs/predictions.md), so that the gap is the replay's less its kernels
        kernel_s, launches = _kernels(replay, device)
        out["decode"].update(graph_kernel_s=kernel_s, graph_launches=launches)
        with constants_made_once():
            adv = capture_graph(gen.advance)
        gen.rewind(seq)
        out["decode"]["graph_loop_s"] = _loop_s(adv, new_tokens, device)
    except Exception as e:  # noqa: BLE001 - a model that cannot be captured is a result
        out["decode"]["graph_error"] = str(e).splitlines()[0][:200]


def _ratios(out: dict, batch: int, mem: dict) -> None:
    """Predicted and plain-roofline over measured, TTFT, TPOT and tokens/s, into ``out``."""
    p, d = out["prefill"], out["decode"]
    for x in (p, d):  # kernel time has no gaps between kernels: nor has this prediction
        x["predicted_over_kernel"] = (x["predicted_kernels_s"] / x["kernel_s"] if x["kernel_s"]
                                      else None)
    # where the device waits for the host to launch, its time is the host's: the prediction
    # (of kernels) is then read against the kernel time
    p["kernel_busy_fraction"] = p["kernel_s"] / p["device_s"]
    d["kernel_busy_fraction"] = d["kernel_s"] / d["eager_device_s"]
    for x in (p, d):
        x["host_bound"] = x["kernel_busy_fraction"] < HOST_BOUND
    for x, eager in ((p, p["device_s"]), (d, d["eager_device_s"])):
        for mode, s in (("eager", eager), ("graph", x.get("graph_device_s"))):
            if s:
                x[f"predicted_over_{mode}_device"] = x["predicted_s"] / s
                x[f"roofline_over_{mode}_device"] = x["roofline_s"] / s
        best = "graph" if x.get("graph_device_s") else "eager"  # the call without launch gaps
        x["predicted_over_device"] = x[f"predicted_over_{best}_device"]
        x["roofline_over_device"] = x[f"roofline_over_{best}_device"]
    if p.get("graph_wall_s"):
        out["ttft_graph_s"] = p["graph_wall_s"]
    tpot = d.get("graph_loop_s") or d["eager_loop_s"]
    out["ttft_s"] = p["wall_s"] if p["wall_s"] is not None else p["device_s"]
    out["tpot_s"] = tpot
    out["tokens_per_s"] = batch / tpot
    if "memory_measured_peak_bytes" in out:
        out["memory_predicted_over_measured"] = (mem["total_bytes"] /
                                                 out["memory_measured_peak_bytes"])
