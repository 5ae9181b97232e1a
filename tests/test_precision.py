"""Quantised what-ifs: each tensor role's bytes in its own dtype, exactly; FLOPs unchanged."""
import json

import pytest

from rooflab import hardware as H
from rooflab import models as M
from rooflab import precision as Q
from rooflab.cli import main
from rooflab.studies import decoder

LLAMA = M.load("Llama-3.1-8B")  # hidden 4096, 32 heads, 8 KV heads, MLP 14336, bf16


def by_name(p, phase=M.Phase.decode(1, 1024)):
    return {c.name: c for c in M.layer_costs(LLAMA, phase, "full", p)}


@pytest.mark.parametrize("phase", [M.Phase.prefill(2, 64), M.Phase.decode(3, 100)])
def test_the_models_own_dtype_changes_nothing(phase):
    same = M.layer_costs(LLAMA, phase, "full", Q.Precision("bf16", "bf16", "bf16"))
    assert same == M.layer_costs(LLAMA, phase, "full")


def test_int4_weights_with_group_scales():
    c = by_name(Q.Precision("int4", "bf16", "bf16", 128))["mlp.gate_proj"]
    n = 4096 * 14336  # weights
    # x and y in bf16: 2 * (4096 + 14336); weights at half a byte; one fp16 scale per 128
    assert c.bytes == 2 * (4096 + 14336) + n // 2 + (n // 128) * 2
    assert c.macs == 4096 * 14336 and c.flops == 2 * c.macs  # the arithmetic is the same
    plain = by_name(Q.Precision("int4", "bf16", "bf16"))["mlp.gate_proj"]
    assert plain.bytes == 2 * (4096 + 14336) + n // 2  # no group size: no scales counted


def test_kv_cache_in_its_own_dtype():
    bf16 = by_name(Q.Precision("bf16", "bf16", "bf16"))["attn.core"]
    fp8 = by_name(Q.Precision("bf16", "bf16", "fp8"))["attn.core"]
    kv = 1 * 8 * 1024 * 128  # K (and V alike) elements: B * Hkv * kv_len * D
    assert bf16.bytes - fp8.bytes == 2 * kv * (2 - 1)  # K and V at 1 byte instead of 2
    assert fp8.detail["kv_cache_read_bytes"] == 2 * 8 * 128 * 1 * 1023  # the 1023 past tokens


def test_recipes_on_a_card_without_the_dtype_are_left_out():
    rows = decoder.recipes(M.load("gemma-3-270m-it"), H.lookup("RTX A6000"), batches=(1,))
    assert {r["recipe"] for r in rows} == {"W16A16", "W8A8", "W4A16"}  # no fp8 peak: no FP8
    w16 = next(r for r in rows if r["recipe"] == "W16A16")
    w4 = next(r for r in rows if r["recipe"] == "W4A16")
    assert w4["intensity"] > 3 * w16["intensity"]  # the same FLOPs over about a quarter the bytes


def test_a_card_without_bf16_runs_the_16_bit_recipes_in_fp16():
    """A T4 has fp16 and int8 peaks but no bf16: W16A16 and W4A16 take fp16 there (the same
    bytes), so the lab's single-user point (W4A16) is answered on it too."""
    from rooflab.lab.parts.p3_layer import _recipes_text
    gemma = M.load("gemma-3-270m-it")
    rows = decoder.recipes(gemma, H.lookup("T4"), batches=(1,))
    assert {r["recipe"] for r in rows} == {"W16A16", "W8A8", "W4A16"}
    w16 = next(r for r in rows if r["recipe"] == "W16A16")
    assert w16["precision"] == "weights fp16, activations fp16, KV fp16"
    same = next(r for r in decoder.recipes(gemma, H.lookup("RTX A6000"), batches=(1,))
                if r["recipe"] == "W16A16")
    assert w16["intensity"] == same["intensity"]  # bf16 and fp16: the same bytes
    # a comparison names the recipe it is made against
    text = _recipes_text([r for r in rows if r["recipe"] != "W16A16"])
    assert "x W16A16" not in text and "fastest W4A16, 1.9x W8A8" in text


def test_cli_precision(capsys):
    code = main(["layer", "--model", "Llama-3.1-8B", "--phase", "decode", "--gpu", "H200",
                 "--weight-dtype", "int8", "--act-dtype", "int8", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["roof"] == "H200 int8" and d["precision"].startswith("weights int8")
    for argv, needle in ((["--act-dtype", "int4"], "--act-dtype must be one of"),
                         (["--weight-dtype", "int3"], "--weight-dtype must be one of"),
                         (["--weight-dtype", "int4", "--group-size", "0"], "--group-size")):
        code = main(["layer", *argv])
        err = capsys.readouterr().err
        assert code == 2 and needle in err and err.count("\n") == 1


def test_model_totals_under_a_recipe(capsys):
    phase = M.Phase.decode(1, 8192)
    base = decoder.model_summary(LLAMA, phase)
    w4 = decoder.model_summary(LLAMA, phase, precision=Q.Precision("int4", "bf16", "fp8"))
    assert w4["total"]["flops"] == base["total"]["flops"]  # the arithmetic is the same
    assert w4["kv_cache_bytes"] * 2 == base["kv_cache_bytes"]  # fp8 KV: half of bf16
    lm_head = {p["name"]: p for p in w4["parts"]}["lm_head"]
    assert lm_head == {p["name"]: p for p in base["parts"]}["lm_head"]  # kept in bf16
    code = main(["model", "--model", "Llama-3.1-8B", "--weight-dtype", "int4", "--gpu", "H200"])
    assert code == 0 and "weights int4" in capsys.readouterr().out
