"""The lab's questions by their numbers (1.1 ... 5.2 and the bonus items B.*), and the form of an
answer: ``{"text": ..., "figures": {...}}``, the sentence and the numbers of this run it was
derived from. Each part answers its own questions (rooflab/lab/parts/); no verdict is fixed in
advance: "memory-bound", "fits", "2-4x" are decided by the run's figures.
"""
from __future__ import annotations

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
