"""Writes notebooks/lab1.ipynb (the student's, to hand in), notebooks/lab1_solutions.ipynb (for
instructors) and notebooks/lab1_colab.ipynb (lab1 with a first cell that installs rooflab on
Colab): one section per question of the lab, in its order and numbering
(../shared/seed/lab1-notebook.md is the spec), each with the student's cell at the lab's settings
(a TODO), a self-check under it that names the slip without giving the answer, rooflab's own
measurement and answer for the same question, and a cell for the student's answer.

All come from this one source; edit it, then run `python scripts/make_notebook.py`.
tests/test_notebook.py executes each on the CPU and checks every drawing cell shows its image.
"""
from __future__ import annotations

import pathlib
import sys

import nbformat

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import notebook_cells as C  # noqa: E402 - beside this script
import notebook_cells_late as C2  # noqa: E402

md, code = new_markdown_cell, new_code_cell


def cells(solutions: bool) -> list:
    def todo(student: str, solution: str) -> nbformat.NotebookNode:
        return code(solution if solutions else student)

    return [cell for part in (C.intro, C.part1, C.part2, C.part3, C2.part4, C2.part5_and_bonus)
            for cell in part(todo)]


SETUP = md("""## Setup (Colab or a fresh machine)

The next cell installs rooflab into this kernel where it is not importable yet: from a rooflab
wheel beside this notebook (upload the `rooflab-*.whl` of the lab's archive, or put it in your
Drive's top folder), else from `ROOFLAB_SOURCE` (a wheel's path, or a requirement such as
`rooflab[hf] @ git+https://github.com/<you>/rooflab`). Colab already has torch and transformers.""")

SETUP_CODE = code("""import glob, importlib.util, os, subprocess, sys
if importlib.util.find_spec("rooflab") is None:
    wheels = sorted(glob.glob("rooflab-*.whl") + glob.glob("/content/rooflab-*.whl")
                    + glob.glob("/content/drive/MyDrive/rooflab-*.whl"))
    source = wheels[-1] if wheels else os.environ.get("ROOFLAB_SOURCE", "")
    if source:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", source])
    else:
        print("rooflab is not installed: upload rooflab-*.whl beside this notebook, or set ROOFLAB_SOURCE, then run this cell again")
if importlib.util.find_spec("rooflab") is not None:
    import rooflab
    print("rooflab from", os.path.dirname(rooflab.__file__))""")


def build(solutions: bool = False, colab: bool = False) -> nbformat.NotebookNode:
    body = cells(solutions)
    nb = new_notebook(cells=[body[0], SETUP, SETUP_CODE, *body[1:]] if colab else body)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


VARIANTS = {"lab1.ipynb": {}, "lab1_solutions.ipynb": {"solutions": True},
            "lab1_colab.ipynb": {"colab": True}}

if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
    chosen = {"--solutions": "lab1_solutions.ipynb", "--colab": "lab1_colab.ipynb"}
    names = [chosen[a] for a in sys.argv[1:] if a in chosen] or list(VARIANTS)
    for name in names:
        nbformat.write(build(**VARIANTS[name]), str(root / name))
        print(f"wrote {root / name}")
