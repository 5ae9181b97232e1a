"""Writes notebooks/lab1.ipynb (to hand in), notebooks/lab1_solutions.ipynb (for instructors)
and notebooks/lab1_colab.ipynb (lab1 with a first cell that installs rooflab where it is
missing, as on Colab): the lab's questions in its order and numbering, each with a cell to work
in (a TODO checked against rooflab's public self-checks), rooflab's measurement, and an answer
cell.

All come from this one source, so they stay in step with the package; edit this file, then run
`python scripts/make_notebook.py` (all; `--solutions` or `--colab` for that one alone).
tests/test_notebook.py executes each on the CPU.
"""
from __future__ import annotations

import pathlib
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

md, code = new_markdown_cell, new_code_cell


def answer(qid: str) -> nbformat.NotebookNode:
    return md(f"**Your answer ({qid}):** _write it here, from the numbers above._ "
              f"(`rooflab lab` writes its own, from your device's numbers, as "
              f"`results.json[\"answers\"][\"{qid}\"]`.)")


def cells(solutions: bool) -> list:
    def exercise(student: str, solution: str) -> nbformat.NotebookNode:
        return code(solution if solutions else student)

    return [
        md("""# Lab 1: where GPU time goes, with rooflab

One section per question of the lab, in its numbering. Each has a cell to work in (the TODOs;
run the self-check under it), rooflab's measurement on your hardware, and a cell for your
answer. It runs on whatever device you have: a GPU or just a CPU.

1. **Metrics** (1.1, 1.2) 2. **Roofline** (2.1, 2.2) 3. **A real decoder layer** (3.1-3.4)
4. **Profiler and fusion** (4.1-4.4.2) 5. **Attention** (5.1, 5.2)"""),
        code("""import os, math
import torch
import matplotlib.pyplot as plt
from rooflab import cost, hardware, roofline, models
from rooflab.measure import time, cold_series, ceilings
from rooflab.lab.selfcheck import check_one

QUICK = os.environ.get("ROOFLAB_QUICK") == "1"   # CI runs the notebook with small sizes
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GPU = hardware.detect()
print("device:", DEVICE, "|", GPU.name)

def report(ok, message):
    print("OK:" if ok else "NOT YET:", message)

def show(png):
    plt.figure(figsize=(9, 6)); plt.imshow(plt.imread(png)); plt.axis("off"); plt.show()"""),
        # --- part 1 ---
        md("""## Part 1: three numbers describe an operation

### 1.1 MACs, I/O and latency of a GEMM
For C(M,N) = A(M,K) @ B(K,N): each of the M*N outputs needs K multiply-accumulates (1 MAC =
2 FLOPs), and the operation must at least read A and B and write C once (`e` bytes per
element). Write both formulas, then compare the pure-Python triple loop with `torch.matmul`."""),
        exercise("""def gemm_macs(m, k, n):
    return None   # TODO: multiply-accumulates of C(M,N) = A(M,K) @ B(K,N)

def gemm_bytes(m, k, n, e):
    return None   # TODO: bytes that must cross memory at least once, e bytes per element""",
                 """def gemm_macs(m, k, n):
    return m * k * n

def gemm_bytes(m, k, n, e):
    return e * (m * k + k * n + m * n)"""),
        code("""from rooflab.lab.checks import check_gemm
report(*check_gemm(gemm_macs, gemm_bytes))
from rooflab.lab import metrics
rows = metrics.naive_vs_torch((8, 16, 32) if QUICK else (16, 32, 64), device=DEVICE)
for r in rows:
    print(f"n={r['n']:3d}  naive {r['naive_median_s']*1e3:8.2f} ms   torch {r['torch_median_s']*1e6:8.1f} us   {r['speedup']:8.0f}x")"""),
        answer("1.1"),
        md("""### 1.2 The same call, run after run, without warm-up
What do you see, and which causes does the data show?"""),
        code("""cw = metrics.cold_vs_warm(256 if QUICK else 1024, device=DEVICE)
plt.bar(range(1, len(cw["cold_samples_s"]) + 1), [s * 1e3 for s in cw["cold_samples_s"]])
plt.xlabel("run (no warm-up)"); plt.ylabel("wall time (ms)"); plt.title("torch.matmul, run after run"); plt.show()
print(f"first call {cw['first_call_s']*1e3:.2f} ms, settled {cw['settled_s']*1e3:.2f} ms; warm CV {cw['warm']['cv']:.1%}")"""),
        answer("1.2"),
        # --- part 2 ---
        md("""## Part 2: the roofline

### 2.1 When does GEMM turn compute-bound?
Arithmetic intensity = FLOPs / bytes; the ridge point = peak FLOP/s / bandwidth. Below it a
kernel is memory-bound, above it compute-bound. For fp32 on the card below (change it to
yours), give the ridge and the smallest n (M = N = K = n) at which GEMM is compute-bound."""),
        code("""card = GPU if GPU.peak_flops_per_s else hardware.lookup("RTX A6000")
print(card.name, "fp32 peak", card.peak("fp32"), "FLOP/s; bandwidth", card.mem_bandwidth_bytes_per_s, "B/s")"""),
        exercise("""my_ridge = None       # TODO: FLOP per byte
my_crossover_n = None # TODO: the smallest integer n""", """my_ridge = card.peak("fp32") / card.mem_bandwidth_bytes_per_s
my_crossover_n = math.ceil(6 * my_ridge)   # intensity of fp32 GEMM: 2n^3 / (4 * 3n^2) = n/6"""),
        code("""report(*check_one("2.1.ridge", my_ridge, gpu=card.name, dtype="fp32"))
report(*check_one("2.1.crossover_n", my_crossover_n, gpu=card.name, dtype="fp32"))
roof = roofline.Roof.of(card, "fp32")
gemm = roofline.sweep("gemm", roof, [1024, 2048, 4096, 8192])
gemv = roofline.sweep("gemv", roof, [1024, 2048, 4096, 8192])
print(f"{card.name} fp32: ridge {roof.ridge:.1f} FLOP/B; GEMM compute-bound from n = {gemm.crossover_n}; GEMV: {gemv.crossover_n}")
from rooflab.report import plots
pts = [plots.PlotPoint(p.name, p.intensity, p.attainable_flops_per_s, "predicted", fam)
       for fam, sw in (("GEMM", gemm), ("GEMV", gemv)) for p in sw.points]
plots.roofline_png("roofline.png", [roof], pts, f"GEMM vs GEMV on {card.name}")
show("roofline.png")"""),
        md("""The roof of **this** machine, measured (copy bandwidth and matmul peak), with real
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
        answer("2.1"),
        md("""### 2.2 GEMV
Give GEMV's intensity (M = K = 4096, fp32) and say where it sits against the ridges."""),
        exercise("""my_gemv_intensity = None   # TODO: FLOPs / bytes of y(M) = A(M,K) @ x(K)""",
                 """n, e = 4096, 4
my_gemv_intensity = 2 * n * n / (e * (n * n + n + n))"""),
        code("""report(*check_one("2.2.gemv_intensity", my_gemv_intensity, n=4096, dtype="fp32"))"""),
        answer("2.2"),
        # --- part 3 ---
        md("""## Part 3: a real decoder layer

gemma-3-270m-it's configuration is embedded (no download). Every component's MACs and bytes
come from `rooflab.models`, under the conventions at the top of `rooflab/cost.py`.

### 3.1, 3.2 MACs and I/O of attention
At prefill, batch 1, 1024 tokens: the MACs of QK^T and PV, and their eager I/O (the score
matrix written, read by softmax, read by PV). Write your assumptions as the settings."""),
        exercise("""my_attention_macs = None   # TODO
my_attention_bytes = None  # TODO (eager)""", """cfg = models.load("gemma-3-270m-it")
pairs = 1 * cfg.heads * 1024 * 1024                 # every (query, key) pair, dense
my_attention_macs = 2 * pairs * cfg.head_dim        # QK^T and PV
e, q = 2, 1 * cfg.heads * 1024 * cfg.head_dim       # bf16; q = o
kv = 1 * cfg.kv_heads * 1024 * cfg.head_dim
my_attention_bytes = e * ((q + kv + pairs) + 5 * pairs + (pairs + kv + q))"""),
        code("""settings = dict(model="gemma-3-270m-it", phase="prefill", batch=1, seq=1024)
report(*check_one("3.1.attention_macs", my_attention_macs, **settings))
report(*check_one("3.2.attention_bytes", my_attention_bytes, **settings))
from rooflab.lab import decoder
cfg = models.load("gemma-3-270m-it")
broof = roofline.Roof.of(hardware.lookup("H200") if not GPU.peak_flops_per_s else GPU, "bf16")
layer = decoder.analyze(cfg, models.Phase.prefill(1, 1024), "sliding", broof)
for c in layer["components"]:
    print(f"{c['name']:14s} MACs {c['macs']:>14,}  bytes {c['bytes']:>12,}  intensity {c['intensity']:7.2f}  {c['bound']}")"""),
        answer("3.1"), answer("3.2"),
        md("""### 3.3 The real layer, measured
The transformers layer (random weights): wall time, the kernels' time from the profiler, and
two predictions from the counted ops: the plain roofline, and the roofline plus what each
kernel class costs when it does almost nothing, measured here. Where does it miss?"""),
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
        answer("3.3"),
        md("""### 3.4 Prefill and decode on the roofline
Give the MLP's intensity at decode, batch 1, 1024 cached tokens (eager bytes). Then: 3.4.1 why
prefill and decode differ (the query's shape); 3.4.2 how the point moves as the decode batch
goes 1 -> 64; 3.4.3 how the MLP point and the whole-layer point move as prefill length goes
64 -> 4096 at batch 1."""),
        exercise("""my_mlp_intensity = None   # TODO: FLOPs / bytes of gate, up, act, mul, down""",
                 """mlp = models.groups(models.layer_costs(cfg, models.Phase.decode(1, 1024), "sliding"))["mlp"]
my_mlp_intensity = mlp.flops / mlp.bytes"""),
        code("""report(*check_one("3.4.mlp_intensity", my_mlp_intensity, model="gemma-3-270m-it", phase="decode", batch=1, kv_len=1024))
sw = decoder.sweeps(cfg, broof, prefill_batch=1)
for s in sw:
    print(f"{s['label']:16s} {s['what']:6s} intensity {s['intensity']:7.1f}  {s['bound']}")
pts = [plots.PlotPoint(s["label"], s["intensity"], s["attainable_flops_per_s"], "predicted", s["what"]) for s in sw]
plots.roofline_png("decoder.png", [broof], pts, "gemma layer: decode B=1..64, prefill L=64..4096 (B=1)")
show("decoder.png")"""),
        answer("3.4.1"), answer("3.4.2"), answer("3.4.3"),
        # --- part 4 ---
        md("""## Part 4: see the kernels, then merge them

### 4.1 Which kernel does one torch.matmul launch?"""),
        code("""from rooflab.measure.profile import profile
a = torch.randn(1024, 1024, device=DEVICE)
p = profile(torch.matmul, a, a, iters=3, device=DEVICE, trace_path="matmul_trace.json")
print(f"{p.launches_per_iter:.0f} launch(es) per call:", [(k.name[:60], k.calls) for k in p.kernels])"""),
        answer("4.1"),
        md("""### 4.2 The MLP's kernels and its Chrome trace
Open `mlp_trace.json` in https://ui.perfetto.dev: the table shows totals, the timeline the
gaps between kernels."""),
        code("""from rooflab.lab.fusion import GatedMLP
mlp_mod = GatedMLP(640, 2048).to(DEVICE)
xm = torch.randn(64 if QUICK else 2048, 640, device=DEVICE)
with torch.no_grad():
    p = profile(mlp_mod, xm, iters=3, device=DEVICE, trace_path="mlp_trace.json")
print(f"{p.launches_per_iter:.0f} kernels per call:", [k.name[:50] for k in p.kernels][:6])"""),
        answer("4.2"),
        md("""### 4.3 GeLU from basic ops against F.gelu
Write the tanh-approximated GeLU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), from basic
torch ops; then the profiler shows how many kernels it launches compared with `F.gelu`."""),
        exercise("""def my_gelu(x):
    return None   # TODO: only torch.tanh, +, *, ** and constants""", """def my_gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))"""),
        code("""from rooflab.lab.checks import check_gelu
from rooflab.kernels.gelu import gelu_unfused
ok, message = check_gelu(my_gelu)
report(ok, message)
if not ok:
    my_gelu = gelu_unfused   # rooflab's version, so the rest of the notebook runs
x = torch.randn(1 << (18 if QUICK else 22), device=DEVICE)
for name, fn in (("my_gelu", my_gelu), ("F.gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))):
    p = profile(fn, x, iters=3, device=DEVICE)
    t = time(fn, x, device=DEVICE)
    print(f"{name:8s} {t.device_s*1e6:8.1f} us  {p.launches_per_iter:.0f} kernels/call: {[k.name[:40] for k in p.kernels][:4]}")"""),
        answer("4.3"),
        md("""### 4.4 torch.compile, and 4.4.2 CUDA graphs
What does torch.compile fuse, in the GeLU and in the MLP (max-autotune-no-cudagraphs), and what
do CUDA graphs (max-autotune, under torch.no_grad) change? On a CPU, the default mode stands in
and CUDA graphs cannot run."""),
        code("""from rooflab.lab import fusion
modes = ("eager", "max-autotune-no-cudagraphs", "max-autotune") if DEVICE == "cuda" else ("eager", "default")
study = fusion.mlp_study(640, 2048, 64 if QUICK else 2048, "bf16" if DEVICE == "cuda" else "fp32", DEVICE, modes)
for r in study["rows"]:
    if "error" in r:
        print(r["mode"], "not run:", r["error"])
    else:
        print(f"{r['mode']:28s} device {r['device_s']*1e6:8.1f} us  wall {r['wall_s']*1e6:8.1f} us  {r['kernels_per_call']:.0f} kernels: {[k['name'][:36] for k in r['kernels']][:3]}")"""),
        answer("4.4"), answer("4.4.2"),
        # --- part 5 ---
        md("""## Part 5: attention's memory

### 5.1 Standard attention's memory
Its extra memory, from 512 tokens up: what is its complexity, where does it become a problem on
your GPU, what is its main overhead, and which LLM scenario does it hurt? Give the length at
which it would run out on an A100-80GB (B=1, 16 heads, 10 bytes per score in fp16)."""),
        exercise("""my_oom_seq = None   # TODO: the largest N whose N x N scores fit""",
                 """my_oom_seq = math.isqrt(hardware.lookup("A100-80GB").mem_bytes // (10 * 1 * 16))"""),
        code("""report(*check_one("5.1.oom_seq", my_oom_seq, gpu="A100-80GB", batch=1, heads=16, bytes_per_score=10))
from rooflab.lab import attention
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
        answer("5.1"),
        md("""### 5.2 FlashAttention against standard attention
Latency and memory of the fused kernels against standard attention at each length (flash-attn's
`flash_attn_func` where installed; otherwise SDPA's flash backend and rooflab's Triton kernel
stand in). Does the lab's "2-4x faster" hold here?"""),
        code("""ok = [r for r in res["rows"] if r["status"] == "ok"]
std = {r["seq"]: r for r in ok if r["impl"] == "standard"}
for r in ok:
    if r["impl"] != "standard" and r["seq"] in std:
        s = std[r["seq"]]
        print(f"{r['impl']:8s} N={r['seq']:6d}: {s['device_s']/r['device_s']:5.1f}x faster, "
              f"{s['extra_peak_bytes']/max(r['extra_peak_bytes'], 1):6.0f}x less extra memory")"""),
        answer("5.2"),
        md("""## Bonus, and the whole lab in one command

`rooflab lab` runs all of this and more (the measured decode layer eager and in a CUDA graph,
every SDPA backend, rooflab's Triton FlashAttention) and answers every question by its number,
bonus items included (`B.attention_macs`, `B.attention_io`, `B.decode_profile`,
`B.cuda_graph_profile`, `B.flash_vs_sdpa`, `B.flash_analysis`, `B.flash_decoding`, and
`B.tensor_parallel` where two GPUs are), from your device's numbers, in
`rooflab-report/index.html` and `results.json`. `rooflab check --template` writes the computable
questions as a file to fill in; `rooflab check answers.json` checks it."""),
    ]


SETUP = md("""## Setup (Colab or any fresh machine)

The next cell installs rooflab into this kernel when it is not importable yet, and does nothing
where it is. Colab already has torch, Triton and transformers. rooflab is installed from
`ROOFLAB_SOURCE` (a git URL of your copy of the repository, or the path of a wheel you
uploaded, e.g. `ROOFLAB_SOURCE=/content/rooflab-0.1.0-py3-none-any.whl`), else by its name.""")

SETUP_CODE = code("""import importlib.util, os, subprocess, sys
if importlib.util.find_spec("rooflab") is None:
    source = os.environ.get("ROOFLAB_SOURCE", "rooflab")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", source + "[hf]"
                           if not source.endswith(".whl") else source])
import rooflab
print("rooflab from", os.path.dirname(rooflab.__file__))""")


def build(solutions: bool = False, colab: bool = False) -> nbformat.NotebookNode:
    body = cells(solutions)
    nb = new_notebook(cells=[body[0], SETUP, SETUP_CODE, *body[1:]] if colab else body)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


VARIANTS = {"lab1.ipynb": {}, "lab1_solutions.ipynb": {"solutions": True},
            "lab1_colab.ipynb": {"colab": True}}
PATHS = {False: "lab1.ipynb", True: "lab1_solutions.ipynb"}  # by `solutions`

if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
    chosen = {"--solutions": "lab1_solutions.ipynb", "--colab": "lab1_colab.ipynb"}
    names = [chosen[a] for a in sys.argv[1:] if a in chosen] or list(VARIANTS)
    for name in names:
        nbformat.write(build(**VARIANTS[name]), str(root / name))
        print(f"wrote {root / name}")
