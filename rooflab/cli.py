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
from rooflab import cli_input as I
from rooflab.errors import RooflabError, read_json
from rooflab.report import console

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="rooflab: where GPU time goes, from first principles.")
cost_app = typer.Typer(no_args_is_help=True, help="MACs, FLOPs, bytes and intensity of one op.")
roof_app = typer.Typer(no_args_is_help=True, help="GEMM / GEMV sweeps under a GPU's roof.")
app.add_typer(cost_app, name="cost")
app.add_typer(roof_app, name="roofline")


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


def _gpu(gpu: Optional[str]) -> H.Hardware:
    hw = H.resolve(gpu)
    if not hw.peak_flops_per_s:
        raise I.UserError(f"no datasheet for {hw.name}: pass --gpu NAME (see `rooflab specs`) "
                        "or a spec file")
    return hw


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

        m_hw = CE.get(I.device(None), note=console.note).hardware()
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
def ceilings(device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu"),
             refresh: bool = typer.Option(False, "--refresh", help="measure again"),
             quick: bool = typer.Option(False, "--quick", help="smaller sizes"),
             as_json: bool = JSON):
    """Measured memory bandwidth and matmul peaks of this device (cached)."""
    from rooflab.measure import ceilings as CE

    if device not in (None, "cuda", "cpu"):
        raise I.UserError(f"--device must be cuda or cpu, got {device!r}")
    _emit(CE.get(I.device(device), refresh=refresh, quick=quick, note=console.note).as_dict(), as_json,
          console.ceilings)


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
    from rooflab.lab import decoder

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
          measure: bool = typer.Option(False, "--measure", help="build the model with random "
                                       "weights and generate: TTFT, TPOT, tokens/s, memory"),
          new_tokens: int = typer.Option(32, "--new-tokens", help="--measure: tokens to generate"),
          lm_head: str = typer.Option("last", "--lm-head", help="--measure: logits at prefill "
                                      "for the last position (generation) or all"),
          device: str = DEVICE,
          graph: bool = typer.Option(True, "--graph/--no-graph",
                                     help="--measure: also replay decode as a CUDA graph"),
          as_json: bool = JSON):
    """Whole-model totals: all layers by type, embedding, final norm, lm_head, KV cache; with
    --measure, the model itself generating, against the prediction."""
    from rooflab import models as M
    from rooflab.lab import decoder

    cfg = M.load(model_name)
    if measure:
        from rooflab.lab import generate as GN
        from rooflab.measure import ceilings as CE

        I.positive(batch, "--batch"), I.positive(seq, "--seq"), I.positive(new_tokens,
                                                                             "--new-tokens")
        I.choices(lm_head, GN.LM_HEAD, "--lm-head")
        for flag, value in (("--phase", phase != "prefill"), ("--kv-len", kv_len), ("--tp", tp > 1),
                            ("--weight-dtype", weight_dtype), ("--act-dtype", act_dtype),
                            ("--kv-dtype", kv_dtype), ("--gpu", gpu)):
            if value:
                raise I.UserError(f"{flag} is for the analytic view; --measure runs prefill of "
                                  "--seq tokens, then --new-tokens decode steps, on this device")
        dev = I.device(device)
        GN.check_fits(cfg, batch, seq or 512, new_tokens, dev, GN.default_dtype(cfg, dev),
                      lm_head)  # before any work or progress bar
        ceil = CE.get(dev, note=console.note)
        with console.Progress() as prog:
            data = GN.measure(cfg, batch, seq or 512, new_tokens, ceil, dev, lm_head=lm_head,
                              graph=graph, progress=prog.task(f"{cfg.name} generating",
                                                              GN.STEPS))
        _emit(data, as_json, console.generation)
        return
    prec = I.precision(cfg.dtype, weight_dtype, act_dtype, kv_dtype, group_size)
    data = decoder.model_summary(cfg, I.phase(phase, batch, seq, kv_len),
                                 _roof_for(gpu, prec.act if prec else cfg.dtype), tp,
                                 _hw_for(gpu), prec)
    _emit(data, as_json, console.model)


@app.command()
def lab(device: str = DEVICE,
        parts: str = typer.Option("1,2,3,4,5,6", "--parts", help="which parts, e.g. 1,2,5 "
                                  "(6 runs where two GPUs are)"),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for the analytic answers"),
        quick: bool = typer.Option(False, "--quick", help="smaller sizes"),
        out: str = typer.Option("rooflab-report", "--out", help="report directory"),
        resume: bool = typer.Option(False, "--resume",
                                    help="keep parts already done in --out with the same options"),
        as_json: bool = JSON):
    """Run the whole lab on this device and write an HTML report (DIR/index.html)."""
    from rooflab.lab import run as LR

    dev = I.device(device)
    nums = I.parts(parts)
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

            res = LR.run(dev, nums, gpu, quick, out, resume, progress=task,
                         on_part=lambda num, entry: (prog.part_done(num, entry), check()),
                         note=console.note)
    except KeyboardInterrupt:
        raise I.Interrupted(f"interrupted; finished parts are in {out} (--resume continues)") \
            from None
    _emit(res, as_json, lambda r: console.lab_summary(r, out))


fusion_app = typer.Typer(no_args_is_help=True, help="Kernel fusion: GeLU and the MLP.")
app.add_typer(fusion_app, name="fusion")


@fusion_app.command("gelu")
def fusion_gelu(numel: int = typer.Option(1 << 24, "--numel", help="elements of the input"),
                dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or bf16"),
                device: str = DEVICE,
                trace: Optional[str] = typer.Option(None, "--trace", help="write traces here"),
                as_json: bool = JSON):
    """GeLU-tanh unfused vs F.gelu vs torch.compile vs rooflab's Triton kernel."""
    from rooflab.lab import fusion
    from rooflab.measure import ceilings as CE

    C._sizes(numel=numel)
    dt = I.dtype(dtype, fusion.DTYPES)
    I.fits(fusion.gelu_needs_bytes(numel, dt), I.device(device), f"--numel {numel:,}")
    dev = I.device(device)
    if trace:
        I.writable_dir(trace, "--trace")
    data = fusion.gelu_study(numel, dt, dev, CE.get(dev, note=console.note).mem_bandwidth_bytes_per_s,
                             trace, note=console.note)
    _emit(data, as_json, console.gelu)


@fusion_app.command("mlp")
def fusion_mlp(modes: str = typer.Option(",".join(("eager", "default",
                                                  "max-autotune-no-cudagraphs",
                                                  "max-autotune")), "--modes",
                                   help="eager and torch.compile modes, comma-separated"),
               tokens: int = typer.Option(2048, "--tokens", help="rows through the MLP"),
               dtype: Optional[str] = typer.Option(None, "--dtype", help="fp32, fp16 or bf16 "
                                                   "(default: bf16; fp32 on a CPU)"),
               device: str = DEVICE,
               trace: Optional[str] = typer.Option(None, "--trace", help="write traces here"),
               as_json: bool = JSON):
    """The Gemma MLP eager vs torch.compile modes: kernels, latency, compile time."""
    from rooflab.lab import fusion

    C._sizes(tokens=tokens)
    chosen = I.choices(modes, fusion.MLP_MODES, "--modes")
    dev = I.device(device)
    dt = _dtype_here(dtype, fusion.DTYPES, "bf16", dev)
    if trace:
        I.writable_dir(trace, "--trace")
    data = fusion.mlp_study(640, 2048, tokens, dt, dev, chosen, trace, note=console.note)
    _emit(data, as_json, console.mlp)


@app.command()
def attention(seq: str = typer.Option("512..32768", "--seq", help="a..b (powers of 2) or a,b,c; "
                                      "with --decode, the cache lengths"),
              impl: Optional[str] = typer.Option(None, "--impl",
                                                 help="implementations, comma-separated "
                                                 "(default: all; triton_decode with --decode)"),
              batch: int = typer.Option(1, "--batch", help="sequences"),
              heads: int = typer.Option(16, "--heads", help="attention heads"),
              kv_heads: Optional[int] = typer.Option(None, "--kv-heads",
                                                     help="--decode: K/V heads (GQA; default "
                                                     "--heads)"),
              head_dim: int = typer.Option(128, "--head-dim", help="per-head dimension"),
              dtype: Optional[str] = typer.Option(None, "--dtype", help="fp16, bf16 or fp32 "
                                                  "(default: fp16; fp32 on a CPU)"),
              causal: bool = typer.Option(False, "--causal", help="causal mask"),
              decode: bool = typer.Option(False, "--decode", help="one new token per sequence "
                                          "against a KV cache of each --seq length"),
              device: str = DEVICE,
              force: bool = typer.Option(False, "--force", help="run a sweep whose roofline "
                                         "floor is past ten minutes here"),
              as_json: bool = JSON):
    """Memory and time of attention implementations over sequence lengths (OOM recorded); with
    --decode, the bandwidth each reaches reading a KV cache."""
    from rooflab.lab import attention as A

    C._sizes(batch=batch, heads=heads, head_dim=head_dim)
    I.positive(kv_heads, "--kv-heads")
    seqs = I.seq_range(seq)
    allowed = A.DECODE_IMPLS if decode else A.IMPLS
    impls = I.choices(impl or ",".join(allowed), allowed, "--impl")
    dev = I.device(device)
    dt = _dtype_here(dtype, A.DTYPES, "fp16", dev)
    if decode and causal:
        raise I.UserError("--causal is for prefill: one new token sees the whole cache")
    if not decode and kv_heads is not None:
        raise I.UserError("--kv-heads is for --decode (the prefill sweep has K/V per head)")
    if decode and heads % (kv_heads or heads):
        raise I.UserError(f"--kv-heads {kv_heads} must divide --heads {heads}")
    floors = None if decode else _warn_if_long(seqs, impls, batch, heads, head_dim, dt, causal,
                                               dev, force)
    try:
        with console.Progress() as prog:
            tick = prog.task("attention", len(seqs) * len(impls), weights=floors)
            if decode:
                from rooflab.measure import ceilings as CE
                data = A.decode_sweep(seqs, impls, batch, heads, kv_heads or heads, head_dim, dt,
                                      dev, CE.get(dev, note=console.note).mem_bandwidth_bytes_per_s, tick)
            else:
                data = A.sweep(seqs, impls, batch, heads, None, head_dim, dt, causal, dev, tick)
    except KeyboardInterrupt:
        raise I.Interrupted("interrupted before the sweep finished; nothing was written") \
            from None
    _emit(data, as_json, console.decode_attention if decode else console.attention)


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


LONG_S, REFUSE_S = 60, 600  # a sweep's roofline floor: warn past a minute, refuse past ten


def _warn_if_long(seqs, impls, batch, heads, head_dim, dtype, causal, device,
                  force: bool = False) -> list[float]:
    """One line on stderr when the sweep's roofline floor on this device exceeds a minute; past
    ten minutes it is refused (one line, exit 2) unless --force. Returns each point's floor,
    for the progress line's ETA."""
    from rooflab.lab import attention as A
    from rooflab.measure import ceilings as CE

    ceil = CE.get(device, note=console.note)
    peak = ceil.peak_flops_per_s.get(dtype) or max(ceil.peak_flops_per_s.values())
    floors = A.point_floors_s(seqs, impls, batch, heads, head_dim, dtype, causal, peak,
                              ceil.mem_bandwidth_bytes_per_s)
    floor_s = sum(floors)
    need = (f"this sweep needs at least {floor_s / 60:.0f} min on {ceil.device_name} (its "
            "roofline floor)")
    if floor_s > REFUSE_S and not force:
        raise I.UserError(f"{need}: shorten --seq or --impl, or pass --force to run it anyway")
    if floor_s > LONG_S:
        console.note(f"{need}; Ctrl-C stops it")
    return floors


@app.command()
def collectives(device: str = typer.Option("auto", "--device",
                                           help="auto or cuda (NCCL between the GPUs present), "
                                           "cpu (gloo between processes)"),
                world_size: Optional[int] = typer.Option(None, "--world-size",
                                                         help="ranks (default: every GPU; 2 "
                                                         "on the CPU)"),
                sizes: Optional[str] = typer.Option(None, "--sizes", help="message sizes in "
                                                    "bytes, comma-separated (default 1 KiB..1 GiB)"),
                refresh: bool = typer.Option(False, "--refresh", help="measure again"),
                as_json: bool = JSON):
    """The collective ceiling: all-reduce, all-gather, reduce-scatter against message size."""
    from rooflab.measure import collectives as K

    I.positive(world_size, "--world-size")
    chosen = I.sizes(sizes) if sizes else None
    dev = "cuda" if device == "auto" else device
    if dev not in ("cuda", "cpu"):
        raise I.UserError(f"--device must be auto, cuda or cpu, got {device!r}")
    if dev == "cuda" and K.gpu_count() < 2:
        raise I.UserError(f"collectives need two or more GPUs; this machine has "
                          f"{K.gpu_count()} (--device cpu measures gloo between processes)")
    _emit(K.get(dev, world_size, refresh, chosen, note=console.note), as_json,
          console.collectives)


@app.command()
def analyze(target: str = typer.Argument(..., help="FILE.py:FUNCTION, where FUNCTION returns "
                                         "(module, (tensor, ...))"),
            device: str = DEVICE,
            html: Optional[str] = typer.Option(None, "--html", help="also write this HTML page"),
            profile: bool = typer.Option(True, "--profile/--no-profile",
                                         help="time each op (off: counts only)"),
            as_json: bool = JSON):
    """Your own module, op by op, on this device's measured roofline."""
    from rooflab import analyze as A
    from rooflab.measure import ceilings as CE

    dev = I.device(device)
    page = I.writable_file(html, "--html", (".html", ".htm")) if html is not None else None
    module, inputs = A.load_target(target)
    try:
        data = A.analyze(module, inputs, dev, CE.get(dev, note=console.note), profile=profile)
    except A.TargetError as e:  # the user's module on the user's inputs: theirs, named
        raise A.TargetError(f"{target}: {e}") from None
    if page:
        from rooflab.report import html as H_

        with open(page, "w") as f:
            f.write(H_.analysis_page(data))
        data["html"] = page
    _emit(data, as_json, console.analysis)


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
    res = selfcheck.check(read_json(answers, I.UserError))
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


def main(argv: list[str] | None = None) -> int:
    """Entry point. Exit codes: 0 done, 2 bad input (one line on stderr), 130 interrupted, 1 when
    `rooflab check` finds an answer that does not hold; an unexpected error is one line too
    (ROOFLAB_DEBUG=1 shows its traceback), also with exit code 1."""
    import logging
    import os

    # torch.compile on a machine with a CUDA toolkit but no GPU warns "No CUDA runtime is found"
    # on every compile: noise on a CPU run, so only errors of that module reach the user
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    try:
        rv = app(args=argv, prog_name="rooflab", standalone_mode=False)
    except I.Interrupted as e:
        return _interrupted(str(e))
    except KeyboardInterrupt:  # whatever the typer release does with Ctrl-C
        return _interrupted("interrupted")
    except typer.Exit as e:
        return _interrupted("interrupted") if e.exit_code == 130 else e.exit_code
    except typer.Abort:
        return _interrupted("aborted")
    except getattr(click_exceptions, "NoArgsIsHelpError", ()) as e:
        sys.stdout.write(e.format_message() + "\n")  # bare `rooflab`: help, not an error
        return 0
    except click_exceptions.ClickException as e:
        sys.stderr.write(f"rooflab: error: {e.format_message()}\n")
        return 2
    except RooflabError as e:
        sys.stderr.write(f"rooflab: error: {_first_line(e)}\n")
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("ROOFLAB_DEBUG"):
            raise
        sys.stderr.write(f"rooflab: internal error: {type(e).__name__}: {_first_line(e)} "
                         "(ROOFLAB_DEBUG=1 shows the traceback)\n")
        return 1
    # typer returns the exit code of a Ctrl-C (130) or an explicit Exit instead of raising
    if rv == 130:
        return _interrupted("interrupted")
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e).strip() else type(e).__name__


def _interrupted(message: str) -> int:
    sys.stderr.write(f"rooflab: {message}\n")
    return 130


if __name__ == "__main__":
    sys.exit(main())
