"""`rooflab lab`: every part on the device present, written as it goes.

DIR/results.json is rewritten after each part (atomically), so a crash, an OOM or Ctrl-C in one
part leaves the finished parts intact. Each part records the options it was made with (device,
GPU, quick); --resume keeps a finished part only when they equal this run's, and says why it
recomputes the others. When a part's measured points beat the cached ceilings (they were taken
under load), the cache is dropped so the next run measures again. The report, figures and CSV
tables are regenerated from results.json after every part.
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict
import os
import time as _time
import traceback

import torch

from rooflab import hardware as H
from rooflab import models as M
from rooflab.lab import answers as LA
from rooflab.lab import parts as LP
from rooflab.lab.context import LAB_MODEL, Context, Dtypes
from rooflab.measure import ceilings as CE
from rooflab.measure import provenance
from rooflab.measure.memory import release
from rooflab.units import si

DEFAULT_GPU = "RTX A6000"  # the lab's default card when no GPU is present or named


def _write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, path)


def _replace(path: str, write) -> None:
    """``write(tmp)`` then rename onto ``path``: a reader sees the old file or the new, whole."""
    root, ext = os.path.splitext(path)
    tmp = f"{root}.tmp{ext}"  # the extension last: matplotlib picks the format from it
    write(tmp)
    os.replace(tmp, path)


def write_outputs(out_dir: str, results: dict, parts=None) -> None:
    """The figures/*.png and tables/*.csv of ``parts`` (keys of results["parts"]; None: every
    part), index.html, then results.json: each file written whole under a temporary name and
    renamed, results.json last, so a part is recorded only once everything it writes is on
    disk (an interrupt in between leaves the part unrecorded, and --resume runs it again). A
    part's figures change only when the part is rerun, and drawing them is most of the time
    this takes (7 s for all twelve PNGs on a 2-core CPU), so the lab draws each part's once,
    when it ends."""
    from rooflab.report import html, plots

    results["answers"] = LA.collect(results["parts"])
    results["meta"]["unstable_timings"] = LA.unstable_timings(results["parts"])
    results["meta"]["unstable_note"] = LA.unstable_text(results["meta"]["unstable_timings"])
    os.makedirs(os.path.join(out_dir, "figures"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "tables"), exist_ok=True)
    for key, p in results["parts"].items():
        if parts is not None and key not in parts:
            continue
        r = p.get("result") or {}
        for spec in r.get("plots", []):
            _replace(os.path.join(out_dir, "figures", f"{spec['name']}.png"),
                     lambda tmp, spec=spec: plots.render_png(spec, tmp))
        for t in r.get("tables", []):
            def table(tmp, t=t):
                with open(tmp, "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(t["columns"])
                    w.writerows(t["rows"])
            _replace(os.path.join(out_dir, "tables", f"{t['name']}.csv"), table)
    page = html.report(results, {int(n): t for n, t in results["meta"]["titles"].items()})

    def index(tmp):
        with open(tmp, "w") as f:
            f.write(page)
    _replace(os.path.join(out_dir, "index.html"), index)
    _write_json(os.path.join(out_dir, "results.json"), results)


def run_lab(device: str, parts=tuple(LP.PARTS), gpu: str | None = None, quick: bool = False,
            out_dir: str = "rooflab-report", resume: bool = False, progress=None,
            on_part=None, note=None, dtype: str | None = None) -> dict:
    """Run the parts; returns the results dict. ``progress(desc, total) -> advance`` draws bars;
    ``on_part(num, entry)`` is told when each part ends; ``note(line)`` of steps with no bar
    (measuring the ceilings); ``dtype``: the decoder layer's (part 3), else its config's."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.json")
    previous = {}
    if resume and os.path.exists(path):
        try:
            with open(path) as f:
                previous = json.load(f).get("parts", {})
        except (OSError, ValueError, AttributeError):
            previous = {}  # unreadable: every part is recomputed
    if device == "cuda":
        detected = H.detect(torch.cuda.get_device_name())
    else:
        detected = H.cpu_record()
    gpu_hw = H.resolve(gpu) if gpu else (detected if detected.peak_flops_per_s
                                         else H.lookup(DEFAULT_GPU))
    ceil = CE.get(device, quick=quick, note=note)
    summary = f"{si(ceil.mem_bandwidth_bytes_per_s, 'B/s')} copy, " + ", ".join(
        f"{k} {si(v, 'FLOP/s')}" for k, v in ceil.peak_flops_per_s.items())
    dtypes = Dtypes.resolve(device, ceil, dtype or M.load(LAB_MODEL).dtype)
    options = {"device": device, "device_name": ceil.device_name, "gpu": gpu_hw.name,
               "quick": quick, "dtype": dtypes.layer}
    results = {"meta": {"device": device, "device_name": ceil.device_name, "gpu": gpu_hw.name,
                        "ceilings": ceil.as_dict(), "ceilings_summary": summary,
                        "versions": provenance.versions(), "commit": provenance.commit(), "quick": quick,
                        "dtypes": asdict(dtypes),
                        "titles": {str(n): title for n, (title, _) in LP.PARTS.items()},
                        "date": provenance.now()},
               "parts": {k: v for k, v in previous.items()
                         if v.get("status") == "ok" and v.get("options") == options}}
    ctx = Context(device, gpu_hw, ceil, out_dir, quick,
                  progress or (lambda desc, total: (lambda: None)),
                  lab_gpu=H.resolve(gpu) if gpu else H.lookup(DEFAULT_GPU), dtypes=dtypes)
    new = set()  # parts run now, each drawn when it ended
    for num in parts:
        key = str(num)
        old = previous.get(key)
        if key in results["parts"]:
            if on_part:
                on_part(num, {**old, "resumed": True})
            continue
        t0 = _time.perf_counter()
        why_not = LP.NEEDS[num](ctx) if num in LP.NEEDS else None
        try:
            entry = ({"status": "skipped", "reason": why_not,
                      "answers": {q: LA.answer(why_not[0].upper() + why_not[1:] + ".")
                                  for q in LP.QUESTIONS.get(num, ())}} if why_not else
                     {"status": "ok", "result": LP.PARTS[num][1](ctx)})
        except Exception as e:  # noqa: BLE001 - one part failing leaves the others intact
            release(device)
            entry = {"status": "failed", "error": f"{type(e).__name__}: {e}".splitlines()[0],
                     "traceback": traceback.format_exc(limit=6)}
        entry["time_s"] = _time.perf_counter() - t0
        entry["options"] = options
        if old and old.get("status") == "ok":
            entry["recomputed"] = "made with other options: " + ", ".join(
                f"{k}={(old.get('options') or {}).get(k)!r}" for k in options
                if (old.get("options") or {}).get(k) != options[k])
        results["parts"][key] = entry
        new.add(key)
        write_outputs(out_dir, results, parts={key})
        if on_part:
            on_part(num, entry)
    if ctx.raised:  # this run beat the cached ceilings: they were measured under load
        results["meta"]["ceilings_forgotten"] = CE.forget(device, quick)
    # parts kept by --resume are drawn again: their files may be gone from DIR
    write_outputs(out_dir, results, parts={k for k in results["parts"] if k not in new})
    return results
