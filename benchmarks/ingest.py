"""Unpack a device call's results into results/current/: every name marked with the device, the
call's manifest rewritten to those names, and older manifests' entries for the same files moved to
their part's "superseded" (so the index names one maker a file). What an A/B part (ab_*) made goes
to results/ab/ beside it, named in the manifest as ../ab/NAME.

Usage: python benchmarks/ingest.py OUT/current.tar.gz DEVICE [OLD=NEW ...] [--results DIR]
  DEVICE: the mark, e.g. h100 ("attention_classes.json" -> "attention_classes_h100.json",
  "pytest-gpu-kernels.xml" -> "pytest-gpu-kernels-h100.xml": a name's own separator);
  OLD=NEW: a name of the call's own choosing (a folder of a second run of one part, or the
  manifest of a call whose parts an earlier call ran too).
Then `python benchmarks/index.py` writes the index.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def marked(name: str, device: str, is_dir: bool = False) -> str:
    """``name`` with the device's mark before its extension (its last parts that begin with a
    letter: a number's dot, 0.75, is the stem's), joined as the name joins its words."""
    stem, ext = (name, "") if is_dir else re.fullmatch(r"(.*?)((?:\.[A-Za-z]\w*)*)",
                                                       name).groups()
    sep = "-" if "-" in stem and "_" not in stem else "_"
    return f"{stem}{sep}{device}{ext}"


def ingest(tar_path: str, device: str, renames: dict[str, str], results: str) -> str:
    """Copy the call's files into ``results``, write its manifest; the manifest's name."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
        src = os.path.join(tmp, "current")
        [manifest_name] = [f for f in os.listdir(src) if f.startswith("manifest-")]
        name = renames.get(manifest_name) or f"{manifest_name[:-len('.json')]}-{device}.json"
        if os.path.exists(os.path.join(results, name)):
            raise SystemExit(f"{name} exists: name this call's files apart (OLD=NEW)")
        with open(os.path.join(src, manifest_name)) as f:
            m = json.load(f)
        names = {}
        for f in sorted(os.listdir(src)):
            if f == manifest_name or f == "nvidia-smi.txt":  # the manifest records the device
                continue
            is_dir = os.path.isdir(os.path.join(src, f))
            names[f] = renames.get(f) or marked(f, device, is_dir)
            if m["files"].get(f, {}).get("part", "").startswith("ab_"):
                names[f] = os.path.join("..", "ab", names[f])
            dest = os.path.join(results, names[f])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.isdir(dest):
                shutil.rmtree(dest)
            (shutil.copytree if is_dir else shutil.copy2)(os.path.join(src, f), dest)
    for p in m["parts"]:
        p["files"] = [names[f] for f in p["files"] if f in names]
    m["files"] = {names[f]: v for f, v in m["files"].items() if f in names}
    m["unpacked_as"] = ", ".join(f"{f} -> {n}" for f, n in names.items())
    supersede(results, set(names.values()), f"{name} ({m.get('commit')})")
    with open(os.path.join(results, name), "w") as f:
        json.dump(m, f, indent=1)
    return name


def supersede(results: str, files: set[str], by: str) -> None:
    """Older manifests that made any of ``files`` keep the part, and say which call replaced it."""
    for name in sorted(f for f in os.listdir(results) if f.startswith("manifest")):
        path = os.path.join(results, name)
        with open(path) as f:
            m = json.load(f)
        gone = files & set(m.get("files", {}))
        if not gone:
            continue
        for p in m["parts"]:
            for f in sorted(gone & set(p.get("files", []))):
                p["files"].remove(f)
                p.setdefault("superseded", []).append(f"{f}: by {by}")
        m["files"] = {f: v for f, v in m["files"].items() if f not in gone}
        with open(path, "w") as f:
            json.dump(m, f, indent=1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tar"), ap.add_argument("device"), ap.add_argument("renames", nargs="*")
    ap.add_argument("--results", default=os.path.join(HERE, "results", "current"))
    a = ap.parse_args(argv)
    if not all("=" in r for r in a.renames):
        ap.error("renames are OLD=NEW")
    if not (os.path.isfile(a.tar) and tarfile.is_tarfile(a.tar)):
        ap.error(f"{a.tar} is not a device call's archive (OUT/current.tar.gz)")
    print(ingest(a.tar, a.device, dict(r.split("=", 1) for r in a.renames), a.results))


if __name__ == "__main__":
    main()
