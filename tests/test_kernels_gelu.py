"""rooflab/kernels/gelu.py: the fused GeLU against PyTorch's, its cost against the counter.
On the CPU under TRITON_INTERPRET=1 (CI), on CUDA with the gpu marker; tolerances are tied to
PyTorch's own low-precision error on the same fresh random inputs."""
import os

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed")

from rooflab import count  # noqa: E402
from rooflab.kernels import gelu as G  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def gelu_tolerance(n, dtype, device):
    torch_err = G.max_error(G.gelu_torch, n, dtype, device, seed=n)
    if INTERPRET and dtype == torch.bfloat16:
        # the interpreter truncates fp32 -> bf16 instead of rounding: allow one bf16 ulp of |y|<8
        return max(2 * torch_err, 2.0 ** -7 * 8)
    return max(2 * torch_err, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 1000, G.BLOCK + 3, 3 * G.BLOCK])  # incl. a ragged last block
def test_gelu_triton_matches(device, dtype, n):
    err = G.max_error(G.gelu_triton, n, dtype, device, seed=n)
    assert err == err  # not NaN: every element was written over the NaN poison
    assert err <= gelu_tolerance(n, dtype, device)


def test_gelu_unfused_cost_matches_the_counter():
    x = torch.randn(1000)
    c = count.count(G.gelu_unfused, x)
    hand = G.cost(1000, "fp32", fused=False)
    assert len(c.kernels()) == hand.kernels == 9
    assert c.total_bytes == hand.bytes == 4 * 1000 * (12 + 9)  # 84000: x * x reads x once
    assert G.cost(1000, "fp32").bytes == 8000  # fused: read once, write once
    assert float((G.gelu_unfused(x) - G.gelu_torch(x)).abs().max()) < 1e-5


def test_gelu_rejects_other_dtypes():
    with pytest.raises(TypeError, match="fp32, fp16 and bf16"):
        G.gelu_triton(torch.zeros(4, dtype=torch.int32))


def test_gelu_writes_only_into_an_out_it_fits(device):
    x = torch.randn(3, 50, device=device)
    for out in (torch.empty(100, device=device), torch.empty(3, 50, device=device).half(),
                torch.empty(50, 3, device=device).t()):
        with pytest.raises(ValueError, match="out is a contiguous"):
            G.gelu_triton(x, out=out)
    out = torch.empty(3, 50, device=device)
    assert G.gelu_triton(x.t().contiguous().t(), out=out) is out  # x's strides do not matter
    assert float((out - G.gelu_torch(x)).abs().max()) < 1e-5
