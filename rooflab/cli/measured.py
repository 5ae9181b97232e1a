"""The commands that measure this device: its ceilings, fusion, attention sweeps, collectives, a
whole model generating, and a user's own module."""
from __future__ import annotations

from typing import Optional

import typer

from rooflab import cost as C
from rooflab.cli import inputs as I
from rooflab.cli.common import BATCH, DEVICE, JSON, SEQ, _dtype_here, _emit, app
from rooflab.report import console

fusion_app = typer.Typer(no_args_is_help=True, help="Kernel fusion: GeLU and the MLP.")
app.add_typer(fusion_app, name="fusion")


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


@fusion_app.command("gelu")
def fusion_gelu(numel: int = typer.Option(1 << 24, "--numel", help="elements of the input"),
                dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or bf16"),
                device: str = DEVICE,
                trace: Optional[str] = typer.Option(None, "--trace", help="write traces here"),
                as_json: bool = JSON):
    """GeLU-tanh unfused vs F.gelu vs torch.compile vs rooflab's Triton kernel."""
    from rooflab.studies import fusion
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
    from rooflab.studies import fusion

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
    from rooflab.studies import attention as A

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



LONG_S, REFUSE_S = 60, 600  # a sweep's roofline floor: warn past a minute, refuse past ten


def _warn_if_long(seqs, impls, batch, heads, head_dim, dtype, causal, device,
                  force: bool = False) -> list[float]:
    """One line on stderr when the sweep's roofline floor on this device exceeds a minute; past
    ten minutes it is refused (one line, exit 2) unless --force. Returns each point's floor,
    for the progress line's ETA."""
    from rooflab.studies import attention as A
    from rooflab.measure import ceilings as CE

    from rooflab.roofline import Roof

    ceil = CE.get(device, note=console.note)
    roof = Roof.from_ceilings(ceil, dtype)
    floors = A.point_floors_s(seqs, impls, batch, heads, head_dim, dtype, causal,
                              roof.peak_flops_per_s, roof.mem_bandwidth_bytes_per_s)
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
    from rooflab.studies import analyze as A
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
def generate(model_name: Optional[str] = typer.Option(None, "--model", help="preset or "
                                                      "config.json"),
             batch: int = BATCH, seq: Optional[int] = SEQ,
             new_tokens: int = typer.Option(32, "--new-tokens", help="tokens to generate"),
             lm_head: str = typer.Option("last", "--lm-head", help="logits at prefill for the "
                                         "last position (generation) or all"),
             device: str = DEVICE,
             graph: bool = typer.Option(True, "--graph/--no-graph",
                                        help="also replay decode as a CUDA graph"),
             attn: str = typer.Option("sdpa", "--attn", help="sdpa, eager or rooflab (its "
                                      "FlashAttention and flash-decoding kernels)"),
             as_json: bool = JSON):
    """The whole model with random weights generating on this device: TTFT, TPOT, tokens/s and
    memory, each beside its prediction from the counted ops."""
    run_generate(model_name, batch, seq, new_tokens, lm_head, device, graph, attn, as_json)


def run_generate(model_name, batch, seq, new_tokens, lm_head, device, graph, attn, as_json,
                 announce: str = "") -> None:
    """`rooflab generate`; ``announce``: a line said once the input is checked, before work."""
    from rooflab import models as M
    from rooflab.measure import ceilings as CE
    from rooflab.studies import generate as GN

    cfg = M.load(model_name)
    I.positive(batch, "--batch"), I.positive(seq, "--seq"), I.positive(new_tokens, "--new-tokens")
    I.choices(lm_head, GN.LM_HEAD, "--lm-head")
    if attn not in GN.ATTN:
        raise I.UserError(f"--attn takes one of {', '.join(GN.ATTN)}; got {attn!r}")
    dev = I.device(device)
    GN.check_fits(cfg, batch, seq or 512, new_tokens, dev, GN.default_dtype(cfg, dev),
                  lm_head)  # before any work or progress bar
    if announce:
        console.note(announce)
    ceil = CE.get(dev, note=console.note)
    with console.Progress() as prog:
        data = GN.measure_generation(cfg, batch, seq or 512, new_tokens, ceil, dev,
                                     lm_head=lm_head, graph=graph, attn=attn,
                                     progress=prog.task(f"{cfg.name} generating", GN.STEPS))
    _emit(data, as_json, console.generation)
