"""Issue 'fusion': GeLU four ways at 64M elements (fp32, bf16), the MLP under compile modes, and a
decode step eager vs in a CUDA graph."""
from __future__ import annotations

import sys

from rooflab import models as M
from rooflab.studies import fusion
from rooflab.studies import layer_measure as LM
from rooflab.measure import op_classes as OC
from rooflab.measure import ceilings as CE

from common import write


def gelu_tuning(bw: float) -> list[dict]:
    """Block size and warps of the Triton GeLU against F.gelu, same run, 64M and 256M elements."""
    import torch

    from rooflab.kernels import gelu as G
    from rooflab.measure.timer import time_call

    rows = []
    for dt, tdt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for numel in (1 << 26, 1 << 28):
            x = torch.randn(numel, device="cuda", dtype=tdt)
            out = torch.empty_like(x)
            nbytes = 2 * numel * x.element_size()
            ref = time_call(G.gelu_torch, x, warmup=5, reps=50, device="cuda").median_s
            for block in (1024, 2048, 4096, 8192):
                for warps in (4, 8, 16):
                    t = time_call(G.gelu_triton, x, out, block, warps, warmup=5, reps=50,
                                  device="cuda").median_s
                    rows.append({"dtype": dt, "numel": numel, "block": block, "num_warps": warps,
                                 "device_s": t, "fgelu_time_s": ref,
                                 "throughput_over_fgelu": ref / t,
                                 "fraction_of_copy_bw": nbytes / t / bw,
                                 "fgelu_fraction_of_copy_bw": nbytes / ref / bw})
            best = max((r for r in rows if r["dtype"] == dt and r["numel"] == numel),
                       key=lambda r: r["fraction_of_copy_bw"])
            print("gelu best", dt, numel, best)
    return rows


def main(out_dir: str) -> None:
    ceil = CE.get("cuda")
    bw = ceil.mem_bandwidth_bytes_per_s
    gelu, summary = {}, {}
    for dt in ("fp32", "bf16"):
        g = fusion.gelu_study(1 << 26, dt, "cuda", bw, f"{out_dir}/traces")
        gelu[dt] = g
        rows = {r["variant"]: r for r in g["rows"] if "device_s" in r}
        tri, ref = rows["rooflab Triton kernel"], rows["F.gelu (PyTorch fused)"]
        unf = rows["unfused (basic ops)"]
        summary[dt] = {
            "triton_throughput_over_fgelu": ref["device_s"] / tri["device_s"],
            "triton_fraction_of_copy_bw": tri["fraction_of_copy_bw"],
            "unfused_over_fused_time": unf["device_s"] / ref["device_s"],
            "kernels": {k: r["kernels_per_call"] for k, r in rows.items()},
            "targets_met": ref["device_s"] / tri["device_s"] >= 0.95
            and tri["fraction_of_copy_bw"] >= 0.90,
        }
    tuning = gelu_tuning(bw)
    mlp = fusion.mlp_study(640, 2048, 2048, "bf16", "cuda", fusion.MLP_MODES, f"{out_dir}/traces")
    cfg = M.load("gemma-3-270m-it")
    costs = OC.measure_op_costs("cuda")
    step = {mode: LM.measure_layer(cfg, M.Phase.decode(1, 4096), "full", ceil, "cuda",
                             graph=mode == "graph", costs=costs)
            for mode in ("eager", "graph")}
    write(out_dir, "fusion", {"gelu": gelu, "summary": summary, "tuning": tuning, "mlp": mlp,
                              "decode_step": step})
    print(summary)
    for r in mlp["rows"]:
        print(r["mode"], "device", r.get("device_s"), "wall", r.get("wall_s"), "kernel",
              r.get("kernel_s"), r.get("kernels_per_call"), r.get("first_call_s"), r.get("error"))
    for mode, s in step.items():
        print(mode, "wall", s["wall_s"], "device", s["device_s"], "kernel", s["kernel_s"],
              "gaps", s["timeline"])


if __name__ == "__main__":
    main(sys.argv[1])
