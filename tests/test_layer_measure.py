"""The measured layer on the CPU, and the miss explanations on the committed H200 profile."""
import json
import pathlib

import pytest

pytest.importorskip("transformers")

from rooflab import models as M  # noqa: E402
from rooflab.lab import layer_measure as LM  # noqa: E402
from rooflab.measure import ceilings as CE  # noqa: E402

H200 = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200_decoder.json"


def test_cpu_decode_layer_measured_and_predicted():
    ceil = CE.get("cpu", quick=True)
    r = LM.measure(M.load(), M.Phase.decode(1, 64), "full", ceil, "cpu", dtype="fp32")
    comps = {c["component"]: c for c in r["components"]}
    assert {"attn.q_proj", "attn.core+rope", "mlp.down_proj", "residuals"} <= set(comps)
    assert comps["attn.q_proj"]["flops"] == 2 * 640 * 1024  # one token through q_proj
    assert r["predicted_s"] > 0 and r["kernel_s"] > 0 and r["wall_s"] > 0
    # cat(past K, new K) and the same for V: read 63 + 1 positions, write 64; 1 head of 256, fp32
    assert comps["attn.core+rope"]["cache_copy_bytes"] == 2 * (63 + 1 + 64) * 256 * 4  # 262144


def test_explanations_on_the_h200_profile():
    d = json.loads(H200.read_text())
    ceil = CE.Ceilings(**d["ceilings"])
    row = d["rows"][0]  # gemma prefill B=8 L=2048, eager
    c = next(c for c in row["components"] if c["component"] == "attn.q_norm")
    counted = {"ops": ["mul"] * c["kernels_counted"], "kernels": c["kernels_counted"],
               "flops": c["flops"], "bytes": c["bytes"], "predicted_s": c["predicted_s"],
               "cache_copy_bytes": 0}
    why = LM.explain("attn.q_norm", counted, d["kernel_floor_s"], 16384, c["kernel_s"], ceil,
                     "bf16", c["top_kernels"])
    assert "generic (non-vectorized) elementwise kernel" in why
    assert "of the measured copy bandwidth" in why
    assert "KV cache" not in why  # prefill concatenates no cache
    cache = dict(counted, cache_copy_bytes=8_000_000)
    assert "KV cache is concatenated" in LM.explain("attn.core+rope", cache, 1e-6, 1, 1e-3,
                                                    ceil, "bf16")
