"""Writes notebooks/lab1.ipynb: a guided walk through the five parts of the lab with rooflab.

The notebook is generated so its cells stay in step with the package; edit this file, then run
`python scripts/make_notebook.py`. tests/test_notebook.py executes the result on the CPU.
"""
from __future__ import annotations

import pathlib

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

md, code = new_markdown_cell, new_code_cell

CELLS = [
    md("""# Lab 1: where GPU time goes, with rooflab

This notebook walks through the five parts of the lab on whatever device you have: a GPU
(Colab, a workstation, a cluster node) or just a CPU. Every number is measured here, on your
hardware, or computed from formulas you can read in `rooflab/cost.py`.

1. **Metrics**: latency, MACs, I/O bytes; why a measurement without warm-up is noisy.
2. **Roofline**: intensity, ridge point, when GEMM turns compute-bound, why GEMV never does.
3. **A real decoder layer** (gemma-3-270m-it): prefill vs decode on the roofline.
4. **Profiler and fusion**: which kernels an op launches; GeLU unfused vs fused.
5. **Attention**: memory of standard attention vs FlashAttention."""),
    code("""import os, math
import torch
import matplotlib.pyplot as plt
from rooflab import cost, hardware, roofline, models
from rooflab.measure import time, cold_series, ceilings

QUICK = os.environ.get("ROOFLAB_QUICK") == "1"   # CI runs the notebook with small sizes
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GPU = hardware.detect()
print("device:", DEVICE, "|", GPU.name)

def show(png):
    plt.figure(figsize=(9, 6)); plt.imshow(plt.imread(png)); plt.axis("off"); plt.show()"""),
    md("""## Part 1: three numbers describe an operation

For C(M,N) = A(M,K) @ B(K,N): each of the M*N outputs needs K multiply-accumulates, and the
operation must at least read A and B and write C once. **Exercise:** write both formulas
(1 MAC = 2 FLOPs; `e` is bytes per element), then run the self-check."""),
    code("""def gemm_macs(m, k, n):
    return None   # TODO: multiply-accumulates of C(M,N) = A(M,K) @ B(K,N)

def gemm_bytes(m, k, n, e):
    return None   # TODO: bytes that must cross memory at least once, e bytes per element

from rooflab.lab.checks import check_gemm
ok, message = check_gemm(gemm_macs, gemm_bytes)
print("OK:" if ok else "NOT YET:", message)"""),
    md("""The pure-Python triple loop (`rooflab.kernels.naive.matmul`) against `torch.matmul`, and
the same `torch.matmul` run back to back **without** warm-up: the first call pays for lazy
initialisation, so a single un-warmed timing measures set-up, not the kernel."""),
    code("""from rooflab.lab import metrics
rows = metrics.naive_vs_torch((8, 16, 32) if QUICK else (16, 32, 64), device=DEVICE)
for r in rows:
    print(f"n={r['n']:3d}  naive {r['naive_median_s']*1e3:8.2f} ms   torch {r['torch_median_s']*1e6:8.1f} us   {r['speedup']:8.0f}x")
cw = metrics.cold_vs_warm(256 if QUICK else 1024, device=DEVICE)
plt.bar(range(1, len(cw["cold_samples_s"]) + 1), [s * 1e3 for s in cw["cold_samples_s"]])
plt.xlabel("run (no warm-up)"); plt.ylabel("ms"); plt.title("torch.matmul, run after run"); plt.show()"""),
    md("""## Part 2: the roofline

Arithmetic intensity = FLOPs / bytes. Below the ridge point (peak FLOP/s / bandwidth) a kernel
is memory-bound; above it, compute-bound. GEMM with M=N=K=n has intensity n/6 in fp32, GEMV
about 0.5 at every size. Pick your card with `hardware.lookup("A100")` or keep the detected one."""),
    code("""card = GPU if GPU.peak_flops_per_s else hardware.lookup("RTX A6000")
roof = roofline.Roof.of(card, "fp32")
gemm = roofline.sweep("gemm", roof, [1024, 2048, 4096, 8192])
gemv = roofline.sweep("gemv", roof, [1024, 2048, 4096, 8192])
print(f"{card.name} fp32: ridge {roof.ridge:.1f} FLOP/B; GEMM compute-bound from n = {gemm.crossover_n}; GEMV: {gemv.crossover_n}")
from rooflab.report import plots
pts = [plots.PlotPoint(p.name, p.intensity, p.attainable_flops_per_s, "predicted", fam)
       for fam, sw in (("GEMM", gemm), ("GEMV", gemv)) for p in sw.points]
plots.roofline_png("roofline.png", [roof], pts, f"GEMM vs GEMV on {card.name}")
show("roofline.png")"""),
    md("""Now the roof of **this** machine, measured (copy bandwidth and matmul peak), with real
matmuls placed on it as achieved points."""),
    code("""ceil = ceilings.get(DEVICE, quick=QUICK)
measured = ceil.hardware(hardware.detect(ceil.device_name) if DEVICE == "cuda" else None)
dt = "bf16" if "bf16" in ceil.peak_flops_per_s else "fp32"
mroof = roofline.Roof.of(measured, dt)
from rooflab.measure.achieved import hold, measure as measure_point
from rooflab.measure.dtypes import torch_dtype
tdt = torch_dtype(dt)
points = []
for n in ([256, 512] if QUICK else [512, 1024, 2048]):
    a = torch.randn(n, n, device=DEVICE, dtype=tdt)
    points.append(measure_point(torch.matmul, cost.gemm(n, n, n, dt).named(f"GEMM n={n}"), mroof,
                                a, a, device=DEVICE, budget_s=0.05))
# a point faster than the measured roof raises it (the ceiling run was slower), or says why
mroof, points, notes = hold(mroof, points, hardware.cpu_cache_bytes() if DEVICE == "cpu" else GPU.l2_bytes)
for p in points:
    print(f"{p['name']}: {p['achieved_flops_per_s']/1e12:.3f} TFLOP/s = {p['fraction_of_roof']:.0%} of the measured roof")
for note in notes:
    print(note)"""),
    md("""## Part 3: a real decoder layer

gemma-3-270m-it's configuration is embedded (no download). Every component's MACs and bytes at
prefill and decode come from `rooflab.models`; the sweep shows how decode moves right on the
roofline as the batch grows, and prefill sits far to the right."""),
    code("""from rooflab.lab import decoder
cfg = models.load("gemma-3-270m-it")
broof = roofline.Roof.of(hardware.lookup("H200") if not GPU.peak_flops_per_s else GPU, "bf16")
layer = decoder.analyze(cfg, models.Phase.decode(1, 1024), "sliding", broof)
for c in layer["components"][:8]:
    print(f"{c['name']:14s} MACs {c['macs']:>12,}  bytes {c['bytes']:>12,}  intensity {c['intensity']:6.2f}  {c['bound']}")
sw = decoder.sweeps(cfg, broof)
pts = [plots.PlotPoint(s["label"], s["intensity"], s["attainable_flops_per_s"], "predicted", s["what"]) for s in sw]
plots.roofline_png("decoder.png", [broof], pts, "gemma layer: decode B=1..64, prefill L=64..4096")
show("decoder.png")"""),
    md("""Now the real transformers layer (random weights), measured: wall time, the kernels' time
from the profiler, and two predictions from the counted ops. The plain roofline misses badly on
small kernels; adding what each kernel class costs when it does almost nothing (its floor) and
the rate of PyTorch's generic elementwise loop (broadcast, transposed and widening ops), both
measured here, brings the prediction close on a GPU (on an H200, within 25% of the profiled
kernel time in all 16 configurations of `benchmarks/decoder.py`). On a CPU the matrix-vector
products of a decode step run well below the copy bandwidth, so the prediction stays further
off there. The table lists the slowest ops: where does it miss?"""),
    code("""try:
    from rooflab.lab import layer_measure
except ImportError:
    layer_measure = None
    print("the real layer needs transformers: pip install 'rooflab[hf]'")
if layer_measure is not None:
    phase = models.Phase.decode(1, 4096 if DEVICE == "cuda" else 256)
    m = layer_measure.measure(cfg, phase, "full", ceil, DEVICE, dtype="bf16" if DEVICE == "cuda" else "fp32")
    print(f"wall {m['wall_s']*1e6:.0f} us, kernels {m['kernel_s']*1e6:.0f} us; plain roofline "
          f"{m['roofline_s']*1e6:.0f} us, with op costs {m['predicted_s']*1e6:.0f} us "
          f"({m['predicted_over_kernel']:.2f} of measured)")
    for o in m["ops"][:8]:
        print(f"{o['op'][:44]:44s} {o['class']:11s} {o['path']:10s} predicted {o['predicted_s']*1e6:7.1f} us  measured {(o['kernel_s'] or 0)*1e6:7.1f} us")"""),
    md("""## Part 4: see the kernels, then merge them

**Exercise:** write the tanh-approximated GeLU from basic torch ops,
0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), and check it. Then the profiler shows how many
kernels it launches compared with `F.gelu`."""),
    code("""def my_gelu(x):
    return None   # TODO: only torch.tanh, +, *, ** and constants

from rooflab.lab.checks import check_gelu
from rooflab.kernels.gelu import gelu_unfused
ok, message = check_gelu(my_gelu)
print("OK:" if ok else "NOT YET:", message)
if not ok:
    my_gelu = gelu_unfused   # rooflab's version, so the rest of the notebook runs

from rooflab.measure.profile import profile
x = torch.randn(1 << (18 if QUICK else 22), device=DEVICE)
for name, fn in (("my_gelu", my_gelu), ("F.gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))):
    p = profile(fn, x, iters=3, device=DEVICE)
    t = time(fn, x, device=DEVICE)
    print(f"{name:8s} {t.median_s*1e6:8.1f} us  {p.launches_per_iter:.0f} kernels/call: {[k.name[:40] for k in p.kernels][:4]}")"""),
    md("""## Part 5: attention's memory

Standard attention materialises the N x N score matrix, so its extra memory grows with slope 2
on a log-log plot; FlashAttention-style kernels (SDPA's flash backend, rooflab's Triton kernel on
a GPU) keep it in on-chip memory and grow with slope 1."""),
    code("""from rooflab.lab import attention
if DEVICE == "cuda":
    seqs, kw = [512, 1024, 2048, 4096] if QUICK else [512 << i for i in range(6)], dict(heads=16, head_dim=128, dtype="fp16")
else:
    seqs, kw = [128, 256, 512] if QUICK else [256, 512, 1024, 2048], dict(heads=4, head_dim=64, dtype="fp32")
res = attention.sweep(seqs, ("standard", "flash", "triton"), device=DEVICE, **kw)
for impl in ("standard", "flash", "triton"):
    pts = [(r["seq"], r["extra_peak_bytes"]) for r in res["rows"] if r["impl"] == impl and r["status"] == "ok"]
    if pts:
        plt.loglog(*zip(*pts), marker="o", label=impl)
plt.xlabel("sequence length"); plt.ylabel("extra peak bytes"); plt.legend(); plt.show()
print("memory slopes:", {k: round(v, 2) for k, v in res["analysis"]["memory_slope"].items() if v})
print("not run here:", res["skipped"])"""),
    md("""## The whole lab in one command

`rooflab lab` runs all of this (and more: the measured layer, compile modes, every SDPA
backend) and writes an HTML report with interactive plots: `rooflab-report/index.html`."""),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook(cells=CELLS)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


if __name__ == "__main__":
    path = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "lab1.ipynb"
    nbformat.write(build(), str(path))
    print(f"wrote {path}")
