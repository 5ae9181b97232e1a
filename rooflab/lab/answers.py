"""The lab's questions by their numbers (1.1 ... 5.2 and the bonus items B.*), and the form of an
answer: ``{"text": ..., "figures": {...}}``, the sentence and the numbers of this run it was
derived from. Each part answers its own questions (rooflab/lab/parts/); no verdict is fixed in
advance: "memory-bound", "fits", "2-4x" are decided by the run's figures.
"""
from __future__ import annotations

from rooflab.units import CV_UNSTABLE

IDS = ("1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "3.3", "3.4.1", "3.4.2", "3.4.3", "4.1", "4.2",
       "4.3", "4.4", "4.4.2", "5.1", "5.2", "B.attention_macs", "B.attention_io",
       "B.decode_profile", "B.cuda_graph_profile", "B.flash_vs_sdpa", "B.flash_analysis",
       "B.flash_decoding", "B.tensor_parallel")


def answer(text: str, **figures) -> dict:
    return {"text": text, "figures": figures}


def collect(parts: dict) -> dict:
    """Every finished part's answers, in the lab's order, keyed by question id."""
    found = {q: a for p in parts.values() for q, a in
             ((p.get("result") or {}).get("answers") or p.get("answers") or {}).items()}
    return {q: found[q] for q in IDS if q in found}


def names(kernels: list, n: int = 3) -> str:
    """The first kernel names, shortened, for a sentence."""
    return ", ".join(k[:60] for k in kernels[:n]) or "none"


def noise(rows: list[dict], label, flag: str = "unstable", cv: str = "cv") -> str:
    """A sentence naming the timings among ``rows`` the timer flagged unstable (``label(row)``
    names one), for an answer that compares them; '' when every one was stable."""
    bad = [r for r in rows if r.get(flag)]
    if not bad:
        return ""
    listed = ", ".join(f"{label(r)} (CV {r[cv]:.0%})" for r in bad[:4])
    more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
    return (f" Unstable timings (robust CV above {CV_UNSTABLE:.0%}): {listed}{more}: their calls "
            "varied that much (another process, clocks, caches), so ratios that use them are "
            "uncertain by about as much.")
