"""Whole models generating on one GPU, measured against rooflab's prediction: gemma-3-270m-it,
Llama-3.1-8B and Qwen3-8B at prefill B 1, 8 x L 512, 4096 and decode B 1, 8, 64 (random weights,
bf16, a static KV cache, 32 new tokens, eager and CUDA graph). With attention implementations
named (sdpa,rooflab; a model that runs no SDPA, Gemma 2, runs eager in its place), each shape
runs under each on the same weights, and the last position's logits of a forward over the prompt
are compared with the first's; beside them, as the yardstick of what two correct kernels differ
by, the logits under SDPA's flash backend against its cuDNN one.
Usage: python benchmarks/generate.py OUT_DIR [model,...] [BxL,BxL,...] [attn,attn,...]
       (a model: a preset's name or a config.json's path)
       (OUT_DIR/generate.json, or generate_attn.json where attention implementations are named)
       python benchmarks/generate.py OUT_DIR --diagnose MODEL BxL prefill|decode [attn]
       (one step op by op against its prediction: OUT_DIR/diagnose.json)"""
from __future__ import annotations

import sys

import torch

from rooflab import hf
from rooflab import models as M
from rooflab.studies import generate as GN
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC

from common import write

MODELS = ("gemma-3-270m-it", "Llama-3.1-8B", "Qwen3-8B")
SHAPES = [(1, 512), (1, 4096), (8, 512), (8, 4096), (64, 512)]  # (batch, prompt tokens)


def main(out_dir: str, models: str = ",".join(MODELS), shapes: str = "", attns: str = "") -> None:
    """shapes: e.g. 1x512,8x4096 (batch x prompt tokens); all of SHAPES by default."""
    ceil, costs = CE.get("cuda"), OC.measure_op_costs("cuda")
    chosen = [tuple(map(int, s.split("x"))) for s in shapes.split(",") if s] or SHAPES
    impls = [a for a in attns.split(",") if a] or ["sdpa"]
    if "rooflab" in impls:
        from rooflab.kernels import register_hf_attention
        register_hf_attention()
    rows = []
    for name in models.split(","):
        cfg = M.load(name)
        built = hf.build_model(cfg, "cuda", torch.bfloat16, attn=impls[0])
        ran = [hf.runnable_attention(type(built[0]), a) for a in impls]  # Gemma 2: no SDPA
        for batch, seq in chosen:
            first = None
            for attn in ran:
                built[0].set_attn_implementation(attn)  # the same weights under each
                try:
                    r = GN.measure_generation(cfg, batch, seq, 32, ceil, "cuda", costs=costs,
                                              built=built, attn=attn)
                    if len(impls) > 1:
                        logits = _last_logits(built[0], cfg, batch, seq)
                        first = logits if first is None else first
                        r["logits_rel_err_vs_" + ran[0]] = float(
                            (logits - first).norm() / first.norm())
                except Exception as e:  # noqa: BLE001 - one shape failing loses nothing else
                    r = {"model": name, "batch": batch, "seq": seq, "attn": attn,
                         "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                if len(impls) > 1 and attn == ran[-1]:
                    r.update(_yardstick(built[0], cfg, batch, seq))
                rows.append(r)
                _print(name, batch, seq, attn, r)
                write(out_dir, "generate_attn" if len(impls) > 1 else "generate",
                      {"op_costs": costs.as_dict(), "rows": rows})
        del built
        torch.cuda.empty_cache()


def _last_logits(model, cfg, batch: int, seq: int, device: str = "cuda") -> torch.Tensor:
    """The last position's logits of a forward over a fixed random prompt (no cache), fp32."""
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(cfg.vocab, (batch, seq), generator=g).to(device)
    with torch.no_grad():
        return model(ids, use_cache=False, logits_to_keep=1).logits.float()


def _yardstick(model, cfg, batch: int, seq: int) -> dict:
    """The relative difference of the logits under two of SDPA's backends, the same weights and
    prompt: what two correct bf16 kernels differ by after every layer. Flash against cuDNN;
    where flash refuses (a mask: gemma's sliding layers; latent attention's head dims), the
    efficient backend against cuDNN: {"logits_rel_diff_sdpa_A_vs_B": value or why not}."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if hf.runnable_attention(type(model), "sdpa") != "sdpa":
        return {"logits_rel_diff_sdpa_flash_vs_cudnn": "the model runs no SDPA"}
    model.set_attn_implementation("sdpa")
    out = {}
    for first, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                           ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                a = _last_logits(model, cfg, batch, seq)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                b = _last_logits(model, cfg, batch, seq)
        except RuntimeError as e:  # a backend that refuses the shape or mask
            out[f"logits_rel_diff_sdpa_{first}_vs_cudnn"] = \
                f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            continue
        out[f"logits_rel_diff_sdpa_{first}_vs_cudnn"] = float((a - b).norm() / b.norm())
        break
    return out


def _print(name, batch, seq, attn, r) -> None:
    p, d = r.get("prefill", {}), r.get("decode", {})
    print(name, batch, seq, attn, "TTFT", p.get("device_s"), "graph", p.get("graph_device_s"),
          "pred/meas", round(p.get("predicted_over_device", 0), 3), "pred/kernel",
          round(p.get("predicted_over_kernel") or 0, 3), p.get("graph_error", ""),
          "| decode", d.get("eager_device_s"),
          d.get("graph_device_s"), "pred/meas", round(d.get("predicted_over_device", 0), 3),
          "| roof", round(p.get("roofline_over_device", 0), 3),
          round(d.get("roofline_over_device", 0), 3), "| mem", round(
              r.get("memory_predicted_over_measured", 0), 3), r.get("error", ""),
          d.get("graph_error", ""), r.get("attention_paths", ""),
          {k: v if isinstance(v, str) else round(v, 4) for k, v in r.items()
           if k.startswith("logits_rel")}, flush=True)


def diagnose(out_dir: str, name: str, shape: str, phase: str = "decode",
             attn: str = "sdpa") -> None:
    """Where a whole model's prefill or decode step spends its kernel time, op by op, beside the
    prediction (the rates generate measures: floors, attention, grouped GEMMs, GEMM shapes,
    top-k and sorts), under transformers' attention ``attn`` (GN.ATTN): OUT_DIR/diagnose.json."""
    from rooflab import count
    from rooflab.studies import layer_measure as LM
    from rooflab.measure import profile as P

    batch, seq = map(int, shape.split("x"))
    cfg = M.load(name)
    ceil, costs = CE.get("cuda"), OC.measure_op_costs("cuda")
    with torch.no_grad():
        g = GN.Generation(cfg, batch, seq, 32, "cuda", "bf16", attn=attn)
        run = g.prefill if phase == "prefill" else g.step
        with count.Counter(g.model) as c:
            run()
        OC.measure_rates(costs, c.records, "cuda")
        prof = P.profile(run, iters=3, warmup=2, device="cuda")
    ops = LM.by_op(c.records, ceil, "bf16", costs, prof)
    kernel_s = prof.device_time_us / prof.iters / 1e6
    predicted_s = sum(o["predicted_s"] for o in ops)
    print(name, shape, phase, attn, f"kernel {kernel_s * 1e3:.2f} ms",
          f"predicted {predicted_s * 1e3:.2f} ms")
    for o in sorted(ops, key=lambda o: -abs((o["kernel_s"] or 0) - o["predicted_s"]))[:15]:
        print(f"  {o['op'][:64]:64s} {o['class']:11s} calls {o['calls']:4d} measured "
              f"{(o['kernel_s'] or 0) * 1e6:9.1f} us predicted {o['predicted_s'] * 1e6:9.1f} us")
    write(out_dir, "diagnose", {"model": name, "batch": batch, "seq": seq, "phase": phase,
                                "attn": attn,
                                "kernel_s": kernel_s, "predicted_s": predicted_s,
                                "op_costs": costs.as_dict(), "ops": ops})


if __name__ == "__main__":
    if sys.argv[2:3] == ["--diagnose"]:
        diagnose(sys.argv[1], *sys.argv[3:7])
    else:
        main(sys.argv[1], *sys.argv[2:5])
