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
    (lambda: torch.topk(x, 4), "contiguous", "select"),  # a router's top k
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


def test_roll_is_indexed_and_takes_its_own_rate():
    """torch.roll (a sliding-window cache's step) computes a source index per element."""
    r = _one(lambda: torch.roll(x, -1, 1))
    assert (OC.op_class(r), OC.path(r)) == ("indexed", "")
    costs = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9})
    assert costs.predict_s(r, 1e12, 1e12) == pytest.approx(1e-6 + r.bytes / 1e12)  # unmeasured
    costs.indexed_elements_per_s = {2: 1e9, 4: 5e8}
    assert costs.predict_s(r, 1e12, 1e12) == pytest.approx(1e-6 + x.numel() / 5e8)


def test_each_kind_of_kernel_takes_its_own_floor():
    """A widening cast and a strided read take their kinds' floors, a broadcast the generic
    class's, a top k the select class's; costs measured before those floors existed fall back
    to the generic floor."""
    floors = {c: 1e-6 for c in OC.CLASSES} | {"generic widening": 3e-6, "generic strided": 2e-6,
                                               "select": 5e-6}
    costs = OC.OpCosts("test", floors, {4: 1e12, 8: 1e12})
    cases = {"widening": (lambda: x.to(torch.float64), 3e-6),
             "strided": (lambda: -x[..., 16:], 2e-6), "broadcast": (lambda: x * rms, 1e-6),
             "select": (lambda: torch.topk(x, 4), 5e-6)}
    for name, (fn, floor) in cases.items():
        assert costs.floor(_one(fn)) == floor, name
    old = OC.OpCosts("old", {c: 1e-6 for c in OC.CLASSES if c != "select"} | {"generic": 4e-6},
                     {4: 1e12})
    assert old.floor(_one(lambda: torch.topk(x, 4))) == 4e-6
    assert old.floor(_one(lambda: -x[..., 16:])) == 4e-6


def test_a_grouped_gemm_kind_counts_the_groups_it_reads():
    """Groups read side by side set a decode's grouped kind, to the nearest power of two (52 of
    128 experts read as 64; all 8 of 8 as 8): two rows an expert when every row is read twice."""
    b = torch.randn(128, 16, 32).transpose(-2, -1)
    ends = torch.tensor([i + 1 if i < 52 else 52 for i in range(128)], dtype=torch.int32)
    a, a8 = torch.randn(52, 32), torch.randn(16, 32)
    r = _one(lambda: torch._grouped_mm(a, b, offs=ends))
    assert OC.groups_read(r) == 52
    assert OC.grouped_key(r) == "_grouped_mm 32x16 32-bit 1 rows 64 groups"
    b8 = torch.randn(8, 16, 32).transpose(-2, -1)
    offs8 = torch.arange(2, 17, 2, dtype=torch.int32)
    r8 = _one(lambda: torch._grouped_mm(a8, b8, offs=offs8))
    assert OC.groups_read(r8) == 8
    assert OC.grouped_key(r8) == "_grouped_mm 32x16 32-bit 2 rows 8 groups"


def test_a_prefills_grouped_gemm_is_timed_as_routed_or_on_a_uniform_draw():
    """A prefill's grouped GEMM whose groups are known is a kind of its own, tagged by its
    groups' sizes in order, and its reference runs those groups. Unknown groups (meta) are one
    kind (its matrices and average rows a group), timed on the same rows spread as a seeded
    uniform draw: not exactly even groups, which no router produces."""
    k, n = 8, 64
    b, a = torch.randn(8, n, k).transpose(-2, -1), torch.randn(2048, k)
    sizes = (65, 304, 407, 974, 58, 135, 60, 45)
    even = torch.arange(256, 2049, 256, dtype=torch.int32)
    uneven = torch.tensor(sizes).cumsum(0).int()
    r_even, r_uneven, again = (_one(lambda o=o: torch._grouped_mm(a, b, offs=o))
                               for o in (even, uneven, uneven.clone()))
    assert r_uneven.group_rows == sizes and r_even.group_rows == (256,) * 8
    key = OC.grouped_key(r_uneven)
    assert key.startswith("_grouped_mm 8x64 32-bit prefill 2048 rows as routed ")
    assert key == OC.grouped_key(again) != OC.grouped_key(r_even)
    for r in (r_even, r_uneven):
        ref = _one(OC._grouped_reference(r, "cpu"))
        assert ref.group_rows == r.group_rows and ref.shapes[1] == (8, k, n)
    costs = OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e9}, grouped={
        key: {"bound": "compute", "flops_per_s": 3e7, "bytes_per_s": 1.0, "reference": "it"}})
    assert costs.predict_s(r_uneven, 1e12, 1e12) == pytest.approx(r_uneven.flops / 3e7)
    assert costs.predict_s(r_uneven, 1e12, 1.0) == pytest.approx(r_uneven.bytes)  # the read
    on_meta = [a.to("meta", torch.bfloat16), b.to("meta", torch.bfloat16), even.to("meta")]
    meta = _one(lambda: torch._grouped_mm(on_meta[0], on_meta[1], offs=on_meta[2]))
    assert meta.group_rows == ()
    assert OC.grouped_key(meta) == "_grouped_mm 8x64 16-bit prefill 256 rows"
    draw = OC.uniform_draw(2048, 8)
    assert draw == OC.uniform_draw(2048, 8) and sum(draw) == 2048 and len(draw) == 8
    assert draw != [256] * 8 and max(draw) < 2 * 256  # uneven as a uniform router is, no more
    ref = _one(OC._grouped_reference(meta, "cpu"))
    assert ref.group_rows == tuple(draw) and ref.shapes[1] == (8, k, n)


def test_a_prefill_reference_nearer_the_memory_roof_prices_the_matrices_a_routing_reads():
    """Few rows a group (Qwen3-30B-A3B's 64 at a prefill of 1,024 tokens) leave the grouped
    kernel nearer the memory roof than the compute roof: its time is the read of the matrices of
    groups given rows, at the reference's bytes/s, so a routing that leaves experts empty reads
    less. Nearer the compute roof, its FLOP/s holds whatever the routing reads."""
    k, n = 8, 64
    b, a = torch.randn(8, n, k).transpose(-2, -1), torch.randn(512, k)
    all_used = torch.arange(64, 513, 64, dtype=torch.int32)
    half_used = torch.tensor([128, 256, 384, 512, 512, 512, 512, 512], dtype=torch.int32)
    r_all, r_half = (_one(lambda o=o: torch._grouped_mm(a, b, offs=o))
                     for o in (all_used, half_used))
    assert r_half.bytes < r_all.bytes and r_half.flops == r_all.flops
    peak, bw = 1e12, 1e10

    def costs(flops_per_s, bytes_per_s):
        return OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e12}, grouped={
            OC.grouped_key(r): {"bound": "compute", "flops_per_s": flops_per_s,
                                "bytes_per_s": bytes_per_s, "reference": "it"}
            for r in (r_all, r_half)})
    read = costs(0.2 * peak, 0.7 * bw)  # 20% of the compute roof, 70% of the memory roof
    for r in (r_all, r_half):
        assert read.predict_s(r, peak, bw) == pytest.approx(r.bytes / (0.7 * bw))
    peak, bw = 1e10, 1e12  # where these few FLOPs, not their bytes, take the time
    compute = costs(0.7 * peak, 0.2 * bw)
    for r in (r_all, r_half):
        assert compute.predict_s(r, peak, bw) == pytest.approx(r.flops / (0.7 * peak))


def test_grouped_gemm_is_a_matmul():
    """The experts of a mixture, one grouped GEMM: the matmul class, its floor and roofline."""
    a, b = torch.randn(6, 32), torch.randn(3, 32, 16)
    offs = torch.tensor([2, 4, 6], dtype=torch.int32)
    r = _one(lambda: torch._grouped_mm(a, b, offs=offs))
    assert OC.op_class(r) == "matmul"


def test_measured_on_the_cpu():
    costs = OC.measure_op_costs("cpu")
    assert set(costs.floor_s) == set(OC.FLOORS)
    # seconds, not a unit slipped: a tiny kernel's floor under 1 s even on a busy machine
    assert all(0 < s < 1.0 for s in costs.floor_s.values())
    assert (set(costs.generic_elements_per_s) == set(costs.generic_copy_elements_per_s) ==
            set(costs.indexed_elements_per_s) == {2, 4})
    assert all(r > 1e6 for r in costs.generic_elements_per_s.values())
    assert all(r > 1e6 for r in costs.generic_copy_elements_per_s.values())
    assert {op: set(r) for op, r in costs.loop_elements_per_s.items()} == {
        op: {2, 4} for op in OC.LOOP_OPS}
    assert all(r > 1e6 for rates in costs.loop_elements_per_s.values() for r in rates.values())
    assert (costs.l2_bytes, costs.l2_bytes_per_s, costs.generic_l2_elements_per_s) == (0, 0, {})
    # what a GPU measures, run here on a CPU's cache: rates, or 0 and left out (never negative)
    copy, generic = OC.l2_rates(8 << 20, (torch.float32, torch.bfloat16), "cpu")
    assert copy >= 0 and set(generic) <= {2, 4} and all(r > 0 for r in generic.values())


def test_a_gather_and_a_masked_fill_take_their_own_loops_rate():
    """x[idx] and a fill under a broadcast mask run generic loops of their own: each takes its
    measured rate in place of the broadcast multiply's; the multiply keeps the generic one."""
    idx, mask = torch.randint(0, 8, (64,)), torch.rand(8, 16, 4, 1) > 0.5
    gather, fill, mul = (_one(f) for f in (lambda: x[idx], lambda: x.masked_fill(mask, 0.0),
                                            lambda: x * rms))
    assert {OC.op_class(r) for r in (gather, fill, mul)} == {"generic"}
    costs = OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e9},
                       loop_elements_per_s={"index": {4: 4e9}, "masked_fill": {4: 5e8}})
    assert costs.predict_s(gather, 1e30, 1e30) == pytest.approx(gather.out_elements / 4e9)
    assert costs.predict_s(fill, 1e30, 1e30) == pytest.approx(fill.out_elements / 5e8)
    assert costs.predict_s(mul, 1e30, 1e30) == pytest.approx(mul.out_elements / 1e9)


def test_ropes_cat_and_mixed_order_sum_take_their_own_loops_rate():
    """rotate_half on a head-transposed q (a cat of strided halves) and RoPE's sum of q * cos
    with rotate_half(q) * sin (operands in different orders) each take their measured rate; a
    sum under a broadcast keeps the multiply's, a contiguous sum is vectorized."""
    q = torch.randn(1, 64, 8, 128).transpose(1, 2)
    x1, neg_x2, dense, cos = q[..., :64], -q[..., 64:], q.contiguous(), torch.randn(1, 1, 64, 128)
    cat, mixed, bcast, plain = (_one(f) for f in (
        lambda: torch.cat((neg_x2, x1), dim=-1), lambda: q + dense, lambda: dense + cos,
        lambda: x + x))
    assert [OC.path(r) for r in (cat, mixed, bcast, plain)] == [
        "strided", "strided", "broadcast", "vectorized"]
    costs = OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e9},
                       loop_elements_per_s={"cat": {4: 5e8}, "add strided": {4: 6e8}})
    assert costs.predict_s(cat, 1e30, 1e30) == pytest.approx(cat.out_elements / 5e8)
    assert costs.predict_s(mixed, 1e30, 1e30) == pytest.approx(mixed.out_elements / 6e8)
    assert costs.predict_s(bcast, 1e30, 1e30) == pytest.approx(bcast.out_elements / 1e9)
    assert costs.predict_s(plain, 1e30, 1e30) == pytest.approx(plain.bytes / 1e30)


def test_a_static_caches_write_takes_its_own_loops_rate():
    """index_copy_ of a prefill's head-transposed k into a static cache: its copied elements at
    its measured rate, not at the broadcast multiply's."""
    k, cache, rows = torch.randn(1, 64, 8, 128).transpose(1, 2), torch.zeros(1, 8, 128, 128), \
        torch.arange(64)
    r = _one(lambda: cache.index_copy_(2, rows, k))
    assert OC.op_class(r) == "generic" and r.out_elements == k.numel()
    costs = OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e9},
                       loop_elements_per_s={"index_copy": {4: 3e8}})
    assert costs.predict_s(r, 1e30, 1e30) == pytest.approx(k.numel() / 3e8)


def test_a_top_k_sort_or_few_row_reduction_takes_its_time_alone_at_its_shape():
    """Each top-k, sort and reduction of the last dimension to few rows is timed once alone (its
    passes step with size and bit width) and predicted at that time; a shape not timed keeps its
    class's model, and a reduction to many rows, or of another dimension, is never timed alone."""
    ids, rows, tall = torch.randint(0, 128, (512,)), torch.randn(8, 1, 256), torch.randn(2048, 4)
    topk, sort = _one(lambda: torch.topk(x, 4)), _one(lambda: torch.sort(ids))
    norm = _one(lambda: rows.mean(-1, keepdim=True))
    assert OC.alone_key(topk) == "topk 8x16x4x32 -> 4096 32-bit"  # values and indices
    assert OC.alone_key(sort) == "sort 512 -> 1024 64-bit"
    assert OC.alone_key(norm) == "mean 8x1x256 -> 8 32-bit"
    many, across = _one(lambda: tall.mean(-1)), _one(lambda: rows.mean(0))
    assert not OC.timed_alone(many) and not OC.timed_alone(across)
    costs = OC.measure_alone(OC.OpCosts("cpu", {c: 3.0 for c in OC.CLASSES}, {4: 1e9}),
                             [topk, topk, sort, norm, across], "cpu")
    assert set(costs.alone_s) == {OC.alone_key(topk), OC.alone_key(sort), OC.alone_key(norm)}
    assert all(0 < t < 1.0 for t in costs.alone_s.values())
    assert costs.predict_s(sort, 1e30, 1e30) == costs.alone_s[OC.alone_key(sort)]
    assert costs.predict_s(norm, 1e30, 1e30) == costs.alone_s[OC.alone_key(norm)]
    other = _one(lambda: torch.topk(x, 2))
    assert costs.predict_s(other, 1e30, 1e30) == pytest.approx(3.0)


def test_a_few_row_gemm_is_timed_alone_on_a_gpu_at_its_shape():
    """A GEMM of at most GEMM_FEW_ROWS rows (a decode's projection) is one kind per shape
    (gemm_key), its reference the same GEMM as a linear passes it (a bias for addmm); on a GPU
    it is timed alone and predicted at that time, on a CPU it keeps the matmul model. A GEMM of
    more rows is never timed alone."""
    lin = torch.nn.Linear(64, 16).to(torch.bfloat16)
    x8, x128 = torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(128, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        few, many = _one(lambda: lin(x8)), _one(lambda: lin(x128))
    assert few.op == "addmm" and OC.timed_alone(few) and not OC.timed_alone(many)
    assert OC.alone_key(few) == OC.gemm_key(few) == "addmm 8x64 @ 64x16 16-bit"
    ref = _one(OC._alone_reference(few, "cpu"))
    assert (ref.op, ref.shapes, ref.flops, ref.bytes) == (few.op, few.shapes, few.flops, few.bytes)
    base = OC.OpCosts("cpu", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9, 2: 1e9})
    assert OC.measure_alone(base, [few], "cpu").alone_s == {}  # cuBLAS's, not a CPU's
    model = base.predict_s(few, 1e12, 1e12)
    base.alone_s[OC.alone_key(few)] = 7e-6
    assert base.predict_s(few, 1e12, 1e12) == 7e-6 != model


@pytest.mark.gpu
def test_measured_on_the_gpu():
    costs = OC.measure_op_costs("cuda")
    assert all(0 < s < 50e-6 for s in costs.floor_s.values())  # tiny kernels: microseconds
    # a GEMM's or an attention kernel's floor is above an elementwise kernel's
    assert costs.floor_s["matmul"] > costs.floor_s["elementwise"]
    assert costs.floor_s["attention"] > costs.floor_s["elementwise"]
    assert 0 <= costs.hbm_s < 20e-6  # an HBM round trip or two
    assert 0 < costs.gap_s < 5e-6  # a launch
    assert all(1e10 < r < 1e13 for r in costs.generic_elements_per_s.values())
    assert all(1e10 < r < 1e13 for r in costs.generic_copy_elements_per_s.values())
    assert all(1e10 < r < 1e13 for rates in costs.loop_elements_per_s.values()
               for r in rates.values())
    # with its operands in L2: bytes and elements a second, units not slipped
    assert costs.l2_bytes == torch.cuda.get_device_properties(0).L2_cache_size // 2
    assert 1e11 < costs.l2_bytes_per_s < 1e15
    assert set(costs.generic_l2_elements_per_s) == {2, 4}
    assert all(1e10 < r < 1e14 for r in costs.generic_l2_elements_per_s.values())


def _attention(**kw) -> count.OpRecord:
    qq, kk = torch.randn(2, 4, kw.pop("lq", 64), 32), torch.randn(2, 4, 64, 32)
    (r,) = [r for r in _records(lambda: torch.nn.functional.scaled_dot_product_attention(
        qq, kk, kk, **kw)) if OC.op_class(r) == "attention"]
    return r


def test_attention_kinds_are_told_apart_by_mask_causality_and_phase():
    keys = [OC.attention_key(_attention(**kw)) for kw in (
        {}, {"is_causal": True}, {"attn_mask": torch.zeros(2, 1, 64, 64)}, {"lq": 1},
        {"lq": 16}, {"lq": 17})]
    op = keys[0].split()[0]
    k = "q 2x4x64x32 k"  # a decode's kind holds its shapes: its reference is the op's own
    assert keys == [f"{op} d32 32-bit {m} {p}" for m, p in (
        ("none", "prefill"), ("causal", "prefill"), ("mask", "prefill"),
        ("none", f"decode 2x4x1x32 {k}"), ("none", f"decode 2x4x16x32 {k}"), ("none", "prefill"))]


def test_a_measured_attention_rate_replaces_the_ceiling_of_its_bound():
    costs = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9})
    pre, dec = _attention(), _attention(lq=1)
    peak, bw = 1e12, 1e12
    assert costs.predict_s(pre, peak, bw) == pytest.approx(1e-6 + pre.flops / peak)  # unmeasured
    costs.attention[OC.attention_key(pre)] = {"bound": "compute", "flops_per_s": 1e11}
    costs.attention[OC.attention_key(dec)] = {"bound": "memory", "bytes_per_s": 1e9}
    assert costs.predict_s(pre, peak, bw) == pytest.approx(1e-6 + pre.flops / 1e11)
    assert costs.predict_s(dec, peak, bw) == pytest.approx(1e-6 + OC.attention_bytes(dec) / 1e9)
    costs.attention[OC.attention_key(pre)] = {"error": "CUDA out of memory"}  # back on the roof
    assert costs.predict_s(pre, peak, bw) == pytest.approx(1e-6 + pre.flops / peak)


def test_an_attention_reference_that_cannot_run_is_a_reason_not_a_crash(monkeypatch):
    def refuse(r, device, sm_count):
        def call():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return call

    monkeypatch.setattr(OC, "_attention_reference", refuse)
    r = _attention()
    costs = OC.measure_attention(OC.OpCosts("cpu", {}, {}), [r], "cpu")
    assert costs.attention == {OC.attention_key(r): {"error": "CUDA out of memory. Tried to "
                                                              "allocate 1.00 GiB"}}
    assert OC.attention_summary(costs.attention).endswith(
        "not measured (CUDA out of memory. Tried to allocate 1.00 GiB): on the roofline")
    # a reference that runs the math fallback (matmuls and a softmax) has no rate to give
    monkeypatch.setattr(OC, "_attention_reference", lambda r, device, sms: lambda: (
        torch.randn(4, 4) @ torch.randn(4, 4)).softmax(-1))
    costs = OC.measure_attention(OC.OpCosts("cpu", {}, {}), [r], "cpu")
    assert costs.attention[OC.attention_key(r)] == {
        "error": "the reference ran no fused attention kernel"}


def test_a_prefill_too_small_to_fill_the_gpu_is_timed_on_its_own_shapes():
    """2 sequences x 4 heads x 64 queries: 8 programs of 64 rows. On 16 SMs half stay idle and
    the longest program's chain sets the time, so its reference is its own shapes; on 8 SMs
    (or off a GPU) it shares the kind's reference that fills the GPU."""
    pre = _attention()
    assert not OC.under_filled(pre, 0) and not OC.under_filled(pre, 8)
    assert OC.under_filled(pre, 16)
    assert not OC.under_filled(_attention(lq=65), 16)  # a ragged last tile is a program too
    own, shared = OC.attention_key(pre, 16), OC.attention_key(pre, 8)
    assert shared == OC.attention_key(pre) and own == f"{shared} 2x4x64x32 q 2x4x64x32 k"
    for sms, reference in ((16, "2x4x64x32 q, 64 keys"), (0, "8x4x256x32 q, 256 keys")):
        costs = OC.measure_attention(OC.OpCosts("cpu", {}, {}, sm_count=sms), [pre], "cpu")
        (a,) = costs.attention.values()
        assert a["reference"] == reference and a["bound"] == "compute"
    # the rate it was measured at is the rate it is priced at: no share of the GPU on top
    costs = OC.OpCosts("test", {c: 0.0 for c in OC.CLASSES}, {4: 1e9}, sm_count=16)
    costs.attention[own] = {"bound": "compute", "flops_per_s": 1e11}
    assert costs.predict_s(pre, 1e12, 1e12) == pytest.approx(pre.flops / 1e11)


def test_a_latent_attentions_reference_keeps_v_narrower_than_q_and_k():
    """DeepSeek's q and k of 192 dims against v's 128 (here 48 and 32), through rooflab's
    kernel (SDPA on a CPU runs such shapes unfused): the reference is timed with v at its own
    width, so that its count (and so its rate) is the op's kind's. (Its own shapes: as a GPU of
    many SMs times a prefill this small.)"""
    pytest.importorskip("triton")
    from rooflab.kernels import hf_attention  # noqa: F401 - defines torch.ops.rooflab
    qk, vv = torch.randn(2, 4, 64, 48, dtype=torch.float16), torch.randn(2, 4, 64, 32,
                                                                          dtype=torch.float16)
    (r,) = [r for r in _records(lambda: torch.ops.rooflab.flash_attention(qk, qk, vv, True, 0.1))
            if OC.op_class(r) == "attention"]
    (ref,) = [x for x in _records(OC._attention_reference(r, "cpu", 1000))
              if OC.op_class(x) == "attention"]
    assert ref.shapes[2][-1] == 32 and ref.shapes[0][-1] == 48
    assert OC.attention_key(ref, 1000) == OC.attention_key(r, 1000)


def test_a_padded_prefills_kind_is_causal_with_a_mask_and_its_reference_keeps_keys():
    """rooflab's kernel with a padded batch's kept keys: counted causal (it skips the blocks past
    the diagonal), keyed "causal mask", and its reference runs the same kernel with kept keys
    (as a GPU of many SMs times a prefill this small: its own shapes)."""
    pytest.importorskip("triton")
    from rooflab.kernels import hf_attention  # noqa: F401 - defines torch.ops.rooflab
    qkv = torch.randn(2, 4, 64, 32, dtype=torch.float16)
    keep = torch.ones(2, 64, dtype=torch.bool)
    keep[0, :9] = False
    (r,) = [r for r in _records(lambda: torch.ops.rooflab.flash_attention(
        qkv, qkv, qkv, True, 0.1, keep=keep)) if OC.op_class(r) == "attention"]
    assert r.macs == 2 * 4 * (64 * 65 // 2) * 2 * 32  # the causal pairs, padded keys included
    key = OC.attention_key(r, 1000)
    assert " 16-bit causal mask prefill " in key
    (ref,) = [x for x in _records(OC._attention_reference(r, "cpu", 1000))
              if OC.op_class(x) == "attention"]
    assert OC.attention_key(ref, 1000) == key and len(ref.shapes) == 4


def test_a_softcapped_attentions_kind_and_reference_keep_the_cap():
    """rooflab's kernel with Gemma 2's softcap: 3 FLOPs a pair past the matmuls' (here every
    pair: not causal), keyed "softcap", and its reference runs the kernel with a cap."""
    pytest.importorskip("triton")
    from rooflab.kernels import hf_attention  # noqa: F401 - defines torch.ops.rooflab
    qkv = torch.randn(2, 4, 64, 32, dtype=torch.float16)
    (r,) = [r for r in _records(lambda: torch.ops.rooflab.flash_attention(
        qkv, qkv, qkv, False, 0.1, softcap=30.0)) if OC.op_class(r) == "attention"]
    assert r.flops - 2 * r.macs == 3 * 2 * 4 * 64 * 64
    key = OC.attention_key(r, 1000)
    assert " 16-bit softcap prefill " in key
    (ref,) = [x for x in _records(OC._attention_reference(r, "cpu", 1000))
              if OC.op_class(x) == "attention"]
    assert OC.attention_key(ref, 1000) == key


def test_attention_bytes_expand_broadcast_heads():
    """K/V heads as a broadcast view (one head read by 4): the counter holds one copy, the
    decode kernel streams one per query head."""
    qq, kv = torch.randn(2, 4, 1, 32), torch.randn(2, 1, 64, 32).expand(2, 4, 64, 32)
    (r,) = [r for r in _records(lambda: torch.nn.functional.scaled_dot_product_attention(
        qq, kv, kv)) if OC.op_class(r) == "attention"]
    out = 2 * 4 * 1 * 32 * 4
    assert OC.attention_bytes(r) == (qq.numel() + 2 * kv.numel()) * 4 + r.bytes_written
    assert r.bytes_written >= out and r.bytes < OC.attention_bytes(r)


def test_attention_rates_are_measured_once_per_kind_on_the_cpu():
    rs = [_attention(), _attention(), _attention(lq=1), _attention(is_causal=True)]
    costs = OC.measure_attention(OC.OpCosts("cpu", {}, {}), rs, "cpu")
    assert set(costs.attention) == {OC.attention_key(r) for r in rs} and len(costs.attention) == 3
    for key, a in costs.attention.items():
        assert a["bound"] == ("memory" if " decode " in key else "compute")
        assert a["flops_per_s"] > 0 and a["bytes_per_s"] > 0
    # the reference is counted by the same rules: a decode's is its own 4-head cache of 64 keys
    assert costs.attention[OC.attention_key(rs[2])]["reference"] == "2x4x1x32 q, 64 keys"


@pytest.mark.gpu
def test_attention_rates_on_the_gpu_stay_under_their_ceilings():
    """Each kind's rate, checked against the independently measured ceilings: a prefill under
    the matmul peak; a decode under 1.1x the copy ceiling (a read-only stream may pass a copy,
    which is half writes, by a few percent: part 5 says so where it happens)."""
    from rooflab.measure import ceilings as CE

    ceil = CE.get("cuda")
    peak = ceil.peak_flops_per_s.get("bf16") or max(ceil.peak_flops_per_s.values())
    records = []
    # a decode's reference is its own shape: 8 x 32 heads of 4,096 keys stream half a GB
    for b, lq, n, kw in ((1, 1024, 1024, {"is_causal": True}), (1, 1024, 1024, {}),
                         (8, 1, 4096, {})):
        q = torch.randn(b, 32 if lq == 1 else 8, lq, 128, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(b, q.shape[1], n, 128, device="cuda", dtype=torch.bfloat16)
        records += [r for r in _records(lambda: torch.nn.functional.scaled_dot_product_attention(
            q, kv, kv, **kw)) if OC.op_class(r) == "attention"]
    costs = OC.measure_attention(OC.OpCosts("cuda", {}, {}), records, "cuda")
    assert len(costs.attention) == 3, costs.attention
    for key, a in costs.attention.items():
        assert "bound" in a, (key, a)
        if a["bound"] == "compute":
            assert 0.05 * peak < a["flops_per_s"] <= peak, (key, a)
        else:
            assert 0.2 * ceil.mem_bandwidth_bytes_per_s < a["bytes_per_s"] <= (
                1.1 * ceil.mem_bandwidth_bytes_per_s), (key, a)


def test_a_grouped_gemm_kind_is_measured_once_and_replaces_the_ceiling():
    """The experts' grouped GEMM at decode (a row or two an expert) gets the bytes/s its kernel
    reaches on a reference of the same kind (as many groups read, to a power of two), timed
    here; a prefill's, FLOP/s."""
    a, offs = torch.randn(4, 32), torch.tensor([1, 2, 3, 4, 4, 4, 4, 4], dtype=torch.int32)
    b = torch.randn(8, 16, 32).transpose(-2, -1)
    decode = _one(lambda: torch._grouped_mm(a, b, offs=offs))
    a2, offs2 = torch.randn(8 * 64, 32), torch.arange(64, 513, 64, dtype=torch.int32)
    prefill = _one(lambda: torch._grouped_mm(a2, b, offs=offs2))
    assert OC.groups_read(decode) == 4  # the groups with rows: their matrices are read
    assert OC.grouped_key(decode) == "_grouped_mm 32x16 32-bit 1 rows 4 groups"
    assert OC.grouped_key(prefill).startswith(
        "_grouped_mm 32x16 32-bit prefill 512 rows as routed ")
    costs = OC.measure_rates(OC.OpCosts("cpu", {c: 0.0 for c in OC.CLASSES}, {4: 1e9}),
                             [decode, decode, prefill], "cpu")
    assert set(costs.grouped) == {OC.grouped_key(decode), OC.grouped_key(prefill)}
    d, p = costs.grouped[OC.grouped_key(decode)], costs.grouped[OC.grouped_key(prefill)]
    assert (d["bound"], p["bound"]) == ("memory", "compute")
    assert d["reference"] == "4 rows in 4 groups of 32x16"  # 4 experts hit, a row each
    assert p["reference"] == "512 rows in 8 groups of 32x16, as routed"
    # the measured rate replaces the copy bandwidth (a slow one: the measured time wins)
    assert costs.predict_s(decode, 1e30, 1e30) == pytest.approx(decode.bytes / d["bytes_per_s"])
    assert costs.predict_s(prefill, 1e30, 1e30) == pytest.approx(
        max(prefill.flops / p["flops_per_s"], prefill.bytes / 1e30))


def test_a_small_op_reading_a_weight_waits_on_hbm_a_matmul_does_not():
    """A norm's weight times its rows pays hbm_s over its floor; the same multiply by an
    activation does not, nor a linear (its bandwidth term reads the weight from HBM)."""
    norm, lin = torch.nn.Parameter(torch.ones(32)), torch.nn.Linear(32, 8)
    with torch.no_grad():
        weighted = _one(lambda: norm * x)
        plain = _one(lambda: w * x)
        (mm,) = [r for r in _records(lambda: lin(x)) if OC.op_class(r) == "matmul"]
    assert weighted.reads_weight and not plain.reads_weight and mm.reads_weight
    costs = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e30}, hbm_s=2e-6)
    base = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e30})
    assert costs.predict_s(weighted, 1e30, 1e30) == pytest.approx(3e-6)
    assert costs.predict_s(plain, 1e30, 1e30) == pytest.approx(1e-6)
    assert costs.predict_s(mm, 1e30, 1e30) == base.predict_s(mm, 1e30, 1e30)
    assert OC.hbm_latency_s("cpu") == 0.0


def test_what_cublas_adds_to_a_gemm_shape_is_added_to_its_prediction():
    """A GEMM shape whose extra kernels (a split-K's reduction) were profiled takes their time
    beside floor and bytes; another shape nothing; off a GPU nothing is measured."""
    lin = torch.nn.Linear(32, 8, bias=False)
    with torch.no_grad():
        (mm,) = _records(lambda: lin(x.view(-1, 32)))
    assert OC.gemm_key(mm) == "mm 512x32 @ 32x8 32-bit"
    costs = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9},
                       gemm_extra_s={"mm 512x32 @ 32x8 32-bit": 2e-6})
    plain = OC.OpCosts("test", {c: 1e-6 for c in OC.CLASSES}, {4: 1e9})
    assert costs.predict_s(mm, 1e12, 1e12) == pytest.approx(plain.predict_s(mm, 1e12, 1e12) + 2e-6)
    assert OC.measure_gemm_extra(plain, [mm], "cpu").gemm_extra_s == {}


@pytest.mark.gpu
def test_a_split_gemm_is_profiled_alone_on_the_gpu():
    """On a GPU each GEMM shape met gets its extra kernels' time, 0 or a few microseconds."""
    xs = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    ws = [torch.nn.Parameter(torch.randn(n, k, device="cuda", dtype=torch.bfloat16))
          for k, n in ((4096, 1024), (1024, 4096))]
    with torch.no_grad():
        records = [r for w in ws for r in _records(
            lambda w=w: torch.nn.functional.linear(xs[:, :w.shape[1]], w))
            if OC.op_class(r) == "matmul"]
    costs = OC.measure_gemm_extra(OC.OpCosts("cuda", {}, {}), records, "cuda")
    assert len(costs.gemm_extra_s) == 2
    assert all(0 <= s < 20e-6 for s in costs.gemm_extra_s.values())


def test_an_input_still_in_l2_is_read_at_l2s_rates():
    """An input the op before wrote, fitting in L2 with the bytes moved since, is read at the
    L2's measured rates (bytes: the copy's; elements: the generic loop's); one that does not
    fit, or costs without L2 rates (a CPU), price it as before."""
    y = torch.randn(8, 16, 4, 32)
    with count.Counter() as c:
        h = y * 2.0
        sq, scaled = h * h, h * rms  # vectorized (h once: the same tensor), broadcast
    sq, scaled = (r for r in c.records[1:] if r.bytes)
    assert sq.fresh == ((h.numel() * 4, 0),) and scaled.fresh[0][0] == h.numel() * 4
    plain = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {4: 1e9})
    l2 = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {4: 1e9}, l2_bytes=1 << 20,
                    l2_bytes_per_s=4e12, generic_l2_elements_per_s={4: 4e9})
    small = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {4: 1e9}, l2_bytes=1 << 15,
                       l2_bytes_per_s=4e12, generic_l2_elements_per_s={4: 4e9})
    peak, bw = 1e15, 1e12
    n = y.numel()
    assert plain.in_l2(sq) == small.in_l2(sq) == 0 and l2.in_l2(sq) == n * 4  # 64 kB
    assert plain.predict_s(sq, peak, bw) == pytest.approx(1e-6 + sq.bytes / bw)
    assert l2.predict_s(sq, peak, bw) == pytest.approx(1e-6 + n * 4 / bw + n * 4 / 4e12)
    assert small.predict_s(sq, peak, bw) == plain.predict_s(sq, peak, bw)
    f = n * 4 / scaled.bytes_read  # h's share of the broadcast multiply's reads
    assert l2.predict_s(scaled, peak, bw) == pytest.approx(1e-6 + n * ((1 - f) / 1e9 + f / 4e9))
    assert plain.predict_s(scaled, peak, bw) == pytest.approx(1e-6 + n / 1e9)
