"""The measured layer on the CPU; predictions and miss explanations from counted ops."""
import pytest

pytest.importorskip("transformers")

from rooflab import models as M  # noqa: E402
from rooflab.studies import layer_measure as LM  # noqa: E402
from rooflab.measure import ceilings as CE  # noqa: E402

@pytest.mark.slow
def test_cpu_decode_layer_measured_and_predicted():
    ceil = CE.get("cpu", quick=True)
    r = LM.measure_layer(M.load(), M.Phase.decode(1, 64), "full", ceil, "cpu", dtype="fp32")
    comps = {c["component"]: c for c in r["components"]}
    assert {"attn.q_proj", "attn.core+rope", "mlp.down_proj", "residuals"} <= set(comps)
    assert comps["attn.q_proj"]["flops"] == 2 * 640 * 1024  # one token through q_proj
    assert r["predicted_s"] > 0 and r["kernel_s"] > 0 and r["wall_s"] > 0
    # cat(past K, new K) and the same for V: read 63 + 1 positions, write 64; 1 head of 256, fp32
    assert comps["attn.core+rope"]["cache_copy_bytes"] == 2 * (63 + 1 + 64) * 256 * 4  # 262144
    # per op and shapes: the profile's ops matched to the counted ones
    ops = {o["op"]: o for o in r["ops"]}
    assert ops["mm(1x640,640x1024)"]["class"] == "matmul"  # q_proj, one token
    assert ops["mm(1x640,640x1024)"]["kernel_s"] > 0
    assert ops["cat(1x1x63x256,1x1x1x256)"]["kernel_s"] > 0  # the KV cache, concatenated
    assert all(o["kernel_s"] for o in r["ops"])  # every counted op found in the profile


def test_prediction_and_explanations_from_counted_ops():
    import torch

    from rooflab import count, hf
    from rooflab.measure import op_classes as OC

    cfg = M.load()
    layer, _ = hf.build_layer(cfg, "full", "meta", dtype=torch.bfloat16)
    with torch.no_grad(), count.Counter(layer) as c:
        hf.prepare(cfg, "full", M.Phase.prefill(2, 128), "meta", layer=layer)()
    costs = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {2: 1e11, 4: 1e11})
    ceil = CE.Ceilings("cuda", "test", 1e12, {"bf16": 1e14})
    per = LM.predict(c.records, ceil, "bf16", costs, cfg.family)
    qn = per["attn.q_norm"]
    # gemma's q_norm: x.float() and w.float() widen; x * rsqrt(...)[..., None] and
    # x * (1 + w) broadcast
    assert sorted(qn["generic"]) == ["_to_copy (widening)"] * 2 + ["mul (broadcast)"] * 2
    assert qn["floors_s"] == pytest.approx(qn["kernels"] * 1e-6)
    assert qn["predicted_s"] > qn["roofline_s"] + qn["floors_s"]  # the generic loop is slower
    why = LM.explain("attn.q_norm", qn, costs, 256, 2 * qn["predicted_s"], ceil, "bf16")
    assert "generic (non-vectorized) elementwise loop: _to_copy (widening), mul (broadcast)" in why
    assert "of the measured copy bandwidth" in why and "KV cache" not in why
    cache = dict(qn, cache_copy_bytes=8_000_000)
    assert "KV cache is concatenated" in LM.explain("attn.core+rope", cache, costs, 1, 1e-3,
                                                    ceil, "bf16")
    # the attention component names its kind's measured rate, where one was measured (on the
    # CPU: SDPA on the meta device decomposes into bmm and softmax)
    layer, _ = hf.build_layer(cfg, "full", "cpu", attn="sdpa")
    with torch.no_grad(), count.Counter(layer) as c:
        hf.prepare(cfg, "full", M.Phase.prefill(1, 16), "cpu", layer=layer)()
    per = LM.predict(c.records, ceil, "fp32", costs, cfg.family)
    comp, core = next((k, d) for k, d in per.items() if d.get("attention_kinds"))
    (kind,) = core["attention_kinds"]
    assert "the attention kernel alone" not in LM.explain(comp, core, costs, 16, 1e-3, ceil,
                                                          "bf16")
    costs.attention[kind] = {"bound": "compute", "flops_per_s": 2.71e14}
    assert (f"the attention kernel alone, timed on a shape of its kind that fills the device: "
            f"{kind} 271 TFLOP/s" in LM.explain(comp, core, costs, 16, 1e-3, ceil, "bf16"))
