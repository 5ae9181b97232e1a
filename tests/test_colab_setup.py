"""The Colab notebook's setup cell, in a fresh virtual environment that has torch alone: with
rooflab's wheel beside the notebook it installs rooflab from it, and part 1's first check runs;
with neither a wheel nor ROOFLAB_SOURCE it says in one line what to do."""
import importlib.metadata as md
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # run by CI's second command: pytest -m slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
TORCH_ALONE = ("torch", "filelock", "typing_extensions", "sympy", "mpmath", "networkx", "jinja2",
               "MarkupSafe", "fsspec")


def setup_cell() -> str:
    nb = json.loads((ROOT / "notebooks" / "lab1_colab.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    assert "find_spec(\"rooflab\")" in src, "the Colab notebook's first code cell is its setup"
    return src


def torch_alone(tmp: pathlib.Path) -> pathlib.Path:
    """A folder with links to torch and what it imports, nothing else (no rooflab)."""
    d = tmp / "torch_alone"
    d.mkdir()
    for name in TORCH_ALONE:
        dist = md.distribution(name)
        for top in {pathlib.Path(f).parts[0] for f in dist.files} - {".."}:
            src = pathlib.Path(dist.locate_file(top))
            if src.exists() and not (d / top).exists():
                (d / top).symlink_to(src)
    return d


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("colab")
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "v")], check=True)
    py = tmp / "v" / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    pathlib.Path(site, "torch_alone.pth").write_text(str(torch_alone(tmp)) + "\n")
    return tmp, py


def run_cell(py, cwd, extra="", env=None):
    return subprocess.run([str(py), "-c", setup_cell() + "\n" + extra], cwd=cwd, text=True,
                          capture_output=True, timeout=900,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items()
                               if (k != "ROOFLAB_SOURCE" or env) and k != "PYTHONPATH"})


def test_without_wheel_or_source_one_line(venv, tmp_path):
    _, py = venv
    r = run_cell(py, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == [
        "rooflab is not installed: upload rooflab-*.whl beside this notebook, or set "
        "ROOFLAB_SOURCE, then run this cell again"]


@pytest.mark.network  # pip installs the wheel's dependencies from the index
def test_installs_from_the_wheel_beside_the_notebook(venv, tmp_path):
    tmp, py = venv
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path), str(ROOT)], check=True)
    assert list(tmp_path.glob("rooflab-*.whl"))
    r = run_cell(py, tmp_path, extra=(
        "from rooflab.lab import checks\n"
        "print(checks.check_gemm_mac(lambda A, B: A.shape[0] * A.shape[1] * B.shape[1]))\n"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"rooflab from {tmp / 'v'}" in r.stdout
    assert "(True, \"correct on the lab's checks" in r.stdout


def test_handout_has_the_wheel_and_the_student_notebooks_only(tmp_path):
    import zipfile

    path = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_handout.py"), "--out",
                           str(tmp_path)], check=True, capture_output=True, text=True)
    names = zipfile.ZipFile(path.stdout.strip()).namelist()
    assert sorted(n for n in names if n.endswith(".ipynb")) == ["lab1.ipynb", "lab1_colab.ipynb"]
    assert [n for n in names if n.endswith(".whl")] and len(names) == 3
