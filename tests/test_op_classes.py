"""Kernel classes of counted ops (layouts as PyTorch's TensorIterator sees them) and the cost
model built on the measured floors and generic-loop rate."""
import pytest
import torch

from rooflab import count
from rooflab.measure import op_classes as OC


def _records(fn):
    with count.Counter() as c:
        fn()
    return [r for r in c.records if r.bytes]


def _one(fn) -> count.OpRecord:
    (r,) = _records(fn)
    return r


x = torch.randn(8, 16, 4, 32)  # (batch, seq, heads, head_dim), as a projection's view
q = x.transpose(1, 2)  # (batch, heads, seq, head_dim): dense, not contiguous
qc, w, m, rms = q.contiguous(), torch.ones(32), torch.randn(32, 8), x.mean(-1, keepdim=True)


@pytest.mark.parametrize("fn, layout, cls", [
    (lambda: x * x, "contiguous", "elementwise"),
    (lambda: q * q, "contiguous", "elementwise"),  # same dense order on both sides
    (lambda: x * rms, "broadcast", "generic"),  # x * rms[..., None]
    (lambda: x * w, "broadcast", "generic"),  # x * weight
    (lambda: x * w.expand(8, 16, 4, 32), "broadcast", "generic"),
    (lambda: q + qc, "strided", "generic"),  # two orders
    (lambda: -x[..., 16:], "strided", "generic"),  # a slice
    (lambda: torch.cat((x[..., 16:], x[..., :16]), -1), "strided", "generic"),  # rotate_half
    (lambda: torch.cat((x, x), 1), "broadcast", "elementwise"),  # cat of whole tensors
    (lambda: x.to(torch.float64), "contiguous", "generic"),  # widening cast
    (lambda: x.to(torch.float16), "contiguous", "elementwise"),  # narrowing cast
    (lambda: x * 2.0, "contiguous", "elementwise"),  # a Python scalar is no operand
    (lambda: x.mean(-1), "contiguous", "reduction"),
    (lambda: x.view(-1, 32) @ m, "broadcast", "matmul"),
])
def test_layouts_and_classes(fn, layout, cls):
    r = _one(fn)
    assert (r.layout, OC.op_class(r)) == (layout, cls)
    expected = {"elementwise": "vectorized", "generic": layout if layout != "contiguous"
                else "widening"}.get(cls, "")
    assert OC.path(r) == expected


def test_sdpa_is_attention_and_counts_elements():
    qq = torch.randn(1, 2, 8, 16)
    rs = _records(lambda: torch.nn.functional.scaled_dot_product_attention(qq, qq, qq))
    assert "attention" in {OC.op_class(r) for r in rs}
    r = _one(lambda: x * rms)
    assert (r.out_elements, r.in_itemsize, r.itemsize) == (x.numel(), 4, 4)


def test_predicted_time_is_floor_plus_the_slowest_limit():
    costs = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9, 2: 2e9})
    bcast, plain = _one(lambda: x * rms), _one(lambda: x * x)
    peak, bw = 1e12, 1e12
    # generic: elements / rate (16384 / 1e9 s) beats bytes / bandwidth (~131 kB / 1e12)
    assert costs.predict_s(bcast, peak, bw) == pytest.approx(1e-6 + x.numel() / 1e9)
    assert costs.predict_s(plain, peak, bw) == pytest.approx(1e-6 + plain.bytes / bw)
    assert costs.generic_rate(2) == 2e9 and costs.generic_rate(8) == 1e9  # nearest size
    # a copy from a broadcast source (repeat_kv) takes the copy rate where one was measured
    wide = torch.randn(4, 1, 256)
    rep = _one(lambda: wide.expand(4, 8, 256).reshape(32, 256))
    assert (rep.op, OC.op_class(rep)) == ("clone", "generic")
    assert costs.predict_s(rep, peak, bw) == pytest.approx(1e-6 + rep.out_elements / 1e9)
    costs.generic_copy_elements_per_s = {4: 4e9}
    assert costs.predict_s(rep, peak, bw) == pytest.approx(1e-6 + rep.out_elements / 4e9)
    assert costs.predict_s(bcast, peak, bw) == pytest.approx(1e-6 + x.numel() / 1e9)


def test_measured_on_the_cpu():
    costs = OC.measure("cpu")
    assert set(costs.floor_s) == set(OC.CLASSES)
    assert all(0 < s < 1e-2 for s in costs.floor_s.values())
    assert set(costs.generic_elements_per_s) == set(costs.generic_copy_elements_per_s) == {2, 4}
    assert all(r > 1e6 for r in costs.generic_elements_per_s.values())
    assert all(r > 1e6 for r in costs.generic_copy_elements_per_s.values())


@pytest.mark.gpu
def test_measured_on_the_gpu():
    costs = OC.measure("cuda")
    assert all(0 < s < 50e-6 for s in costs.floor_s.values())  # tiny kernels: microseconds
    # a GEMM's or an attention kernel's floor is above an elementwise kernel's
    assert costs.floor_s["matmul"] > costs.floor_s["elementwise"]
    assert costs.floor_s["attention"] > costs.floor_s["elementwise"]
    assert all(1e10 < r < 1e13 for r in costs.generic_elements_per_s.values())
    assert all(1e10 < r < 1e13 for r in costs.generic_copy_elements_per_s.values())
