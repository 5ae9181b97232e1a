"""What every command shares: the app, its options, the JSON-or-table output, the GPU and dtype
a command's flags name."""
from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.cli import inputs as I

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="rooflab: where GPU time goes, from first principles.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("rooflab")
        except PackageNotFoundError:  # run from a checkout without installing it
            v = "not installed (run from its source)"
        sys.stdout.write(f"rooflab {v}\n")
        raise typer.Exit()


@app.callback()
def _root(show_version: bool = typer.Option(False, "--version", callback=_version,
                                            is_eager=True, help="print rooflab's version")):
    """rooflab: where GPU time goes, from first principles."""


JSON = typer.Option(False, "--json", help="machine-readable output (field names are a contract)")
DTYPE = typer.Option("fp32", "--dtype", help="fp64, fp32, tf32, bf16, fp16, fp8 or int8")
SIZES = typer.Option("1024,2048,4096,8192", "--sizes", help="n values, comma-separated")
DEVICE = typer.Option("auto", "--device", help="auto, cuda or cpu")
PHASE = typer.Option("prefill", "--phase", help="prefill or decode")
BATCH = typer.Option(1, "--batch", help="sequences in the batch")
SEQ = typer.Option(None, "--seq", help="prefill: tokens per sequence (default 512)")
KV_LEN = typer.Option(None, "--kv-len", help="decode: cached positions attended (default 1024)")


def _emit(data, as_json: bool, render) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        render(data)


def _gpu(gpu: Optional[str]) -> H.Hardware:
    hw = H.resolve(gpu)
    if not hw.peak_flops_per_s:
        raise I.UserError(f"no datasheet for {hw.name}: pass --gpu NAME (see `rooflab specs`) "
                        "or a spec file")
    return hw


def _hw_for(gpu: Optional[str]) -> H.Hardware:
    return _gpu(gpu) if gpu else H.detect()


def _roof_for(gpu: Optional[str], dtype: str) -> Optional[R.Roof]:
    """The roof of a model's dtype on the GPU named; a card without that dtype (a T4 has no
    bf16) is one line that says which flag picks another."""
    hw = _hw_for(gpu)
    if not hw.peak_flops_per_s:
        return None
    try:
        return R.Roof.of(hw, dtype)
    except H.HardwareError as e:
        raise I.UserError(f"{e}: choose one with --dtype (layer) or --act-dtype") from None


TP = typer.Option(1, "--tp", help="tensor-parallel GPUs: one GPU's share and its all-reduces")
WEIGHT_DTYPE = typer.Option(None, "--weight-dtype", help="fp32, bf16, fp16, fp8, int8 or int4")
ACT_DTYPE = typer.Option(None, "--act-dtype", help="activations: fp32, bf16, fp16, fp8, int8")
KV_DTYPE = typer.Option(None, "--kv-dtype", help="the KV cache (default: --act-dtype)")
GROUP_SIZE = typer.Option(None, "--group-size", help="weights per fp16 scale (int4, int8)")


def _dtype_here(text: Optional[str], allowed, default: str, device: str) -> str:
    """The asked dtype, or ``default`` as this device runs it (fp32 on a CPU, where half types
    are emulated; fp16 for bf16 on a GPU without native bf16); one line on stderr when the
    asked dtype is emulated here."""
    from rooflab.measure.dtypes import runnable

    if text is None:
        return runnable(default, device)
    dt = I.dtype(text, allowed)
    if runnable(dt, device) != dt:
        where = "CPU" if device == "cpu" else "GPU"
        sys.stderr.write(f"rooflab: {dt} on this {where} is emulated, far below its measured "
                         f"roof; --dtype {runnable(dt, device)} runs at it\n")
    return dt

