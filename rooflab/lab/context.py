"""What every part returns, and the context it runs in: plain data (numbers, plot
specifications, answers, tables) that the views draw."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.measure import ceilings as CE


@dataclass
class Context:
    device: str
    gpu: H.Hardware  # the datasheet record analytic answers use (detected, chosen or default)
    ceilings: CE.Ceilings
    out_dir: str
    quick: bool = False
    progress: Callable[[str, int], Callable[[], None]] = lambda desc, total: (lambda: None)

    @property
    def measured(self) -> H.Hardware:
        return self.ceilings.hardware(self.gpu if self.device == "cuda" else None)

    @property
    def measured_dtype(self) -> str:
        """The dtype this device's measured roof is drawn for."""
        return "bf16" if "bf16" in self.ceilings.peak_flops_per_s else "fp32"

    @property
    def trace_dir(self) -> str:
        d = os.path.join(self.out_dir, "traces")
        os.makedirs(d, exist_ok=True)
        return d


def roof_spec(roof: R.Roof) -> dict:
    return {"label": roof.label, "peak_flops_per_s": roof.peak_flops_per_s,
            "mem_bandwidth_bytes_per_s": roof.mem_bandwidth_bytes_per_s, "ridge": roof.ridge,
            "measured": roof.measured}


def pt(label, intensity, flops_per_s, kind="predicted", group="", **hover) -> dict:
    return {"label": label, "intensity": intensity, "flops_per_s": flops_per_s, "kind": kind,
            "group": group, "hover": hover}


def result(headline: str, data: dict, plots: list, answers: list, not_measured=(),
           tables=()) -> dict:
    return {"headline": headline, "data": data, "plots": plots, "answers": answers,
            "not_measured": list(not_measured), "tables": list(tables)}


def table(name: str, title: str, rows: list[dict], columns: list[str]) -> dict:
    """A table as data: the listed columns of each row (units are in the column names)."""
    return {"name": name, "title": title, "columns": columns,
            "rows": [[r.get(c) for c in columns] for r in rows]}
