"""The held-out configs (tests/data/heldout/, never tuned on): each loads, has transformers' own
parameter count, and its layers count exactly as the analytic model says (FLOPs of every
component) and as FlopCounterMode says (matmul FLOPs), on the meta device; so do presets of
every dense family at sizes drawn from a seed, and mixtures of drawn sizes route exactly the
experts' MACs counted."""
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
    counts_agree(M.load(str(path)), phase)


def counts_agree(cfg: M.ModelConfig, phase: M.Phase) -> None:
    """Each layer type of ``cfg`` at ``phase``, on the meta device: the counter's FLOPs equal
    the analytic model's, its matmul FLOPs FlopCounterMode's, and no op goes uncounted."""
    for lt in sorted(set(cfg.layer_types)):
        call = hf.prepare(cfg, lt, phase)
        c = count.count(call, module=call.layer)
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            call()
        assert c.unsupported_ops() == {}, (cfg.name, lt)
        assert c.matmul_flops() == fc.get_total_flops(), (cfg, phase, lt)
        assert c.total_flops == C.total(M.layer_costs(cfg, phase, lt)).flops, (cfg, phase, lt)


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


def drawn(seed: int, families: tuple[str, ...]) -> M.ModelConfig:
    """A preset of one of ``families`` with sizes nobody picked, from a seeded draw: heads, KV
    heads that divide them, head dim, widths, a window, experts; two layers."""
    import dataclasses
    r = torch.Generator().manual_seed(seed)
    pick = lambda xs: xs[int(torch.randint(len(xs), (1,), generator=r))]  # noqa: E731
    p = M.PRESETS[pick(sorted(n for n, c in M.PRESETS.items() if c.family in families))]
    heads = pick([2, 3, 4, 6])
    f = dict(name=f"drawn-{seed}", hidden=heads * pick([8, 16, 32]), heads=heads,
             kv_heads=pick([k for k in (1, 2, 3, 6) if heads % k == 0]),
             head_dim=pick([16, 32, 48, 64]), intermediate=pick([48, 64, 100]), layers=2,
             layer_types=("sliding", "full") if p.family.startswith("gemma") else
             (p.layer_types[0],) * 2, sliding_window=pick([4, 9, 40]), max_positions=256)
    if p.experts:
        f.update(experts=pick([4, 6, 8]), experts_per_token=pick([1, 2]),
                 expert_intermediate=pick([16, 32]), dense_layers=0)
    if p.kv_lora_rank:  # latent attention: q and k nope + rope wide, every head its own
        rope = pick([8, 16])
        f.update(kv_lora_rank=pick([16, 32]), qk_rope_dim=rope, head_dim=pick([16, 32]) + rope,
                 v_head_dim=pick([16, 32]), kv_heads=heads)
    if "sliding" not in f["layer_types"]:
        f["sliding_window"] = None
    return dataclasses.replace(p, **f)


DENSE = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3")


@pytest.mark.parametrize("seed", range(16))
def test_drawn_dense_configs_count_as_transformers_builds_them(seed):
    """Sizes nobody picked, every dense family: transformers' own parameter count, and each
    layer type counted exactly as the analytic model says and as FlopCounterMode says, at a
    drawn prefill and a drawn decode."""
    cfg = drawn(seed, DENSE)
    model, _ = hf.build_model(cfg, "meta")
    assert sum(p.numel() for p in model.parameters()) == M.param_count(cfg), cfg
    r = torch.Generator().manual_seed(seed)
    b, n = (int(x) for x in torch.randint(1, 60, (2,), generator=r))
    for phase in (M.Phase.prefill(b % 4 + 1, n), M.Phase.decode(b, n)):
        counts_agree(cfg, phase)


@pytest.mark.parametrize("seed", range(8))
def test_drawn_mixtures_route_exactly_the_macs_counted(seed):
    """Mixtures of sizes nobody picked (Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V2's routed and
    shared experts): whatever a real router picks, the experts' MACs the counter sees on a
    layer run on the CPU equal the analytic model's."""
    cfg = drawn(seed, ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v2"))
    layer, config = hf.build_layer(cfg, cfg.layer_types[0], "cpu", torch.float32)
    r = torch.Generator().manual_seed(seed)
    b, n = (int(x) for x in torch.randint(1, 20, (2,), generator=r))
    x = torch.randn(b, n, cfg.hidden, generator=r)
    config._experts_implementation = "eager"  # a loop over the experts hit
    with torch.no_grad():
        c = count.count(lambda: layer.mlp(x), module=layer)
    mlp = [p for p in M.layer_costs(cfg, M.Phase.prefill(b, n)) if p.name.startswith("mlp.")]
    assert sum(r.macs for r in c.records) == sum(p.macs for p in mlp), cfg
    assert not c.unsupported_ops()
