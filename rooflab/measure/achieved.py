"""Achieved points: a callable measured together with its cost, placed under a roof."""
from __future__ import annotations

from rooflab import roofline as R
from rooflab.cost import Cost
from rooflab.measure.timer import Timing, time


def point(timing: Timing, c: Cost, roof: R.Roof, fused: bool = False) -> dict:
    """Achieved FLOP/s and bandwidth of a measured op, and its fraction of the roof at its
    intensity (the roofline's attainable FLOP/s, or bandwidth when it does no FLOPs)."""
    nbytes = c.bytes_fused if fused else c.bytes
    t = timing.median_s
    i = R.intensity(c.flops, nbytes)
    attainable = R.attainable(roof, i)
    achieved_flops = c.flops / t
    achieved_bw = nbytes / t
    frac = achieved_flops / attainable if c.flops else achieved_bw / roof.mem_bandwidth_bytes_per_s
    return {
        "name": c.name, "flops": c.flops, "bytes": nbytes, "intensity": i,
        "measured_s": t, "time_floor_s": R.time_floor_s(roof, c.flops, nbytes),
        "achieved_flops_per_s": achieved_flops, "achieved_bandwidth_bytes_per_s": achieved_bw,
        "attainable_flops_per_s": attainable, "fraction_of_roof": frac,
        "bound": R.bound(roof, i), "unstable": timing.unstable, "roof": roof.label,
    }


def counted(fn, *args, name: str = "") -> Cost:
    """The cost of fn(*args) as the dispatch counter sees it (eager bytes: every op's inputs
    and outputs; fused-ideal bytes are unknown for an arbitrary callable, so the same)."""
    from rooflab.count import count

    c = count(fn, *args)
    return Cost(name or getattr(fn, "__name__", "callable"), c.total_macs, c.total_flops,
                c.total_bytes, c.total_bytes, kernels=len(c.kernels()))


def measure(fn, c: Cost | None, roof: R.Roof, *args, fused: bool = False,
            **time_kwargs) -> dict:
    """Time fn(*args) with the one timer and place the result under ``roof``; without a given
    cost, the dispatch counter counts it first."""
    c = c if c is not None else counted(fn, *args)
    return point(time(fn, *args, name=c.name, **time_kwargs), c, roof, fused)



def hold(roof: R.Roof, points: list[dict], cache_bytes: int | None = None,
         tolerance: float = R.ABOVE_ROOF_TOLERANCE) -> tuple[R.Roof, list[dict], list[str]]:
    """``R.hold`` over achieved points: the roof this run's points respect, the points placed
    under it again (``above_roof`` says why where one still is), and one note per change."""
    new, notes, why = R.hold(roof, [(p["name"], p["intensity"], p["achieved_flops_per_s"],
                                     p["bytes"]) for p in points], cache_bytes, tolerance)
    placed = []
    for p in points:
        i = p["intensity"]
        q = {**p, "attainable_flops_per_s": R.attainable(new, i), "bound": R.bound(new, i),
             "time_floor_s": R.time_floor_s(new, p["flops"], p["bytes"]), "roof": new.label}
        q["fraction_of_roof"] = (q["achieved_flops_per_s"] / q["attainable_flops_per_s"]
                                 if p["flops"] else
                                 q["achieved_bandwidth_bytes_per_s"] / new.mem_bandwidth_bytes_per_s)
        if p["name"] in why:
            q["above_roof"] = why[p["name"]]
        placed.append(q)
    return new, placed, notes
