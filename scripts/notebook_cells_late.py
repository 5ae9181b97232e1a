"""The cells of the lab notebooks' parts 4 and 5 and the bonus items (parts 1-3:
notebook_cells.py)."""
from nbformat.v4 import new_code_cell, new_markdown_cell

from notebook_cells import answer

md, code = new_markdown_cell, new_code_cell


def part4(todo) -> list:
    """Part 4: profiler and fusion (4.1-4.4.2)."""
    return [
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
             """on_device = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == (DEVICE == "cuda")
             and not e.key.startswith("ProfilerStep")]   # the profiler's own step range, no op
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
    ]


def part5_and_bonus(todo) -> list:
    """Part 5: attention (5.1, 5.2), and the bonus items."""
    return [
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
