"""Numbers for people: SI prefixes and seconds in the unit that reads best."""
from __future__ import annotations


def si(v, unit: str = "") -> str:
    """1.23e12 -> '1.23 T'; None -> '-'."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    for p, s in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= s:
            return f"{v / s:.3g} {p}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def secs(v) -> str:
    """0.000123 -> '123 us'; None -> '-'."""
    if v is None:
        return "-"
    for unit, s in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if abs(v) >= s:
            return f"{v / s:.3g} {unit}"
    return f"{v / 1e-9:.3g} ns"
