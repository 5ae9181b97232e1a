"""Write benchmarks/README.md: the index of results/current/ (what each file holds, the command,
commit, date and device that made it) and of results/ab/ (one-off A/Bs and studies).

Usage: python benchmarks/index.py [RESULTS_DIR]   (default: benchmarks/results)
results/current/ is what scripts/gpu_check.sh writes, overwritten by each full run; its
manifest-*.json name the command of every part, so files that are not JSON are indexed too.
"""
from __future__ import annotations

import json
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

HEAD = """# Benchmarks

Scripts that measure rooflab on a GPU. `scripts/gpu_check.sh OUT` runs the tests and every
benchmark in one go and writes `OUT/current.tar.gz`; `python benchmarks/ingest.py
OUT/current.tar.gz h100` unpacks it into `results/current/`, each name marked with the device,
and that folder is what the README's figures quote. Each JSON opens with its `meta`: the
commit, date, device, versions and the command that made it. A/Bs and one-off studies live in
`results/ab/`; the kernels' decision logs (`docs/kernels/`) say what each one decided.
This page is generated: `python benchmarks/index.py`.
"""


def _meta(path: str) -> dict:
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    m = d.get("meta", {}) if isinstance(d, dict) else {}
    return {"commit": m.get("commit"), "date": (m.get("date") or "")[:10],
            "device": m.get("device_name") or m.get("device"), "command": m.get("command")
            or (" ".join(["python3", *m["argv"]]) if m.get("argv") else None)}


def _files(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for f in sorted(files):
            out.append(os.path.relpath(os.path.join(root, f), folder))
    return out


def _inside_a_report(f: str) -> bool:
    """A lab report's figures, tables and page: its results.json stands for them."""
    return any(part in ("figures", "tables", "traces") for part in f.split("/")) or (
        f.endswith("index.html") and "/" in f)


def _row(cells) -> str:
    return "| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in cells) + " |"


def current(folder: str) -> list[str]:
    if not os.path.isdir(folder):
        return ["No full run is recorded yet: `scripts/gpu_check.sh OUT` makes one."]
    manifest = _manifests(folder)
    lines = ["Exit code: of the part that wrote the file (0: it ran through; 124: stopped at its "
             "time limit, the file holds what it wrote by then; empty: no manifest names it).", "",
             "| file | made by | commit | date | device | exit code |",
             "| --- | --- | --- | --- | --- | --- |"]
    for f in _files(folder):
        if f.startswith("manifest") or _inside_a_report(f):
            continue  # a report's figures and tables are indexed by its results.json
        m = _meta(os.path.join(folder, f)) if f.endswith(".json") else {}
        part = manifest["files"].get(f.split("/")[0], {})
        lines.append(_row([f"`{f}`", f"`{m.get('command') or part.get('command', '?')}`",
                           m.get("commit") or part.get("commit"), m.get("date") or part.get("date"),
                           m.get("device") or part.get("device"), part.get("rc")]))
    lines += ["", "The run's parts (exit code 0 is a pass):", "",
              "| part | exit code | seconds | command |", "| --- | --- | --- | --- |"]
    lines += [_row([p["part"], p["rc"], p["seconds"], f"`{p['command']}`"])
              for p in manifest.get("parts", [])]
    return lines


def _manifests(folder: str) -> dict:
    """The manifests of the calls that filled the folder, merged (the first one's provenance)."""
    merged: dict = {"files": {}, "parts": []}
    found = []
    for name in (f for f in os.listdir(folder) if f.startswith("manifest")):
        with open(os.path.join(folder, name)) as f:
            found.append(json.load(f))
    for m in sorted(found, key=lambda m: m.get("date") or ""):  # a later call's file wins
        knobs = "".join(f"{k}={shlex.quote(v)} " for k, v in m.get("knobs", {}).items()
                        if k != "PART_TIMEOUT")  # what narrowed the call's parts
        by_part = {p["part"]: p["rc"] for p in m.get("parts", [])}
        by_file = {f: p["rc"] for p in m.get("parts", []) for f in p.get("files", [])}
        made = {f: {**v, "command": knobs + v["command"], "commit": m.get("commit"),
                    "rc": by_file.get(f, by_part.get(v.get("part"))),
                    "date": (m.get("date") or "")[:10], "device": m.get("device_name")}
                for f, v in m.get("files", {}).items()}
        parts = [{**p, "command": knobs + p["command"]} for p in m.get("parts", [])]
        merged = {**m, **merged, "files": {**merged["files"], **made},
                  "parts": merged["parts"] + parts}
    return merged


def ab(folder: str) -> list[str]:
    lines = ["| file | script | commit | date | device |", "| --- | --- | --- | --- | --- |"]
    for f in _files(folder):
        if _inside_a_report(f):
            continue
        m = _meta(os.path.join(folder, f)) if f.endswith(".json") else {}
        script = (m.get("command") or "").split(" ")[1:2]
        lines.append(_row([f"`{f}`", script[0] if script else "", m.get("commit") or
                           "not recorded", m.get("date"), m.get("device")]))
    return lines


def main(results: str, path: str | None = None) -> str:
    """Write the index of ``results`` to ``path`` (default: README.md beside it); its path."""
    text = "\n".join([HEAD, "## Current (`results/current/`)", "", *current(
        os.path.join(results, "current")), "", "## A/Bs and one-off studies (`results/ab/`)",
        "", "Files made before results carried their commit say so; their scripts are in "
        "`benchmarks/` at the date given.", "", *ab(os.path.join(results, "ab")), ""])
    path = path or os.path.join(os.path.dirname(os.path.abspath(results)), "README.md")
    with open(path, "w") as f:
        f.write(text)
    return path


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results")))
