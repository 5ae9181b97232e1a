"""Issue 'attention': rooflab's Triton FlashAttention against SDPA's flash and cuDNN backends
(same run, ratios), the 512..32768 sweep, and a few tile configurations for tuning."""
from __future__ import annotations

import sys

import torch

from rooflab.kernels import flash_attention as FA
from rooflab.studies import attention as A
from rooflab.measure.timer import time_call

from common import write

DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def bench(fn, flops) -> dict:
    try:
        t = time_call(fn, warmup=3, reps=20, device="cuda")
    except Exception as e:  # noqa: BLE001 - a backend that cannot run the shape
        return {"error": str(e).splitlines()[0][:160]}
    return {"device_s": t.device_s, "tflops_per_s": flops / t.device_s / 1e12, "cv": t.cv}


def ratios() -> list[dict]:
    rows = []
    flash, cudnn = A._sdpa("flash"), A._sdpa("cudnn")
    for d in (64, 128, 256):
        for dt in ("fp16", "bf16"):
            for causal in (False, True):
                for n in (2048, 4096, 8192):
                    b, h = max(16384 // n, 1), 2048 // d  # 16k tokens, 2048 hidden
                    g = torch.Generator(device="cuda").manual_seed(n)
                    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=DT[dt], generator=g)
                               for _ in range(3))
                    flops = FA.cost(b, h, n, n, d, dtype=dt, causal=causal).flops
                    r = {"head_dim": d, "dtype": dt, "causal": causal, "seq": n, "batch": b,
                         "heads": h,
                         "triton": bench(lambda: FA.flash_attention(q, k, v, causal), flops),
                         "sdpa_flash": bench(lambda: flash(q, k, v, causal), flops),
                         "sdpa_cudnn": bench(lambda: cudnn(q, k, v, causal), flops)}
                    for peer in ("sdpa_flash", "sdpa_cudnn"):
                        if "device_s" in r[peer] and "device_s" in r["triton"]:
                            r[f"triton_over_{peer}"] = r[peer]["device_s"] / r["triton"]["device_s"]
                    rows.append(r)
                    print(d, dt, causal, n, {k: round(v, 3) for k, v in r.items()
                                             if k.startswith("triton_over")},
                          round(r["triton"].get("tflops_per_s", 0), 1))
    return rows


def tile_search() -> list[dict]:
    out = []
    cands = {64: [(128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 4)],
             128: [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3),
                   (128, 32, 4, 4), (128, 64, 8, 4)],
             256: [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3), (128, 32, 8, 2),
                   (64, 64, 8, 2)]}
    for d, cs in cands.items():
        for causal in (False, True):
            n, b, h = 4096, 4, 2048 // d
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
                       for _ in range(3))
            flops = FA.cost(b, h, n, n, d, dtype="fp16", causal=causal).flops
            for bm, bn, w, s in cs:
                cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s}
                r = bench(lambda: FA.flash_attention(q, k, v, causal, cfg=cfg), flops)
                out.append({"head_dim": d, "causal": causal, **cfg, **r})
                print("tile", d, causal, cfg, r.get("tflops_per_s"), r.get("error", ""))
    return out


def main(out_dir: str, what: str = "all") -> None:
    data = {}
    if what in ("all", "tiles"):
        data["tiles"] = tile_search()
    if what in ("all", "ratios"):
        data["ratios"] = ratios()
        ok = [r for r in data["ratios"] if "triton_over_sdpa_flash" in r and r["head_dim"] <= 128]
        data["target_triton_ge_flash"] = all(r["triton_over_sdpa_flash"] >= 1.0 for r in ok)
        data["min_ratio_vs_flash_hd_le_128"] = min((r["triton_over_sdpa_flash"] for r in ok),
                                                   default=None)
    if what in ("all", "sweep"):
        data["sweep"] = A.sweep([512 << i for i in range(7)], A.IMPLS, 1, 16, None, 128, "fp16",
                                False, "cuda")
        data["sweep_causal"] = A.sweep([512 << i for i in range(7)], ("standard", "flash",
                                       "triton"), 1, 16, None, 128, "fp16", True, "cuda")
        data["profile_view"] = A.profile_view(4096, "cuda")
        print(data["sweep"]["analysis"])
    write(out_dir, f"attention_{what}", data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "all")
