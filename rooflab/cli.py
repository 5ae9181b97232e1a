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


def _gpu(gpu: Optional[str]) -> H.Hardware:
    hw = H.resolve(gpu)
    if not hw.peak_flops_per_s:
        raise UserError(f"no datasheet for {hw.name}: pass --gpu NAME (see `rooflab specs`) "
                        "or a spec file")
    return hw


def _roofline(family: str, gpu: Optional[str], dtype: str, sizes: str, plot: Optional[str],
              also: str, measured: bool, as_json: bool) -> None:
    hw = _gpu(gpu)
    roof = R.Roof.of(hw, dtype)
    extra = [R.Roof.of(hw, d) for d in (s.strip() for s in also.split(",")) if d]
    sw = R.sweep(family, roof, _sizes(sizes))
    data = sw.as_dict()
    if measured:
        from rooflab.measure import ceilings as CE

        m_hw = CE.get(_device(None)).hardware()
        m_dt = roof.dtype if roof.dtype in m_hw.peak_flops_per_s else next(iter(m_hw.peak_flops_per_s))
        extra.append(R.Roof.of(m_hw, m_dt))
    data["extra_roofs"] = [{"label": r.label, "ridge": r.ridge} for r in extra]
    if plot:
        from rooflab.report import plots
        pts = [plots.PlotPoint(f"n={r['n']}", r["intensity"], r["attainable_flops_per_s"],
                               "predicted", family.upper()) for r in data["rows"]]
        data["plot"] = plots.roofline_png(plot, [roof, *extra], pts,
                                          f"{family.upper()} on {hw.name}, {roof.dtype}")
    _emit(data, as_json, console.sweep)


ALSO = typer.Option("", "--roofs", help="more dtypes to draw, e.g. bf16,fp8")
MEASURED = typer.Option(False, "--measured", help="also draw this machine's measured roof")


@roof_app.command("gemm")
def roofline_gemm(gpu: Optional[str] = typer.Option(None, "--gpu", help="name or spec file"),
                  dtype: str = "fp32", sizes: str = "1024,2048,4096,8192",
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  also: str = ALSO, measured: bool = MEASURED,
                  as_json: bool = typer.Option(False, "--json")):
    """GEMM with M=N=K=n: intensity, bound and time floor per size; the compute-bound n."""
    _roofline("gemm", gpu, dtype, sizes, plot, also, measured, as_json)


@roof_app.command("gemv")
def roofline_gemv(gpu: Optional[str] = typer.Option(None, "--gpu", help="name or spec file"),
                  dtype: str = "fp32", sizes: str = "1024,2048,4096,8192",
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  also: str = ALSO, measured: bool = MEASURED,
                  as_json: bool = typer.Option(False, "--json")):
    """GEMV with M=K=n: always memory-bound on a GPU."""
    _roofline("gemv", gpu, dtype, sizes, plot, also, measured, as_json)


@app.command()
def ceilings(device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu"),
             refresh: bool = typer.Option(False, "--refresh", help="measure again"),
             quick: bool = typer.Option(False, "--quick", help="smaller sizes"),
             as_json: bool = typer.Option(False, "--json")):
    """Measured memory bandwidth and matmul peaks of this device (cached)."""
    from rooflab.measure import ceilings as CE

    if device not in (None, "cuda", "cpu"):
        raise UserError(f"--device must be cuda or cpu, got {device!r}")
    _emit(CE.get(_device(device), refresh=refresh, quick=quick).as_dict(), as_json,
          console.ceilings)


def _device(device: Optional[str]) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available here (use --device cpu)")
    if device not in ("cuda", "cpu"):
        raise UserError(f"--device must be auto, cuda or cpu, got {device!r}")
    return device


def _phase(phase: str, batch: int, seq: Optional[int], kv_len: Optional[int]):
    from rooflab import models as M

    if phase == "prefill":
        return M.Phase.prefill(batch, seq or 512)
    if phase == "decode":
        return M.Phase.decode(batch, kv_len or seq or 1024)
    raise UserError(f"--phase must be prefill or decode, got {phase!r}")


def _roof_for(gpu: Optional[str], dtype: str) -> Optional[R.Roof]:
    hw = _gpu(gpu) if gpu else H.detect()
    return R.Roof.of(hw, dtype) if hw.peak_flops_per_s else None


@app.command()
def layer(model: Optional[str] = typer.Option(None, "--model", help="preset name or config.json"),
          layer_index: Optional[int] = typer.Option(None, "--layer", help="layer number"),
          layer_type: Optional[str] = typer.Option(None, "--layer-type", help="full or sliding"),
          phase: str = typer.Option("prefill", "--phase", help="prefill or decode"),
          batch: int = typer.Option(1, "--batch"), seq: Optional[int] = typer.Option(None, "--seq"),
          kv_len: Optional[int] = typer.Option(None, "--kv-len"),
          dtype: Optional[str] = typer.Option(None, "--dtype"),
          gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name or spec file"),
          as_json: bool = typer.Option(False, "--json")):
    """Every component of one decoder layer: MACs, FLOPs, bytes, intensity, bound, time floor."""
    from dataclasses import replace

    from rooflab import models as M
    from rooflab.lab import decoder

    cfg = M.load(model)
    if dtype:
        cfg = replace(cfg, dtype=C.dtype_name(dtype))
    if layer_index is not None and layer_type is not None:
        raise UserError("give --layer or --layer-type, not both")
    lt = M.layer_type_of(cfg, layer_index, layer_type)
    data = decoder.analyze(cfg, _phase(phase, batch, seq, kv_len), lt, _roof_for(gpu, cfg.dtype))
    _emit(data, as_json, console.layer)


@app.command()
def model(model_name: Optional[str] = typer.Option(None, "--model", help="preset or config.json"),
          phase: str = typer.Option("prefill", "--phase"), batch: int = typer.Option(1, "--batch"),
          seq: Optional[int] = typer.Option(None, "--seq"),
          kv_len: Optional[int] = typer.Option(None, "--kv-len"),
          gpu: Optional[str] = typer.Option(None, "--gpu"),
          as_json: bool = typer.Option(False, "--json")):
    """Whole-model totals: all layers by type, embedding, final norm, lm_head, KV cache."""
    from rooflab import models as M
    from rooflab.lab import decoder

    cfg = M.load(model_name)
    data = decoder.model_summary(cfg, _phase(phase, batch, seq, kv_len), _roof_for(gpu, cfg.dtype))
    _emit(data, as_json, console.model)


def _choices(text: str, allowed, flag: str) -> list[str]:
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    if not chosen or any(c not in allowed for c in chosen):
        raise UserError(f"{flag} takes {', '.join(allowed)}; got {text!r}")
    return chosen


def _dtype(text: str, allowed, flag: str = "--dtype") -> str:
    dt = C.dtype_name(text)
    if dt not in allowed:
        raise UserError(f"{flag} must be one of {', '.join(allowed)}, got {text!r}")
    return dt


def _parts(text: str) -> list[int]:
    from rooflab.lab.parts import PARTS

    try:
        nums = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UserError(f"--parts takes numbers 1-5 separated by commas, got {text!r}") from None
    bad = [n for n in nums if n not in PARTS]
    if bad or not nums:
        raise UserError(f"--parts takes numbers 1-5 separated by commas, got {text!r}")
    return nums


@app.command()
def lab(device: str = typer.Option("auto", "--device", help="auto, cuda or cpu"),
        parts: str = typer.Option("1,2,3,4,5", "--parts", help="which parts, e.g. 1,2,5"),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for the analytic answers"),
        quick: bool = typer.Option(False, "--quick", help="smaller sizes"),
        out: str = typer.Option("rooflab-report", "--out", help="report directory"),
        resume: bool = typer.Option(False, "--resume", help="skip parts already done in --out")):
    """Run the whole lab on this device and write an HTML report (DIR/index.html)."""
    from rooflab.lab import run as LR

    dev = _device(device)
    nums = _parts(parts)
    if gpu:
        H.resolve(gpu)  # a bad name fails before any work
    if dev == "cpu":
        console.out.print("No CUDA device: running the CPU lab (measured CPU roofline; "
                          "GPU-only parts say what they could not measure).")
    with console.Progress() as prog:
        res = LR.run(dev, nums, gpu, quick, out, resume, progress=prog.task,
                     on_part=prog.part_done)
    console.lab_summary(res, out)


fusion_app = typer.Typer(no_args_is_help=True, help="Kernel fusion: GeLU and the MLP.")
app.add_typer(fusion_app, name="fusion")


@fusion_app.command("gelu")
def fusion_gelu(numel: int = typer.Option(1 << 24, "--numel"), dtype: str = "fp32",
                device: str = typer.Option("auto", "--device"),
                trace: Optional[str] = typer.Option(None, "--trace", help="write traces here"),
                as_json: bool = typer.Option(False, "--json")):
    """GeLU-tanh unfused vs F.gelu vs torch.compile vs rooflab's Triton kernel."""
    from rooflab.lab import fusion
    from rooflab.measure import ceilings as CE

    C._sizes(numel=numel)
    dt = _dtype(dtype, fusion.DTYPES)
    dev = _device(device)
    data = fusion.gelu_study(numel, dt, dev, CE.get(dev).mem_bandwidth_bytes_per_s, trace)
    _emit(data, as_json, console.gelu)


@fusion_app.command("mlp")
def fusion_mlp(modes: str = typer.Option(",".join(("eager", "default",
                                                  "max-autotune-no-cudagraphs",
                                                  "max-autotune")), "--modes"),
               tokens: int = typer.Option(2048, "--tokens"), dtype: str = "bf16",
               device: str = typer.Option("auto", "--device"),
               trace: Optional[str] = typer.Option(None, "--trace"),
               as_json: bool = typer.Option(False, "--json")):
    """The Gemma MLP eager vs torch.compile modes: kernels, latency, compile time."""
    from rooflab.lab import fusion

    C._sizes(tokens=tokens)
    chosen = _choices(modes, fusion.MLP_MODES, "--modes")
    dt = _dtype(dtype, fusion.DTYPES)
    data = fusion.mlp_study(640, 2048, tokens, dt, _device(device), chosen, trace)
    _emit(data, as_json, console.mlp)


@app.command()
def attention(seq: str = typer.Option("512..32768", "--seq", help="a..b (powers of 2) or a,b,c"),
              impl: str = typer.Option(",".join(("standard", "math", "efficient", "flash",
                                                 "cudnn", "triton", "flash_attn")), "--impl"),
              batch: int = typer.Option(1, "--batch"), heads: int = typer.Option(16, "--heads"),
              head_dim: int = typer.Option(128, "--head-dim"), dtype: str = "fp16",
              causal: bool = typer.Option(False, "--causal"),
              device: str = typer.Option("auto", "--device"),
              as_json: bool = typer.Option(False, "--json")):
    """Memory and time of attention implementations over sequence lengths (OOM recorded)."""
    from rooflab.lab import attention as A

    C._sizes(batch=batch, heads=heads, head_dim=head_dim)
    if ".." in seq:
        lo, _, hi = seq.partition("..")
        lo_n, hi_n = _sizes(lo)[0], _sizes(hi)[0]
        seqs, n = [], lo_n
        while n <= hi_n:
            seqs.append(n)
            n *= 2
    else:
        seqs = _sizes(seq)
    impls = _choices(impl, A.IMPLS, "--impl")
    dt = _dtype(dtype, A.DTYPES)
    dev = _device(device)
    with console.Progress() as prog:
        tick = prog.task("attention", len(seqs) * len(impls))
        data = A.sweep(seqs, impls, batch, heads, None, head_dim, dt, causal, dev, tick)
    _emit(data, as_json, console.attention)


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
