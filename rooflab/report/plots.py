"""Static plots (matplotlib, PNG). Views only: every number arrives computed."""
from __future__ import annotations

import math
from dataclasses import dataclass

from rooflab.units import secs, si
from rooflab.roofline import Roof

Y_UNITS = {"s": secs, "FLOP/s": lambda v: si(v, "FLOP/s")}  # a y unit -> its tick labels


@dataclass(frozen=True)
class PlotPoint:
    label: str
    intensity: float
    flops_per_s: float
    kind: str = "predicted"  # "predicted" (on the roof) | "measured" (achieved)
    group: str = ""


def _figure(width: float, height: float):
    """A figure with its own Agg canvas: no pyplot, so the user's backend and open figures (a
    notebook's inline plots) are left as they were."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=130)
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def _colors() -> list[str]:
    import matplotlib

    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def _fmt_flops(v: float) -> str:
    for unit, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v / 1e6:.3g} MFLOP/s"


def roofline_png(path, roofs: list[Roof], points: list[PlotPoint] = (), title: str = "") -> str:
    """Log-log roofline: one line per roof, its ridge marked, regions labelled, points drawn as
    hollow circles when predicted (on the roof) and filled diamonds when measured."""
    xs = [p.intensity for p in points if p.intensity > 0 and math.isfinite(p.intensity)]
    xs += [r.ridge for r in roofs]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 3))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    fig, ax = _figure(8.5, 5.5)
    colors = _colors()
    for i, r in enumerate(roofs):
        c = colors[i % len(colors)]
        ls = "--" if r.measured else "-"
        ax.plot([x_lo, r.ridge, x_hi],
                [r.mem_bandwidth_bytes_per_s * x_lo, r.peak_flops_per_s, r.peak_flops_per_s],
                color=c, ls=ls, lw=2, label=f"{r.label}: {_fmt_flops(r.peak_flops_per_s)}, "
                f"{r.mem_bandwidth_bytes_per_s / 1e9:.0f} GB/s, ridge {r.ridge:.1f}")
        ax.axvline(r.ridge, color=c, ls=":", lw=1)
        ax.annotate(f"ridge {r.ridge:.3g}", (r.ridge, r.peak_flops_per_s), fontsize=7, color=c,
                    xytext=(-4, 6), textcoords="offset points", ha="right")
    groups = sorted({p.group for p in points})
    markers = "oDs^v<>"
    for gi, g in enumerate(groups):
        for kind in ("predicted", "measured"):
            sel = [p for p in points if p.group == g and p.kind == kind]
            if not sel:
                continue
            c = colors[(gi + len(roofs)) % len(colors)]
            ax.scatter([p.intensity for p in sel], [p.flops_per_s for p in sel],
                       marker=markers[gi % len(markers)] if kind == "measured" else "o",
                       facecolors=c if kind == "measured" else "none", edgecolors=c, s=45,
                       zorder=3, label=f"{g + ' ' if g else ''}{kind}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("performance")
    _y_unit(ax, "FLOP/s")
    ymax = max(r.peak_flops_per_s for r in roofs)
    ax.set_ylim(bottom=min([r.mem_bandwidth_bytes_per_s * x_lo for r in roofs]
                           + [p.flops_per_s for p in points if p.flops_per_s > 0]) / 2,
                top=ymax * 3)
    _label_points(fig, ax, points)
    r0 = roofs[0]
    ax.text(math.sqrt(x_lo * r0.ridge), ymax * 1.6, "memory-bound", ha="center", fontsize=10,
            color="0.35")
    ax.text(math.sqrt(r0.ridge * x_hi), ymax * 1.6, "compute-bound", ha="center", fontsize=10,
            color="0.35")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(_wrap(title), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def _y_unit(ax, unit: str | None) -> None:
    if unit in Y_UNITS:
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: Y_UNITS[unit](v)))


def _label_points(fig, ax, points) -> None:
    """One label per name (the measured point's where there is one), placed at the first of a
    few offsets where it overlaps no label already placed; a label with no free place is left to
    the legend and the HTML report's hover."""
    fig.canvas.draw()  # the transforms below need the final limits
    placed, seen = [], set()
    order = sorted(points, key=lambda p: p.kind != "measured")
    for p in order:
        if not p.label or p.label in seen or not (p.intensity > 0 and p.flops_per_s > 0):
            continue
        seen.add(p.label)
        x, y = ax.transData.transform((p.intensity, p.flops_per_s))
        px = 7 * fig.dpi / 72  # the labels' font size, in pixels
        w, h = 0.62 * px * len(p.label), 1.25 * px
        for dx, dy in ((5, 4), (5, -h - 4), (5, h + 6), (5, -2 * h - 6), (-8 - w, 4),
                       (-8 - w, -h - 4)):
            box = (x + dx, y + dy, x + dx + w, y + dy + h)
            if all(box[2] < b[0] or box[0] > b[2] or box[3] < b[1] or box[1] > b[3]
                   for b in placed):
                placed.append(box)
                ax.annotate(p.label, (p.intensity, p.flops_per_s), fontsize=7,
                            xytext=(dx * 72 / fig.dpi, dy * 72 / fig.dpi),
                            textcoords="offset points")
                break


def lines_png(path, series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str,
              title: str = "", logx: bool = True, logy: bool = True,
              marks: dict[str, list[tuple[float, str]]] | None = None,
              yunit: str | None = None) -> str:
    """One line per series of (x, y); ``marks`` annotates points (e.g. 'OOM') per series."""
    from rooflab.report.svg import coincide

    fig, ax = _figure(8, 4.8)
    same = coincide(series)
    for name, pts in series.items():
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:  # a series equal to an earlier one: dashed on top of it, and said
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if name not in same
                    else "x", ls="--" if name in same else "-",
                    label=name + (f" (the same as {same[name]})" if name in same else ""))
    for name, items in (marks or {}).items():
        for x, text in items:
            ax.axvline(x, color="red", ls=":", lw=1)
            ax.annotate(f"{name}: {text}", (x, 0.95), xycoords=("data", "axes fraction"),
                        fontsize=7, color="red", rotation=90, va="top")
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _y_unit(ax, yunit)
    ax.set_title(_wrap(title), fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def bars_png(path, labels: list[str], values: list[float], ylabel: str, title: str = "",
             logy: bool = False, yunit: str | None = None) -> str:
    fig, ax = _figure(8, 4.5)
    ax.bar(range(len(values)), values, color="#4C72B0")
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    _y_unit(ax, yunit)
    ax.set_title(_wrap(title), fontsize=10)
    for i, v in enumerate(values):
        ax.annotate(Y_UNITS[yunit](v) if yunit in Y_UNITS else f"{v:.3g}", (i, v), ha="center",
                    va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def _wrap(title: str, width: int = 95) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(title, width)) if title else ""


def render_png(spec: dict, path) -> str:
    """Draw a plot specification (as the lab parts produce them) to a PNG."""
    if spec["kind"] == "roofline":
        roofs = [Roof(r["label"], r["peak_flops_per_s"], r["mem_bandwidth_bytes_per_s"],
                      measured=r["measured"]) for r in spec["roofs"]]
        pts = [PlotPoint(p["label"], p["intensity"], p["flops_per_s"], p["kind"], p["group"])
               for p in spec["points"]]
        return roofline_png(path, roofs, pts, spec["title"])
    if spec["kind"] == "lines":
        marks = {k: [(x, t) for x, t in v] for k, v in spec.get("marks", {}).items()}
        return lines_png(path, {k: [tuple(p) for p in v] for k, v in spec["series"].items()},
                         spec["xlabel"], spec["ylabel"], spec["title"], spec.get("logx", True),
                         spec.get("logy", True), marks, spec.get("yunit"))
    if spec["kind"] == "bars":
        return bars_png(path, spec["labels"], spec["values"], spec["ylabel"], spec["title"],
                        yunit=spec.get("yunit"))
    raise ValueError(f"unknown plot kind {spec['kind']!r}")
