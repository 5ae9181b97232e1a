"""Tensor parallelism, analytically: one GPU's share of a layer and its all-reduces, exactly."""
import json

import pytest

from rooflab import models as M
from rooflab import parallel as P
from rooflab.cli import main
from rooflab.hardware import lookup

LLAMA = M.load("Llama-3.1-8B")   # 32 heads, 8 KV heads, hidden 4096, MLP 14336, bf16
GEMMA = M.load("gemma-3-270m-it")  # 4 heads, 1 KV head


def by_name(cfg, phase, tp):
    return {p.name: p for p in M.layer_costs(P.shard(cfg, tp), phase, cfg.layer_types[0])}


@pytest.mark.parametrize("phase", [M.Phase.prefill(2, 512), M.Phase.decode(8, 4096)])
def test_megatron_split_divides_the_matmuls_and_keeps_the_norms(phase):
    one, two = by_name(LLAMA, phase, 1), by_name(LLAMA, phase, 2)
    t = phase.tokens
    assert two["attn.q_proj"].macs == t * 4096 * (16 * 128)          # column-parallel: 16 heads
    assert two["attn.k_proj"].macs == t * 4096 * (4 * 128)           # 4 of the 8 KV heads
    assert two["attn.o_proj"].macs == t * (16 * 128) * 4096          # row-parallel
    assert two["mlp.down_proj"].macs == t * (14336 // 2) * 4096
    for name in ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.o_proj", "attn.core",
                 "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
        assert 2 * two[name].macs == one[name].macs, name  # the two shares make the whole
    assert two["input_norm"] == one["input_norm"]  # whole on every GPU
    assert two["residual.mlp"] == one["residual.mlp"]


def test_fewer_kv_heads_than_gpus_are_replicated():
    phase = M.Phase.decode(4, 1024)
    one, two = by_name(GEMMA, phase, 1), by_name(GEMMA, phase, 2)
    assert two["attn.k_proj"].macs == one["attn.k_proj"].macs == 4 * 640 * 256  # 1 KV head each
    assert 2 * two["attn.q_proj"].macs == one["attn.q_proj"].macs


def test_all_reduces_and_their_floor():
    phase = M.Phase.decode(8, 4096)
    c = P.communication(LLAMA, phase, 2, 1, 900e9, "H200 datasheet")
    # two all-reduces of T x hidden bf16: 8 * 4096 * 2 = 65,536 B each, 131,072 B per layer
    assert (c["all_reduces"], c["message_bytes"], c["all_reduce_bytes"]) == (2, 65536, 131072)
    # ring: 2(N-1)/N x 65,536 B / 450 GB/s each way, twice: 2 * 145.6 ns
    assert c["predicted_s"] == pytest.approx(2 * 65536 / 450e9)
    assert P.all_reduce_s(1 << 30, 4, 100e9, 20e-6) == pytest.approx(20e-6 + 1.5 * (1 << 30) / 100e9)
    assert P.communication(LLAMA, phase, 1)["all_reduce_bytes"] == 0
    whole = P.communication(LLAMA, phase, 2, LLAMA.layers)
    assert whole["all_reduces"] == 64 and whole["predicted_s"] is None  # no link given
    fp8 = P.communication(LLAMA, phase, 2, 1, act_dtype="fp8")  # 8 * 4096 * 1 B each
    assert (fp8["message_bytes"], fp8["dtype"]) == (32768, "fp8")


def test_the_cli_sizes_the_all_reduce_in_the_activation_dtype(capsys):
    """A quantised what-if under TP: fp8 activations halve the partial sums of bf16."""
    argv = ["layer", "--model", "Llama-3.1-8B", "--phase", "decode", "--batch", "8",
            "--kv-len", "4096", "--gpu", "H200", "--tp", "2", "--json"]
    assert main(argv + ["--weight-dtype", "fp8", "--act-dtype", "fp8"]) == 0
    fp8 = json.loads(capsys.readouterr().out)["communication"]
    assert main(argv) == 0
    bf16 = json.loads(capsys.readouterr().out)["communication"]
    assert 2 * fp8["all_reduce_bytes"] == bf16["all_reduce_bytes"] == 131072


def odd(intermediate: int) -> M.ModelConfig:
    return M.from_hf_dict({"model_type": "llama", "hidden_size": 768,
                           "intermediate_size": intermediate, "num_hidden_layers": 2,
                           "num_attention_heads": 24, "num_key_value_heads": 6,
                           "vocab_size": 1000}, name="odd")


@pytest.mark.parametrize("cfg,tp,needle", [(LLAMA, 3, "divide the 32 query heads"),
                                           (odd(3000), 4, "one must divide the other"),
                                           (odd(3001), 2, "MLP width 3001")])
def test_splits_the_shapes_do_not_allow(cfg, tp, needle):
    with pytest.raises(P.ParallelError, match=needle):
        P.shard(cfg, tp)


def test_splits_that_work():
    assert P.shard(odd(3000), 3).kv_heads == 2  # 24 heads, 6 KV heads, MLP 3000 over 3
    assert P.shard(LLAMA, 16).kv_heads == 1  # 16 GPUs, 8 KV heads: each kept by two GPUs


def test_cli_tp(capsys):
    code = main(["layer", "--model", "Llama-3.1-8B", "--phase", "decode", "--batch", "8",
                 "--kv-len", "4096", "--gpu", "H200", "--tp", "2", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["tp"] == 2 and d["communication"]["all_reduce_bytes"] == 131072
    assert "NVLink 900 GB/s" in d["communication"]["link"]
    q = next(c for c in d["components"] if c["name"] == "attn.q_proj")
    assert q["macs"] == 8 * 4096 * 2048
    code = main(["model", "--model", "Llama-3.1-8B", "--tp", "4", "--gpu", "A100-80GB"])
    out = capsys.readouterr().out
    assert code == 0 and "tensor parallel over 4 GPUs" in out and "whole on every GPU" in out
    assert main(["layer", "--tp", "3"]) == 2
    assert lookup("T4").link_bytes_per_s == 32e9 and "PCIe" in lookup("T4").link_source


def test_the_lm_head_and_embedding_are_split_by_vocabulary():
    """A whole model under TP: each GPU holds vocab/tp rows of the embedding and the lm_head
    (Megatron's and vLLM's split), so the lm_head's MACs divide too; the logits are gathered
    once (T x vocab) and the embedded tokens all-reduced once (T x hidden)."""
    from rooflab.studies import decoder

    phase = M.Phase.decode(8, 4096)
    one = decoder.model_summary(LLAMA, phase, tp=1)
    eight = decoder.model_summary(LLAMA, phase, tp=8, hw=lookup("H200"))
    head = {d["name"]: d for d in one["parts"]}["lm_head"]
    head8 = {d["name"]: d for d in eight["parts"]}["lm_head"]
    assert head["macs"] == 8 * 4096 * 128256 and head8["macs"] == 8 * 4096 * 16032  # 128256 / 8
    c = eight["communication"]
    assert c["all_reduces"] == 2 * 32 + 1 and c["all_gathers"] == 1
    assert c["all_gather_bytes"] == 8 * 128256 * 2 and c["all_reduce_bytes"] == 65 * 8 * 4096 * 2
    # ring: 2(N-1)/N of each all-reduce, (N-1)/N of the gather, over 450 GB/s each way
    assert c["predicted_s"] == pytest.approx(
        (65 * 2 * 7 / 8 * 65536 + 7 / 8 * 8 * 128256 * 2) / 450e9)
    assert eight["replicated"] == ["final_norm"] and one["replicated"] == []
    assert eight["params"] < one["params"] / 7  # the vocabulary rows split as well as the layers
