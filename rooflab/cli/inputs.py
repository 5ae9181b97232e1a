"""Command-line input, checked before any work starts: each bad value is one UserError (one line
on stderr, exit code 2) that says what would work."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from typing import Optional

from rooflab import cost as C
from rooflab.errors import RooflabError


class UserError(RooflabError):
    """Bad input from the command line: one line on stderr, exit code 2."""


class Interrupted(Exception):
    """Ctrl-C during a command; the message says what was kept."""


@contextlib.contextmanager
def stop_between_steps():
    """Inside, the first Ctrl-C is held until the next ``check()`` (a point of a sweep, the end
    of a part), which raises KeyboardInterrupt there; a second one raises at once. An interrupt
    raised wherever Python happens to be can land in an import (matplotlib's, drawing a part's
    figures) and leave a C extension half made: the lab then ended as an internal error and a
    fatal error at exit (once in three runs of the test suite that sends a real SIGINT)."""
    pending = []

    def held(signum, frame):
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)
        sys.stderr.write("\nrooflab: stopping after this step (Ctrl-C again stops now)\n")

    def check():
        if pending:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, held)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)


def positive(value: Optional[int], flag: str) -> Optional[int]:
    if value is not None and value <= 0:
        raise UserError(f"{flag} must be a positive integer, got {value}")
    return value


def writable_dir(path: str, flag: str) -> str:
    """Create ``path`` (like mkdir -p) and check a file can be written there, before any work."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{flag} {path}: is a file, not a folder")
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot write there ({e.strerror or e})") from None
    return path


def writable_file(path: str, flag: str, suffixes: tuple[str, ...] = ()) -> str:
    """A file path whose folder exists and is writable, with one of ``suffixes`` if given
    (checked before any work)."""
    if not path.strip():
        raise UserError(f"{flag} needs a file name" + (f" ending in {' or '.join(suffixes)}"
                                                       if suffixes else ""))
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"{flag} {path}: is a folder; give a file name such as {path}/plot.png")
    if suffixes and not path.lower().endswith(suffixes):
        raise UserError(f"{flag} {path}: give a file name ending in {' or '.join(suffixes)}")
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UserError(f"{flag} {path}: cannot write in {folder}")
    return path


def fits(need_bytes: int, device: str, what: str) -> None:
    """Refuse, before any work, what this device's free memory cannot hold."""
    from rooflab.measure.memory import free_bytes

    free = free_bytes(device)
    if free is not None and need_bytes > free:
        raise UserError(f"{what} needs about {need_bytes / 2**30:,.1f} GiB for its tensors; "
                        f"this {device} has {free / 2**30:,.1f} GiB free")


def sizes(text: str) -> list[int]:
    """'1024,2048': positive integers."""
    try:
        values = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"sizes must be comma-separated positive integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise UserError(f"sizes must be comma-separated positive integers, got {text!r}")
    return values


def device(name: Optional[str]) -> str:
    """auto (or none), cuda or cpu -> the device to run on; cuda only where there is one."""
    import torch

    if name in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available here (use --device cpu)")
    if name not in ("cuda", "cpu"):
        raise UserError(f"--device must be auto, cuda or cpu, got {name!r}")
    return name


def phase(kind: str, batch: int, seq: Optional[int], kv_len: Optional[int]):
    """--phase with its sizes: prefill takes --seq, decode --kv-len, never the other one."""
    from rooflab import models as M

    positive(batch, "--batch"), positive(seq, "--seq"), positive(kv_len, "--kv-len")
    if kind == "prefill":
        if kv_len is not None:
            raise UserError("--kv-len is for --phase decode (the cache length); prefill attends "
                            "its own --seq tokens")
        return M.Phase.prefill(batch, seq or 512)
    if kind == "decode":
        if seq is not None:
            raise UserError("--seq is for --phase prefill; decode takes --kv-len (the cache "
                            "length, default 1024)")
        return M.Phase.decode(batch, kv_len or 1024)
    raise UserError(f"--phase must be prefill or decode, got {kind!r}")


def choices(text: str, allowed, flag: str) -> list[str]:
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    if not chosen or any(c not in allowed for c in chosen):
        raise UserError(f"{flag} takes {', '.join(allowed)}; got {text!r}")
    return chosen


def dtype(text: str, allowed, flag: str = "--dtype") -> str:
    dt = C.dtype_name(text)
    if dt not in allowed:
        raise UserError(f"{flag} must be one of {', '.join(allowed)}, got {text!r}")
    return dt


def parts(text: str) -> list[int]:
    from rooflab.lab.parts import PARTS

    try:
        nums = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UserError(f"--parts takes numbers 1-{max(PARTS)} separated by commas, got "
                        f"{text!r}") from None
    bad = [n for n in nums if n not in PARTS]
    if bad or not nums:
        raise UserError(f"--parts takes numbers 1-{max(PARTS)} separated by commas, got {text!r}")
    return nums


def seq_range(text: str) -> list[int]:
    """'a..b': the powers-of-two multiples a, 2a, ... up to b; 'a,b,c': those lengths."""
    if ".." not in text:
        return sizes(text)
    lo, _, hi = text.partition("..")
    lo_n, hi_n = sizes(lo)[0], sizes(hi)[0]
    if lo_n > hi_n:
        raise UserError(f"--seq {text}: the range is empty; write low..high, e.g. {hi_n}..{lo_n}")
    seqs, n = [], lo_n
    while n <= hi_n:
        seqs.append(n)
        n *= 2
    return seqs


def precision(default: str, weight: Optional[str], act: Optional[str], kv: Optional[str],
              group_size: Optional[int]):
    """--weight-dtype/--act-dtype/--kv-dtype/--group-size as a Precision, or None when none is
    given (the config's dtype for everything)."""
    from rooflab import precision as Q

    if weight is None and act is None and kv is None and group_size is None:
        return None
    positive(group_size, "--group-size")

    def name(d: Optional[str], flag: str, allowed) -> Optional[str]:
        if d is None:
            return None
        key = "int4" if str(d).lower() == "int4" else C.DTYPE_ALIASES.get(str(d).lower(),
                                                                           str(d).lower())
        if key not in allowed:
            raise UserError(f"{flag} must be one of {', '.join(allowed)}, got {d!r}")
        return key

    a = name(act, "--act-dtype", Q.ACT_DTYPES) or default
    return Q.Precision(name(weight, "--weight-dtype", Q.WEIGHT_BITS) or default, a,
                       name(kv, "--kv-dtype", Q.ACT_DTYPES) or a, group_size)
