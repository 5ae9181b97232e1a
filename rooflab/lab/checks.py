"""Self-checks for the notebook's exercises: a learner's function against rooflab's own answer
on fresh random inputs. Each returns (ok, message) and never raises for a wrong answer."""
from __future__ import annotations

import random

import torch

from rooflab import cost as C


def _shapes(n: int = 5, seed: int | None = None):
    rng = random.Random(seed)
    return [(rng.randint(1, 4096), rng.randint(1, 4096), rng.randint(1, 4096)) for _ in range(n)]


def check_gemm(macs_fn, bytes_fn, elem_bytes: int = 4) -> tuple[bool, str]:
    """macs_fn(m, k, n) and bytes_fn(m, k, n, elem_bytes) against cost.gemm."""
    dtype = {8: "fp64", 4: "fp32", 2: "bf16", 1: "int8"}[elem_bytes]
    for m, k, n in _shapes():
        want = C.gemm(m, k, n, dtype)
        try:
            got_macs, got_bytes = macs_fn(m, k, n), bytes_fn(m, k, n, elem_bytes)
        except Exception as e:  # noqa: BLE001 - a learner's bug is reported, not raised
            return False, f"your function raised {type(e).__name__}: {e}"
        if got_macs != want.macs:
            return False, f"MACs of ({m}x{k}) @ ({k}x{n}): expected {want.macs:,}, got {got_macs}"
        if got_bytes != want.bytes:
            return False, f"bytes of ({m}x{k}) @ ({k}x{n}): expected {want.bytes:,}, got {got_bytes}"
    return True, "correct: MACs = M*K*N and bytes = e*(M*K + K*N + M*N) on 5 random shapes"


def check_gelu(fn, device: str = "cpu") -> tuple[bool, str]:
    """A GeLU-tanh built from basic ops against F.gelu(approximate='tanh') in float64."""
    x = torch.randn(10_000, dtype=torch.float64, device=device) * 3
    try:
        got = fn(x)
    except Exception as e:  # noqa: BLE001
        return False, f"your function raised {type(e).__name__}: {e}"
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return False, "return a tensor of the input's shape"
    err = float((got - torch.nn.functional.gelu(x, approximate="tanh")).abs().max())
    if err > 1e-9:
        return False, f"max error {err:.3g} against F.gelu(approximate='tanh'): check the formula"
    return True, f"correct (max error {err:.1e})"
