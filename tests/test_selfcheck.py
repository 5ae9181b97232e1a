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
    expected = {r["id"]: r["expected"] for r in S.check(t)["rows"]}
    # by hand: 1024^3 MACs; 4 * 3 * 1024^2 bytes; A6000 fp32 ridge 50.39, crossover n = 303
    assert expected["1.1.gemm_macs"] == 1024**3 and expected["1.1.gemm_bytes"] == 12 * 1024**2
    assert expected["2.1.crossover_n"] == 303
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(filled(**expected)))
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "all hold" in out


def test_verdicts_name_the_convention_or_the_slip():
    rows = {r["id"]: r for r in S.check(filled(**{
        "1.1.gemm_macs": 2 * 1024**3,                       # FLOPs, not MACs
        "1.1.gemm_bytes": 4 * 2 * 1024**2,                  # C not written
        "2.1.ridge": 50.2,                                  # within 1% of 50.39
        "3.1.attention_macs": S._core({**S.QUESTIONS["3.1.attention_macs"][0]}).detail[
            "macs_causal"],                                 # causal only: a stated convention
        "3.2.attention_bytes": 123,                         # just wrong
    }))["rows"]}
    assert rows["1.1.gemm_macs"]["verdict"] == "wrong" and "FLOPs" in rows["1.1.gemm_macs"]["why"]
    assert "writing C" in rows["1.1.gemm_bytes"]["why"]
    assert rows["2.1.ridge"]["verdict"] == "ok"
    assert rows["3.1.attention_macs"]["verdict"] == "convention"
    assert rows["3.2.attention_bytes"]["verdict"] == "wrong"
    assert rows["5.1.oom_seq"]["verdict"] == "missing"


def test_settings_are_the_students_own():
    t = {"answers": {"2.1.crossover_n": {"gpu": "H200", "dtype": "bf16", "value": 619}}}
    assert S.check(t)["all_hold"]  # the README's H200 bf16 crossover


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON"),
    ('{"answers": {"9.9": {}}}', "unknown question id"),
    ('{"answers": {"2.1.ridge": {"gpu": "H2000", "value": 1}}}', "bad settings"),
    ("[]", "an answers file is"),
])
def test_bad_answers_files_are_one_line(tmp_path, capsys, content, needle):
    path = tmp_path / "a.json"
    path.write_text(content)
    code, _, err = run(capsys, "check", str(path))
    assert code == 2 and needle in err and err.count("\n") == 1


def test_compare_two_runs(tmp_path, capsys):
    def res(name, bw, crossover):
        return {"meta": {"device_name": name, "date": "d", "gpu": "g", "ceilings": {
            "mem_bandwidth_bytes_per_s": bw, "peak_flops_per_s": {"fp32": 10 * bw}}},
            "answers": {"2.1": {"text": "", "figures": {"crossover_n": crossover,
                                                        "gpu": "not a number"}}}, "parts": {}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(res("T4", 3e11, 40)))
    (tmp_path / "b.json").write_text(json.dumps(res("H200", 4.8e12, 14)))
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b.json"), "--json")
    d = json.loads(out)
    rows = {r["figure"]: r for r in d["rows"]}
    assert code == 0 and rows["copy bandwidth (B/s)"]["b_over_a"] == pytest.approx(16)
    assert rows["2.1: crossover_n"]["b"] == 14 and "2.1: gpu" not in rows
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b.json"))
    assert code == 0 and "B / A" in out
    (tmp_path / "old.json").write_text(json.dumps({"meta": {}, "parts": {}}))
    code, _, err = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "old.json"))
    assert code == 2 and "run `rooflab lab` again" in err
    with pytest.raises(K.CompareError):
        K.load(str(tmp_path / "missing"))
