"""The lab's questions by their numbers (1.1 ... 5.2 and the bonus items B.*), and the form of an
answer: ``{"text": ..., "figures": {...}}``, the sentence and the numbers of this run it was
derived from. Each part answers its own questions (rooflab/lab/parts/); no verdict is fixed in
advance: "memory-bound", "fits", "2-4x" are decided by the run's figures.
"""
from __future__ import annotations

from rooflab.units import CV_UNSTABLE

IDS = ("1.1", "1.2", "1.3", "1.4", "2.1.1", "2.1.2", "2.2", "3.1", "3.2", "3.3", "3.4.1",
       "3.4.2", "3.4.3", "4.1", "4.2", "4.3.1", "4.3.2", "4.3.3", "4.3.4", "4.4", "4.4.1",
       "4.4.2", "5.1", "5.2", "B.attention_macs", "B.attention_io", "B.decode_profile",
       "B.cuda_graph_profile", "B.flash_vs_sdpa", "B.flash_analysis", "B.flash_decoding",
       "B.tensor_parallel")
AGREE = 0.10  # two timings of the same thing "agree" within 10% (or twice their CV, to 25%)


def answer(text: str, **figures) -> dict:
    return {"text": text, "figures": figures}


def collect(parts: dict) -> dict:
    """Every finished part's answers, in the lab's order, keyed by question id."""
    found = {q: a for p in parts.values() for q, a in
             ((p.get("result") or {}).get("answers") or p.get("answers") or {}).items()}
    return {q: found[q] for q in IDS if q in found}


def times(r: float) -> str:
    """A ratio for a sentence: "3.2x", "1,234x"."""
    return f"{r:,.0f}x" if r >= 100 else f"{r:.3g}x"


def speed(ratio: float) -> str:
    """``ratio`` = the other's time over this one's: "3.2x faster", "4.8x slower" or "as fast"."""
    if abs(ratio - 1) < 0.02:
        return "as fast (within 2%)"
    return times(ratio if ratio > 1 else 1 / ratio) + (" faster" if ratio > 1 else " slower")


def agree_bound(cv: float = 0.0) -> float:
    """How far apart two clocks may read and still agree: 10%, or twice the runs' CV (to 25%)."""
    return min(0.25, max(AGREE, 2 * cv))


def agree(ratio: float, cv: float = 0.0) -> bool:
    return abs(ratio - 1) <= agree_bound(cv)


def kernel_label(name: str) -> str:
    """A kernel's name for a sentence: a C++ kernel's own function name, without its return
    type, namespaces, template and argument lists (a generic cutlass ``Kernel`` by its first
    template argument), to 80 characters; other names (nvjet_..., aten::mm) as they are, to 60."""
    if not (name.startswith("void ") or "<" in name):
        return name[:60]
    s = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    cut = min((i for i in (s.find("<"), s.find("(")) if i >= 0), default=len(s))
    label = s[:cut].rsplit("::", 1)[-1]
    if label.startswith("Kernel") and s[cut:cut + 1] == "<":
        label = s[cut + 1:].split(",")[0].split(">")[0].split("(")[0].strip()
    return label[:80] or name[:60]


def names(kernels: list, n: int = 3) -> str:
    """The first ``n`` kernels by label, for a sentence; a label twice is counted ("x2")."""
    counts: dict = {}
    for k in kernels[:n]:
        counts[kernel_label(k)] = counts.get(kernel_label(k), 0) + 1
    return ", ".join(k + (f" (x{c})" if c > 1 else "") for k, c in counts.items()) or "none"


def unstable_timings(parts: dict) -> dict[str, int]:
    """Per part, how many of its timings the timer flagged unstable: every row of its data with
    a true flag named "unstable" or ending in "_unstable" (one flag per timing)."""
    def count(x) -> int:
        if isinstance(x, dict):
            return sum(v is True for k, v in x.items() if str(k) == "unstable" or
                       str(k).endswith("_unstable")) + sum(count(v) for v in x.values())
        return sum(count(v) for v in x) if isinstance(x, list) else 0
    found = {n: count((p.get("result") or {}).get("data")) for n, p in parts.items()}
    return {n: c for n, c in found.items() if c}


def unstable_text(counts: dict[str, int]) -> str:
    """One sentence for a run's flagged timings, '' when there were none."""
    if not counts:
        return ""
    return (f"{sum(counts.values())} timings were unstable (robust CV above {CV_UNSTABLE:.0%}; "
            + ", ".join(f"part {n}: {c}" for n, c in sorted(counts.items()))
            + "): the tables show their CV and the answers that compare them say so.")
