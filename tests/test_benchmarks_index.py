"""benchmarks/index.py: benchmarks/README.md names, for every current result, the command, commit,
date and device that made it (a JSON's own meta first, else the manifest of the call that made
it, with the settings that narrowed that call), and every A/B says whether its commit was
recorded."""
import importlib.util
import json
import pathlib

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
    text = pathlib.Path(index().main(str(tmp_path / "results"))).read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert "abc1234" in rows["`kernels.json`"] and "2026-12-03" in rows["`kernels.json`"]
    assert "def5678" in rows["`pytest-gpu.xml`"]
    assert "`TESTS_K='not slow' cmd 0`" in rows["`pytest-gpu.xml`"]  # not the time limit
    assert "`report/results.json`" in rows and "`report/figures/p1.png`" not in rows
    assert "not recorded" in rows["`old.json`"] and "benchmarks/ab_flash.py" in rows["`old.json`"]
    assert "| p1 | 1 | 5 | `cmd 1` |" in text  # a part that failed shows its exit code


def test_the_committed_index_is_current(tmp_path):
    """benchmarks/README.md is what index.py writes from the committed results."""
    committed = (ROOT / "benchmarks" / "README.md").read_text()
    path = index().main(str(ROOT / "benchmarks" / "results"), str(tmp_path / "README.md"))
    assert pathlib.Path(path).read_text() == committed, "run python benchmarks/index.py"
