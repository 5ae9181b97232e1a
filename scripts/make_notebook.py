"""Writes notebooks/lab1.ipynb (the student's, to hand in), notebooks/lab1_solutions.ipynb (for
instructors) and notebooks/lab1_colab.ipynb (lab1 with a first cell that installs rooflab on
Colab): one section per question of the lab, in its order and numbering
(../shared/seed/lab1-notebook.md is the spec), each with the student's cell at the lab's settings
(a TODO), a self-check under it that names the slip without giving the answer, rooflab's own
measurement and answer for the same question, and a cell for the student's answer.

All come from this one source; edit it, then run `python scripts/make_notebook.py`.
tests/test_notebook.py executes each on the CPU and checks every drawing cell shows its image.
"""
from __future__ import annotations

import pathlib
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

md, code = new_markdown_cell, new_code_cell


def answer(qid: str) -> nbformat.NotebookNode:
    return md(f"**Your answer ({qid}):** _write it here, from the numbers above._")


def cells(solutions: bool) -> list:
    def todo(student: str, solution: str) -> nbformat.NotebookNode:
        return code(solution if solutions else student)

    return [
        md("""# Lab 1: efficient AI fundamentals, with rooflab

One section per question of the lab, in its numbering (1.1 ... 5.2 and the bonus items). In each:
**your cell** (the TODO, at the lab's settings), a **self-check** under it that says what is
wrong without giving the answer away (`reveal=True` shows rooflab's value), **rooflab's own
measurement** of the same question on your device, with what it adds (a measured roof, achieved
points, predictions), and a cell for **your answer**. It runs on a GPU or on a CPU alone; where a
CPU cannot do what the lab asks, the cell says which setting it used instead."""),
        code("""import math, os, time
import torch
import matplotlib.pyplot as plt
from rooflab import cost, hardware, roofline, models
from rooflab.lab import checks
from rooflab.lab.notebook import Lab, report
from rooflab.lab.selfcheck import check_one
from rooflab.measure import peak_memory

QUICK = os.environ.get("ROOFLAB_QUICK") == "1"   # CI runs the notebook with small sizes
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
lab = Lab(DEVICE, quick=QUICK)                   # rooflab's own run, beside yours
print("device:", DEVICE, "|", torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU")

def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()"""),
        # ---------------------------------------------------------------- part 1
        md("""## Part 1: basic metrics

### 1.1 A GEMM as a triple loop
Write `gemm(A, B)` for A (N, K) and B (K, M) with three nested loops. No matmul API of any kind
(`@`, `torch.matmul`, `.mm`, `bmm`, `einsum`, `tensordot`, `addmm`, `baddbmm`): the check reads
your function's code, then compares it with `A @ B` on odd shapes."""),
        todo("""def gemm(A, B):
    N, K = A.shape
    M = B.shape[1]
    C = torch.zeros(N, M, dtype=A.dtype)
    # TODO: C[i, j] = sum over p of A[i, p] * B[p, j]
    return C""", """def gemm(A, B):
    N, K = A.shape
    M = B.shape[1]
    C = torch.zeros(N, M, dtype=A.dtype)
    for i in range(N):
        for j in range(M):
            acc = 0.0
            for p in range(K):
                acc += A[i, p] * B[p, j]
            C[i, j] = acc
    return C"""),
        code("""report(*checks.check_gemm(gemm))"""),
        code("""lab.answer("1.1", "p1_latency")   # rooflab: its own triple loop at the lab's sizes, in its time budget"""),
        answer("1.1"),
        md("""### 1.2 Timing, with and without warm-up
Write `latency(fn, warmup=10, repeat=100)`: call `fn()` `warmup` times untimed, then return the
mean seconds of `repeat` timed calls (CUDA events on a GPU, `time.perf_counter` on a CPU).
Then time `torch.matmul` several times in a row with **no** warm-up, and describe what you see."""),
        todo("""def latency(fn, warmup=10, repeat=100):
    # TODO
    return None""", """def latency(fn, warmup=10, repeat=100):
    for _ in range(warmup):
        fn()
    if DEVICE == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / repeat
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat"""),
        code("""ok, why = checks.check_latency(latency)
report(ok, why)
if not ok:   # rooflab's timer stands in, so the rest of the notebook runs
    from rooflab.measure import time_call as _rooflab_time
    latency = lambda fn, warmup=10, repeat=100: _rooflab_time(fn, warmup=warmup, reps=repeat, device=DEVICE).mean_s
A = torch.randn(256 if QUICK else 1024, 256 if QUICK else 1024, device=DEVICE)
runs = [latency(lambda: A @ A, warmup=0, repeat=1) for _ in range(8)]   # no warm-up
plt.bar(range(1, 9), [r * 1e3 for r in runs])
plt.xlabel("run (no warm-up)"); plt.ylabel("ms"); plt.title("torch.matmul, run after run"); plt.show()"""),
        md("""The triple loop against `torch.matmul` at the lab's sizes (warm-up 2, repeat 5). The loop's
time grows as n^3: a size whose predicted time does not fit the budget is skipped, and said."""),
        code("""sizes, budget_s = ((16, 32, 64), 3.0) if QUICK else ((64, 128, 256, 512), 60.0)
if not checks.check_gemm(gemm)[0]:   # rooflab's triple loop stands in
    from rooflab.kernels import naive
    gemm = lambda A, B: torch.tensor(naive.matmul(A.tolist(), B.tolist()))
rows, spent, last = [], 0.0, None
for n in sizes:
    guess = last[1] * (n / last[0]) ** 3 * 7 if last else 0.0
    if guess > budget_s - spent:
        print(f"n = {n}: skipped, predicted {guess:.0f} s for 7 runs, past the {budget_s:.0f} s budget")
        continue
    A, B = torch.randn(n, n), torch.randn(n, n)
    t_loop = latency(lambda: gemm(A, B), warmup=2, repeat=5)
    spent += 7 * t_loop
    last = (n, t_loop)
    Ad, Bd = A.to(DEVICE), B.to(DEVICE)
    rows.append((n, t_loop, latency(lambda: Ad @ Bd, warmup=2, repeat=5)))
    print(f"n = {n}: loop {t_loop * 1e3:.1f} ms, torch.matmul {rows[-1][2] * 1e6:.1f} us")
plt.loglog([r[0] for r in rows], [r[1] for r in rows], "o-", label="triple loop")
plt.loglog([r[0] for r in rows], [r[2] for r in rows], "o-", label=f"torch.matmul ({DEVICE})")
plt.xlabel("n"); plt.ylabel("seconds"); plt.legend(); plt.show()"""),
        code("""lab.answer("1.2", "p1_cold")   # rooflab: cold vs warm, checked against an independent clock"""),
        answer("1.2"),
        md("""### 1.3 MACs
`gemm_mac(A, B) -> int`: the multiply-accumulates of A (N, K) @ B (K, M), whatever the dtype
(1 MAC = 2 FLOPs). A GEMV is M = 1."""),
        todo("""def gemm_mac(A, B):
    return None   # TODO""", """def gemm_mac(A, B):
    (N, K), M = A.shape, B.shape[1]
    return N * K * M"""),
        code("""report(*checks.check_gemm_mac(gemm_mac))
lab.answer("1.3")"""),
        answer("1.3"),
        md("""### 1.4 I/O
`gemm_io(A, B) -> int`: the bytes that must cross memory at least once: read A and B, write C
(fp32 in the lab's checks)."""),
        todo("""def gemm_io(A, B):
    return None   # TODO""", """def gemm_io(A, B):
    (N, K), M = A.shape, B.shape[1]
    return A.element_size() * (N * K + K * M + N * M)"""),
        code("""report(*checks.check_gemm_io(gemm_io))
lab.answer("1.4")"""),
        answer("1.4"),
        # ---------------------------------------------------------------- part 2
        md("""## Part 2: the roofline

Intensity = FLOPs / bytes; ridge = peak FLOP/s / peak bandwidth. Left of the ridge an operation
is memory-bound (attainable = bandwidth x intensity), right of it compute-bound (the peak).

### 2.1.1 GEMM rooflines, N = 1024 ... 8192, fp32
Set `gpu_name` to your card (`rooflab specs` lists them). Write the point of an fp32 GEMM with
M = N = K = n on a roof."""),
        code("""gpu_name = "RTX A6000"   # the lab's default: change it to your card
card = hardware.lookup(gpu_name)
peak, bw = card.peak("fp32"), card.mem_bandwidth_bytes_per_s
print(f"{card.name}: fp32 peak {peak / 1e12:.1f} TFLOP/s, {bw / 1e9:.0f} GB/s  ({card.source})")"""),
        todo("""def gemm_roofline_point(n, peak_flops_per_s, bandwidth_bytes_per_s):
    intensity = None    # TODO: FLOPs / bytes
    attainable = None   # TODO: FLOP/s on the roof at that intensity
    return intensity, attainable""", """def gemm_roofline_point(n, peak_flops_per_s, bandwidth_bytes_per_s):
    intensity = 2 * n ** 3 / (4 * 3 * n * n)
    return intensity, min(peak_flops_per_s, bandwidth_bytes_per_s * intensity)"""),
        code("""ok, why = checks.check_roofline(gemm_roofline_point, card.name)
report(ok, why)
point = gemm_roofline_point if ok else (lambda n, p, b: (lambda c: (c.intensity, min(p, b * c.intensity)))(cost.gemm(n, n, n, "fp32")))
xs = [2 ** e for e in range(-2, 12)]
plt.loglog(xs, [min(peak, bw * x) for x in xs], "k-", label=f"{card.name} fp32 roof")
for n in (1024, 2048, 4096, 8192):
    i, perf = point(n, peak, bw)
    plt.loglog([i], [perf], "o", label=f"GEMM N={n}")
plt.axvline(peak / bw, ls=":", c="gray")
plt.xlabel("FLOP / byte"); plt.ylabel("FLOP/s"); plt.legend(fontsize=7); plt.show()"""),
        code("""lab.answer("2.1.1", "p2_gemm_gemv", "p2_measured")   # rooflab: and real matmuls on the measured roof of this device"""),
        answer("2.1.1"),
        md("""### 2.1.2 How large must N be on an A6000 (fp32) to be compute-bound?
Give the smallest integer n, and the derivation in your answer."""),
        todo("""my_ridge = None        # TODO: FLOP per byte
my_crossover_n = None  # TODO: the smallest integer n""", """my_ridge = peak / bw
my_crossover_n = math.ceil(6 * my_ridge)   # intensity of an fp32 GEMM is n/6"""),
        code("""report(*check_one("2.1.2.ridge", my_ridge, gpu=card.name, dtype="fp32"))
report(*check_one("2.1.2.crossover_n", my_crossover_n, gpu=card.name, dtype="fp32"))
lab.answer("2.1.2")"""),
        answer("2.1.2"),
        md("""### 2.2 GEMV
The same for y = A x, M = K = n: its intensity at n = 4096 (fp32), and does it ever cross?"""),
        todo("""my_gemv_intensity = None   # TODO""", """n = 4096
my_gemv_intensity = 2 * n * n / (4 * (n * n + n + n))"""),
        code("""report(*check_one("2.2.gemv_intensity", my_gemv_intensity, n=4096, dtype="fp32"))
lab.answer("2.2")"""),
        answer("2.2"),
        # ---------------------------------------------------------------- part 3
        md("""## Part 3: a gemma-3-270m-it decoder layer

gemma-3-270m-it's configuration is embedded in rooflab (no download): hidden 640, intermediate
2048, 4 heads of 256, 1 KV head. Every layer is treated as full attention here, as in the lab.

### 3.1 Attention from scratch, and its MACs
`scaled_dot_product_attention(q, k, v, attn_mask=None)` in fp32: softmax(q k^T / sqrt(D)) v, no
SDPA call. Then `calc_attn_mac(B, H, Lq, Lkv, D)`: Q K^T and P V (softmax has no MAC)."""),
        todo("""def scaled_dot_product_attention(q, k, v, attn_mask=None):
    return None   # TODO

def calc_attn_mac(B, H, Lq, Lkv, D):
    return None   # TODO""", """def scaled_dot_product_attention(q, k, v, attn_mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v

def calc_attn_mac(B, H, Lq, Lkv, D):
    return 2 * B * H * Lq * Lkv * D"""),
        code("""ok, why = checks.check_sdpa(scaled_dot_product_attention)
report(ok, why)
if not ok:   # rooflab's standard attention stands in, for part 5
    from rooflab.kernels.flash_attention import standard_attention
    scaled_dot_product_attention = lambda q, k, v, attn_mask=None: standard_attention(q, k, v, False)
report(*checks.check_attn_mac(calc_attn_mac))
lab.answer("3.1")"""),
        answer("3.1"),
        md("""### 3.2 Attention's I/O
`calc_attn_io(B, H, Lq, Lkv, D, ...)` in bytes: Q K^T reads Q and K and writes S; softmax moves
5 x B H Lq Lkv elements (the lab's hint); P V reads P and V and writes O; no separate term for the
scaling. Write your assumptions as parameters: bytes per element (4: fp32), softmax passes, and
fused (Q, K, V, O cross memory once, no score matrix)."""),
        todo("""def calc_attn_io(B, H, Lq, Lkv, D, bytes_per_elem=4, softmax_passes=5, fused=False):
    return None   # TODO""", """def calc_attn_io(B, H, Lq, Lkv, D, bytes_per_elem=4, softmax_passes=5, fused=False):
    q = o = B * H * Lq * D
    k = v = B * H * Lkv * D
    s = B * H * Lq * Lkv
    if fused:
        return bytes_per_elem * (q + k + v + o)
    return bytes_per_elem * ((q + k + s) + softmax_passes * s + (s + v + o))"""),
        code("""report(*checks.check_attn_io(calc_attn_io))
lab.answer("3.2")"""),
        answer("3.2"),
        md("""### 3.3 The layer measured (no questions)
The lab times a larger pseudo-Gemma layer at prefill and decode. rooflab measures the real
transformers gemma layer (random weights): wall time, the kernels' time from the profiler, and
two predictions from the counted ops: the plain roofline, and the roofline plus the measured
cost of each kind of small kernel."""),
        code("""lab.answer("3.3", "p3_measured")"""),
        answer("3.3"),
        md("""### 3.4 The MLP on the roofline
The worked example, x (B, L, D), weights (I, D), bf16: MACs 3 B L D I; FLOPs 6 B L D I + 9 B L I
(GeLU 8 an element, the gate x up product 1); I/O 2 (3 B L D + 3 D I + 8 B L I) bytes (every
kernel reads its inputs and writes its output). Write the three, then place the MLP at B = 8:
prefill L = 2048 and decode L = 1, on Part 2's fp32 roof."""),
        todo("""def mlp_mac(B, L, D, I):
    return None   # TODO

def mlp_flops(B, L, D, I):
    return None   # TODO

def mlp_io(B, L, D, I):
    return None   # TODO (bf16: 2 bytes an element)""", """def mlp_mac(B, L, D, I):
    return 3 * B * L * D * I

def mlp_flops(B, L, D, I):
    return 6 * B * L * D * I + 9 * B * L * I

def mlp_io(B, L, D, I):
    return 2 * (3 * B * L * D + 3 * D * I + 8 * B * L * I)"""),
        code("""ok, why = checks.check_mlp(mlp_mac, mlp_flops, mlp_io)
report(ok, why)
D, I = 640, 2048
def mlp_point(B, L):
    if ok:
        return mlp_flops(B, L, D, I) / mlp_io(B, L, D, I)
    return models.groups(models.layer_costs(models.load("gemma-3-270m-it"), models.Phase.prefill(B, L), "sliding"))["mlp"].intensity
def draw(points, title):
    xs = [2 ** e for e in range(-1, 12)]
    plt.loglog(xs, [min(peak, bw * x) for x in xs], "k-", label=f"{card.name} fp32 roof")
    for label, i in points:
        plt.loglog([i], [min(peak, bw * i)], "o", label=f"{label}: {i:.1f} FLOP/B")
    plt.xlabel("FLOP / byte"); plt.ylabel("FLOP/s"); plt.title(title); plt.legend(fontsize=7); plt.show()
draw([("prefill B=8 L=2048", mlp_point(8, 2048)), ("decode B=8 L=1", mlp_point(8, 1))], "MLP at B = 8")"""),
        md("""#### 3.4.1 Why is prefill compute-bound and decode memory-bound? (the query's shape)"""),
        code("""lab.answer("3.4.1")"""),
        answer("3.4.1"),
        md("""#### 3.4.2 Decode at B = 1, 4, 16, 64: how does the point move?"""),
        code("""draw([(f"decode B={b}", mlp_point(b, 1)) for b in (1, 4, 16, 64)], "MLP at decode")
lab.answer("3.4.2")"""),
        answer("3.4.2"),
        md("""#### 3.4.3 Prefill at B = 32, L = 64, 256, 1024, 4096: how does the point move?"""),
        code("""draw([(f"prefill L={l}", mlp_point(32, l)) for l in (64, 256, 1024, 4096)], "MLP at prefill, B = 32")
lab.answer("3.4.3", "p3_sweeps")   # rooflab: the whole layer beside the MLP"""),
        answer("3.4.3"),
        md("""#### Bonus: the attention module's MACs
`calc_attn_module_mac(batch, query_len, kv_len, config)`: the q, k, v and o projections plus the
core, at prefill (`config` is rooflab's model record: `hidden`, `heads`, `kv_heads`,
`head_dim`)."""),
        todo("""def calc_attn_module_mac(batch, query_len, kv_len, config):
    return None   # TODO""", """def calc_attn_module_mac(batch, query_len, kv_len, config):
    t, c = batch * query_len, config
    proj = t * c.hidden * (2 * c.heads + 2 * c.kv_heads) * c.head_dim   # q, o and k, v
    return proj + calc_attn_mac(batch, c.heads, query_len, kv_len, c.head_dim)"""),
        code("""cfg = models.load("gemma-3-270m-it")
report(*check_one("B.attn_module_mac", calc_attn_module_mac(1, 1024, 1024, cfg), model=cfg.name, batch=1, query_len=1024, kv_len=1024))
lab.answer("B.attention_macs"); lab.answer("B.attention_io")"""),
        # ---------------------------------------------------------------- part 4
        md("""## Part 4: profiler and fusion

### 4.1 Profile a 128 x 128 bf16 matmul
Run the profiler over 10 steps and name the kernel it launches (on a CPU: the op)."""),
        code("""from torch.profiler import ProfilerActivity, profile, record_function, schedule
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
dt = torch.bfloat16 if DEVICE == "cuda" else torch.float32
a = torch.randn(128, 128, device=DEVICE, dtype=dt)
with profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=7)) as prof:
    for _ in range(10):
        a @ a
        prof.step()
sync()
print(prof.key_averages().table(sort_by="cuda_time_total" if DEVICE == "cuda" else "cpu_time_total", row_limit=8))"""),
        todo("""my_kernel_name = ""   # TODO: the kernel (a part of its name) from the table""",
             """on_device = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == (DEVICE == "cuda")]
own = (lambda e: e.self_device_time_total) if DEVICE == "cuda" else (lambda e: e.self_cpu_time_total)
my_kernel_name = max(on_device, key=own).key   # the one that took the time"""),
        code("""report(*checks.check_kernel_name(my_kernel_name, DEVICE))
lab.answer("4.1")"""),
        answer("4.1"),
        md("""### 4.2 The MLP's profile and Chrome trace (B = 4, L = 1024, bf16)
Each projection is in a `record_function` range. Profile one call and export the trace to
`mlp_trace.json`, then open it in https://ui.perfetto.dev."""),
        code("""class MLP(torch.nn.Module):
    def __init__(self, d=640, i=2048):
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(d, i, bias=False), torch.nn.Linear(d, i, bias=False)
        self.down_proj = torch.nn.Linear(i, d, bias=False)
    def forward(self, x):
        with record_function("gate_proj"):
            g = self.gate_proj(x)
        with record_function("up_proj"):
            u = self.up_proj(x)
        with record_function("act_fn"):
            h = torch.nn.functional.gelu(g, approximate="tanh") * u
        with record_function("down_proj"):
            return self.down_proj(h)

L = 1024 if DEVICE == "cuda" else (16 if QUICK else 128)   # a CPU takes a shorter L
mlp = MLP().to(DEVICE, dt).eval()
x = torch.randn(4, L, 640, device=DEVICE, dtype=dt)
print(f"MLP at B=4, L={L}, {dt}")"""),
        todo("""# TODO: profile one mlp(x) under torch.no_grad() and prof.export_chrome_trace("mlp_trace.json")""",
             """with torch.no_grad(), profile(activities=activities) as prof:
    mlp(x); sync()
prof.export_chrome_trace("mlp_trace.json")
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))"""),
        code("""report(*checks.check_trace("mlp_trace.json"))
lab.answer("4.2")"""),
        answer("4.2"),
        md("""### 4.3.1 GeLU from basic ops
`gelu_tanh_python(x)` = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), from basic torch ops
(no `F.gelu`)."""),
        todo("""def gelu_tanh_python(x):
    return None   # TODO""", """def gelu_tanh_python(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))"""),
        code("""ok, why = checks.check_gelu(gelu_tanh_python)
report(ok, why)
if not ok:   # rooflab's stands in, so the rest runs
    from rooflab.kernels.gelu import gelu_unfused as gelu_tanh_python
lab.answer("4.3.1")"""),
        answer("4.3.1"),
        md("""### 4.3.2 Its latency against F.gelu(approximate="tanh"), 1,000,000 fp32 elements"""),
        code("""F = torch.nn.functional
xg = torch.randn(1_000_000, device=DEVICE)
t_mine = latency(lambda: gelu_tanh_python(xg))
t_torch = latency(lambda: F.gelu(xg, approximate="tanh"))
print(f"gelu_tanh_python {t_mine * 1e6:.1f} us, F.gelu {t_torch * 1e6:.1f} us: ratio {t_mine / t_torch:.2f}")
lab.answer("4.3.2")"""),
        answer("4.3.2"),
        md("""### 4.3.3 Your findings"""),
        code("""lab.answer("4.3.3", "p4_gelu")"""),
        answer("4.3.3"),
        md("""### 4.3.4 Explain the gap with the profiler
How many kernels does each launch, and how many times does the data cross memory?"""),
        code("""for name, fn in (("gelu_tanh_python", gelu_tanh_python), ("F.gelu", lambda t: F.gelu(t, approximate="tanh"))):
    with profile(activities=activities) as prof:
        fn(xg); sync()
    ev = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == (DEVICE == "cuda") and not e.key.startswith("aten::to")]
    print(f"{name}: {len(ev)} distinct kernels/ops:", [e.key[:50] for e in ev][:10])
lab.answer("4.3.4")"""),
        answer("4.3.4"),
        md("""### 4.4 torch.compile of your GeLU (default mode), and its profile"""),
        todo("""compiled_gelu = None   # TODO: torch.compile(...)""",
             """compiled_gelu = torch.compile(gelu_tanh_python)"""),
        code("""report(compiled_gelu is not None, "compiled" if compiled_gelu is not None else "compile gelu_tanh_python")
if compiled_gelu is not None:
    compiled_gelu(xg)   # the first call compiles
    with profile(activities=activities) as prof:
        compiled_gelu(xg); sync()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=6))
    print(f"compiled {latency(lambda: compiled_gelu(xg)) * 1e6:.1f} us against {t_mine * 1e6:.1f} us")
lab.answer("4.4")"""),
        answer("4.4"),
        md("""### 4.4.1 The MLP under torch.compile(mode="max-autotune-no-cudagraphs"), against eager
(on a CPU the default mode stands in: max-autotune's GEMM search needs a GPU). On GPUs with
fewer than 68 SMs (a T4 has 40) Inductor does not autotune the matmuls: only the elementwise ops
fuse."""),
        todo("""compiled_mlp = None   # TODO: torch.compile(mlp, mode=...)""",
             """compiled_mlp = torch.compile(mlp, mode="max-autotune-no-cudagraphs" if DEVICE == "cuda" else None)"""),
        code("""report(compiled_mlp is not None, "compiled" if compiled_mlp is not None else "compile the MLP")
if compiled_mlp is not None:
    with torch.no_grad():
        compiled_mlp(x)
        print(f"eager {latency(lambda: mlp(x), repeat=20) * 1e6:.0f} us, compiled {latency(lambda: compiled_mlp(x), repeat=20) * 1e6:.0f} us per call")
lab.answer("4.4.1", "p4_mlp")"""),
        answer("4.4.1"),
        md("""### 4.4.2 (bonus) mode="max-autotune": CUDA graphs
It replays only under `torch.no_grad()`. Compare its wall time and timeline with 4.4.1's."""),
        code("""if DEVICE == "cuda":
    graphed = torch.compile(mlp, mode="max-autotune")
    with torch.no_grad():
        graphed(x); graphed(x)
        print(f"max-autotune {latency(lambda: graphed(x), repeat=20) * 1e6:.0f} us per call")
else:
    print("CUDA graphs need a GPU")
lab.answer("4.4.2")"""),
        answer("4.4.2"),
        md("""#### Bonus: the decoder layer at decode, profiled, and as a CUDA graph"""),
        code("""lab.answer("B.decode_profile"); lab.answer("B.cuda_graph_profile")"""),
        # ---------------------------------------------------------------- part 5
        md("""## Part 5: attention

### 5.1 Memory of your attention, L = 512 ... 32768
q, k, v (1, 16, L, 128) in fp16 (fp32 on a CPU, to lengths its memory allows). Record each
length's peak memory, `None` where it runs out of memory (catch `torch.cuda.OutOfMemoryError`),
beside the attention matrix's own 16 L^2 e bytes. Then: its memory complexity; the length where
it becomes a problem on your GPU; the main overhead; which LLM scenario it hurts."""),
        code("""if DEVICE == "cuda":
    seqs, adt = [512 * 2 ** i for i in range(5 if QUICK else 7)], torch.float16
else:
    seqs, adt = ([256, 512] if QUICK else [512, 1024, 2048]), torch.float32
e = torch.finfo(adt).bits // 8
print("lengths:", seqs, adt)"""),
        todo("""rows = []
for L in seqs:
    q, k, v = (torch.randn(1, 16, L, 128, device=DEVICE, dtype=adt) for _ in range(3))
    # TODO: the peak memory of scaled_dot_product_attention(q, k, v), None when out of memory
    #       (rooflab.measure.peak_memory(fn, *args, device=DEVICE) returns .extra_peak_bytes and .oom)
    rows.append((L, None))""", """rows = []
for L in seqs:
    q, k, v = (torch.randn(1, 16, L, 128, device=DEVICE, dtype=adt) for _ in range(3))
    m = peak_memory(scaled_dot_product_attention, q, k, v, device=DEVICE)
    rows.append((L, None if m.oom else m.extra_peak_bytes))
    del q, k, v"""),
        code("""report(*checks.check_memory(rows, heads=16, bytes_per_elem=e))
ran = [(L, p) for L, p in rows if p]
for L, p in rows:
    print(f"L = {L:6d}: " + ("out of memory" if p is None else f"{p / 2**20:9.1f} MiB") + f"   attention matrix {16 * L * L * e / 2**20:9.1f} MiB")
if ran:
    plt.loglog([L for L, _ in ran], [p for _, p in ran], "o-", label="your attention: extra peak")
plt.loglog(seqs, [16 * L * L * e for L in seqs], "--", label="16 L^2 e (the attention matrix)")
plt.xlabel("sequence length"); plt.ylabel("bytes"); plt.legend(); plt.show()
lab.answer("5.1", "p5_memory")"""),
        answer("5.1"),
        md("""### 5.2 FlashAttention against SDPA, L = 256 ... 8192
`flash_attn_func` (layout (B, L, H, D)) against `F.scaled_dot_product_attention` ((B, H, L, D)),
fp16. Where flash-attn is not installed, SDPA's flash backend stands in on a GPU (and your
attention against SDPA's CPU kernel on a CPU), named in the table. Then: why is standard
attention memory-bound, how does FlashAttention make it compute-bound, why does the speed-up grow
with length?"""),
        code("""try:
    from flash_attn import flash_attn_func
    flash, flash_name = lambda q, k, v: flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)), "flash_attn_func"
    base, base_name = F.scaled_dot_product_attention, "SDPA"
except ImportError:
    if DEVICE == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        def flash(q, k, v):
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v)
        flash_name, base, base_name = "SDPA flash backend (flash-attn not installed)", scaled_dot_product_attention, "your attention"
    else:
        flash, flash_name = F.scaled_dot_product_attention, "SDPA on the CPU (flash-attn needs a GPU)"
        base, base_name = scaled_dot_product_attention, "your attention"
lengths = [256, 512, 1024] if QUICK or DEVICE == "cpu" else [256 * 2 ** i for i in range(6)]
table = []
for L in lengths:
    q, k, v = (torch.randn(1, 16, L, 128, device=DEVICE, dtype=adt) for _ in range(3))
    tb, tf = latency(lambda: base(q, k, v), repeat=10), latency(lambda: flash(q, k, v), repeat=10)
    mb, mf = (peak_memory(fn, q, k, v, device=DEVICE).extra_peak_bytes or 0 for fn in (base, flash))
    table.append((L, tb * 1e3, tf * 1e3, tb / tf, mb / 1e9, mf / 1e9))
print(f"sdpa = {base_name}; flash = {flash_name}")
print("seq_len   sdpa_ms  flash_ms  speedup  sdpa_mem_gb  flash_mem_gb")
for r in table:
    print(f"{r[0]:7d} {r[1]:9.3f} {r[2]:9.3f} {r[3]:8.2f} {r[4]:12.4f} {r[5]:13.4f}")
plt.semilogx([r[0] for r in table], [r[3] for r in table], "o-", base=2)
plt.xlabel("sequence length"); plt.ylabel(f"speed-up ({base_name} / flash)"); plt.show()"""),
        code("""lab.answer("5.2", "p5_time")"""),
        answer("5.2"),
        md("""## Bonus: rooflab's own kernels, and the whole lab in one command

`rooflab lab` runs everything above at the lab's settings and writes `rooflab-report/index.html`
and `results.json`, every answer keyed by the ids used here. `rooflab check --template` writes the
computable questions as a file to fill in; `rooflab check answers.json` checks it (`--reveal`
shows rooflab's values)."""),
        code("""lab.answer("B.flash_vs_sdpa"); lab.answer("B.flash_analysis")
lab.answer("B.flash_decoding"); lab.answer("B.tensor_parallel")"""),
    ]


SETUP = md("""## Setup (Colab or a fresh machine)

The next cell installs rooflab into this kernel where it is not importable yet: from a rooflab
wheel beside this notebook (upload the `rooflab-*.whl` of the lab's archive, or put it in your
Drive's top folder), else from `ROOFLAB_SOURCE` (a wheel's path, or a requirement such as
`rooflab[hf] @ git+https://github.com/<you>/rooflab`). Colab already has torch and transformers.""")

SETUP_CODE = code("""import glob, importlib.util, os, subprocess, sys
if importlib.util.find_spec("rooflab") is None:
    wheels = sorted(glob.glob("rooflab-*.whl") + glob.glob("/content/rooflab-*.whl")
                    + glob.glob("/content/drive/MyDrive/rooflab-*.whl"))
    source = wheels[-1] if wheels else os.environ.get("ROOFLAB_SOURCE", "")
    if source:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", source])
    else:
        print("rooflab is not installed: upload rooflab-*.whl beside this notebook, or set ROOFLAB_SOURCE, then run this cell again")
if importlib.util.find_spec("rooflab") is not None:
    import rooflab
    print("rooflab from", os.path.dirname(rooflab.__file__))""")


def build(solutions: bool = False, colab: bool = False) -> nbformat.NotebookNode:
    body = cells(solutions)
    nb = new_notebook(cells=[body[0], SETUP, SETUP_CODE, *body[1:]] if colab else body)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


VARIANTS = {"lab1.ipynb": {}, "lab1_solutions.ipynb": {"solutions": True},
            "lab1_colab.ipynb": {"colab": True}}

if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
    chosen = {"--solutions": "lab1_solutions.ipynb", "--colab": "lab1_colab.ipynb"}
    names = [chosen[a] for a in sys.argv[1:] if a in chosen] or list(VARIANTS)
    for name in names:
        nbformat.write(build(**VARIANTS[name]), str(root / name))
        print(f"wrote {root / name}")
