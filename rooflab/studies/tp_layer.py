"""A real tensor-parallel decoder layer: the transformers layer of a config with its weights split
Megatron's way over the ranks of a process group (parallel.py says how), an all-reduce after
o_proj and after down_proj, measured on every rank and predicted from its counted ops plus the
collective ceiling.

Run by torch.multiprocessing, one process per GPU (NCCL), or per CPU process (gloo: the CPU
check that the split layer computes what the whole one does).
"""
from __future__ import annotations

import os

import torch

from rooflab import count, hf
from rooflab import predict as PR
from rooflab import models as M
from rooflab import parallel as TP
from rooflab.measure import op_classes as OC
from rooflab.measure.collectives import free_port, leave, spawn, write_result
from rooflab.roofline import Roof

HOOKED = ("self_attn.o_proj", "mlp.down_proj")  # row-parallel: each rank holds a partial sum


def _rows(rank: int, per_rank: int) -> slice:
    return slice(rank * per_rank, (rank + 1) * per_rank)


def split(full: torch.nn.Module, cfg: M.ModelConfig, layer_type: str, tp: int, rank: int):
    """This rank's share of ``full`` (a layer of ``cfg``): q/k/v and gate/up by output rows,
    o and down by input columns; a KV head replicated where there are fewer than ranks; norms
    whole; the row-parallel biases on rank 0 only (they are added once, after the sum)."""
    part = TP.shard(cfg, tp)
    layer, _ = hf.build_layer(part, layer_type, "meta", dtype=next(full.parameters()).dtype,
                              attn=full.self_attn.config._attn_implementation)
    layer = layer.to_empty(device=next(full.parameters()).device)
    d, hq = cfg.head_dim, part.heads
    if cfg.kv_heads >= tp:
        kv = _rows(rank, part.kv_heads * d)
    else:  # one KV head per rank: the one this rank's query heads read
        group = cfg.heads // cfg.kv_heads
        first = rank * hq // group
        kv = slice(first * d, (first + 1) * d)
    inter = _rows(rank, part.intermediate)
    rows = {"self_attn.q_proj": _rows(rank, hq * d), "self_attn.k_proj": kv,
            "self_attn.v_proj": kv, "mlp.gate_proj": inter, "mlp.up_proj": inter}
    cols = {"self_attn.o_proj": _rows(rank, hq * d), "mlp.down_proj": inter}
    src = dict(full.named_parameters())
    with torch.no_grad():
        for name, p in layer.named_parameters():
            mod, kind = name.rsplit(".", 1)
            w = src[name]
            if mod in rows:
                w = w[rows[mod]]
            elif mod in cols and kind == "weight":
                w = w[:, cols[mod]]
            elif mod in cols:  # a row-parallel bias
                w = w if rank == 0 else torch.zeros_like(w)
            p.copy_(w)
        for name, b in full.named_buffers():
            dict(layer.named_buffers())[name].copy_(b)
    return layer


def all_reduce_after(layer: torch.nn.Module) -> list:
    """Sum the row-parallel outputs over the ranks, in place, before the residual sees them."""
    import torch.distributed as dist

    def hook(mod, args, out):
        dist.all_reduce(out)
        return out

    mods = dict(layer.named_modules())
    return [mods[name].register_forward_hook(hook) for name in HOOKED]


def _init(rank, world, backend, port):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)


def _check_worker(rank, world, cfg, layer_type, phase, port, reduce, out_path):
    import torch.distributed as dist

    _init(rank, world, "gloo", port)
    full, _ = hf.build_layer(cfg, layer_type, "cpu", dtype=torch.float32)  # seeded: every rank
    torch.manual_seed(1)
    call = hf.prepare(cfg, layer_type, phase, "cpu", layer=full)
    with torch.no_grad():
        want = call()
        mine = split(full, cfg, layer_type, world, rank)
        if reduce:
            all_reduce_after(mine)
        got = hf.LayerCall(mine, call.kwargs, call.hidden)()
    err = torch.tensor([float((got - want).abs().max() / want.abs().max())])
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    if rank == 0:
        write_result(out_path, {"max_rel_err": float(err)})
    leave()


def check_split(cfg: M.ModelConfig, layer_type: str, phase: M.Phase, tp: int = 2,
          reduce: bool = True) -> float:
    """The split layer against the whole one (fp32, gloo between ``tp`` CPU processes): the
    largest difference of the outputs, relative to the largest output. ``reduce=False`` leaves
    out the all-reduces (the control: each rank then has only its partial sums)."""
    TP.shard(cfg, tp)  # a split the shapes do not allow fails here, in one line
    return spawn(_check_worker, (tp, cfg, layer_type, phase, free_port(), reduce),
                 tp)["max_rel_err"]


def _measure_worker(rank, world, cfg, layer_type, phase, collective, ceil, costs, port,
                    out_path):
    import torch.distributed as dist

    from rooflab.measure import profile as P
    from rooflab.measure.timer import capture_graph, time_call

    _init(rank, world, "nccl", port)
    dev = f"cuda:{rank}"
    part = TP.shard(cfg, world)
    layer, _ = hf.build_layer(part, layer_type, dev, attn="sdpa")
    all_reduce_after(layer)
    row = {"rank": rank}
    with torch.inference_mode():
        for mode in ("eager", "graph"):
            call = hf.prepare(part, layer_type, phase, dev, cache="static" if mode == "graph"
                              else "concat", layer=layer)
            try:
                fn = capture_graph(call) if mode == "graph" else call
                t = time_call(fn, warmup=3, budget_s=0.3, device="cuda")
                prof = P.profile(fn, iters=5, warmup=1, device="cuda")
                comm = sum(k.total_us for k in prof.kernels if "nccl" in k.name.lower())
                row[mode] = {"device_s": t.device_s, "wall_s": t.wall_s,
                             "kernel_s": prof.device_time_us / prof.iters / 1e6,
                             "communication_s": comm / prof.iters / 1e6,
                             "launches_per_iter": prof.launches_per_iter}
            except Exception as e:  # noqa: BLE001 - a mode that cannot run is a result
                row[mode] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    with torch.no_grad():  # counted outside inference mode: composite ops decomposed
        call = hf.prepare(part, layer_type, phase, dev, layer=layer)
        with count.Counter(layer) as c:
            call()
    records = [r for r in c.records if "all_reduce" not in r.op and "allreduce" not in r.op]
    OC.measure_rates(costs, records, dev)
    compute = PR.total(PR.group(PR.op_times(records, Roof.from_ceilings(ceil, cfg.dtype), costs),
                                PR.by_module))["predicted_s"]
    comm = TP.communication(cfg, phase, world, measured=collective)  # the layer's all-reduces
    row.update(predicted_compute_s=compute, predicted_communication_s=comm["predicted_s"],
               predicted_s=compute + comm["predicted_s"], message_bytes=comm["message_bytes"])
    rows = [None] * world
    dist.all_gather_object(rows, row)
    if rank == 0:
        write_result(out_path, rows)
    leave()


def measure_split(cfg: M.ModelConfig, layer_type: str, phase: M.Phase, tp: int, collective: dict,
            ceil, costs) -> dict:
    """One layer split over ``tp`` GPUs: every rank's eager and CUDA-graph times, its kernel and
    communication time (the profiler's NCCL kernels), and the prediction."""
    ranks = spawn(_measure_worker, (tp, cfg, layer_type, phase, collective, ceil, costs,
                                    free_port()), tp)
    slowest = max(ranks, key=lambda r: (r.get("graph") or {}).get("device_s") or 0)
    return {"model": cfg.name, "layer_type": layer_type, "phase": phase.kind,
            "batch": phase.batch, "seq": phase.seq, "kv_len": phase.kv_len, "tp": tp,
            "ranks": ranks, "predicted_s": slowest["predicted_s"],
            "predicted_communication_s": slowest["predicted_communication_s"]}
