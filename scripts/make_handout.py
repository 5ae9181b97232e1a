"""Builds what an instructor publishes: one zip with rooflab's wheel and the student notebooks
(lab1.ipynb, lab1_colab.ipynb: its setup cell installs the wheel lying beside it). The solutions
notebook stays out.

    python scripts/make_handout.py [--out DIR]     # writes DIR/rooflab-lab1-handout.zip
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
STUDENT = ("lab1.ipynb", "lab1_colab.ipynb")


def build(out: pathlib.Path) -> pathlib.Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "-w", tmp, str(ROOT)], check=True)
        wheel = next(pathlib.Path(tmp).glob("rooflab-*.whl"))
        path = out / "rooflab-lab1-handout.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(wheel, wheel.name)
            for name in STUDENT:
                z.write(ROOT / "notebooks" / name, name)
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="dist", help="folder for the archive (default: dist)")
    print(build(pathlib.Path(ap.parse_args().out)))
