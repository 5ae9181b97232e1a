"""Both notebooks (to hand in, and the instructors' solutions) run top to bottom on the CPU
(small sizes), and are in step with their generator."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXERCISES = 9  # self-checked answers: 1.1, 2.1 (two), 2.2, 3.1, 3.2, 3.4, 4.3, 5.1


def generator():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import make_notebook
    finally:
        sys.path.pop(0)
    return make_notebook


@pytest.mark.parametrize("name", ["lab1.ipynb", "lab1_solutions.ipynb", "lab1_colab.ipynb"])
def test_notebook_matches_generator(name):
    pytest.importorskip("nbformat")
    mk = generator()
    fresh = [c["source"] for c in mk.build(**mk.VARIANTS[name]).cells]
    path = ROOT / "notebooks" / name
    committed = [c["source"] for c in json.loads(path.read_text())["cells"]]
    committed = ["".join(s) if isinstance(s, list) else s for s in committed]
    assert committed == fresh, "run python scripts/make_notebook.py"


def test_every_question_has_its_answer_cell():
    pytest.importorskip("nbformat")
    from rooflab.lab.answers import IDS
    text = "".join(c["source"] for c in generator().build(False).cells)
    assert all(f"**Your answer ({q}):**" in text for q in IDS if not q.startswith("B."))
    assert all(q in text for q in IDS if q.startswith("B."))  # the bonus: `rooflab lab`


@pytest.mark.parametrize("name", ["lab1.ipynb", "lab1_solutions.ipynb", "lab1_colab.ipynb"])
def test_notebook_executes(tmp_path, monkeypatch, name):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("ROOFLAB_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    solutions = name == "lab1_solutions.ipynb"
    path = ROOT / "notebooks" / name
    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    if solutions:  # every self-check accepts the instructors' answers
        assert outputs.count("OK:") == EXERCISES and "NOT YET:" not in outputs
    else:  # blank exercises: the self-checks say so, and the notebook goes on
        assert outputs.count("NOT YET:") == EXERCISES
    assert "memory slopes" in outputs and "GEMM compute-bound from n =" in outputs
    if name == "lab1_colab.ipynb":  # rooflab is importable here: the setup cell installs nothing
        assert "rooflab from" in outputs
