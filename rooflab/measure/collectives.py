"""The collective ceiling: all-reduce, all-gather and reduce-scatter time against message size,
between the GPUs present (NCCL) or between processes on the CPU (gloo), in nccl-tests' terms.

A message of S bytes is the all-reduce's buffer, the all-gather's gathered output and the
reduce-scatter's input. Algorithm bandwidth is S / t; bus bandwidth, the figure comparable with
a link's speed, is that times 2(n-1)/n for an all-reduce (a ring sends and receives each byte
that often per GPU) and (n-1)/n for the other two. Small messages never reach the bus bandwidth:
their time is the latency floor, the median time of messages of at most LATENCY_BELOW bytes.
A call's time is the slowest rank's mean over ``iters`` back-to-back calls.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import statistics
import tempfile
import time as _time

import torch

from rooflab.errors import RooflabError
from rooflab.units import secs

OPS = ("all_reduce", "all_gather", "reduce_scatter")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
SIZES = [1 << k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB
LATENCY_BELOW = 64 << 10
FORMAT = 1


class CollectiveError(RooflabError):
    """Collectives cannot run here (too few GPUs, a world size the sizes do not divide)."""


def bus_bandwidth(op: str, message_bytes: int, seconds: float, n: int) -> float:
    return message_bytes / seconds * BUS_FACTOR[op](n)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def leave() -> None:
    """Every rank at the same point, then out of the process group. Without the barrier a rank
    that left first (rank 0 serves the group's store) made another abort in its teardown
    ("terminate called without an active exception"): 1 of 25 two-process checks on a 2-core CPU."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def write_result(out_path: str, data) -> None:
    """Rank 0's results, whole or not at all (written aside, then moved into place)."""
    with open(out_path + ".part", "w") as f:
        json.dump(data, f)
    os.replace(out_path + ".part", out_path)


def spawn(fn, args: tuple, nprocs: int, note=None) -> object:
    """Run ``fn(rank, *args, out_path)`` in ``nprocs`` processes; what rank 0 wrote with
    write_result. Rank 0 writes after a collective every rank joined, so results on disk are
    whole even where a rank then aborts in its teardown despite leave()'s barrier (seen once in
    a full CI run on a 2-core CPU): such an exit keeps them; any other failure raises. The
    lines rank 0 appends to ``out_path + ".progress"`` are passed to ``note`` as they come."""
    import threading

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        done = threading.Event()

        def follow():  # the ranks' progress, read back while they run
            seen = 0
            while True:
                stop = done.wait(1.0)
                try:
                    with open(out + ".progress") as f:
                        lines = f.read().splitlines()
                except OSError:
                    lines = []
                for line in lines[seen:]:
                    note(line)
                seen = len(lines)
                if stop:
                    return

        watcher = threading.Thread(target=follow, daemon=True) if note else None
        if watcher:
            watcher.start()
        try:
            mp.spawn(fn, args=(*args, out), nprocs=nprocs, join=True)
        except mp.ProcessExitedException:
            if not os.path.exists(out):
                raise
        finally:
            done.set()
            if watcher:
                watcher.join()
        with open(out) as f:
            return json.load(f)


def _buffers(op: str, message_bytes: int, world: int, dtype, device):
    n = message_bytes // torch.tensor([], dtype=dtype).element_size()
    big = torch.ones(n, dtype=dtype, device=device)
    small = torch.ones(n // world, dtype=dtype, device=device)
    import torch.distributed as dist
    if op == "all_reduce":
        return lambda: dist.all_reduce(big)
    # torch 2.13 renamed these (the old names warn); 2.11 has only the old ones
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op == "all_gather":
        return lambda: gather(big, small)
    return lambda: scatter(small, big)


def _worker(rank, world, backend, device, sizes, dtype_name, iters, port, out_path):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)
    dev = f"cuda:{rank}" if device == "cuda" else "cpu"
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[dtype_name]
    rows = []
    for op in OPS:
        for size in sizes:
            call = _buffers(op, size, world, dtype, dev)
            for _ in range(3):
                call()
            if device == "cuda":
                torch.cuda.synchronize()
            dist.barrier()
            t0 = _time.perf_counter()
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                for _ in range(iters):
                    call()
                end.record()
                torch.cuda.synchronize()
                seconds = start.elapsed_time(end) / 1e3 / iters
            else:
                for _ in range(iters):
                    call()
                seconds = (_time.perf_counter() - t0) / iters
            slowest = torch.tensor([seconds], dtype=torch.float64, device=dev)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            t = float(slowest.item())
            rows.append({"op": op, "message_bytes": size, "time_s": t,
                         "algbw_bytes_per_s": size / t,
                         "busbw_bytes_per_s": bus_bandwidth(op, size, t, world)})
            if rank == 0:
                with open(out_path + ".progress", "a") as f:
                    f.write(f"{op} of {size:,} bytes: {secs(t)} "
                            f"({len(rows)}/{len(OPS) * len(sizes)})\n")
    if rank == 0:
        write_result(out_path, rows)
    leave()


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def measure_collectives(device: str = "cuda", world_size: int | None = None, sizes=None,
            dtype: str | None = None, iters: int = 20, note=None) -> dict:
    """Spawn one process per GPU (or ``world_size`` CPU processes) and time every op at every
    size; the result names the backend, the world size and each op's floor and peak."""
    world = world_size or (gpu_count() if device == "cuda" else 2)
    if device == "cuda" and gpu_count() < max(world, 2):
        raise CollectiveError(f"collectives need two or more GPUs; this machine has "
                              f"{gpu_count()} (--device cpu measures gloo between processes)")
    if world < 2:
        raise CollectiveError(f"--world-size must be at least 2, got {world}")
    sizes = sorted(sizes or SIZES)
    dtype = dtype or ("bf16" if device == "cuda" else "fp32")
    step = world * 4  # every buffer splits evenly across ranks, in whole elements
    if any(s % step for s in sizes):
        raise CollectiveError(f"message sizes must be multiples of {step} bytes for {world} "
                              "ranks")
    backend = "nccl" if device == "cuda" else "gloo"
    rows = spawn(_worker, (world, backend, device, sizes, dtype, iters, free_port()), world,
                 note)
    return summarize(rows, device, backend, world, dtype)


def summarize(rows: list[dict], device: str, backend: str, world: int, dtype: str) -> dict:
    floor, peak = {}, {}
    for op in OPS:
        mine = [r for r in rows if r["op"] == op]
        small = [r["time_s"] for r in mine if r["message_bytes"] <= LATENCY_BELOW]
        floor[op] = statistics.median(small) if small else None
        peak[op] = max((r["busbw_bytes_per_s"] for r in mine), default=None)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU processes"
    return {"format": FORMAT, "device": device, "device_name": name, "backend": backend,
            "world_size": world, "dtype": dtype, "rows": rows, "latency_floor_s": floor,
            "peak_busbw_bytes_per_s": peak, "versions": {"torch": torch.__version__},
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def cache_path(device: str, world: int) -> str:
    from rooflab.measure.ceilings import cache_path as ceilings_path

    base = ceilings_path(device)  # same folder and key: device, driver, versions
    return base.replace("ceilings-", f"collectives-{world}x-")


def cached(device: str, world: int) -> dict | None:
    """A cached measurement of ``world`` ranks here, or None (nothing is measured)."""
    if device == "cuda" and gpu_count() < world:
        return None
    path = cache_path(device, world)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    return data if data.get("format") == FORMAT else None


def get(device: str = "cuda", world_size: int | None = None, refresh: bool = False,
        sizes=None, note=None) -> dict:
    """Cached per device, world size and versions, like the other ceilings (full sweeps only);
    ``note(line)`` is told what is measured before the ranks start."""
    world = world_size or (gpu_count() if device == "cuda" else 2)
    path = cache_path(device, world)
    if not refresh and sizes is None and os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        if data.get("format") == FORMAT:
            return {**data, "cached": True}
    if note:
        s = sorted(sizes or SIZES)
        note(f"measuring {', '.join(OPS)} over {world} {'NCCL' if device == 'cuda' else 'gloo'} "
             f"ranks at {len(s)} message sizes, {s[0]:,} to {s[-1]:,} bytes" +
             (" (minutes on a CPU)" if device == "cpu" and sizes is None else ""))
    data = measure_collectives(device, world, sizes, note=note)
    if sizes is None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, indent=1)
    return {**data, "cached": False}
