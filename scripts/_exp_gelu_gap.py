import torch, torch.nn.functional as F, triton, triton.language as tl
from rooflab.kernels import gelu as G
from rooflab.lab import attention as A
from rooflab.measure.timer import time

def graph_events(f, n=200):
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        f()
    torch.cuda.current_stream().wait_stream(st)
    with torch.cuda.graph(g):
        for _ in range(n): f()
    g.replay(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); g.replay(); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e3

def show(label, f):
    t = time(f, warmup=3, budget_s=0.1, wall=False, device='cuda')
    c = time(f, warmup=3, budget_s=0.1, wall=False, device='cuda', flush_l2=True)
    print(f"{label:28s} warm {t.device_s*1e6:8.2f} ({t.extra.get('method','')[:14]}) cold {c.device_s*1e6:8.2f} graph {graph_events(f):8.2f}", flush=True)

for n in (1<<20, (1<<22)+7, 1<<24):
    x = torch.randn(n, device='cuda', dtype=torch.bfloat16); y = torch.empty_like(x)
    show(f"fgelu {n}", lambda: F.gelu(x, approximate='tanh'))
    show(f"triton gelu {n}", lambda: G.gelu_triton(x, y))
for b, lkv in ((8, 4096), (1, 4096)):
    q = torch.randn(b, 32, 1, 128, device='cuda', dtype=torch.bfloat16)
    k = torch.randn(b, 8, lkv, 128, device='cuda', dtype=torch.bfloat16); v = torch.randn_like(k)
    for name in ('cudnn', 'flash', 'triton_decode'):
        fn = A.implementation(name, 'cuda')[0]
        show(f"decode B{b} {name}", lambda: fn(q, k, v, False))
