"""rooflab's kernels against their peers on one GPU, same run (ratios):
- GeLU-tanh at powers of two and odd lengths, fp32/fp16/bf16, against F.gelu and a copy of the
  same bytes (L2 flushed: each call reads from HBM);
- flash-decoding (split-KV) against every SDPA backend and rooflab's FlashAttention at decode
  shapes, with a search over how many programs it launches;
- part 5's decode sweep (512 to 32768 cached tokens), every backend, three alternating rounds;
- the FlashAttention forward rows of the kernels issue against SDPA's flash and cuDNN backends.
Usage: python benchmarks/kernels.py OUT_DIR [gelu,decode,lab_decode,flash]"""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD
from rooflab.kernels import gelu as G
from rooflab.lab import attention as A
from rooflab.measure import ceilings as CE
from rooflab.measure.timer import time

from common import write

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def t_s(fn, *args) -> float:
    return time(fn, *args, warmup=3, budget_s=0.1, max_reps=200, flush_l2=True, wall=False,
                device="cuda").device_s


def gelu(bw: float) -> list[dict]:
    rows = []
    for base in (20, 21, 22, 24, 26, 28):
        for extra in (0, 1, 3, 7, 1000):
            n = (1 << base) + extra
            for dt in ("fp32", "fp16", "bf16"):
                x = torch.randn(n, device="cuda", dtype=DT[dt])
                y = torch.empty_like(x)
                nbytes = 2 * n * x.element_size()
                tri = t_s(G.gelu_triton, x, y)
                ref = t_s(lambda: F.gelu(x, approximate="tanh"))
                cp = t_s(y.copy_, x)
                r = {"numel": n, "dtype": dt, "triton_s": tri, "fgelu_s": ref, "copy_s": cp,
                     "triton_over_fgelu": ref / tri, "triton_over_copy": cp / tri,
                     "triton_fraction_of_copy_ceiling": nbytes / tri / bw,
                     "fgelu_fraction_of_copy_ceiling": nbytes / ref / bw,
                     "copy_fraction_of_copy_ceiling": nbytes / cp / bw}
                r["meets_095_fgelu"] = r["triton_over_fgelu"] >= 0.95
                r["meets_090_copy"] = r["triton_over_copy"] >= 0.90
                rows.append(r)
                print(f"gelu {dt} n={n}: {r['triton_over_fgelu']:.2f}x F.gelu, "
                      f"{r['triton_over_copy']:.2f} of a copy, "
                      f"{r['triton_fraction_of_copy_ceiling']:.2f} of the ceiling")
    return rows


def gelu_tiles() -> list[dict]:
    """Block and warps at the small end (1M-16M elements), against F.gelu in the same run."""
    rows = []
    for n in ((1 << 20) + 3, (1 << 22) + 7, (1 << 24) + 1):
        for dt in ("fp32", "bf16"):
            x = torch.randn(n, device="cuda", dtype=DT[dt])
            y = torch.empty_like(x)
            ref = t_s(lambda: F.gelu(x, approximate="tanh"))
            for block in (256, 512, 1024, 2048, 4096):
                for warps in (1, 2, 4, 8):
                    if block // (32 * warps) < 4:
                        continue
                    s = t_s(G.gelu_triton, x, y, block, warps)
                    rows.append({"numel": n, "dtype": dt, "block": block, "num_warps": warps,
                                 "triton_s": s, "fgelu_s": ref, "triton_over_fgelu": ref / s})
            best = max((r for r in rows if r["numel"] == n and r["dtype"] == dt),
                       key=lambda r: r["triton_over_fgelu"])
            print("gelu tiles", n, dt, best)
    return rows


DECODE_SHAPES = [  # (B, H, Hkv, Lq, Lkv, D): the issue's row first, part 5's short caches,
    # then batch, length, q_len
    (8, 32, 8, 1, 4096, 128), (8, 32, 8, 1, 512, 128), (8, 32, 8, 1, 1024, 128),
    (1, 32, 8, 1, 4096, 128), (64, 32, 8, 1, 4096, 128),
    (8, 32, 8, 1, 16384, 128), (1, 32, 8, 1, 131072, 128), (8, 32, 8, 4, 4096, 128),
    (8, 32, 8, 16, 4096, 128), (8, 8, 1, 1, 8192, 256), (32, 16, 16, 1, 4096, 64),
]


def decode(bw: float) -> list[dict]:
    rows = []
    impls = {n: A.implementation(n, "cuda")[0] for n in A.DECODE_IMPLS}
    for b, h, hkv, lq, lkv, d in DECODE_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(lkv)
        q = torch.randn(b, h, lq, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(b, hkv, lkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        c = FD.cost(b, h, lq, lkv, d, hkv, "bf16", causal=lq > 1)
        r = {"batch": b, "heads": h, "kv_heads": hkv, "q_len": lq, "kv_len": lkv, "head_dim": d,
             "bytes": c.bytes, "floor_s": c.bytes / bw, "errors": FD.errors(
                 b, h, lq, lkv, d, hkv, torch.bfloat16, lq > 1, "cuda", seed=1)}
        causal = lq > 1  # SDPA aligns is_causal top-left: with Lq > 1 only the kernels agree
        for name, fn in impls.items():
            if fn is None or (causal and name not in ("triton", "triton_decode")):
                continue
            try:
                r[name + "_s"] = t_s(fn, q, k, v, causal)
            except Exception as e:  # noqa: BLE001 - a backend refusing a shape is a result
                r[name + "_error"] = str(e).splitlines()[0][:160]
        best = {}
        for mult in (0.25, 0.5, 1, 2, 4):  # programs = mult x SMs: fewer, longer runs too
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            for cfg in ({"BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
                        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
                        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 4},
                        {"BLOCK_N": 32, "num_warps": 4, "num_stages": 4},
                        {"BLOCK_N": 128, "num_warps": 4, "num_stages": 2},
                        {"BLOCK_N": 128, "num_warps": 8, "num_stages": 3}):
                if d > 128 and cfg["BLOCK_N"] > 64:
                    continue
                key = f"x{mult} n{cfg['BLOCK_N']} w{cfg['num_warps']} s{cfg['num_stages']}"
                try:
                    best[key] = t_s(lambda: FD.flash_decode(
                        q, k, v, causal, programs=max(1, int(mult * sms)), cfg=cfg))
                except Exception:  # noqa: BLE001 - a tile that does not fit in shared memory
                    continue
        if FD.dependent_launch("cuda"):  # the merge launched early (the default) or not
            r["triton_decode_no_pdl_s"] = t_s(lambda: FD.flash_decode(
                q, k, v, causal, cfg={**FD.config(d), "PDL": False}))
        r["search_s"] = best
        r["search_best"] = min(best, key=best.get)
        # reading the same bytes and nothing else: reads alone stream faster than the copy that
        # sets the ceiling (half reads, half writes), so a read-only kernel can pass 100% of it
        x = torch.empty(c.bytes // 2, device="cuda", dtype=torch.bfloat16)
        r["read_same_bytes_s"] = t_s(x.sum)
        r["read_same_bytes_fraction_of_copy_ceiling"] = c.bytes / r["read_same_bytes_s"] / bw
        mine = r.get("triton_decode_s")
        if mine:
            r["triton_decode_fraction_of_copy_ceiling"] = c.bytes / mine / bw
            r["triton_decode_over_read_same_bytes"] = r["read_same_bytes_s"] / mine
            peers = {k[:-2]: s for k, s in r.items() if k.endswith("_s") and k not in (
                "triton_decode_s", "floor_s", "search_s", "read_same_bytes_s",
                "triton_decode_no_pdl_s")}
            r["fastest_peer"] = min(peers, key=peers.get) if peers else None
            if peers:
                r["triton_decode_over_fastest_peer"] = peers[r["fastest_peer"]] / mine
        rows.append(r)
        print("decode", (b, h, hkv, lq, lkv, d), {k: (round(v * 1e6, 1) if k.endswith("_s")
              else v) for k, v in r.items() if (k.endswith("_s") and k != "search_s") or
              "fraction" in k or k.endswith("peer")},
              "best", r["search_best"], round(best[r["search_best"]] * 1e6, 1))
    return rows


LAB_KV_LENS = [512 << i for i in range(7)]  # part 5's decode sweep: 512 to 32768 cached tokens


def lab_decode(bw: float, rounds: int = 3) -> dict:
    """Part 5's decode sweep itself (B=8, 32 heads, 8 KV heads, d 128, bf16, L2 flushed), every
    implementation, in ``rounds`` alternating rounds: per cached length, the median of each."""
    runs = [A.decode_sweep(LAB_KV_LENS, bandwidth_bytes_per_s=bw) for _ in range(rounds)]
    rows = []
    for n in LAB_KV_LENS:
        times = {}
        for run in runs:
            for r in run["rows"]:
                if r["kv_len"] == n and r["status"] == "ok":
                    times.setdefault(r["impl"], []).append(r["device_s"])
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        mine = med.pop("triton_decode", None)
        peers = {k: v for k, v in med.items() if k not in ("triton", "standard")}  # SDPA's
        best = min(peers, key=peers.get) if peers else None
        row = {"kv_len": n, "median_s": {**med, "triton_decode": mine}, "all_s": times,
               "fastest_sdpa": best}
        if mine and best:
            row["triton_decode_over_fastest_sdpa"] = peers[best] / mine  # > 1: ours is faster
            row["triton_decode_fraction_of_copy_ceiling"] = (
                next(r for r in runs[0]["rows"] if r["kv_len"] == n)["bytes_fused"] / mine / bw)
        rows.append(row)
        print("lab decode", n, {k: round(v * 1e6, 1) for k, v in row["median_s"].items() if v},
              "ours/fastest", round(row.get("triton_decode_over_fastest_sdpa", 0), 3), flush=True)
    return {"shape": {k: runs[0][k] for k in ("batch", "heads", "kv_heads", "head_dim", "dtype")},
            "rounds": rounds, "rows": rows}


FLASH_ROWS = [  # (B, H, Hkv, N, D, dtype, causal): the kernels issue's table
    (1, 16, 16, 16384, 128, "fp16", False), (2, 32, 4, 1000, 128, "bf16", True),
    (1, 8, 8, 4096, 256, "bf16", True), (4, 32, 32, 2048, 64, "fp16", False),
    (4, 32, 32, 2048, 64, "bf16", True), (2, 16, 16, 4096, 128, "bf16", False),
]


TMA_TILES = [  # tried through tensor descriptors beside the default tiles (rooflab's TMA path)
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2},
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "WS": True},
    {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "WS": True},
]


def flash() -> list[dict]:
    rows = []
    peers = {"sdpa_flash": A._sdpa("flash"), "sdpa_cudnn": A._sdpa("cudnn")}
    for b, h, hkv, n, d, dt, causal in FLASH_ROWS:
        g = torch.Generator(device="cuda").manual_seed(n)
        q = torch.randn(b, h, n, d, device="cuda", dtype=DT[dt], generator=g)
        k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=DT[dt], generator=g)
                for _ in range(2))
        flops = FA.cost(b, h, n, n, d, hkv, dt, causal).flops
        r = {"batch": b, "heads": h, "kv_heads": hkv, "seq": n, "head_dim": d, "dtype": dt,
             "causal": causal}
        tma = {f"triton_tma_m{c['BLOCK_M']}n{c['BLOCK_N']}w{c['num_warps']}s{c['num_stages']}"
               f"{'_ws' if c.get('WS') else ''}":
               (lambda c=c: FA.flash_attention(q, k, v, causal, cfg={**c, "TMA": True}))
               for c in (FA.config(d, causal), *TMA_TILES) if d < 256 or c["BLOCK_N"] <= 64}
        for name, fn in [("triton", lambda: FA.flash_attention(q, k, v, causal)), *tma.items(),
                         *[(p, (lambda f=f: f(q, k, v, causal))) for p, f in peers.items()]]:
            try:
                s = time(fn, warmup=3, budget_s=0.2, max_reps=50, wall=False,
                         device="cuda").device_s
                r[name + "_tflops_per_s"] = flops / s / 1e12
            except Exception as e:  # noqa: BLE001
                r[name + "_error"] = str(e).splitlines()[0][:160]
        best_tma = max((r.get(n + "_tflops_per_s", 0) for n in tma), default=0)
        if best_tma:
            r["triton_tma_best_tflops_per_s"] = best_tma
        for p in peers:
            for mine in ("triton", "triton_tma_best"):
                if p + "_tflops_per_s" in r and mine + "_tflops_per_s" in r:
                    r[f"{mine}_over_{p}"] = r[mine + "_tflops_per_s"] / r[p + "_tflops_per_s"]
        rows.append(r)
        print("flash", r)
    return rows


def main(out_dir: str, what: str = "gelu,decode,lab_decode,flash") -> None:  # gelu_tiles: tuning
    bw = CE.get("cuda").mem_bandwidth_bytes_per_s
    data = {"copy_ceiling_bytes_per_s": bw}
    for name, fn in (("gelu", lambda: gelu(bw)), ("gelu_tiles", gelu_tiles),
                     ("decode", lambda: decode(bw)), ("lab_decode", lambda: lab_decode(bw)),
                     ("flash", flash)):
        if name in what.split(","):
            data[name] = fn()
            write(out_dir, "kernels", data)  # after each section: a late failure loses nothing


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])
