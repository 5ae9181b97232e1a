"""The CLI contract: JSON field names, and bad input as one line with exit code 2."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cost_gemm_json(capsys):
    code, out, _ = run(capsys, "cost", "gemm", "--m", "2", "--k", "3", "--n", "4", "--json")
    d = json.loads(out)
    assert code == 0
    assert (d["macs"], d["flops"], d["bytes"]) == (24, 48, 104)  # see test_cost
    assert d["intensity"] == pytest.approx(48 / 104)


def test_cost_gemv_and_attention(capsys):
    _, out, _ = run(capsys, "cost", "gemv", "--m", "4", "--k", "4", "--dtype", "bf16", "--json")
    assert json.loads(out)["bytes"] == 2 * (16 + 4 + 4)  # 48
    args = ["cost", "attention", "--batch", "1", "--heads", "1", "--q-len", "2", "--kv-len", "2",
            "--head-dim", "4", "--json"]
    _, out, _ = run(capsys, *args)
    assert json.loads(out)["bytes"] == 240
    _, out, _ = run(capsys, *args, "--fused")
    d = json.loads(out)
    assert d["bytes"] == 128 and d["macs"] == 32 and set(d) >= {"macs", "flops", "bytes", "intensity"}


def test_roofline_json_and_plot(capsys, tmp_path):
    png = tmp_path / "r.png"
    code, out, _ = run(capsys, "roofline", "gemm", "--gpu", "A6000", "--sizes", "256,1024",
                       "--plot", str(png), "--json")
    d = json.loads(out)
    assert code == 0 and d["crossover_n"] == 303 and d["ridge"] == pytest.approx(50.39, abs=0.01)
    assert [r["bound"] for r in d["rows"]] == ["memory", "compute"]
    assert set(d["rows"][0]) >= {"n", "intensity", "attainable_flops_per_s", "bound", "time_floor_s"}
    assert png.stat().st_size > 10_000
    _, out, _ = run(capsys, "roofline", "gemv", "--gpu", "H200", "--json")
    assert json.loads(out)["crossover_n"] is None


def test_roofline_several_roofs(capsys, tmp_path):
    png = tmp_path / "r.png"
    code, out, _ = run(capsys, "roofline", "gemm", "--gpu", "H200", "--dtype", "fp32",
                       "--roofs", "bf16,fp8", "--measured", "--plot", str(png), "--json")
    d = json.loads(out)
    assert code == 0 and [r["label"] for r in d["extra_roofs"]][:2] == ["H200 bf16", "H200 fp8"]
    assert "(measured)" in d["extra_roofs"][2]["label"] and png.stat().st_size > 10_000


def test_specs_json(capsys):
    code, out, _ = run(capsys, "specs", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["gpus"]) >= 13 and sum(g["detected"] for g in d["gpus"]) == 1


@pytest.mark.parametrize("argv,needle", [
    (["roofline", "gemm", "--gpu", "H2000"], "did you mean"),
    (["cost", "gemm", "--m", "0", "--k", "1", "--n", "1"], "positive integer"),
    (["cost", "gemm", "--m", "-3", "--k", "1", "--n", "1"], "positive integer"),
    (["cost", "gemm", "--m", "1.5", "--k", "1", "--n", "1"], "--m"),
    (["cost", "gemm", "--m", "2", "--k", "1", "--n", "1", "--dtype", "fp7"], "unknown dtype"),
    (["roofline", "gemm", "--gpu", "T4", "--dtype", "bf16"], "no bf16 peak"),
    (["layer", "--gpu", "T4"], "no bf16 peak (has: fp32, fp16, int8): choose one with --dtype"),
    (["model", "--gpu", "T4"], "choose one with --dtype (layer) or --act-dtype"),
    (["roofline", "gemm", "--gpu", "H200", "--sizes", "1,x"], "sizes"),
    (["roofline", "gemm", "--gpu", "nope.json"], "cannot read"),
    (["nonsense"], "No such command"),
    (["roofline", "gemm", "--gpu", "H200", "--roofs", "fp9"], "unknown dtype"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


# capsys is drained by every run(), so sharing it across examples is safe
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.integers(-10**6, 10**6).map(str), st.text(max_size=6)))
def test_any_size_argument_is_ok_or_clean_error(capsys, value):
    if value.startswith("-") and not value.lstrip("-").isdigit():
        value = "x" + value  # a bare option-looking token is a different parse path
    code, out, err = run(capsys, "cost", "gemm", "--m", value, "--k", "3", "--n", "4", "--json")
    if code == 0:
        assert json.loads(out)["macs"] == int(value) * 12
    else:
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_version(capsys):
    from importlib.metadata import PackageNotFoundError, version

    try:
        expected = version("rooflab")
    except PackageNotFoundError:  # run from the source tree (PYTHONPATH), as on a remote GPU
        expected = "not installed (run from its source)"
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"rooflab {expected}\n"


# --- the families of bad input a busy user tried: each is one line and exit 2 -----------------
USER_CODE = '''
import torch
def raises():
    raise ValueError("my bug")
def mismatch():
    return torch.nn.Linear(4, 8), (torch.randn(3, 5),)
'''


@pytest.mark.parametrize("argv,needle", [
    (["roofline", "gemm", "--gpu", "H200", "--plot", "gemm.txt"], "ending in .png"),
    (["roofline", "gemm", "--gpu", "H200", "--plot", ""], "--plot needs a file name"),
    (["fusion", "gelu", "--numel", "999999999999999"], "GiB free"),
    (["cost", "gemm", "--m", "2", "--k", "3", "--n", "4x"], "valid int"),
    (["cost", "gemm", "--m", "", "--k", "3", "--n", "4"], "valid int"),  # click: "integer" or "int"
    (["attention", "--seq", "1..99999999", "--device", "cpu"], "--force"),
    (["layer", "--model", "Llama-3.1-8B", "--phase", "decode", "--weight-dtype", "int4",
      "--group-size", "100", "--gpu", "H200"], "does not divide attn.q_proj's input width 4096"),
    (["layer", "--model", "{cfg}"], "head_dim must be a positive integer, got 0"),
    (["analyze", "{code}:raises"], "raises() raised ValueError: my bug"),
    (["analyze", "{code}:mismatch", "--no-profile"], "mismatch: Linear on inputs (3, 5) raised"),
    (["check", "{answers}"], "must be an integer, got 'abc'"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_bad_input_of_every_family_is_one_line(capsys, tmp_path, argv, needle):
    (tmp_path / "user.py").write_text(USER_CODE)
    (tmp_path / "cfg.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100, "head_dim": 0}))
    (tmp_path / "a.json").write_text(json.dumps(
        {"answers": {"1.3.gemm_mac": {"N": "abc", "value": 1}}}))
    argv = [a.format(cfg=tmp_path / "cfg.json", code=tmp_path / "user.py",
                     answers=tmp_path / "a.json") for a in argv]
    code, _, err = run(capsys, *argv)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert code == 2 and needle in last and "internal error" not in err, err
