"""Achieved points: a callable measured together with its cost, placed under a roof."""
from __future__ import annotations

from rooflab import roofline as R
from rooflab.cost import Cost
from rooflab.measure.timer import Timing, time_call


def place(flops: int, nbytes: int, seconds: float, roof: R.Roof) -> dict:
    """Achieved FLOP/s and bandwidth of work measured at ``seconds``, and its fraction of the
    roof at its intensity (the roofline's attainable FLOP/s, or bandwidth when it does no FLOPs)."""
    i = R.intensity(flops, nbytes)
    attainable = R.attainable(roof, i)
    achieved_flops, achieved_bw = flops / seconds, nbytes / seconds
    frac = achieved_flops / attainable if flops else achieved_bw / roof.mem_bandwidth_bytes_per_s
    return {
        "flops": flops, "bytes": nbytes, "intensity": i, "measured_s": seconds,
        "time_floor_s": R.time_floor_s(roof, flops, nbytes),
        "achieved_flops_per_s": achieved_flops, "achieved_bandwidth_bytes_per_s": achieved_bw,
        "attainable_flops_per_s": attainable, "fraction_of_roof": frac,
        "bound": R.bound(roof, i), "roof": roof.label,
    }


def point(timing: Timing, c: Cost, roof: R.Roof, fused: bool = False) -> dict:
    """A measured op placed under ``roof`` (eager bytes, or fused-ideal ones)."""
    return {"name": c.name, **place(c.flops, c.bytes_fused if fused else c.bytes,
                                    timing.median_s, roof), "unstable": timing.unstable}


def counted(fn, *args, name: str = "") -> Cost:
    """The cost of fn(*args) as the dispatch counter sees it (eager bytes: every op's inputs
    and outputs; fused-ideal bytes are unknown for an arbitrary callable, so the same)."""
    from rooflab.count import count

    c = count(fn, *args)
    return Cost(name or getattr(fn, "__name__", "callable"), c.total_macs, c.total_flops,
                c.total_bytes, c.total_bytes, kernels=len(c.kernels()))


def measure_point(fn, c: Cost | None, roof: R.Roof, *args, fused: bool = False,
            **time_kwargs) -> dict:
    """Time fn(*args) with the one timer and place the result under ``roof``; without a given
    cost, the dispatch counter counts it first."""
    c = c if c is not None else counted(fn, *args)
    return point(time_call(fn, *args, name=c.name, **time_kwargs), c, roof, fused)



def hold(roof: R.Roof, points: list[dict], cache_bytes: int | None = None,
         tolerance: float = R.ABOVE_ROOF_TOLERANCE) -> tuple[R.Roof, list[dict], list[str]]:
    """``R.hold`` over achieved points: the roof this run's points respect, the points placed
    under it again (``above_roof`` says why where one still is), and one note per change."""
    new, notes, why = R.hold(roof, [(p["name"], p["intensity"], p["achieved_flops_per_s"],
                                     p["bytes"]) for p in points], cache_bytes, tolerance)
    placed = [{**p, **place(p["flops"], p["bytes"], p["measured_s"], new),
               **({"above_roof": why[p["name"]]} if p["name"] in why else {})} for p in points]
    return new, placed, notes
