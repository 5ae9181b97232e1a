"""The `rooflab` command. Thin: parse, call the core or lab/, render (report/console.py)."""
from __future__ import annotations

import json
import sys
from typing import Optional

import typer

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.errors import RooflabError
from rooflab.report import console

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="rooflab: where GPU time goes, from first principles.")
cost_app = typer.Typer(no_args_is_help=True, help="MACs, FLOPs, bytes and intensity of one op.")
roof_app = typer.Typer(no_args_is_help=True, help="GEMM / GEMV sweeps under a GPU's roof.")
app.add_typer(cost_app, name="cost")
app.add_typer(roof_app, name="roofline")

class UserError(RooflabError):
    """Bad input from the command line: one line on stderr, exit code 2."""


def _emit(data, as_json: bool, render) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        render(data)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"sizes must be comma-separated positive integers, got {text!r}") from None
    if not sizes or any(s <= 0 for s in sizes):
        raise UserError(f"sizes must be comma-separated positive integers, got {text!r}")
    return sizes


@app.command()
def specs(as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """The GPU table, with sources; marks the detected device."""
    detected = H.detect()
    rows = [{**hw.as_dict(), "detected": hw.name == detected.name} for hw in H.PRESETS.values()]
    if detected.name not in H.PRESETS:
        rows.append({**detected.as_dict(), "detected": True})
    _emit({"detected": detected.name, "gpus": rows}, as_json, console.specs)


def _cost_out(c: C.Cost, as_json: bool, fused: bool = False) -> None:
    d = c.as_dict()
    if fused:
        d["bytes"] = c.bytes_fused
        d["intensity"] = c.intensity_fused
    _emit(d, as_json, console.cost)


@cost_app.command("gemm")
def cost_gemm(m: int = typer.Option(..., "--m"), k: int = typer.Option(..., "--k"),
              n: int = typer.Option(..., "--n"), dtype: str = "fp32",
              as_json: bool = typer.Option(False, "--json")):
    """C(M,N) = A(M,K) @ B(K,N)."""
    _cost_out(C.gemm(m, k, n, dtype), as_json)


@cost_app.command("gemv")
def cost_gemv(m: int = typer.Option(..., "--m"), k: int = typer.Option(..., "--k"),
              dtype: str = "fp32", as_json: bool = typer.Option(False, "--json")):
    """y(M) = A(M,K) @ x(K)."""
    _cost_out(C.gemv(m, k, dtype), as_json)


@cost_app.command("attention")
def cost_attention(batch: int = typer.Option(..., "--batch"),
                   heads: int = typer.Option(..., "--heads"),
                   kv_heads: Optional[int] = typer.Option(None, "--kv-heads"),
                   q_len: int = typer.Option(..., "--q-len"),
                   kv_len: int = typer.Option(..., "--kv-len"),
                   head_dim: int = typer.Option(..., "--head-dim"), dtype: str = "fp32",
                   causal: bool = typer.Option(False, "--causal"),
                   fused: bool = typer.Option(False, "--fused", help="fused-ideal bytes"),
                   as_json: bool = typer.Option(False, "--json")):
    """softmax(Q K^T) V: eager (N x N round-trips HBM) or fused-ideal bytes."""
    c = C.attention(batch, heads, q_len, kv_len, head_dim, kv_heads, dtype, causal)
    _cost_out(c, as_json, fused)


def _roofline(family: str, gpu: str, dtype: str, sizes: str, plot: Optional[str],
              as_json: bool) -> None:
    hw = H.resolve(gpu)
    roof = R.Roof.of(hw, dtype)
    sw = R.sweep(family, roof, _sizes(sizes))
    data = sw.as_dict()
    if plot:
        from rooflab.report import plots
        pts = [plots.PlotPoint(f"n={r['n']}", r["intensity"], r["attainable_flops_per_s"],
                               "predicted", family.upper()) for r in data["rows"]]
        data["plot"] = plots.roofline_png(plot, [roof], pts,
                                          f"{family.upper()} on {hw.name}, {roof.dtype}")
    _emit(data, as_json, console.sweep)


@roof_app.command("gemm")
def roofline_gemm(gpu: Optional[str] = typer.Option(None, "--gpu", help="name or spec file"),
                  dtype: str = "fp32", sizes: str = "1024,2048,4096,8192",
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  as_json: bool = typer.Option(False, "--json")):
    """GEMM with M=N=K=n: intensity, bound and time floor per size; the compute-bound n."""
    _roofline("gemm", gpu, dtype, sizes, plot, as_json)


@roof_app.command("gemv")
def roofline_gemv(gpu: Optional[str] = typer.Option(None, "--gpu", help="name or spec file"),
                  dtype: str = "fp32", sizes: str = "1024,2048,4096,8192",
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  as_json: bool = typer.Option(False, "--json")):
    """GEMV with M=K=n: always memory-bound on a GPU."""
    _roofline("gemv", gpu, dtype, sizes, plot, as_json)


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors are one line on stderr and exit code 2, never a traceback."""
    try:
        app(args=argv, prog_name="rooflab", standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        sys.stderr.write("rooflab: aborted\n")
        return 130
    except getattr(click_exceptions, "NoArgsIsHelpError", ()) as e:
        sys.stdout.write(e.format_message() + "\n")  # bare `rooflab`: help, not an error
        return 0
    except click_exceptions.ClickException as e:
        sys.stderr.write(f"rooflab: error: {e.format_message()}\n")
        return 2
    except RooflabError as e:
        sys.stderr.write(f"rooflab: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
