"""A whole model: built from its config (meta device, exact parameter counts), its memory
predicted (exact integers), generating on the CPU with its prediction beside it."""
import dataclasses
import json

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from rooflab import count, hf  # noqa: E402
from rooflab import models as M  # noqa: E402
from rooflab import predict as PR  # noqa: E402
from rooflab.studies import generate as GN  # noqa: E402
from rooflab.measure import ceilings as CE  # noqa: E402
from rooflab.measure import op_classes as OC  # noqa: E402

TINY = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 32, "vocab_size": 1000, "max_position_embeddings": 256, "sliding_window": 16,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "query_pre_attn_scalar": 32}
CEIL = CE.Ceilings("cpu", "test", 1e10, {"fp32": 1e11, "bf16": 1e11})
COSTS = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {2: 1e9, 4: 1e9})


@pytest.mark.parametrize("name", list(M.PRESETS))
def test_whole_model_built_on_meta_has_every_parameter(name):
    cfg = M.load(name)
    model, config = hf.build_model(cfg, "meta")
    assert sum(p.numel() for p in model.parameters()) == M.param_count(cfg)
    assert len(model.model.layers) == cfg.layers
    assert [t.split("_")[0] for t in config.layer_types] == list(cfg.layer_types)


def test_memory_prediction_exact():
    cfg = M.load("gemma-3-270m-it")  # 15 sliding layers (window 512), 3 full ones, 1 KV head
    m = GN.predicted_memory(cfg, batch=2, seq=1000, new_tokens=24, dtype="bf16")
    assert m["weights_bytes"] == 268098176 * 2
    per_position = 2 * 2 * 1 * 256 * 2  # K and V, batch 2, one head of 256, bf16
    assert m["kv_cache_bytes"] == per_position * (15 * 512 + 3 * 1024)
    logits = 2 * 262144 * (2 + 4)  # the last position only, bf16 and its fp32 copy
    assert m["activation_bytes"] == 2 * 1000 * (3 * 2048 + 4 * 640) * 2 + logits
    assert m["total_bytes"] == m["weights_bytes"] + m["kv_cache_bytes"] + m["activation_bytes"]


def test_memory_prediction_of_latent_attention_and_experts():
    """DeepSeek-V2-Lite caches a latent of 512 and a rotated key of 64 a token and layer (27
    layers), not every head's K and V; a mixture's prefill transient is its experts' routed rows
    (k a token, H + 4 I_e each) where they outweigh a dense MLP's 3 I."""
    ds = M.load("DeepSeek-V2-Lite")
    m = GN.predicted_memory(ds, batch=8, seq=4096, new_tokens=32, dtype="bf16")
    assert m["kv_cache_bytes"] == 27 * 8 * 4128 * (512 + 64) * 2
    logits = 8 * ds.vocab * (2 + 4)
    routed = 6 * (2048 + 4 * 1408)  # above the dense first layer's 3 x 10,944
    assert m["activation_bytes"] == 8 * 4096 * (routed + 4 * 2048) * 2 + logits
    qwen = M.load("Qwen3-30B-A3B")  # no dense layer: the experts' rows alone
    m = GN.predicted_memory(qwen, batch=64, seq=1024, new_tokens=32, dtype="bf16")
    assert m["activation_bytes"] == 64 * 1024 * (8 * (2048 + 4 * 768) + 4 * 2048) * 2 + \
        64 * qwen.vocab * 6


def test_prefill_lm_head_last_or_all_positions():
    cfg = M.from_hf_dict(TINY, "tiny")
    for keep, rows in (("last", 1), ("all", 12)):
        with torch.no_grad():
            g = GN.Generation(cfg, 2, 12, 2, "cpu", "fp32", keep)
            with count.Counter(g.model) as c:
                g.prefill()
        head = [r for r in c.records if PR.by_layer(r) == "lm_head" and r.macs]
        assert sum(r.macs for r in head) == 2 * rows * 64 * 1000


def test_generation_measured_and_predicted_on_cpu(capsys):
    cfg = M.from_hf_dict(TINY, "tiny")
    ticks = []
    r = GN.measure_generation(cfg, 2, 24, 3, CEIL, "cpu", dtype="fp32", costs=COSTS,
                   progress=lambda: ticks.append(1))
    assert len(ticks) == GN.STEPS  # the progress bar ends full
    p, d = r["prefill"], r["decode"]
    assert p["device_s"] > 0 and d["eager_device_s"] > 0 and d["eager_loop_s"] > 0
    assert p["predicted_over_device"] == p["predicted_s"] / p["device_s"]
    assert r["tokens_per_s"] == 2 / r["tpot_s"]
    # every layer predicted, plus the embedding, the final norm and the head
    assert {"layer 0", "layer 1", "layer 2", "embedding", "final norm", "lm_head"} <= set(
        r["layers_predicted"]["decode"])
    assert d["flops"] < p["flops"] and "graph_device_s" not in d  # no CUDA graph on a CPU
    assert "graph_device_s" not in p and "ttft_graph_s" not in r
    assert p["kernel_s"] > 0
    assert d["predicted_over_kernel"] == d["predicted_kernels_s"] / d["kernel_s"]
    assert p["kernel_busy_fraction"] == p["kernel_s"] / p["device_s"]
    assert p["host_bound"] == (p["kernel_busy_fraction"] < GN.HOST_BOUND)
    from rooflab.report import console

    p.update(host_bound=True, kernel_busy_fraction=0.44)  # as Qwen3-8B's B=1 x 512 prefill
    d["host_bound"] = False
    capsys.readouterr()
    console.generation(r)
    shown = capsys.readouterr().out
    assert "prefill: bound by the host (kernels busy 44% of its device time)" in shown
    assert "eager decode step: bound" not in shown
    kinds = r["op_costs"]["attention"]  # the prefill's and the decode's, each measured once
    assert {k.split()[4] for k in kinds} == {"prefill", "decode"}  # op d bits mask phase
    flat = " ".join(shown.split())  # the console wraps long lines at spaces
    assert all(k in flat for k in kinds) and "FLOP/s" in shown and "B/s" in shown
    assert r["attn"] == "sdpa" and "sdpa attention" in flat


@pytest.mark.slow  # about 20 s: the CPU's grouped GEMM is a loop over the experts, profiled
def test_a_mixture_generating_says_how_its_experts_ran(capsys):
    """A tiny Qwen3-MoE generating on the CPU: its experts ran as one grouped GEMM a projection,
    their counted bytes, predicted time and the active floor (2 of 8 experts a token)."""
    import dataclasses

    cfg = dataclasses.replace(M.load("Qwen3-30B-A3B"), hidden=64, expert_intermediate=32,
                              heads=4, kv_heads=2, head_dim=16, vocab=128, layers=2, experts=8,
                              experts_per_token=2)
    r = GN.measure_generation(cfg, 2, 8, 2, CEIL, "cpu", dtype="fp32", costs=COSTS)
    e = r["experts"]
    assert e["how"] == "one grouped GEMM a projection (grouped_mm)"
    assert e["active_bytes"] == 2 * 2 * 3 * 64 * 32 * 4  # layers x k x 3 matrices x fp32
    assert e["active_floor_s"] == e["active_bytes"] / CEIL.mem_bandwidth_bytes_per_s
    assert e["kernels"] >= 4 and e["predicted_s"] > 0 and e["bytes"] >= e["active_bytes"]
    from rooflab.report import console
    console.generation(r)
    printed = capsys.readouterr().out
    assert "experts at decode: transformers ran them as one grouped GEMM" in printed
    routing = e["prefill_routing"]  # the prefill's groups, read on the CPU from the offsets
    assert routing["grouped_ops"] >= 2 and routing["largest_over_mean"][1] >= 1.0
    assert "experts at prefill: the largest expert's share was" in printed


def test_the_prefill_routing_is_read_from_the_grouped_gemms_groups():
    """The largest group over the mean, lowest and highest over the grouped GEMMs that know
    their groups, beside a uniform draw of the same rows where the rows a group are a
    prefill's (a decode's few have an even reference: None), and how many were timed as routed
    (a prefill's); no grouped GEMM: None."""
    a, b = torch.randn(224, 32), torch.randn(4, 64, 32).transpose(-2, -1)
    with count.Counter() as c:
        torch._grouped_mm(a[:64], b, offs=torch.tensor([16, 32, 48, 64], dtype=torch.int32))
        torch._grouped_mm(a[:212], b, offs=torch.tensor([4, 8, 12, 212], dtype=torch.int32))
    r = GN.experts_routing(c.records)
    assert r["grouped_ops"] == 2 and r["as_routed"] == 1  # the prefill's: its groups timed
    assert r["largest_over_mean"] == [1.0, 200 * 4 / 212]
    draw = OC.uniform_draw(212, 4)  # 53 rows a group: a prefill's (16 are a decode's)
    assert sum(draw) == 212 and len(draw) == 4
    assert r["reference_largest_over_mean"] == max(draw) * 4 / 212
    assert GN.experts_routing([]) is None
    with count.Counter() as c:  # 8 rows over 4 groups: a decode's few rows, an even reference
        torch._grouped_mm(a[:8], b, offs=torch.tensor([2, 4, 6, 8], dtype=torch.int32))
    assert GN.experts_routing(c.records)["reference_largest_over_mean"] is None


def test_mask_decision_under_capture_is_the_warm_ups(monkeypatch):
    """During capture HF's is_causal decision (which reads a device tensor) is not made again:
    the one made by the warm-up for the same shape is returned; outside capture, it is made."""
    MU = pytest.importorskip("transformers.masking_utils")
    calls = []
    monkeypatch.setattr(MU, "_ignore_causal_mask_sdpa",
                        lambda *a, **k: calls.append(a) or len(calls) == 1)
    capturing = [False]
    monkeypatch.setattr(GN, "_capturing", lambda: capturing[0])
    offset = torch.zeros((), dtype=torch.long)
    with GN.mask_decisions_made_before_capture() as made:
        assert MU._ignore_causal_mask_sdpa(None, 512, 544, offset, 0) is True  # warm-up
        capturing[0] = True
        assert MU._ignore_causal_mask_sdpa(None, 512, 544, offset, 0) is True  # reused
        assert len(calls) == 1 and len(made) == 1
        capturing[0] = False
        assert MU._ignore_causal_mask_sdpa(None, 512, 544, offset, 0) is False  # afresh
    assert MU._ignore_causal_mask_sdpa(None, 1, 1, 0, 0) is False  # put back on exit


def test_generation_console_shows_the_graph_prefill(capsys):
    cfg = M.from_hf_dict(TINY, "tiny")
    r = GN.measure_generation(cfg, 1, 16, 2, CEIL, "cpu", dtype="fp32", costs=COSTS)
    p = r["prefill"]
    g = p["device_s"] / 4  # as a CUDA graph would read on a host-bound prefill
    p.update(graph_device_s=g, graph_wall_s=g, graph_cv=0.01, graph_unstable=False,
             predicted_over_graph_device=p["predicted_s"] / g,
             roofline_over_graph_device=p["roofline_s"] / g, host_bound=True,
             kernel_busy_fraction=0.25, graph_error=None)
    r["ttft_graph_s"] = g
    r["decode"]["graph_error"] = "operation not permitted when stream is capturing"
    from rooflab.report import console

    capsys.readouterr()
    console.generation(r)
    shown = capsys.readouterr().out
    assert "prefill (TTFT), CUDA graph" in shown and "prefill (TTFT), eager" in shown
    assert f"{p['predicted_s'] / g:.2f}" in shown
    assert "in a CUDA graph" in shown and "the kernel time or the CUDA graph's" in shown
    assert "CUDA graph of the decode step: not captured (operation not permitted" in shown


def test_generate_cli_and_its_old_spelling(tmp_path, monkeypatch, capsys):
    from rooflab.cli import main

    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps(TINY))
    monkeypatch.setattr(CE, "get", lambda device, **kw: CEIL)
    monkeypatch.setattr(OC, "measure_op_costs", lambda device: COSTS)
    assert main(["generate", "--model", str(cfg_path), "--seq", "8", "--new-tokens", "2",
                 "--device", "cpu", "--json"]) == 0
    new = json.loads(capsys.readouterr().out)
    assert new["prefill"]["predicted_s"] > 0 and new["new_tokens"] == 2
    assert main(["model", "--model", str(cfg_path), "--measure", "--seq", "8", "--new-tokens",
                 "2", "--device", "cpu"]) == 0  # the console view renders
    assert "now `rooflab generate`" in capsys.readouterr().err
    assert main(["model", "--measure", "--tp", "2"]) == 2
    assert main(["generate", "--lm-head", "first"]) == 2
    assert main(["generate", "--attn", "sdpa,eager"]) == 2
    assert main(["generate", "--model", str(cfg_path), "--seq", "8", "--new-tokens", "2",
                 "--device", "cpu", "--attn", "rooflab", "--json"]) == 0
    paths = json.loads(capsys.readouterr().out)["attention_paths"]
    # an fp32 CPU model: SDPA, counted
    assert set(paths) == {"sdpa (dtype torch.float32)"} and sum(paths.values())
    monkeypatch.setattr(GN, "free_bytes", lambda device: 1 << 20)
    assert main(["generate", "--device", "cpu"]) == 2  # will not fit: one line


def test_prediction_adds_the_gap_between_kernels_once_per_kernel():
    cfg = M.from_hf_dict(TINY, "tiny")
    with torch.no_grad():
        g = GN.Generation(cfg, 1, 8, 2, "cpu", "fp32")
        with count.Counter(g.model) as c:
            g.step()
    gapped = dataclasses.replace(COSTS, gap_s=1e-6)  # the same costs, attention rates included
    plain, with_gap = GN.predict(c.records, CEIL, "fp32", COSTS), GN.predict(c.records, CEIL,
                                                                            "fp32", gapped)
    assert with_gap["kernels"] == plain["kernels"] > 50  # a whole model: many kernels
    assert abs(with_gap["predicted_s"] - plain["predicted_s"] - plain["kernels"] * 1e-6) < 1e-12


@pytest.mark.gpu
def test_generation_on_the_gpu_with_a_cuda_graph():
    """A small llama generating on the GPU: decode replayed as a CUDA graph, memory measured."""
    cfg = M.from_hf_dict({**TINY, "model_type": "llama", "layer_types": None,
                          "sliding_window": None, "num_key_value_heads": 2}, "tiny-llama")
    r = GN.measure_generation(cfg, 2, 64, 4, CE.get("cuda"), "cuda", dtype="bf16", costs=COSTS)
    d, p = r["decode"], r["prefill"]
    assert "graph_error" not in d, d.get("graph_error")
    assert d["graph_device_s"] > 0 and d["graph_loop_s"] > 0
    # the replay profiled: its kernels' time fits in the replay's span (which adds the gaps)
    assert 0 < d["graph_kernel_s"] <= d["graph_device_s"] * 1.1 and d["graph_launches"] > 0
    assert "graph_error" not in p, p.get("graph_error")
    assert p["graph_device_s"] > 0 and r["ttft_graph_s"] == p["graph_wall_s"]
    assert r["memory_measured_peak_bytes"] > r["memory_predicted"]["weights_bytes"]


@pytest.mark.gpu
def test_generation_with_rooflabs_attention_runs_its_kernels_in_the_graphs():
    """attn="rooflab": FlashAttention at the prefill from an empty static cache, flash-decoding
    on the cache's kept keys at every step, eager and replayed; SDPA nowhere."""
    cfg = M.from_hf_dict({**TINY, "model_type": "llama", "layer_types": None,
                          "sliding_window": None, "num_key_value_heads": 2}, "tiny-llama")
    r = GN.measure_generation(cfg, 2, 64, 4, CE.get("cuda"), "cuda", dtype="bf16", costs=COSTS,
                              attn="rooflab")
    prefill = {p for p in r["attention_paths"] if p.startswith("flash_attention (")}
    assert len(prefill) == 1 and set(r["attention_paths"]) - prefill == {
        "flash_decoding (kept keys)"}
    for call in ("prefill", "decode"):
        assert "graph_error" not in r[call], r[call].get("graph_error")


@pytest.mark.gpu
def test_a_full_sliding_window_cache_is_captured_in_a_cuda_graph():
    """gemma's sliding layers, window full (48 prompt tokens, a window of 16): HF makes an index
    tensor from Python data at every step, which capture refuses unless it is made once."""
    cfg = M.from_hf_dict(TINY, "tiny-gemma")
    r = GN.measure_generation(cfg, 2, 48, 4, CE.get("cuda"), "cuda", dtype="bf16", costs=COSTS)
    for call in ("prefill", "decode"):
        assert "graph_error" not in r[call], r[call].get("graph_error")
        assert r[call]["graph_device_s"] > 0


@pytest.mark.gpu
def test_the_captured_prefill_computes_what_the_eager_prefill_does():
    """The graph reuses the warm-up's mask decision: its logits are the eager prefill's."""
    from rooflab.measure.timer import capture_graph

    cfg = M.from_hf_dict(TINY, "tiny-gemma")
    with torch.no_grad():
        g = GN.Generation(cfg, 2, 48, 4, "cuda", "bf16", lm_head="all")
        eager = g.prefill().clone()
        out = torch.empty_like(eager)
        with GN.constants_made_once(), GN.mask_decisions_made_before_capture():
            replay = capture_graph(lambda: out.copy_(g.prefill()))
        out.zero_()
        replay()
        torch.testing.assert_close(out, eager, rtol=0, atol=0)


def test_constants_made_once_only_inside_and_only_for_small_device_data():
    real = torch.tensor
    with GN.constants_made_once() as made:
        a = torch.tensor([-1], dtype=int, device="cpu")
        assert torch.tensor([-1], dtype=int, device="cpu") is a  # made once
        assert torch.tensor([-2], dtype=int, device="cpu") is not a
        assert torch.tensor([-1], device="cpu") is not a  # another dtype
        assert torch.tensor([-1]) is not torch.tensor([-1])  # no device given: not cached
        big = list(range(100))
        assert torch.tensor(big, device="cpu") is not torch.tensor(big, device="cpu")
        assert len(made) == 3
    assert torch.tensor is real
    assert torch.tensor([-1], dtype=int, device="cpu") is not a
