"""The notebook's self-checks: each accepts the lab's answer, refuses the lab's forbidden APIs,
and names a known slip without giving rooflab's value away."""
import math
import time

import torch

from rooflab.lab import checks


def loops(A, B):
    n, k = A.shape
    C = torch.zeros(n, B.shape[1])
    for i in range(n):
        for j in range(B.shape[1]):
            C[i, j] = sum(float(A[i, p]) * float(B[p, j]) for p in range(k))
    return C


def test_gemm_reads_the_code_and_compares_on_odd_shapes():
    assert checks.check_gemm(loops)[0]
    for fn, name in ((lambda A, B: A @ B, "@"), (lambda A, B: torch.matmul(A, B), "matmul"),
                     (lambda A, B: torch.einsum("ij,jk->ik", A, B), "einsum"),
                     (lambda A, B: A.mm(B), "mm")):
        ok, msg = checks.check_gemm(fn)
        assert not ok and name in msg
    ok, msg = checks.check_gemm(lambda A, B: torch.zeros(A.shape[0], B.shape[1]))
    assert not ok and "differ" in msg


def test_gemm_mac_and_io_name_the_slip_and_hide_the_value():
    mac = lambda A, B: A.shape[0] * A.shape[1] * B.shape[1]  # noqa: E731
    assert checks.check_gemm_mac(mac)[0]
    ok, msg = checks.check_gemm_mac(lambda A, B: 2 * mac(A, B))
    assert not ok and "FLOPs" in msg and "134,217,728" not in msg
    assert "134,217,728" in checks.check_gemm_mac(lambda A, B: 3, reveal=True)[1]
    elems = lambda A, B: A.shape[0] * A.shape[1] + A.shape[1] * B.shape[1] + A.shape[0] * B.shape[1]  # noqa: E731,E501
    assert checks.check_gemm_io(lambda A, B: A.element_size() * elems(A, B)) == (
        True, "correct on the lab's checks and odd shapes, fp32 and bf16")
    ok, msg = checks.check_gemm_io(lambda A, B: 4 * elems(A, B))   # holds for the lab's fp32
    assert ok and "element_size" in msg
    for wrong, slip in ((lambda A, B: 2 * elems(A, B), "2 bytes"), (elems, "elements"),
                        (lambda A, B: 4 * (elems(A, B) - A.shape[0] * B.shape[1]), "C is not")):
        ok, msg = checks.check_gemm_io(wrong)
        assert not ok and slip in msg, msg
    ok, msg = checks.check_gemm_mac(lambda A, B: None)
    assert not ok and "None" in msg


def test_latency_counts_the_calls_and_the_unit():
    def right(fn, warmup=10, repeat=100):
        for _ in range(warmup):
            fn()
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - t) / repeat
    assert checks.check_latency(right)[0]
    assert "milliseconds" in checks.check_latency(lambda fn, warmup, repeat: 1e3 * right(fn, warmup, repeat))[1]  # noqa: E501
    assert "10" in checks.check_latency(lambda fn, warmup, repeat: right(fn, 0, repeat))[1]


def test_roofline_point_caps_at_the_peak():
    right = lambda n, p, b: (n / 6, min(p, b * n / 6))  # noqa: E731
    assert checks.check_roofline(right)[0]
    ok, msg = checks.check_roofline(lambda n, p, b: (n / 6, b * n / 6))
    assert not ok and "min(peak" in msg
    ok, msg = checks.check_roofline(lambda n, p, b: (n / 12, min(p, b * n / 12)))  # MACs / bytes
    assert not ok and "MACs over bytes" in msg


def sdpa(q, k, v, attn_mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(s, -1) @ v


def test_sdpa_and_its_counts():
    assert checks.check_sdpa(sdpa)[0]
    ok, msg = checks.check_sdpa(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    assert not ok and "1/sqrt(D)" in msg
    ok, msg = checks.check_sdpa(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v))  # noqa: E501
    assert not ok and "scaled_dot_product_attention" in msg
    assert checks.check_attn_mac(lambda B, H, Lq, Lkv, D: 2 * B * H * Lq * Lkv * D)[0]
    ok, msg = checks.check_attn_mac(lambda B, H, Lq, Lkv, D: B * H * Lq * Lkv * D)
    assert not ok and "alone" in msg

    def io(B, H, Lq, Lkv, D, bytes_per_elem=4, softmax_passes=5, fused=False):
        q, kv, s = B * H * Lq * D, B * H * Lkv * D, B * H * Lq * Lkv
        return bytes_per_elem * (2 * q + 2 * kv + (0 if fused else (2 + softmax_passes) * s))
    assert checks.check_attn_io(io)[0]
    ok, msg = checks.check_attn_io(lambda *a, bytes_per_elem=4, softmax_passes=5, fused=False:
                                   io(*a, bytes_per_elem, 3, fused))  # ignores its passes
    assert not ok and "3 softmax passes" in msg
    assert not checks.check_attn_io(lambda B, H, Lq, Lkv, D: 0)[0]  # no parameters


def test_mlp_names_fused_bytes_residual_and_gate_only():
    mac = lambda B, L, D, I: 3 * B * L * D * I  # noqa: E731
    fl = lambda B, L, D, I: 6 * B * L * D * I + 9 * B * L * I  # noqa: E731
    io = lambda B, L, D, I: 2 * (3 * B * L * D + 3 * D * I + 8 * B * L * I)  # noqa: E731
    assert checks.check_mlp(mac, fl, io)[0]
    for wrong, slip in ((lambda B, L, D, I: 2 * (2 * B * L * D + 3 * D * I), "fused"),
                        (lambda B, L, D, I: io(B, L, D, I) + 6 * B * L * D, "residual")):
        ok, msg = checks.check_mlp(mac, fl, wrong)
        assert not ok and slip in msg, msg
    ok, msg = checks.check_mlp(mac, lambda B, L, D, I: 6 * B * L * D * I, io)
    assert not ok and "9 B L I" in msg


def test_gelu_check_refuses_f_gelu():
    good = lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # noqa: E731
    assert checks.check_gelu(good)[0]
    assert not checks.check_gelu(lambda x: torch.relu(x))[0]
    assert not checks.check_gelu(lambda x: 0)[0]
    ok, msg = checks.check_gelu(lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    assert not ok and "gelu" in msg
    ok, msg = checks.check_gelu(lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))))
    assert not ok and "erf" in msg


def test_kernel_name_trace_and_memory(tmp_path):
    assert checks.check_kernel_name("aten::mm", "cpu")[0]
    assert not checks.check_kernel_name("cublas", "cpu")[0]
    assert not checks.check_trace(str(tmp_path / "none.json"))[0]
    with torch.profiler.profile() as prof:
        for r in ("gate_proj", "up_proj", "down_proj"):
            with torch.profiler.record_function(r):
                torch.ones(2) + 1
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert checks.check_trace(str(tmp_path / "t.json"))[0]
    assert checks.check_memory([(512, 16 * 512 * 512 * 2 + 1), (1024, None)])[0]
    assert not checks.check_memory([(512, 100)])[0]
    assert not checks.check_memory([(512, None)])[0]
