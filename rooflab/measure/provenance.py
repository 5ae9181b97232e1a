"""Where a result came from: the commit, the date, the device and the versions it ran with.

Every benchmark JSON and every lab report carries this record, so that a current result can be
told from an old one without reading prose.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def versions() -> dict:
    v = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("transformers", "triton"):
        try:
            v[mod] = __import__(mod).__version__
        except ImportError:
            v[mod] = "not installed"
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
    return v


def commit() -> str | None:
    """$ROOFLAB_COMMIT where set (a copy of a checkout sent to a remote GPU, whose .git may be
    older than its files); else the commit of the checkout rooflab runs from, with "-dirty"
    where its tracked files differ from it; None when installed from a wheel, whatever
    repository site-packages sits in."""
    if os.environ.get("ROOFLAB_COMMIT"):
        return os.environ["ROOFLAB_COMMIT"]
    if not os.path.exists(os.path.join(ROOT, ".git")):
        return None
    try:
        git = ["git", "-C", ROOT]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "rooflab", "benchmarks"],
                               capture_output=True, timeout=5).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + "-dirty" if dirty else head) or None


def device() -> dict:
    if not torch.cuda.is_available():
        return {"device": "cpu", "device_name": platform.processor() or platform.machine()}
    p = torch.cuda.get_device_properties(0)
    return {"device": "cuda", "device_name": torch.cuda.get_device_name(),
            "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory}


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def record() -> dict:
    """commit, date, device and versions: the provenance of a result made now."""
    return {"commit": commit(), "date": now(), **device(), "versions": versions()}
