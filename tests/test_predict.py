"""predict.py: counted ops + measured op costs -> predicted time, the one place. Every view sums to
the same totals, a GEMM's prediction is its hand floor plus its class's floor, and the roof's one
fallback is the one stated."""
import pytest
import torch

from rooflab import count, hf
from rooflab import models as M
from rooflab import predict as PR
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC
from rooflab.roofline import Roof

CEIL = CE.Ceilings("cpu", "test", 1e10, {"fp32": 1e11, "bf16": 4e11})
FLOOR = 1e-6
COSTS = OC.OpCosts("test", {k: FLOOR for k in OC.CLASSES}, {2: 1e9, 4: 1e9}, gap_s=3e-7)


def test_one_linear_is_its_hand_floor_plus_the_gemm_floor():
    lin = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(8, 64)
    c = count.count(lin, x, module=lin)
    t, = PR.op_times(c.records, Roof.from_ceilings(CEIL, "fp32"), COSTS)
    macs = 8 * 64 * 32
    nbytes = 4 * (8 * 64 + 64 * 32 + 8 * 32)  # x, W read, y written: fp32
    assert (t.record.macs, t.record.bytes) == (macs, nbytes)
    floor = max(2 * macs / 1e11, nbytes / 1e10)
    assert t.roofline_s == pytest.approx(floor)
    assert t.predicted_s == pytest.approx(FLOOR + floor) and t.floor_s == FLOOR


def test_every_view_sums_to_the_same_totals():
    cfg = M.load("gemma-3-270m-it")
    layer, _ = hf.build_layer(cfg, "sliding", "meta")
    with torch.no_grad(), count.Counter(layer) as c:
        hf.prepare(cfg, "sliding", M.Phase.prefill(1, 16), "meta", layer=layer)()
    times = PR.op_times(c.records, Roof.from_ceilings(CEIL, "fp32"), COSTS)
    assert len(times) == sum(1 for r in c.records if r.bytes)  # a view is no kernel
    views = [PR.by_op, PR.by_module, PR.by_layer, PR.by_component(cfg.family)]
    totals = [PR.total(PR.group(times, key)) for key in views]
    for t in totals[1:]:
        assert t == pytest.approx(totals[0])
    assert totals[0]["kernels"] == len(times)
    assert totals[0]["flops"] == sum(r.flops for r in c.records)
    assert totals[0]["predicted_s"] == pytest.approx(sum(t.predicted_s for t in times))
    with_gaps = PR.total(PR.group(times, PR.by_layer, gap_s=COSTS.gap_s))
    assert with_gaps["predicted_s"] == pytest.approx(totals[0]["predicted_s"]
                                                     + len(times) * COSTS.gap_s)
    assert with_gaps["kernels_s"] == pytest.approx(totals[0]["kernels_s"])


def test_without_costs_the_prediction_is_the_plain_roofline():
    lin = torch.nn.Linear(16, 16)
    c = count.count(lin, torch.randn(4, 16), module=lin)
    for t in PR.op_times(c.records, Roof.from_ceilings(CEIL, "fp32"), None):
        assert t.predicted_s == t.roofline_s and t.floor_s == 0.0


@pytest.mark.parametrize("dtype,stands_in", [("bf16", "bf16"), ("fp32", "fp32"), ("fp8", "bf16")])
def test_the_measured_roof_takes_its_dtype_or_the_one_fallback(dtype, stands_in):
    roof = Roof.from_ceilings(CEIL, dtype)
    assert roof.peak_flops_per_s == CEIL.peak_flops_per_s[stands_in]
    assert roof.mem_bandwidth_bytes_per_s == 1e10 and roof.measured and roof.dtype == stands_in
    assert roof.label == f"test (measured) {stands_in}"
    cpu = CE.Ceilings("cpu", "c", 1e10, {"fp32": 1e11, "fp64": 5e10})  # no bf16 measured: fp32
    assert Roof.from_ceilings(cpu, "fp16").dtype == "fp32"


def test_layer_names():
    rec = lambda module: count.OpRecord("mm", module, 1, 2, 3, 4)  # noqa: E731
    assert PR.by_layer(rec("model.layers.11.mlp.down_proj")) == "layer 11"
    assert PR.by_layer(rec("lm_head")) == "lm_head"
    assert PR.by_layer(rec("model.embed_tokens")) == "embedding"
    assert PR.by_layer(rec("model.norm")) == "final norm"


def test_the_basis_says_where_each_rate_came_from():
    from dataclasses import replace

    costs = OC.OpCosts("cpu", {k: FLOOR for k in OC.CLASSES}, {2: 1e9, 4: 1e9}, attention={
        "a": {"bound": "compute", "flops_per_s": 1e12, "bytes_per_s": 1e9, "reference": "REF"},
        "b": {"error": "out of memory"}})
    fresh = PR.basis(replace(CEIL, date="today"), costs)
    assert fresh["ceilings"] == "measured this run (today)"
    assert "cached from today" in PR.basis(replace(CEIL, date="today", cached=True),
                                            costs)["ceilings"]
    assert fresh["attention"] == {"a": "timed this run on REF",
                                  "b": "the roofline's ceilings (out of memory)"}
    assert "grouped" not in fresh and "gemms" not in fresh  # none met
    costs.grouped = {"g": {"bound": "memory", "bytes_per_s": 1e9, "reference": "8 rows"}}
    costs.gemm_extra_s = {"mm 8x64 @ 64x16 16-bit": 2e-6, "mm 8x16 @ 16x64 16-bit": 0.0}
    more = PR.basis(CEIL, costs)
    assert more["grouped"] == {"g": "timed this run on 8 rows"}
    assert more["gemms"] == ("2 GEMM shapes profiled alone this run, 1 with kernels beside the "
                             "main one (a split-K's reduction)")
    # with a model's records, only what they use: costs shared by several models list them all
    lin = torch.nn.Linear(64, 16, bias=False).to(torch.bfloat16)
    with count.Counter() as c:
        lin(torch.randn(8, 64, dtype=torch.bfloat16))
    costs.alone_s = {"topk 8x64 -> 32 16-bit": 1e-5}
    assert PR.basis(CEIL, costs)["alone"] == ("1 top-k, sort, few-row reduction and few-row "
                                              "GEMM shapes timed alone this run")
    mine = PR.basis(CEIL, costs, c.records)
    assert mine["gemms"] == ("1 GEMM shapes profiled alone this run, 1 with kernels beside the "
                             "main one (a split-K's reduction)")
    assert mine["attention"] == {} and "grouped" not in mine and "alone" not in mine
