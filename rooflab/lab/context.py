"""What every part returns, and the context it runs in: plain data (numbers, plot
specifications, answers, tables) that the views draw."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.measure import ceilings as CE
from rooflab.measure.dtypes import runnable

LAB_MODEL = "gemma-3-270m-it"  # the decoder layer of part 3


@dataclass(frozen=True)
class Dtypes:
    """The run's dtypes, resolved once and passed down: the decoder layer's (``--dtype``, else
    its config's), the one it is measured in on this device (the same where the device runs it
    natively: fp32 for a half dtype on a CPU, fp16 for bf16 on a GPU without bf16), and the
    dtype the device's measured roof is drawn for (bf16 where its matmul was measured, else
    fp32)."""

    layer: str
    layer_measured: str
    roof: str

    @classmethod
    def resolve(cls, device: str, ceilings: CE.Ceilings, layer: str) -> "Dtypes":
        return cls(layer, runnable(layer, device), R.measured_dtype(ceilings.peak_flops_per_s,
                                                                     "bf16"))


@dataclass
class Context:
    device: str
    gpu: H.Hardware  # the datasheet record analytic answers use (detected, chosen or default)
    ceilings: CE.Ceilings
    out_dir: str
    quick: bool = False
    progress: Callable[[str, int], Callable[[], None]] = lambda desc, total: (lambda: None)
    raised: list[str] = field(default_factory=list)  # roofs this run's points beat
    lab_gpu: H.Hardware | None = None  # the card the lab's own questions use: --gpu, else the
    #                                    lab's A6000 (None: the same as ``gpu``)
    dtypes: Dtypes | None = None  # None: the lab model's config dtype, resolved on first use

    def __post_init__(self):
        if self.dtypes is None:
            from rooflab import models as M
            self.dtypes = Dtypes.resolve(self.device, self.ceilings, M.load(LAB_MODEL).dtype)

    @property
    def lab_card(self) -> H.Hardware:
        return self.lab_gpu or self.gpu

    def beaten(self, notes: list[str]) -> list[str]:
        """Record a part's roof raises (the cached ceilings were low: run.py measures them
        again next time) and pass the notes on."""
        self.raised += notes
        return notes

    @property
    def measured(self) -> H.Hardware:
        """This device with its measured ceilings, named as the device present (never as the
        card chosen for the analytic answers)."""
        base = H.detect(self.ceilings.device_name) if self.device == "cuda" else None
        return self.ceilings.hardware(base)

    @property
    def cache_bytes(self) -> int | None:
        """The last-level on-chip cache of the device measured (L2 of a GPU, L3 of a CPU)."""
        return self.ceilings.cache_bytes

    @property
    def measured_dtype(self) -> str:
        """The dtype this device's measured roof is drawn for."""
        return self.dtypes.roof

    def measured_roof(self, dtype: str) -> R.Roof:
        """This device's measured roof for ``dtype`` (Roof.from_ceilings, its one fallback)."""
        return R.Roof.from_ceilings(self.ceilings, dtype)

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


def hold_roofline(spec: dict, cache_bytes: int | None) -> list[str]:
    """Make a roofline plot's measured roof hold over its measured points (``R.hold``): raise
    it where the ceiling run was slower, and say in a point's hover why it stays above (cache).
    Returns the notes for the part's answers."""
    roof = spec["roofs"][0]
    if not roof["measured"]:
        return []
    idx = [i for i, p in enumerate(spec["points"]) if p["kind"] == "measured"
           and p["intensity"] > 0 and p["hover"].get("bytes")
           and not p["hover"].get("above_roof")]  # a point that says why it is above stays
    r = R.Roof(roof["label"], roof["peak_flops_per_s"], roof["mem_bandwidth_bytes_per_s"],
               measured=True)
    pts = spec["points"]
    names = [pts[i]["label"] or pts[i]["group"] for i in idx]
    names = [n if names.count(n) == 1 else f"{n} (point {i})" for n, i in zip(names, idx)]
    new, notes, why = R.hold(r, [(n, pts[i]["intensity"], pts[i]["flops_per_s"],
                                  pts[i]["hover"]["bytes"]) for n, i in zip(names, idx)],
                             cache_bytes)
    for n, i in zip(names, idx):
        if n in why:
            pts[i]["hover"]["above_roof"] = why[n]
    spec["roofs"][0] = roof_spec(R.Roof(roof["label"], new.peak_flops_per_s,
                                        new.mem_bandwidth_bytes_per_s, measured=True))
    return [f"{spec['name']}: the measured roof was raised for this run: {n}" for n in notes]
