"""The held-out configs (tests/data/heldout/, never tuned on): each loads, has transformers' own
parameter count, and its layers count exactly as the analytic model says (FLOPs of every
component) and as FlopCounterMode says (matmul FLOPs), on the meta device."""
import pathlib

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

pytest.importorskip("transformers")

from rooflab import cost as C  # noqa: E402
from rooflab import count, hf  # noqa: E402
from rooflab import models as M  # noqa: E402

HELDOUT = sorted((pathlib.Path(__file__).parent / "data" / "heldout").glob("*.json"))


def test_there_are_held_out_configs_of_every_family_but_gemma2():
    families = {M.load(str(p)).family for p in HELDOUT}
    assert len(HELDOUT) >= 4 and families == {"llama", "qwen2", "qwen3", "mistral", "gemma3"}
    assert not {M.load(str(p)).name for p in HELDOUT} & set(M.PRESETS)


@pytest.mark.parametrize("path", HELDOUT, ids=lambda p: p.stem)
def test_parameters_are_transformers_own(path):
    cfg = M.load(str(path))
    model, _ = hf.build_model(cfg, "meta")
    assert sum(p.numel() for p in model.parameters()) == M.param_count(cfg)


@pytest.mark.parametrize("path", HELDOUT, ids=lambda p: p.stem)
@pytest.mark.parametrize("phase", [M.Phase.prefill(2, 48), M.Phase.decode(3, 96)],
                         ids=["prefill", "decode"])
def test_layers_count_as_the_analytic_model_and_flop_counter(path, phase):
    cfg = M.load(str(path))
    for lt in sorted(set(cfg.layer_types)):
        call = hf.prepare(cfg, lt, phase)
        c = count.count(call, module=call.layer)
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            call()
        assert c.unsupported_ops() == {}
        assert c.matmul_flops() == fc.get_total_flops()
        assert c.total_flops == C.total(M.layer_costs(cfg, phase, lt)).flops, (path.stem, lt)


def test_the_layer_benchmark_takes_every_held_out_config_and_layer_type(monkeypatch):
    import importlib.util
    import sys

    bench = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
    monkeypatch.setattr(sys, "path", [str(bench), *sys.path])  # its `from common import write`
    spec = importlib.util.spec_from_file_location("decoder_bench", bench / "decoder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = mod.cases(heldout=True)
    assert {c.name for c, _, _ in cases} == {M.load(str(p)).name for p in HELDOUT}
    assert ("heldout-gemma3-1152", "sliding") in {(c.name, lt) for c, lt, _ in cases}
    for _, _, phases in cases:  # decode over the range: B 1-64, caches 512-8192
        decode = {(ph.batch, ph.kv_len) for ph in phases if ph.kind == "decode"}
        assert len(phases) == 6 and {b for b, _ in decode} == {1, 8, 32, 64}
        assert min(kv for _, kv in decode) == 512 and max(kv for _, kv in decode) == 8192
