"""Both notebooks (to hand in, and the instructors' solutions) run top to bottom on the CPU
(small sizes), and are in step with their generator."""
import json
import pathlib
import re
import sys

import pytest

pytestmark = pytest.mark.slow  # run by CI's second command: pytest -m slow

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


LAB_IDS = ("1.1", "1.2", "1.3", "1.4", "2.1.1", "2.1.2", "2.2", "3.1", "3.2", "3.3", "3.4.1",
           "3.4.2", "3.4.3", "4.1", "4.2", "4.3.1", "4.3.2", "4.3.3", "4.3.4", "4.4", "4.4.1",
           "4.4.2", "5.1", "5.2")  # the lab's notebook, in its order (lab1-notebook.md)
CHECKS = 19  # self-checked cells: every TODO of the lab's


def test_every_question_has_its_section_in_the_labs_order():
    pytest.importorskip("nbformat")
    from rooflab.lab.answers import IDS
    assert IDS[:len(LAB_IDS)] == LAB_IDS and all(q.startswith("B.") for q in IDS[len(LAB_IDS):])
    text = "".join(c["source"] for c in generator().build(False).cells)
    where = [text.index(f"**Your answer ({q}):**") for q in LAB_IDS]
    assert where == sorted(where)
    assert all(f'lab.answer("{q}"' in text for q in IDS)  # rooflab's answer beside each


DRAWS = re.compile(r"plt\.show\(\)|lab\.answer\([^)]*,\s*\"p\d")


@pytest.mark.parametrize("name", ["lab1.ipynb", "lab1_solutions.ipynb", "lab1_colab.ipynb"])
def test_notebook_executes_and_shows_its_plots(tmp_path, monkeypatch, name):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("ROOFLAB_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the notebook's own inline backend
    nb = nbformat.read(str(ROOT / "notebooks" / name), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    blank = [c.source.splitlines()[0] for c in code if DRAWS.search(c.source) and not any(
        "image/png" in o.get("data", {}) for o in c.get("outputs", []))]
    assert not blank, f"cells that draw but show no image: {blank}"
    outputs = "".join(o.get("text", "") for c in code for o in c.get("outputs", []))
    if name == "lab1_solutions.ipynb":  # every self-check accepts the instructors' answers
        assert outputs.count("OK:") == CHECKS and "NOT YET:" not in outputs, outputs
    else:  # the empty TODOs: each check says so, and the notebook goes on
        assert outputs.count("NOT YET:") == CHECKS and "OK:" not in outputs, outputs
    assert all(f"rooflab ({q}):" in outputs for q in LAB_IDS)
    assert "Traceback" not in outputs
    if name == "lab1_colab.ipynb":  # rooflab is importable here: the setup cell installs nothing
        assert "rooflab from" in outputs
