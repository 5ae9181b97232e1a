import math

import torch

from rooflab.lab import checks


def test_gemm_check_accepts_right_and_rejects_wrong():
    ok, msg = checks.check_gemm(lambda m, k, n: m * k * n,
                                lambda m, k, n, e: e * (m * k + k * n + m * n))
    assert ok, msg
    ok, msg = checks.check_gemm(lambda m, k, n: 2 * m * k * n,  # FLOPs, not MACs
                                lambda m, k, n, e: e * (m * k + k * n + m * n))
    assert not ok and "MACs" in msg
    ok, msg = checks.check_gemm(lambda m, k, n: m * k * n, lambda m, k, n, e: m * k)
    assert not ok and "bytes" in msg
    ok, msg = checks.check_gemm(lambda m, k, n: 1 / 0, lambda m, k, n, e: 0)
    assert not ok and "ZeroDivisionError" in msg


def test_gelu_check():
    good = lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # noqa: E731
    assert checks.check_gelu(good)[0]
    assert not checks.check_gelu(lambda x: torch.relu(x))[0]
    assert not checks.check_gelu(lambda x: 0)[0]
