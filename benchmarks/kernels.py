"""rooflab's kernels against their peers on one GPU, same run (ratios):
- GeLU-tanh at powers of two and odd lengths, fp32/fp16/bf16, against F.gelu and a copy of the
  same bytes (L2 flushed: each call reads from HBM); gelu_any: lengths near no power of two,
  each also one element into a larger tensor (data not on a 16-byte boundary);
- flash-decoding (split-KV) against every SDPA backend and rooflab's FlashAttention at decode
  shapes, with a search over how many programs it launches;
- part 5's decode sweep (512 to 32768 cached tokens), every backend, three alternating rounds;
- the FlashAttention forward rows of the kernels issue against SDPA's flash and cuDNN backends.
Usage: python benchmarks/kernels.py OUT_DIR [gelu,decode,lab_decode,flash]
(decode_default and flash_default: the same without the searches over programs and tiles;
gelu_tiles: GeLU's block and warps; copy_write_back: why a copy near L2's size passes the ceiling;
read_floor: part 5's 16.8 MB at 512 cached tokens read by 64, 128 and 256 programs)"""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD
from rooflab.kernels import gelu as G
from rooflab.kernels import routing
from rooflab.studies import attention as A
from rooflab.measure import ceilings as CE
from rooflab.measure.timer import time_call

from common import alternate, write

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def t_s(fn, *args, device: str = "cuda") -> float:
    """Device seconds of one call (L2 flushed first): every GeLU and decode figure here."""
    return time_call(fn, *args, warmup=3, budget_s=0.1, max_reps=200, flush_l2=True, wall=False,
                     device=device).device_s


POWERS = [(1 << base) + extra for base in (20, 21, 22, 24, 26, 28) for extra in (0, 1, 3, 7, 1000)]
# lengths near no power of two, each also as a view one element into a larger tensor (its data
# 2 or 4 bytes past a 16-byte boundary, as a slice of another tensor can be)
ANY = [(n, offset) for n in (1_000_003, 3_000_017, 5_000_001, 12_345_679, 100_000_007)
       for offset in (0, 1)]


def gelu(bw: float, lengths=None) -> list[dict]:
    rows = []
    for n, offset in lengths or [(n, 0) for n in POWERS]:
        for dt in ("fp32", "fp16", "bf16"):
            x = torch.randn(n + offset, device="cuda", dtype=DT[dt])[offset:]
            y = torch.empty_like(x)
            nbytes = 2 * n * x.element_size()
            tri = t_s(G.gelu_triton, x, y)
            ref = t_s(lambda: F.gelu(x, approximate="tanh"))
            cp = t_s(y.copy_, x)
            r = {"numel": n, "dtype": dt, "offset": offset, "triton_s": tri, "fgelu_s": ref,
                 "copy_s": cp,
                 "triton_over_fgelu": ref / tri, "triton_over_copy": cp / tri,
                 "triton_fraction_of_copy_ceiling": nbytes / tri / bw,
                 "fgelu_fraction_of_copy_ceiling": nbytes / ref / bw,
                 "copy_fraction_of_copy_ceiling": nbytes / cp / bw}
            r["meets_095_fgelu"] = r["triton_over_fgelu"] >= 0.95
            r["meets_090_copy"] = r["triton_over_copy"] >= 0.90
            rows.append(r)
            print(f"gelu {dt} n={n} offset {offset}: {r['triton_over_fgelu']:.2f}x F.gelu, "
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


def copy_write_back(bw: float) -> list[dict]:
    """Why a copy of 2^24 fp32 elements reads over 100% of the copy ceiling: time the copy, a
    read of 256 MB, and the copy then the read in one call. The read after the copy evicts the
    copy's output still dirty in L2 and pays its write-back; the difference is what the timed
    copy left out, and bytes / (copy + write-back) is its fraction with that counted."""
    big = torch.empty(1 << 26, device="cuda")                # 256 MB: over L2 (50 MB)
    read = big.sum
    rows = []
    for n, dt in ((1 << 24, "fp32"), (1 << 25, "bf16"), (1 << 26, "fp32")):
        x = torch.randn(n, device="cuda", dtype=DT[dt])
        y = torch.empty_like(x)
        fns = {"copy": lambda: y.copy_(x), "read": read,
               "copy_then_read": lambda: (y.copy_(x), read())}
        m = alternate(fns, [], None, t_s, 3)
        med, runs = m["median_s"], m["all_s"]
        nbytes = 2 * n * x.element_size()
        wb = med["copy_then_read"] - med["copy"] - med["read"]
        rows.append({"numel": n, "dtype": dt, "bytes": nbytes, "median_s": med, "all_s": runs,
                     "write_back_s": wb,
                     "copy_fraction_of_copy_ceiling": nbytes / med["copy"] / bw,
                     "with_write_back_fraction": nbytes / (med["copy"] + wb) / bw})
        print("copy write-back", n, dt, {k: round(v, 3) for k, v in rows[-1].items()
                                         if "fraction" in k}, round(wb * 1e6, 2), "us", flush=True)
    return rows


DECODE_SHAPES = [  # (B, H, Hkv, Lq, Lkv, D): the issue's row first, part 5's short caches,
    # then batch, length, q_len
    (8, 32, 8, 1, 4096, 128), (8, 32, 8, 1, 512, 128), (8, 32, 8, 1, 1024, 128),
    (1, 32, 8, 1, 4096, 128), (64, 32, 8, 1, 4096, 128),
    (8, 32, 8, 1, 16384, 128), (1, 32, 8, 1, 131072, 128), (8, 32, 8, 4, 4096, 128),
    (8, 32, 8, 16, 4096, 128), (8, 8, 1, 1, 8192, 256), (32, 16, 16, 1, 4096, 64),
]


def decode(bw: float, search: bool = True) -> list[dict]:
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
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        searched = [(f"x{m}", max(1, int(m * sms))) for m in (0.5, 1, 2)] + [("heads", b * hkv)]
        # programs = mult x SMs (fewer, longer runs too), or one per KV head: each program then
        # holds a whole head and writes its answer, and the merge kernel is not launched
        for mult, programs in searched if search else []:
            for cfg in ({"BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "TMA": True},
                        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "TMA": True},
                        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 4, "TMA": True},
                        {"BLOCK_N": 128, "num_warps": 4, "num_stages": 3, "TMA": True},
                        {"BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "TMA": True}):
                if d > 128 and cfg["BLOCK_N"] > 64:
                    continue
                key = f"{mult} n{cfg['BLOCK_N']} w{cfg['num_warps']} s{cfg['num_stages']}"
                try:
                    best[key] = t_s(lambda: FD.flash_decode(
                        q, k, v, causal, programs=programs, cfg=cfg))
                except Exception:  # noqa: BLE001 - a tile that does not fit in shared memory
                    continue
        if FD.dependent_launch("cuda"):  # the merge launched early (the default) or not
            r["triton_decode_no_pdl_s"] = t_s(lambda: FD.flash_decode(
                q, k, v, causal,
                cfg={**FD.config(d, lkv, h // hkv * lq, b * hkv), "PDL": False}))
        r["search_s"] = best
        r["search_best"] = min(best, key=best.get) if best else None
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
              "best", r["search_best"], best and round(best[r["search_best"]] * 1e6, 1))
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


FLASH_ROWS = [  # (B, H, Hkv, N, D, dtype, causal): the kernels issue's table, then the rest of
    # its goal's grid (N >= 2048; head dims 64, 128, 256; causal and not; fp16 and bf16; GQA)
    (1, 16, 16, 16384, 128, "fp16", False), (2, 32, 4, 1000, 128, "bf16", True),
    (1, 8, 8, 4096, 256, "bf16", True), (4, 32, 32, 2048, 64, "fp16", False),
    (4, 32, 32, 2048, 64, "bf16", True), (2, 16, 16, 4096, 128, "bf16", False),
    (4, 16, 16, 4096, 128, "fp16", True), (2, 8, 8, 4096, 256, "fp16", False),
    (4, 32, 32, 2048, 64, "fp16", True), (4, 32, 32, 2048, 64, "bf16", False),
    (2, 32, 8, 4096, 64, "bf16", True), (1, 32, 8, 8192, 128, "bf16", True),
    (1, 8, 8, 4096, 256, "fp16", True), (2, 8, 8, 4096, 256, "bf16", False),
]

FLASH_TILES = [  # (BLOCK_M, BLOCK_N, warps, stages), each by addresses and through TMA
    (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 4, 3), (64, 64, 4, 3),
    (128, 64, 8, 4), (64, 128, 4, 3), (128, 32, 8, 4)]


def flash_s(fn, device: str = "cuda") -> float:
    """Device seconds of one attention call, timed as every FlashAttention figure here is."""
    return time_call(fn, warmup=3, budget_s=0.15, max_reps=60, wall=False, device=device).device_s


def flash(tiles: bool = True) -> list[dict]:
    """Per shape: the default, every tile of FLASH_TILES that fits, and SDPA's fused backends;
    then the default, the best tile, cuDNN and flash again in three alternating rounds."""
    rows = []
    peers = {"sdpa_flash": A._sdpa("flash"), "sdpa_cudnn": A._sdpa("cudnn"),
             "sdpa_efficient": A._sdpa("efficient")}  # math: the N x N matrix, not a peer here
    for b, h, hkv, n, d, dt, causal in FLASH_ROWS:
        g = torch.Generator(device="cuda").manual_seed(n)
        q = torch.randn(b, h, n, d, device="cuda", dtype=DT[dt], generator=g)
        k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=DT[dt], generator=g)
                for _ in range(2))
        cost = FA.cost(b, h, n, n, d, hkv, dt, causal)
        r = {"batch": b, "heads": h, "kv_heads": hkv, "seq": n, "head_dim": d, "dtype": dt,
             "causal": causal, "default_kernel": routing.which(q, k, v, causal),
             "default_config": FA.config(d, causal), "tflops_per_s": {}, "errors": {}}
        # "triton": rooflab's default (a Gluon kernel where routing.which() routes the row there);
        # "triton_lang": the Triton-language kernel of flash_attention.py at its config
        fns = {"triton": lambda: FA.flash_attention(q, k, v, causal),
               "triton_lang": lambda: FA.flash_attention(q, k, v, causal, cfg={}),
               **{p: (lambda f=f: f(q, k, v, causal)) for p, f in peers.items()}}
        for bm, bn, w, st in FLASH_TILES if tiles else []:
            if d == 256 and (bn > 64 or (bm == 128 and st > 2)):  # past 227 KB shared memory
                continue
            for tma in (False, True):
                cfg = {**FA.config(d, causal), "BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w,
                       "num_stages": st, "TMA": tma}  # the default's other choices
                cfg["Q_REG"] = cfg.get("Q_REG", False) and tma  # measured with TMA only
                fns[f"m{bm}n{bn}w{w}s{st}{'_tma' if tma else ''}"] = (
                    lambda cfg=cfg: FA.flash_attention(q, k, v, causal, cfg=cfg))

        def tf(fn):
            return FA.tflops(cost, flash_s(fn))

        for name, fn in fns.items():
            try:
                r["tflops_per_s"][name] = tf(fn)
            except Exception as e:  # noqa: BLE001 - a tile that does not fit or compile
                r["errors"][name] = str(e).splitlines()[0][:160]
        tried = {k2: v2 for k2, v2 in r["tflops_per_s"].items() if k2[0] == "m"}
        r["best_tile"] = max(tried, key=tried.get) if tried else None
        rounds = {k2: [] for k2 in ("triton", "triton_lang", r["best_tile"], "sdpa_cudnn",
                                    "sdpa_flash")
                  if k2 in r["tflops_per_s"]}
        for _ in range(3):
            for k2 in rounds:
                rounds[k2].append(tf(fns[k2]))
        med = {k2: sorted(v2)[1] for k2, v2 in rounds.items()}
        r["median_of_3_tflops_per_s"] = med
        for p in (*peers, "triton_lang"):
            if p in med and "triton" in med:
                r[f"triton_over_{p}"] = med["triton"] / med[p]
        rows.append(r)
        print("flash", (b, h, hkv, n, d, dt, causal), {k2: round(v2, 1) for k2, v2 in med.items()},
              {k2: round(v2, 3) for k2, v2 in r.items() if k2.startswith("triton_over")},
              flush=True)
    return rows


def launch_floor() -> dict:
    """What any kernel costs in this timing before it moves a byte: an empty Triton kernel of 64
    programs and a one-element fill, each timed as the decode rows are (L2 flushed first)."""
    import triton

    @triton.jit
    def nothing(x):
        pass

    x = torch.zeros(1, device="cuda")
    return {"empty_triton_kernel_s": t_s(lambda: nothing[(64,)](x)),
            "one_element_fill_s": t_s(x.zero_)}


def read_floor(nbytes: int = 8 * 8 * 512 * 128 * 2 * 2, counts=(64, 128, 256)) -> dict:
    """Seconds to read ``nbytes`` (default: K and V at part 5's 512 cached tokens, 16.8 MB) and
    nothing else, by a Triton kernel of P programs each summing one contiguous share in blocks
    of 32 KB: how a plain read's time falls as it spreads over more SMs (at 64 programs the
    decode kernel, its loads through TMA, is faster than this read)."""
    import triton
    import triton.language as tl

    @triton.jit
    def read_shares(x, out, share, BLOCK: tl.constexpr):
        base = x + tl.program_id(0).to(tl.int64) * share
        acc = tl.zeros([BLOCK], tl.float32)
        for i in range(0, share, BLOCK):
            acc += tl.load(base + i + tl.arange(0, BLOCK)).to(tl.float32)
        tl.store(out + tl.program_id(0), tl.sum(acc, 0))

    x = torch.randn(nbytes // 2, device="cuda").to(torch.bfloat16)
    out = torch.empty(max(counts), device="cuda")
    block = 16384  # bf16 elements: 32 KB a step
    times = {}
    for p in counts:
        share = x.numel() // p
        if share % block == 0:
            times[p] = t_s(lambda p=p, share=share: read_shares[(p,)](
                x, out, share, BLOCK=block, num_warps=4, num_stages=3))
    print("read floor", {p: round(t * 1e6, 2) for p, t in times.items()}, "us")
    return {"bytes": nbytes, "seconds_by_programs": times}


def main(out_dir: str, what: str = "gelu,decode,lab_decode,flash") -> None:  # gelu_tiles: tuning
    bw = CE.get("cuda").mem_bandwidth_bytes_per_s
    data = {"copy_ceiling_bytes_per_s": bw, "launch_floor": launch_floor()}
    print("launch floor", {k: round(v * 1e6, 2) for k, v in data["launch_floor"].items()}, "us")
    for name, fn in (("read_floor", read_floor), ("gelu", lambda: gelu(bw)),
                     ("gelu_any", lambda: gelu(bw, ANY)),
                     ("gelu_tiles", gelu_tiles),
                     ("copy_write_back", lambda: copy_write_back(bw)),
                     ("decode", lambda: decode(bw)), ("decode_default", lambda: decode(bw, False)),
                     ("lab_decode", lambda: lab_decode(bw)), ("flash", flash),
                     ("flash_default", lambda: flash(False))):
        if name in what.split(","):
            data[name] = fn()
            write(out_dir, "kernels", data)  # after each section: a late failure loses nothing


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])
