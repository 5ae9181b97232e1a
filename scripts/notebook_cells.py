"""The cells of the lab notebooks, part by part (4, 5 and the bonus: notebook_cells_late.py);
scripts/make_notebook.py assembles them.
Each part is a function of ``todo`` (the student's cell or its solution, by variant)."""
from nbformat.v4 import new_code_cell, new_markdown_cell

md, code = new_markdown_cell, new_code_cell


def answer(qid: str):
    return md(f"**Your answer ({qid}):** _write it here, from the numbers above._")


def intro(todo) -> list:
    """The title and the imports every cell uses."""
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
    ]


def part1(todo) -> list:
    """Part 1: basic metrics (1.1-1.4)."""
    return [
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
    ]


def part2(todo) -> list:
    """Part 2: the roofline (2.1.1, 2.1.2, 2.2)."""
    return [
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
    ]


def part3(todo) -> list:
    """Part 3: a decoder layer (3.1-3.4.3)."""
    return [
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
    ]

