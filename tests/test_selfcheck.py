"""`rooflab check` (a student's numbers against rooflab's) and `rooflab compare` (two runs)."""
import json

import pytest

from rooflab.cli import main
from rooflab.lab import compare as K
from rooflab.lab import selfcheck as S


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def filled(**values):
    t = S.template()
    for q, v in values.items():
        t["answers"][q]["value"] = v
    return t


def test_template_filled_with_rooflab_values_all_hold(tmp_path, capsys):
    code, out, _ = run(capsys, "check", "--template")
    t = json.loads(out)
    assert code == 0 and set(t["answers"]) == set(S.QUESTIONS)
    expected = {r["id"]: r["expected"] for r in S.check_answers(t)["rows"]}
    # the lab's public checks: 512^3 MACs; 4 * 3 * 512^2 bytes; A6000 fp32 crossover n = 303;
    # calc_attn_mac(1, 4, 173, 256, 128) = 2 * 4 * 173 * 256 * 128 = 45,350,912
    assert expected["1.3.gemm_mac"] == 134217728 and expected["1.4.gemm_io"] == 3145728
    assert expected["2.1.2.crossover_n"] == 303 and expected["3.1.attn_mac"] == 45350912
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(filled(**expected)))
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "all hold" in out


def test_the_empty_template_reveals_nothing(tmp_path, capsys):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(S.template()))
    code, out, _ = run(capsys, "check", str(path), "--json")
    d = json.loads(out)
    assert code == 1 and all(r["verdict"] == "missing" and "expected" not in r for r in d["rows"])
    code, out, _ = run(capsys, "check", str(path))
    assert "134,217,728" not in out and "45,350,912" not in out and "--reveal" in out
    code, out, _ = run(capsys, "check", str(path), "--reveal", "--json")
    assert json.loads(out)["rows"][0]["expected"] == 134217728


def test_verdicts_name_the_convention_or_the_slip():
    gemm = S.QUESTIONS["1.4.gemm_io"][0]
    rows = {r["id"]: r for r in S.check_answers(filled(**{
        "1.3.gemm_mac": 2 * 512**3,                         # FLOPs, not MACs
        "1.4.gemm_io": 4 * 2 * 512**2,                      # C not written
        "2.1.2.ridge": 50.4,                                # rounded: within 0.5% of 50.39
        "3.1.attn_mac": S._attn(S.ATTN, causal=True).macs,  # causal only: a stated convention
        "3.2.attn_io": 123,                                 # just wrong
        "5.1.score_bytes": 16 * 32768**2 * 2 / 2**30,       # GiB, not bytes
    }))["rows"]}
    assert rows["1.3.gemm_mac"]["verdict"] == "wrong" and "FLOPs" in rows["1.3.gemm_mac"]["why"]
    assert "C is not written" in rows["1.4.gemm_io"]["why"] and gemm["dtype"] == "fp32"
    assert rows["2.1.2.ridge"]["verdict"] == "ok"
    assert rows["3.1.attn_mac"]["verdict"] == "convention"
    assert rows["3.2.attn_io"]["verdict"] == "wrong" and "off by" in rows["3.2.attn_io"]["why"]
    assert "GiB" in rows["5.1.score_bytes"]["why"]
    assert rows["5.1.oom_seq"]["verdict"] == "missing"


def test_tolerances_name_a_residual_add_gate_only_and_fused_bytes():
    s = S.QUESTIONS["3.4.mlp_intensity"][0]
    for value, slip in ((S._mlp_alt(s, flops_extra=1, bytes_extra=3), "residual"),
                        (S._mlp_parts(s)["mlp.gate_proj"].intensity, "one projection"),
                        (S._mlp_alt(s, fused=True), "fused")):
        r = S.judge("3.4.mlp_intensity", value, **s)
        assert r["verdict"] == "wrong" and slip in r["why"], r["why"]
    assert S.judge("3.4.mlp_intensity", 212.5, **s)["verdict"] == "ok"  # the lab's ~212
    assert S.judge("3.4.mlp_intensity", 7.73, model=s["model"], batch=8, seq=1)["verdict"] == "ok"


def test_the_lab_fp32_io_and_other_bytes_are_named():
    a = S.ATTN
    fp32 = 4 * (2 * 4 * 173 * 128 + 2 * 4 * 256 * 128 + 7 * 4 * 173 * 256)
    assert S.judge("3.2.attn_io", fp32, **a)["verdict"] == "ok"  # the lab's own convention
    assert "2 bytes" in S.judge("3.2.attn_io", fp32 // 2, **a)["why"]
    assert S.judge("3.2.attn_io", fp32 // 2, **a, bytes_per_elem=2)["verdict"] == "ok"
    assert S._attn_io({**a, "bytes_per_elem": 2, "softmax_passes": 5}) == S._attn(a, dtype="bf16").bytes


def test_settings_are_the_students_own():
    t = {"answers": {"2.1.2.crossover_n": {"gpu": "H200", "dtype": "bf16", "value": 619}}}
    assert S.check_answers(t)["all_hold"]  # the README's H200 bf16 crossover
    t = {"answers": {"1.3.gemm_mac": {"N": 3, "K": 5, "M": 7, "value": 105}}}
    assert S.check_answers(t)["all_hold"]


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON"),
    ('{"answers": {"9.9": {}}}', "unknown question id"),
    ('{"answers": {"2.1.2.ridge": {"gpu": "H2000", "value": 1}}}', "bad settings"),
    ('{"answers": {"1.3.gemm_mac": {"N": "abc", "value": 1}}}', "must be an integer"),
    ('{"answers": {"1.3.gemm_mac": {"N": [1], "value": 1}}}', "must be an integer"),
    ('{"answers": {"1.3.gemm_mac": {"N": 0, "value": 1}}}', "must be positive"),
    ('{"answers": {"1.3.gemm_mac": {"Q": 3, "value": 1}}}', "unknown setting"),
    ('{"answers": {"1.3.gemm_mac": {"N": 3}}}', 'no "value" field'),
    ('{"answers": {"1.3.gemm_mac": 5}}', "expected an object"),
    ("[]", "an answers file is"),
])
def test_bad_answers_files_are_one_line(tmp_path, capsys, content, needle):
    path = tmp_path / "a.json"
    path.write_text(content)
    code, _, err = run(capsys, "check", str(path))
    assert code == 2 and needle in err and err.count("\n") == 1


def test_compare_two_runs(tmp_path, capsys, monkeypatch):
    def res(name, bw, crossover, macs=0):
        return {"meta": {"device_name": name, "date": "d", "gpu": "g", "ceilings": {
            "mem_bandwidth_bytes_per_s": bw, "peak_flops_per_s": {"fp32": 10 * bw}}},
            "answers": {"2.1.2": {"text": "", "figures": {"crossover_n": crossover,
                                                        "gpu": "not a number"}},
                        "B": {"text": "", "figures": {"rope_macs": macs}}}, "parts": {}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(res("T4", 3e11, 40)))
    (tmp_path / "b.json").write_text(json.dumps(res("H200", 4.8e12, 14)))
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b.json"), "--json")
    d = json.loads(out)
    rows = {r["figure"]: r for r in d["rows"]}
    assert code == 0 and rows["copy bandwidth (B/s)"]["b_over_a"] == pytest.approx(16)
    assert rows["2.1.2: crossover_n"]["b"] == 14 and "2.1.2: gpu" not in rows
    assert not rows["B: rope_macs"]["changed"]  # zero in both runs: no change
    (tmp_path / "c.json").write_text(json.dumps(res("H200", 4.8e12, 14, macs=5)))
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "c.json"), "--json")
    assert {r["figure"]: r for r in json.loads(out)["rows"]}["B: rope_macs"]["changed"]
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b.json"))
    assert code == 0 and "B / A" in out
    code, out, _ = run(capsys, "compare", str(tmp_path / "b.json"), str(tmp_path / "b.json"))
    assert code == 0 and "all 5 figures agree within 5%" in out and "B / A" not in out
    monkeypatch.setattr(K, "CHANGED", 20.0)  # the sentence says the threshold that ruled
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b.json"))
    assert code == 0 and "all 5 figures agree within 2000%" in out
    (tmp_path / "old.json").write_text(json.dumps({"meta": {}, "parts": {}}))
    code, _, err = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "old.json"))
    assert code == 2 and "run `rooflab lab` again" in err
    with pytest.raises(K.CompareError):
        K.load(str(tmp_path / "missing"))
