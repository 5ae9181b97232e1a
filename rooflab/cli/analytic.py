"""The analytic commands: the GPU table, one op's cost, GEMM/GEMV sweeps, a decoder layer and a
whole model on any GPU of the table (no device needed)."""
from __future__ import annotations

from typing import Optional

import typer

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.cli import inputs as I
from rooflab.cli.common import (ACT_DTYPE, BATCH, DEVICE, DTYPE, GROUP_SIZE, JSON, KV_DTYPE,
                                KV_LEN, PHASE, SEQ, SIZES, TP, WEIGHT_DTYPE, _emit, _gpu,
                                _hw_for, _roof_for, app)
from rooflab.report import console

cost_app = typer.Typer(no_args_is_help=True, help="MACs, FLOPs, bytes and intensity of one op.")
roof_app = typer.Typer(no_args_is_help=True, help="GEMM / GEMV sweeps under a GPU's roof.")
app.add_typer(cost_app, name="cost")
app.add_typer(roof_app, name="roofline")


@app.command()
def specs(as_json: bool = JSON):
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
def cost_gemm(m: int = typer.Option(..., "--m", help="rows of A and C"),
              k: int = typer.Option(..., "--k", help="the reduced dimension"),
              n: int = typer.Option(..., "--n", help="columns of B and C"), dtype: str = DTYPE,
              as_json: bool = JSON):
    """C(M,N) = A(M,K) @ B(K,N)."""
    _cost_out(C.gemm(m, k, n, dtype), as_json)


@cost_app.command("gemv")
def cost_gemv(m: int = typer.Option(..., "--m", help="rows of A (outputs)"),
              k: int = typer.Option(..., "--k", help="columns of A (inputs)"), dtype: str = DTYPE, as_json: bool = JSON):
    """y(M) = A(M,K) @ x(K)."""
    _cost_out(C.gemv(m, k, dtype), as_json)


@cost_app.command("attention")
def cost_attention(batch: int = typer.Option(..., "--batch", help="sequences"),
                   heads: int = typer.Option(..., "--heads", help="query heads"),
                   kv_heads: Optional[int] = typer.Option(None, "--kv-heads",
                                                          help="K/V heads (GQA); default --heads"),
                   q_len: int = typer.Option(..., "--q-len", help="query positions"),
                   kv_len: int = typer.Option(..., "--kv-len", help="key/value positions"),
                   head_dim: int = typer.Option(..., "--head-dim", help="per-head dimension"),
                   dtype: str = DTYPE,
                   causal: bool = typer.Option(False, "--causal", help="count only the unmasked half"),
                   fused: bool = typer.Option(False, "--fused", help="fused-ideal bytes"),
                   as_json: bool = JSON):
    """softmax(Q K^T) V: eager (N x N round-trips HBM) or fused-ideal bytes."""
    c = C.attention(batch, heads, q_len, kv_len, head_dim, kv_heads, dtype, causal)
    _cost_out(c, as_json, fused)


def _roofline(family: str, gpu: Optional[str], dtype: str, sizes: str, plot: Optional[str],
              also: str, measured: bool, as_json: bool) -> None:
    if plot is not None:  # before the GPU is looked up: the same line whatever the machine
        I.writable_file(plot, "--plot", (".png", ".svg", ".pdf"))
    hw = _gpu(gpu)
    roof = R.Roof.of(hw, dtype)
    extra = [R.Roof.of(hw, d) for d in (s.strip() for s in also.split(",")) if d]
    sw = R.sweep(family, roof, I.sizes(sizes))
    data = sw.as_dict()
    if measured:
        from rooflab.measure import ceilings as CE

        extra.append(R.Roof.from_ceilings(CE.get(I.device(None), note=console.note), roof.dtype))
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
                  dtype: str = DTYPE, sizes: str = SIZES,
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  also: str = ALSO, measured: bool = MEASURED,
                  as_json: bool = JSON):
    """GEMM with M=N=K=n: intensity, bound and time floor per size; the compute-bound n."""
    _roofline("gemm", gpu, dtype, sizes, plot, also, measured, as_json)


@roof_app.command("gemv")
def roofline_gemv(gpu: Optional[str] = typer.Option(None, "--gpu", help="name or spec file"),
                  dtype: str = DTYPE, sizes: str = SIZES,
                  plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG here"),
                  also: str = ALSO, measured: bool = MEASURED,
                  as_json: bool = JSON):
    """GEMV with M=K=n: always memory-bound on a GPU."""
    _roofline("gemv", gpu, dtype, sizes, plot, also, measured, as_json)


@app.command()
def layer(model: Optional[str] = typer.Option(None, "--model", help="preset name or config.json"),
          layer_index: Optional[int] = typer.Option(None, "--layer", help="layer number"),
          layer_type: Optional[str] = typer.Option(None, "--layer-type", help="full or sliding"),
          phase: str = PHASE, batch: int = BATCH, seq: Optional[int] = SEQ,
          kv_len: Optional[int] = KV_LEN,
          dtype: Optional[str] = typer.Option(None, "--dtype", help="override the config's dtype"),
          gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name or spec file"),
          tp: int = TP, weight_dtype: Optional[str] = WEIGHT_DTYPE,
          act_dtype: Optional[str] = ACT_DTYPE, kv_dtype: Optional[str] = KV_DTYPE,
          group_size: Optional[int] = GROUP_SIZE, as_json: bool = JSON):
    """Every component of one decoder layer: MACs, FLOPs, bytes, intensity, bound, time floor."""
    from dataclasses import replace

    from rooflab import models as M
    from rooflab.studies import decoder

    cfg = M.load(model)
    if dtype:
        cfg = replace(cfg, dtype=C.dtype_name(dtype))
    if layer_index is not None and layer_type is not None:
        raise I.UserError("give --layer or --layer-type, not both")
    lt = M.layer_type_of(cfg, layer_index, layer_type)
    prec = I.precision(cfg.dtype, weight_dtype, act_dtype, kv_dtype, group_size)
    data = decoder.analyze(cfg, I.phase(phase, batch, seq, kv_len), lt,
                           _roof_for(gpu, prec.act if prec else cfg.dtype), tp, _hw_for(gpu),
                           prec)
    _emit(data, as_json, console.layer)


@app.command()
def model(model_name: Optional[str] = typer.Option(None, "--model", help="preset or config.json"),
          phase: str = PHASE, batch: int = BATCH, seq: Optional[int] = SEQ,
          kv_len: Optional[int] = KV_LEN,
          gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name or spec file"),
          tp: int = TP, weight_dtype: Optional[str] = WEIGHT_DTYPE,
          act_dtype: Optional[str] = ACT_DTYPE, kv_dtype: Optional[str] = KV_DTYPE,
          group_size: Optional[int] = GROUP_SIZE,
          measure: bool = typer.Option(False, "--measure", help="the old spelling of "
                                       "`rooflab generate`"),
          new_tokens: int = typer.Option(32, "--new-tokens", help="--measure: tokens to generate"),
          lm_head: str = typer.Option("last", "--lm-head", help="--measure: logits at prefill "
                                      "for the last position (generation) or all"),
          device: str = DEVICE,
          graph: bool = typer.Option(True, "--graph/--no-graph",
                                     help="--measure: also replay decode as a CUDA graph"),
          as_json: bool = JSON):
    """Whole-model totals: all layers by type, embedding, final norm, lm_head, KV cache (the
    model generating on this device: `rooflab generate`)."""
    from rooflab import models as M
    from rooflab.studies import decoder

    if measure:  # the old spelling of `rooflab generate`
        from rooflab.cli import measured

        for flag, value in (("--phase", phase != "prefill"), ("--kv-len", kv_len), ("--tp", tp > 1),
                            ("--weight-dtype", weight_dtype), ("--act-dtype", act_dtype),
                            ("--kv-dtype", kv_dtype), ("--gpu", gpu)):
            if value:
                raise I.UserError(f"{flag} is for the analytic view; --measure runs prefill of "
                                  "--seq tokens, then --new-tokens decode steps, on this device")
        measured.run_generate(model_name, batch, seq, new_tokens, lm_head, device, graph, "sdpa",
                              as_json, announce="`rooflab model --measure` is now `rooflab "
                              "generate` (same options)")
        return
    cfg = M.load(model_name)
    prec = I.precision(cfg.dtype, weight_dtype, act_dtype, kv_dtype, group_size)
    data = decoder.model_summary(cfg, I.phase(phase, batch, seq, kv_len),
                                 _roof_for(gpu, prec.act if prec else cfg.dtype), tp,
                                 _hw_for(gpu), prec)
    _emit(data, as_json, console.model)

