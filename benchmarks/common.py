"""Shared by the GPU benchmarks: the run's metadata and JSON output."""
from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from rooflab.measure import provenance


def meta() -> dict:
    """The run's provenance (commit, date, device, versions) and the command that made it."""
    argv = [os.path.relpath(a, provenance.ROOT) if i == 0 else a for i, a in enumerate(sys.argv)]
    if os.environ.get("OUT"):  # the device's output folder, by its name
        argv = [a.replace(os.environ["OUT"], "OUT") for a in argv]
    return {**provenance.record(), "command": " ".join(["python3", *argv])}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=provenance.ROOT, check=True, capture_output=True,
                          text=True).stdout


def module_at(rev: str, path: str):
    """The repository's module ``path`` as it was at git revision ``rev``, imported under its own
    name (its file in a temporary folder: Triton's @jit reads the source from there)."""
    name = f"{os.path.basename(path)[:-3]}_at_{rev.replace('/', '_')}.py"
    file = os.path.join(tempfile.mkdtemp(), name)
    with open(file, "w") as f:
        f.write(git("show", f"{rev}:{path}"))
    return module_from(file)


def module_before(parser, rev: str | None, path: str):
    """The module ``path`` at ``--before REV`` (None without one); a revision git does not know
    is the parser's error: one line, exit 2."""
    try:
        return module_at(rev, path) if rev else None
    except subprocess.CalledProcessError as e:
        parser.error(f"--before {rev}: {e.stderr.strip().splitlines()[-1]}")


@functools.cache
def module_from(path: str):
    """The module in file ``path``, imported under its file's name (once)."""
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(out_dir: str, name: str, data: dict) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"meta": meta(), **data}, f, indent=1, default=str)
    print(f"wrote {path}")
    return path


def variants(parser, values: list[str]) -> dict:
    """--variant NAME=JSON options as {name: config overrides}; bad ones end the run through
    argparse (one line, exit 2)."""
    try:
        return {v.split("=", 1)[0]: dict(json.loads(v.split("=", 1)[1])) for v in values}
    except (IndexError, ValueError, TypeError) as e:
        parser.error(f"--variant takes NAME=JSON with a JSON object ({e})")


def ab_parser(doc: str, name: str) -> argparse.ArgumentParser:
    """The options every same-run A/B takes: OUT_DIR, --variant NAME=JSON (repeated), --rows,
    --rounds, --name (of the JSON written), --device."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--variant", action="append", default=[], help="NAME=JSON")
    p.add_argument("--rows")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--name", default=name)
    p.add_argument("--device", default="cuda")
    return p


def rows(parser, text: str | None, default: list, fields: str) -> list[tuple]:
    """--rows as a Python list of tuples of the named fields ("B, H, ..."), else ``default``;
    a bad one ends the run through argparse (one line, exit 2)."""
    if not text:
        return default
    n = len(fields.split(","))
    try:
        shapes = [tuple(s) for s in ast.literal_eval(text)]
        if any(len(s) != n for s in shapes):
            raise ValueError(f"each tuple has {n} fields")
    except (ValueError, TypeError, SyntaxError) as e:
        parser.error(f"--rows takes a list of ({fields}) tuples ({e})")
    return shapes


def alternate(fns: dict, check: list[str], ref, timer, rounds: int) -> dict:
    """A same-run A/B's measurement: each of ``check`` called once, its first output's largest
    difference from ``ref`` kept (or why it failed); then every callable that did not fail timed
    by ``timer(fn)`` in ``rounds`` alternating rounds. A call that raises is a result, recorded
    under errors. Returns max_abs_diff, errors, all_s and median_s (of the complete series)."""
    diff, errors = {}, {}
    for name in check:
        try:
            diff[name] = float((fns[name]()[0].float() - ref).abs().max())
        except Exception as e:  # noqa: BLE001 - a config that does not compile is a result
            errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    times = {n: [] for n in fns if n not in errors}
    for _ in range(rounds):
        for n in times:
            try:
                times[n].append(timer(fns[n]))
            except Exception as e:  # noqa: BLE001 - a backend refusing a shape is a result
                errors[n] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items() if len(t) == rounds}
    return {"max_abs_diff": diff, "errors": errors, "all_s": times, "median_s": med}
