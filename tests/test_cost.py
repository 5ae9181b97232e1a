"""Every formula against exact integers, the arithmetic in the comment."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooflab import cost as C


def test_gemm_exact():
    c = C.gemm(2, 3, 4, "fp32")
    assert c.macs == 24  # 2 * 3 * 4
    assert c.flops == 48  # 2 FLOPs per MAC
    assert c.bytes == 4 * (6 + 12 + 8) == 104  # A 2x3, B 3x4, C 2x4, 4 bytes each
    assert c.bytes_fused == c.bytes
    assert c.intensity == 48 / 104


def test_gemm_square_intensity_is_n_over_6_in_fp32():
    n = 4096
    c = C.gemm(n, n, n, "fp32")
    assert c.flops == 2 * n**3
    assert c.bytes == 4 * 3 * n * n
    assert c.intensity == pytest.approx(n / 6)


def test_gemv_is_gemm_with_n_1():
    c = C.gemv(1024, 512, "bf16")
    assert c.macs == 1024 * 512  # 524288
    assert c.bytes == 2 * (1024 * 512 + 512 + 1024)  # 2 * 525824 = 1051648
    assert c.macs == C.gemm(1024, 512, 1, "bf16").macs


def test_bmm_and_linear():
    assert C.bmm(3, 2, 2, 2, "fp16").macs == 24  # 3 * 2*2*2
    assert C.bmm(3, 2, 2, 2, "fp16").bytes == 3 * 2 * 12  # 3 batches * 2 bytes * (4+4+4)
    assert C.linear(8, 640, 2048, "bf16").macs == 8 * 640 * 2048  # 10485760


def test_elementwise_and_gelu():
    add = C.elementwise(10, "fp32", reads=2, writes=1)
    assert (add.macs, add.flops, add.bytes) == (0, 10, 120)  # 4 * 10 * 3
    g = C.gelu_tanh(1000, "bf16")
    assert (g.macs, g.flops, g.bytes) == (0, 8000, 4000)  # 8 FLOPs/elem; 2 B * 1000 * (1+1)


def test_norms_softmax_rope():
    r = C.rmsnorm(4, 8, "fp32")
    assert r.flops == 4 * 32 + 2 * 4  # 4 per element * 32 + 2 per row * 4 = 136
    assert C.rmsnorm(4, 8, "fp32", weight_offset=True).flops == 136 + 8  # Gemma's 1 + w
    assert r.bytes == 4 * (2 * 32 + 8)  # read x, write y, read weight(8) = 288
    ln = C.layernorm(4, 8, "fp32")
    assert ln.flops == 7 * 32 and ln.bytes == 4 * (64 + 16)  # 224 FLOPs, 320 bytes
    s = C.softmax(3, 5, "fp16")
    assert s.flops == 5 * 15 and s.bytes == 2 * 5 * 15 and s.bytes_fused == 2 * 2 * 15
    ro = C.rope(6, 4, 8, "bf16")
    assert ro.flops == 3 * 192 + 192 // 2  # 576 + the negated half 96 = 672
    assert ro.bytes == 2 * (2 * 192 + 2 * 6 * 8)  # 2 * (384 + 96) = 960


def test_attention_exact_docstring_example():
    a = C.attention(1, 1, 2, 2, 4, dtype="fp32")
    assert a.macs == 32  # 2 * (1*1*2*2) * 4
    assert a.flops == 2 * 32 + (5 + 1) * 4  # softmax 5 and the scale 1 per score: 88
    assert a.bytes == 4 * ((8 + 8 + 4) + 20 + (4 + 8 + 8))  # 240
    assert a.bytes_fused == 4 * (8 + 8 + 8 + 8)  # 128


def test_attention_gqa_reads_kv_heads_once():
    mha = C.attention(2, 8, 16, 16, 64, kv_heads=8, dtype="bf16")
    gqa = C.attention(2, 8, 16, 16, 64, kv_heads=2, dtype="bf16")
    assert mha.macs == gqa.macs == 2 * (2 * 8 * 16 * 16) * 64  # 524288
    kv_saved = 2 * 2 * (2 * 8 * 16 * 64 - 2 * 2 * 16 * 64)  # bf16 * (K and V) * (16384 - 4096)
    assert mha.bytes - gqa.bytes == kv_saved == 49152
    with pytest.raises(C.CostError):
        C.attention(1, 8, 4, 4, 64, kv_heads=3)


def test_attention_pairs_causal_and_window():
    assert C.attention_pairs(4, 4) == 16
    assert C.attention_pairs(4, 4, causal=True) == 10  # 1+2+3+4
    assert C.attention_pairs(1, 100, causal=True) == 100  # decode sees everything
    assert C.attention_pairs(2, 5, causal=True) == 4 + 5
    assert C.attention_pairs(6, 6, causal=True, window=3) == 1 + 2 + 3 + 3 + 3 + 3  # 15
    assert C.attention_pairs(1, 4096, window=512) == 512
    assert C.attention_pairs(8, 4) == 32  # dense cross-attention: more queries than keys is fine
    with pytest.raises(C.CostError, match="causal"):
        C.attention_pairs(8, 4, causal=True)
    causal = C.attention(1, 2, 4, 4, 8, causal=True)
    assert causal.macs == 2 * (2 * 10) * 8  # 320


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_bad_sizes_raise(bad):
    with pytest.raises(C.CostError):
        C.gemm(bad, 2, 2)


def test_dtype_names():
    assert C.dtype_name("BFloat16") == "bf16"
    assert C.dtype_name("torch.float16") == "fp16"
    with pytest.raises(C.CostError, match="unknown dtype"):
        C.dtype_name("fp7")


def test_total_sums_parts():
    t = C.total([C.gemm(2, 2, 2), C.gelu_tanh(4)], "mlp")
    assert t.name == "mlp" and t.macs == 8 and t.flops == 16 + 32 and t.kernels == 2


sizes = st.integers(min_value=1, max_value=4096)


@given(sizes, sizes, sizes, st.sampled_from(list(C.DTYPE_BYTES)))
def test_gemm_properties(m, k, n, dtype):
    c = C.gemm(m, k, n, dtype)
    assert c.flops == 2 * c.macs == 2 * m * k * n
    assert c.bytes == C.DTYPE_BYTES[dtype] * (m * k + k * n + m * n)
    assert C.gemm(n, k, m, dtype).macs == c.macs  # transposed problem, same work


@given(st.integers(1, 4), st.integers(1, 8), st.integers(1, 256), st.integers(1, 256),
       st.sampled_from([32, 64, 128]), st.booleans())
def test_attention_properties(b, h, lq, extra, d, causal):
    lkv = lq + extra
    a = C.attention(b, h, lq, lkv, d, causal=causal)
    assert a.bytes > a.bytes_fused  # eager always moves the score matrix
    assert a.macs <= C.attention(b, h, lq, lkv, d).macs  # masking never adds work
    assert a.flops == 2 * a.macs + (5 + 1) * (a.macs // (2 * d))  # softmax and scale per score


def test_linear_and_attention_with_their_own_storage_dtypes():
    # x (2x3) and y (2x4) in bf16: 2 * 2 * (3 + 4) = 28; 12 int4 weights: 6; 6 groups of 2: 12
    assert C.linear(2, 3, 4, "bf16", "int4", 2).bytes == 28 + 6 + 12
    assert C.linear(2, 3, 4, "bf16", "bf16").bytes == C.linear(2, 3, 4, "bf16").bytes == 2 * 26
    a = C.attention(1, 1, 2, 2, 4, dtype="fp32", kv_dtype="fp8")
    # the docstring example's 240 bytes, with K and V (8 elements each) at 1 byte, not 4
    assert a.bytes == 240 - (4 - 1) * 16 and a.bytes_fused == 128 - (4 - 1) * 16
