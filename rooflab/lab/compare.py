"""`rooflab compare`: two lab runs side by side (say a T4 and an H200): the devices, their
measured ceilings and ridges, and every numeric figure the answers were derived from (crossover
n, layer times, GeLU and attention figures, OOM length), with B over A."""
from __future__ import annotations

import math
import os

from rooflab import roofline as R
from rooflab.errors import RooflabError, read_json


class CompareError(RooflabError):
    """A results file that cannot be read, or one made before answers had ids."""


def load(path: str) -> dict:
    """DIR/results.json, or the file itself."""
    p = os.path.join(path, "results.json") if os.path.isdir(path) else path
    data = read_json(p, CompareError)
    if not isinstance(data, dict) or "meta" not in data:
        raise CompareError(f"{p} is not a rooflab lab results file")
    if "answers" not in data:
        raise CompareError(f"{p} was written before answers had ids: run `rooflab lab` again")
    return data


def figures(res: dict) -> dict[str, float]:
    """The run's numeric figures, flat: ceilings, then each answer's figures as 'id: name'."""
    c = res["meta"]["ceilings"]
    out = {"copy bandwidth (B/s)": c["mem_bandwidth_bytes_per_s"]}
    for dt, v in c["peak_flops_per_s"].items():
        out[f"matmul {dt} (FLOP/s)"] = v
        out[f"ridge {dt} (FLOP/B)"] = R.ridge(v, c["mem_bandwidth_bytes_per_s"])
    for q, a in res["answers"].items():
        for k, v in a["figures"].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"{q}: {k}"] = v
    return out


CHANGED = 0.05  # a figure "changed" between the runs when B / A is off 1 by more than 5%


def compare(a: dict, b: dict) -> dict:
    """Every figure of both runs, the changed ones first (most changed first), then those only
    one run has, then those within CHANGED of each other."""
    fa, fb = figures(a), figures(b)
    rows = [{"figure": k, "a": fa[k], "b": fb.get(k),
             "b_over_a": fb[k] / fa[k] if fb.get(k) is not None and fa[k] else None}
            for k in fa]
    rows += [{"figure": k, "a": None, "b": v, "b_over_a": None} for k, v in fb.items()
             if k not in fa]
    for r in rows:  # equal figures (zero in both runs too) are unchanged
        q = r["b_over_a"]
        r["changed"] = r["a"] != r["b"] and (q is None or abs(q - 1) > CHANGED)
    rows.sort(key=lambda r: (not r["changed"], r["b_over_a"] is None,
                             -abs(math.log(r["b_over_a"])) if r["b_over_a"] and r["b_over_a"] > 0
                             else 0))
    return {"a": {"device": a["meta"]["device_name"], "date": a["meta"]["date"],
                  "gpu": a["meta"]["gpu"]},
            "b": {"device": b["meta"]["device_name"], "date": b["meta"]["date"],
                  "gpu": b["meta"]["gpu"]}, "changed_past": CHANGED, "rows": rows}
