"""benchmarks/index.py: benchmarks/README.md names, for every current result, the command, commit,
date and device that made it (a JSON's own meta first, else the manifest of the call that made
it, with the settings that narrowed that call) and its part's exit code, and every A/B says
whether its commit was recorded; benchmarks/ingest.py unpacks a device call into
results/current/."""
import importlib.util
import json
import pathlib
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def index():
    spec = importlib.util.spec_from_file_location("index", ROOT / "benchmarks" / "index.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_index_names_each_results_provenance(tmp_path):
    cur, ab = tmp_path / "results" / "current", tmp_path / "results" / "ab"
    (cur / "report" / "figures").mkdir(parents=True)
    ab.mkdir()
    meta = {"commit": "abc1234", "date": "2026-12-03T10:00:00+00:00", "device_name": "NVIDIA H200",
            "command": "python3 benchmarks/kernels.py OUT/current"}
    (cur / "kernels.json").write_text(json.dumps({"meta": meta, "rows": []}))
    (cur / "pytest-gpu.xml").write_text("<testsuites/>")
    (cur / "report" / "results.json").write_text(json.dumps({"meta": {**meta, "command": None}}))
    (cur / "report" / "figures" / "p1.png").write_bytes(b"png")
    for n, (commit, files) in enumerate([("def5678", ["pytest-gpu.xml"]), ("abc1234", ["report"])]):
        (cur / f"manifest-{n}.json").write_text(json.dumps({
            "commit": commit, "date": "2026-12-04T00:00:00", "device_name": "NVIDIA H200",
            "knobs": {"TESTS_K": "not slow", "PART_TIMEOUT": "60"} if n == 0 else {},
            "parts": [{"part": f"p{n}", "rc": n, "seconds": 5, "command": f"cmd {n}"}],
            "files": {f: {"part": f"p{n}", "command": f"cmd {n}"} for f in files}}))
    (ab / "old.json").write_text(json.dumps({"meta": {"argv": ["benchmarks/ab_flash.py", "x"],
                                                      "date": "2026-12-01T00:00:00"}}))
    (ab / "ab_new.json").write_text(json.dumps({"meta": {**meta, "device_name": "NVIDIA H100"}}))
    text = pathlib.Path(index().main(str(tmp_path / "results"))).read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert "abc1234" in rows["`kernels.json`"] and "2026-12-03" in rows["`kernels.json`"]
    assert "def5678" in rows["`pytest-gpu.xml`"]
    assert "`TESTS_K='not slow' cmd 0`" in rows["`pytest-gpu.xml`"]  # not the time limit
    assert rows["`pytest-gpu.xml`"].endswith("| 0 |")  # the exit code of the part that wrote it
    assert rows["`report/results.json`"].endswith("| 1 |")
    assert rows["`kernels.json`"].endswith("|  |")  # no manifest names it
    assert "`report/results.json`" in rows and "`report/figures/p1.png`" not in rows
    assert "not recorded" in rows["`old.json`"] and "benchmarks/ab_flash.py" in rows["`old.json`"]
    assert "| abc1234 | 2026-12-03 | NVIDIA H100 |" in rows["`ab_new.json`"]  # an A/B's device
    assert "| p1 | 1 | 5 | `cmd 1` |" in text  # a part that failed shows its exit code


def test_the_committed_index_is_current(tmp_path):
    """benchmarks/README.md is what index.py writes from the committed results."""
    committed = (ROOT / "benchmarks" / "README.md").read_text()
    path = index().main(str(ROOT / "benchmarks" / "results"), str(tmp_path / "README.md"))
    assert pathlib.Path(path).read_text() == committed, "run python benchmarks/index.py"


def test_ingest_marks_names_rewrites_the_manifest_and_supersedes(tmp_path):
    """A device call's archive unpacked: names marked as each joins its words, the manifest
    rewritten to them, and the older manifest that made one of the files says what replaced it."""
    spec = importlib.util.spec_from_file_location("ingest", ROOT / "benchmarks" / "ingest.py")
    ingest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ingest)
    assert ingest.marked("attention_classes.json", "h100") == "attention_classes_h100.json"
    assert ingest.marked("pytest-gpu-kernels.xml", "h100") == "pytest-gpu-kernels-h100.xml"
    assert ingest.marked("h200_small.trace.json.gz", "h100") == "h200_small_h100.trace.json.gz"
    assert ingest.marked("ab_kept_0.5_0.75.json", "h100") == "ab_kept_0.5_0.75_h100.json"
    assert ingest.marked("attn.d", "h100", is_dir=True) == "attn.d_h100"
    cur, results = tmp_path / "out" / "current", tmp_path / "results" / "current"
    (cur / "attn").mkdir(parents=True), results.mkdir(parents=True)
    (cur / "attn" / "generate.json").write_text("{}")
    (cur / "attention_classes.json").write_text("{}")
    (cur / "ab_flash_x.json").write_text("{}")  # an A/B's rows go to results/ab/
    (cur / "nvidia-smi.txt").write_text("H100")
    part = lambda name, files: {"part": name, "rc": 0, "seconds": 1, "command": name,
                                "files": files}
    (cur / "manifest-attn_classes-generate_attn.json").write_text(json.dumps({
        "commit": "abc1234", "parts": [part("attn_classes", ["attention_classes.json"]),
                                       part("generate_attn", ["attn"]),
                                       part("ab_x", ["ab_flash_x.json"])],
        "files": {"attention_classes.json": {"part": "attn_classes", "command": "c"},
                  "attn": {"part": "generate_attn", "command": "g"},
                  "ab_flash_x.json": {"part": "ab_x", "command": "a"},
                  "nvidia-smi.txt": {"part": "setup", "command": "n"}}}))
    (results / "manifest-attn_classes-h100.json").write_text(json.dumps({
        "commit": "0000000", "parts": [part("attn_classes", ["attention_classes_h100.json"])],
        "files": {"attention_classes_h100.json": {"part": "attn_classes", "command": "c"}}}))
    with tarfile.open(tmp_path / "out" / "current.tar.gz", "w:gz") as tar:
        tar.add(cur, "current")
    name = ingest.ingest(str(tmp_path / "out" / "current.tar.gz"), "h100",
                         {"attn": "attn_llama_h100"}, str(results))
    assert name == "manifest-attn_classes-generate_attn-h100.json"
    assert sorted(p.name for p in results.iterdir()) == [
        "attention_classes_h100.json", "attn_llama_h100", name, "manifest-attn_classes-h100.json"]
    assert [p.name for p in (results.parent / "ab").iterdir()] == ["ab_flash_x_h100.json"]
    m = json.loads((results / name).read_text())
    assert set(m["files"]) == {"attention_classes_h100.json", "attn_llama_h100",
                               "../ab/ab_flash_x_h100.json"}
    assert [p["files"] for p in m["parts"]] == [["attention_classes_h100.json"],
                                               ["attn_llama_h100"], ["../ab/ab_flash_x_h100.json"]]
    old = json.loads((results / "manifest-attn_classes-h100.json").read_text())
    assert old["files"] == {} and old["parts"][0]["files"] == []
    assert old["parts"][0]["superseded"] == [f"attention_classes_h100.json: by {name} (abc1234)"]
    with pytest.raises(SystemExit, match="exists"):  # a second unpacking names its files apart
        ingest.ingest(str(tmp_path / "out" / "current.tar.gz"), "h100", {}, str(results))
    again = "manifest-attn_classes-generate_attn-again-h100.json"
    assert ingest.ingest(str(tmp_path / "out" / "current.tar.gz"), "h100", {
        "manifest-attn_classes-generate_attn.json": again}, str(results)) == again
    assert set(json.loads((results / name).read_text())["files"]) == {"attn_llama_h100"}
    assert len(list((results.parent / "ab").iterdir())) == 1  # the second run's rows replace it
