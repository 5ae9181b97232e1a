"""The lab's commands: the whole lab into a report, a student's answers checked, two runs
compared."""
from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from rooflab import hardware as H
from rooflab.cli import inputs as I
from rooflab.cli.common import DEVICE, JSON, _emit, app
from rooflab.errors import read_json
from rooflab.report import console


@app.command()
def lab(device: str = DEVICE,
        parts: str = typer.Option("1,2,3,4,5,6", "--parts", help="which parts, e.g. 1,2,5 "
                                  "(6 runs where two GPUs are)"),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for the analytic answers"),
        quick: bool = typer.Option(False, "--quick", help="smaller sizes"),
        out: str = typer.Option("rooflab-report", "--out", help="report directory"),
        resume: bool = typer.Option(False, "--resume",
                                    help="keep parts already done in --out with the same options"),
        dtype: Optional[str] = typer.Option(None, "--dtype", help="the decoder layer's dtype "
                                            "in part 3: fp32, bf16 or fp16 (default: its "
                                            "config's)"),
        as_json: bool = JSON):
    """Run the whole lab on this device and write an HTML report (DIR/index.html)."""
    from rooflab.lab import run as LR

    dev = I.device(device)
    nums = I.parts(parts)
    layer_dtype = I.dtype(dtype, ("fp32", "bf16", "fp16")) if dtype is not None else None
    if gpu:
        H.resolve(gpu)  # a bad name fails before any work
    I.writable_dir(out, "--out")
    note = console.out if not as_json else console.err
    if dev == "cpu":
        note.print("No CUDA device: running the CPU lab (measured CPU roofline; "
                   "GPU-only parts say what they could not measure).")
    try:
        with console.Progress() as prog, I.stop_between_steps() as check:
            def task(desc, total):
                advance = prog.task(desc, total)
                return lambda: (advance(), check())

            res = LR.run_lab(dev, nums, gpu, quick, out, resume, progress=task,
                         on_part=lambda num, entry: (prog.part_done(num, entry), check()),
                         note=console.note, dtype=layer_dtype)
    except KeyboardInterrupt:
        raise I.Interrupted(f"interrupted; finished parts are in {out} (--resume continues)") \
            from None
    _emit(res, as_json, lambda r: console.lab_summary(r, out))


@app.command()
def check(answers: Optional[str] = typer.Argument(None, help="your answers file (JSON)"),
          template: bool = typer.Option(False, "--template",
                                        help="print an empty answers file to fill in"),
          reveal: bool = typer.Option(False, "--reveal", help="show rooflab's own values"),
          as_json: bool = JSON):
    """Your numbers for the lab's computable questions against rooflab's, for the settings you
    give (any shapes). Exit code 0 when all hold, 1 when one is wrong or missing."""
    from rooflab.lab import selfcheck

    if template:
        sys.stdout.write(json.dumps(selfcheck.template(), indent=2) + "\n")
        return
    if answers is None:
        raise I.UserError("give an answers file, or --template to print one")
    res = selfcheck.check_answers(read_json(answers, I.UserError))
    res["revealed"] = reveal
    for r in res["rows"]:
        r["message"] = selfcheck.message(r)  # rooflab's value, when revealed, has its column
        if not reveal:
            del r["expected"]
    _emit(res, as_json, console.check)
    if not res["all_hold"]:
        raise typer.Exit(1)


@app.command()
def compare(a: str = typer.Argument(..., help="a lab report folder or its results.json"),
            b: str = typer.Argument(..., help="another one"), as_json: bool = JSON):
    """Two lab runs side by side (e.g. a T4 and an H200): ceilings, ridges, every figure."""
    from rooflab.lab import compare as K

    _emit(K.compare(K.load(a), K.load(b)), as_json, console.compare)

