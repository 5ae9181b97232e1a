"""How fast the SMs read from L2, beside how fast they read from HBM, on one GPU.

A Triton kernel whose programs each sum their own slice of a buffer, over and over: a buffer a
quarter of the L2 stays there after the first pass (the L2 read rate), one of 2 GB cannot (the
HBM read rate). The FlashAttention forward reads every K and V tile from L2 once per query tile,
so it asks BLOCK_M FLOPs of L2 per byte read (64 at 64-row tiles): at this rate times 64 it is
bound by L2, not by the tensor cores, where that product is under the dense peak.
Usage: python benchmarks/l2_bandwidth.py OUT_DIR
"""
from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl

from rooflab.measure.timer import time_call

from common import write


@triton.jit
def _read(X, OUT, slice_elems, passes, BLOCK: tl.constexpr):
    # program p sums elements [p * slice_elems, (p + 1) * slice_elems), `passes` times over
    base = X + tl.program_id(0).to(tl.int64) * slice_elems
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(passes):
        for i in range(0, slice_elems, BLOCK):
            acc += tl.load(base + i + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(OUT + tl.program_id(0), tl.sum(acc, 0))


def read_rate(total_bytes: int, passes: int, programs: int, block: int = 4096) -> dict:
    """Bytes per second read by ``programs`` programs, each its slice ``passes`` times."""
    slice_elems = total_bytes // 2 // programs // block * block    # bf16 elements
    x = torch.randn(programs * slice_elems, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(programs, device="cuda", dtype=torch.float32)
    fn = lambda: _read[(programs,)](x, out, slice_elems, passes, BLOCK=block, num_warps=8)  # noqa: E731
    fn()
    expect = x.float().view(programs, slice_elems).sum(1) * passes
    assert torch.allclose(out, expect, rtol=1e-3, atol=1e-2 * passes), "the read kernel is wrong"
    t = time_call(fn, warmup=3, budget_s=0.3, max_reps=200, wall=False, device="cuda")
    moved = programs * slice_elems * 2 * passes
    return {"buffer_bytes": programs * slice_elems * 2, "passes": passes, "programs": programs,
            "device_s": t.device_s, "cv": t.cv, "unstable": t.unstable, "bytes_per_s": moved / t.device_s}


def main(out_dir: str) -> None:
    props = torch.cuda.get_device_properties(0)
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    rows = [read_rate(l2 // 4, passes, sms * k) for passes in (20, 50) for k in (2, 4, 8)]
    rows += [read_rate(2 << 30, 1, sms * k) for k in (2, 4, 8)]
    best_l2 = max(r["bytes_per_s"] for r in rows if r["passes"] > 1)
    best_hbm = max(r["bytes_per_s"] for r in rows if r["passes"] == 1)
    for r in rows:
        print(r["buffer_bytes"] >> 20, "MiB x", r["passes"], r["programs"], "programs:",
              round(r["bytes_per_s"] / 1e12, 2), "TB/s, cv", round(r["cv"], 3), flush=True)
    write(out_dir, "l2_bandwidth", {
        "l2_bytes": l2, "sm_count": sms, "rows": rows, "l2_read_bytes_per_s": best_l2,
        "hbm_read_bytes_per_s": best_hbm,
        "flash_64_row_tiles_l2_bound_tflops": 64 * best_l2 / 1e12, "note": __doc__})


if __name__ == "__main__":
    main(sys.argv[1])
