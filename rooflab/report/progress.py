"""Progress on stderr: a rich bar on a terminal, a plain line now and then in a pipe or a log,
one line for a step that has no bar. Views only: nothing here measures."""
from __future__ import annotations

import time

from rich.console import Console

err = Console(stderr=True)  # notes that must not mix with --json on stdout


def note(msg: str) -> None:
    """One progress line on stderr (a terminal or not), for steps that have no bar."""
    err.print(f"rooflab: {msg}", highlight=False, soft_wrap=True)


class Progress:
    """Rich progress bars: one per part sweep; parts report when they end."""

    def __init__(self):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as P,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._p = P("[progress.description]{task.description}", BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), "eta", TimeRemainingColumn(),
                    console=err, transient=False)

    def __enter__(self):
        if err.is_terminal:  # elsewhere the bar is not drawn (see task)
            self._p.__enter__()
        return self

    def __exit__(self, *exc):
        return self._p.__exit__(*exc) if err.is_terminal else None

    def task(self, desc: str, total: int, weights: list[float] | None = None):
        """An advance() per step; ``weights`` (each step's predicted share, e.g. its roofline
        floor) make the plain-line ETA follow steps that grow, as a sweep's do."""
        if not err.is_terminal:  # a pipe or a log shows no bar: a line now and then instead
            return _LogTicks(desc, total, weights=weights)
        tid = self._p.add_task(desc, total=total)
        return lambda: self._p.advance(tid)

    def part_done(self, num: int, entry: dict) -> None:
        status = "resumed" if entry.get("resumed") else entry["status"]
        why = f"; recomputed, {entry['recomputed']}" if entry.get("recomputed") else ""
        self._p.console.print(f"part {num}: {status} ({entry.get('time_s', 0):.1f} s){why}")


class _LogTicks:
    """Progress where stderr is not a terminal: one plain line every ``every_s`` seconds and
    at the end, with the time the rest takes at the pace so far (a sweep's later points are
    usually its longer ones: then the rest takes longer)."""

    def __init__(self, desc: str, total: int, every_s: float = 30.0, clock=time.monotonic,
                 weights: list[float] | None = None):
        self.desc, self.total, self.every_s, self.done = desc, total, every_s, 0
        self.clock, self.weights = clock, weights if weights and sum(weights) > 0 else None
        self.start = self.last = self.clock()

    def _rest_s(self, spent: float) -> float:
        """The rest at this pace: per step, or per unit of the steps' weights when known."""
        if self.weights is None:
            return spent / self.done * (self.total - self.done)
        done = sum(self.weights[:self.done])
        rest = sum(self.weights[self.done:])
        return spent / done * rest if done > 0 else float("inf")

    def __call__(self) -> None:
        self.done += 1
        now = self.clock()
        if now - self.last < self.every_s and self.done < self.total:
            return
        self.last = now
        spent = now - self.start
        rest = (f", about {self._rest_s(spent):.0f} s more at this pace"
                if self.done < self.total else "")
        err.print(f"{self.desc}: {self.done}/{self.total} in {spent:.0f} s{rest}",
                  highlight=False)
