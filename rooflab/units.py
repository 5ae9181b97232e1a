"""Numbers for people: SI prefixes, seconds in the unit that reads best, and a column's unit from
its name. Shared by the lab's prose and the views."""
from __future__ import annotations

# a timing whose robust CV is above this is flagged unstable (the timer's threshold, named in the
# views that mark such timings)
CV_UNSTABLE = 0.05


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


# A column's unit comes from its name, exactly (units are in the names, see cost.py):
# the longest matching suffix wins, so "tflops_per_s" is a rate and never a time.
RATE_SUFFIXES = (("tflops_per_s", lambda v: si(v * 1e12, "FLOP/s")),
                 ("flops_per_s", lambda v: si(v, "FLOP/s")),
                 ("bytes_per_s", lambda v: si(v, "B/s")),
                 ("elements_per_s", lambda v: si(v, "elem/s")))


COUNTED = ("bytes", "bytes_fused", "bytes_eager", "flops", "macs")


def column(name: str, v) -> str | None:
    """``v`` in the unit its column name states, or None when the name states none."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    for suffix, render in RATE_SUFFIXES:
        if name == suffix or name.endswith("_" + suffix):
            return render(v)
    if name.endswith("_per_s"):
        return f"{v:.4g} /s"
    if name.endswith("_s"):
        return secs(v)
    if name in COUNTED:
        return None  # exact integers, as counted
    if name.endswith("_bytes") or name.startswith("bytes_"):
        return si(v, "B")
    if name.startswith("fraction_") or is_cv(name):
        return f"{v:.1%}"
    return None


def is_cv(name: str) -> bool:
    """A column of a timing's coefficient of variation ("cv", "device_cv", ...)."""
    return name == "cv" or name.endswith("_cv")


def unstable_cell(name: str, v) -> bool:
    """A CV column whose value is above the timer's threshold: views mark such cells."""
    return is_cv(name) and isinstance(v, (int, float)) and v > CV_UNSTABLE


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
