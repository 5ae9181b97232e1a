"""Part 6: one layer split over two GPUs (tensor parallelism over NCCL): the collective ceiling,
the layer at TP=1 and TP=2, measured and predicted, and when splitting pays. Runs where two or
more GPUs are present; elsewhere the report says why not."""
from __future__ import annotations

from rooflab import models as M
from rooflab.lab.answers import answer
from rooflab.lab.context import Context, result, table
from rooflab.units import secs

TITLE = "Tensor parallelism over two GPUs"
TP = 2
QUESTIONS = ("B.tensor_parallel",)  # answered with the reason when the part cannot run


def needs(ctx: Context) -> str | None:
    """Why this part cannot run here, or None."""
    from rooflab.measure.collectives import gpu_count

    n = gpu_count() if ctx.device == "cuda" else 0
    if n < TP:
        return f"not run: {'one GPU' if n == 1 else 'no GPU'} (tensor parallelism needs {TP})"
    return None


def run(ctx: Context) -> dict:
    from rooflab.studies import layer_measure as LM
    from rooflab.studies import tp_layer as T
    from rooflab.measure import collectives as K
    from rooflab.measure import op_classes as OC

    coll = K.get("cuda", TP)
    costs = OC.measure_op_costs("cuda")
    shapes = [M.Phase.prefill(1, 2048), M.Phase.decode(1, 4096), M.Phase.decode(64, 4096)]
    models = ("gemma-3-270m-it",) if ctx.quick else ("gemma-3-270m-it", "Llama-3.1-8B")
    tick = ctx.progress("part 6: TP=1 vs TP=2 layers", len(models) * len(shapes))
    rows = []
    for name in models:
        cfg = M.load(name)
        for phase in shapes:
            one = LM.measure_layer(cfg, phase, "full", ctx.ceilings, "cuda", graph=True, costs=costs)
            two = T.measure_split(cfg, "full", phase, TP, coll, ctx.ceilings, costs)
            slow = max(two["ranks"], key=lambda r: (r.get("graph") or {}).get("device_s") or 0)
            g = slow.get("graph") or {}
            rows.append({"model": name, "phase": phase.kind, "batch": phase.batch,
                         "tokens": phase.tokens, "tp1_device_s": one["device_s"],
                         "tp2_device_s": g.get("device_s"),
                         "tp2_communication_s": g.get("communication_s"),
                         "tp2_predicted_s": two["predicted_s"],
                         "tp2_predicted_over_device": (two["predicted_s"] / g["device_s"]
                                                       if g.get("device_s") else None),
                         "speedup": (one["device_s"] / g["device_s"] if g.get("device_s")
                                     else None), "tp2": two})
            tick()
    plots = [{"kind": "lines", "name": "p6_collectives", "title": "NCCL collectives: bus "
              f"bandwidth against message size ({coll['world_size']} GPUs)",
              "xlabel": "message (bytes)", "ylabel": "bus bandwidth (GB/s)", "logx": True,
              "series": {op: [[r["message_bytes"], r["busbw_bytes_per_s"] / 1e9]
                              for r in coll["rows"] if r["op"] == op]
                         for op in coll["latency_floor_s"]}}]
    return result(_headline(rows), {"collectives": coll, "rows": rows}, plots,
                  {"B.tensor_parallel": _answer(rows, coll)},
                  tables=[table("p6_tp", "One layer at TP=1 and TP=2 (CUDA graphs)", rows,
                                ["model", "phase", "batch", "tp1_device_s", "tp2_device_s",
                                 "tp2_communication_s", "tp2_predicted_s",
                                 "tp2_predicted_over_device", "speedup"])])


def _headline(rows: list[dict]) -> str:
    wins = [r for r in rows if (r["speedup"] or 0) > 1]
    return f"TP=2 faster than one GPU in {len(wins)} of {len(rows)} layer shapes"


def _answer(rows: list[dict], coll: dict) -> dict:
    floor = coll["latency_floor_s"]["all_reduce"]
    ran = [r for r in rows if r["speedup"]]
    won = [f"{r['model']} {r['phase']} B={r['batch']}" for r in ran if r["speedup"] > 1]
    lost = [f"{r['model']} {r['phase']} B={r['batch']}" for r in ran if r["speedup"] <= 1]
    # what TP=2 saves (half the layer, at best) against what it adds (its all-reduces)
    parts = [f"{r['model']} {r['phase']} B={r['batch']}: TP=1 {secs(r['tp1_device_s'])}, TP=2 "
             f"{secs(r['tp2_device_s'])} ({r['speedup']:.2f}x), of which all-reduces "
             f"{secs(r['tp2_communication_s'])} against the {secs(r['tp1_device_s'] / 2)} that "
             "halving the layer could save" for r in ran]
    return answer(
        "Splitting a layer halves its weights and FLOPs per GPU and adds two all-reduces of "
        f"tokens x hidden elements (measured latency floor {secs(floor)} each). "
        + "; ".join(parts) + ". " +
        (f"It paid for {', '.join(won)}" if won else "It paid for none of these shapes") +
        (f"; it lost for {', '.join(lost)}" if lost else "") + ".",
        all_reduce_floor_s=floor, **{f"{r['model']}_{r['phase']}_B{r['batch']}_speedup":
                                     r["speedup"] for r in ran})
