"""Interactive SVG plots for the HTML report: no JavaScript library, no network. Each point
carries its numbers in data attributes and a <title> (the browser's own hover tooltip); the
report's small script shows the same numbers in a floating box. Views only."""
from __future__ import annotations

import html
import math

from rooflab.units import secs, si

W, H_, PAD_L, PAD_R, PAD_T, PAD_B = 760, 416, 86, 20, 26, 46
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def _esc(s) -> str:
    return html.escape(str(s), quote=True)


class _Axes:
    def __init__(self, xs, ys, logx=True, logy=True):
        self.logx, self.logy = logx, logy
        xs = [x for x in xs if x and x > 0 and math.isfinite(x)] or [1.0]
        ys = [y for y in ys if y and y > 0 and math.isfinite(y)] or [1.0]
        self.x0, self.x1 = self._range(xs, logx)
        self.y0, self.y1 = self._range(ys, logy)

    @staticmethod
    def _range(v, log):
        lo, hi = min(v), max(v)
        if log:
            lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
            return (lo, hi * 10) if lo == hi else (lo, hi)
        span = (hi - lo) or abs(hi) or 1.0
        return lo - 0.05 * span, hi + 0.05 * span

    def _t(self, v, lo, hi, log):
        if log:
            v, lo, hi = math.log10(max(v, 1e-300)), math.log10(lo), math.log10(hi)
        return (v - lo) / (hi - lo)

    def x(self, v):
        return PAD_L + self._t(v, self.x0, self.x1, self.logx) * (W - PAD_L - PAD_R)

    def y(self, v):
        return H_ - PAD_B - self._t(v, self.y0, self.y1, self.logy) * (H_ - PAD_T - PAD_B)

    def ticks(self, log, lo, hi):
        if log:
            return [10.0 ** e for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]
        step = (hi - lo) / 5
        return [lo + i * step for i in range(6)]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


TICKS = {"s": secs, "FLOP/s": lambda v: si(v, "FLOP/s")}  # a y unit -> its tick labels


def tick_label(v: float, unit: str | None = None) -> str:
    if unit in TICKS:
        return TICKS[unit](v)
    return f"{v:,.0f}" if 1e3 <= abs(v) < 1e7 and float(v).is_integer() else f"{v:.3g}"


def _frame(ax: _Axes, xlabel: str, ylabel: str, yunit: str | None = None) -> list[str]:
    out = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" '
           f'height="{H_ - PAD_T - PAD_B}" class="frame"/>']
    for v in ax.ticks(ax.logx, ax.x0, ax.x1):
        x = ax.x(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H_ - PAD_B}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{H_ - PAD_B + 19}" text-anchor="middle">{tick_label(v)}</text>')
    for v in ax.ticks(ax.logy, ax.y0, ax.y1):
        y = ax.y(v)
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{_esc(tick_label(v, yunit))}</text>')
    out.append(f'<text x="{W / 2}" y="{H_ - 8}" text-anchor="middle">{_esc(xlabel)}</text>')
    out.append(_ylabel(ylabel))
    return out


def _ylabel(text: str) -> str:
    """Above the y axis, level: it never meets the tick labels to its left."""
    return f'<text x="{PAD_L}" y="{PAD_T - 9}" text-anchor="start" class="ylabel">{_esc(text)}</text>'


def coincide(series: dict[str, list], rel: float = 0.01) -> dict[str, str]:
    """Series whose points all equal an earlier series' (within ``rel``): name -> that one's
    name. The plots draw them dashed and say so in the legend, so no line hides another."""
    out = {}
    names = list(series)
    for i, a in enumerate(names):
        pa = [p for p in series[a] if p[1] is not None]
        for b in names[:i]:
            pb = [p for p in series[b] if p[1] is not None]
            if pa and len(pa) == len(pb) and all(
                    xa == xb and abs(ya - yb) <= rel * max(abs(yb), 1e-300)
                    for (xa, ya), (xb, yb) in zip(pa, pb)):
                out[a] = out.get(b, b)
                break
    return out


def _point(x, y, color, filled, label, hover: dict) -> str:
    tip = " | ".join([label] + [f"{k}: {_fmt(v)}" for k, v in hover.items() if v is not None])
    fill = color if filled else "white"
    shape = (f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{fill}" '
             if filled else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{fill}" ')
    return (f'<g class="pt" data-tip="{_esc(tip)}">{shape}stroke="{color}" stroke-width="1.5">'
            f'<title>{_esc(tip)}</title></{"rect" if filled else "circle"}></g>')


def roofline(spec: dict) -> str:
    pts = spec["points"]
    xs = [p["intensity"] for p in pts] + [r["ridge"] for r in spec["roofs"]]
    ys = [p["flops_per_s"] for p in pts] + [r["peak_flops_per_s"] for r in spec["roofs"]]
    ax = _Axes([min(xs) / 3, max(xs) * 3], [min(ys) / 3, max(ys) * 2])
    out = _frame(ax, "arithmetic intensity (FLOP/byte)", "performance", "FLOP/s")
    legend = []
    for i, r in enumerate(spec["roofs"]):
        c = COLORS[i % len(COLORS)]
        bw, peak, ridge = r["mem_bandwidth_bytes_per_s"], r["peak_flops_per_s"], r["ridge"]
        x0 = min(max(ax.x0, ax.y0 / bw), ridge)  # where the slope enters the plot
        path = (f"M{ax.x(x0):.1f},{ax.y(bw * x0):.1f} L{ax.x(ridge):.1f},"
                f"{ax.y(peak):.1f} L{ax.x(ax.x1):.1f},{ax.y(peak):.1f}")
        dash = ' stroke-dasharray="6 3"' if r["measured"] else ""
        out.append(f'<path d="{path}" class="roof" stroke="{c}"{dash} data-bw="{bw!r}" '
                   f'data-peak="{peak!r}"/>')
        out.append(f'<line x1="{ax.x(ridge):.1f}" x2="{ax.x(ridge):.1f}" y1="{PAD_T}" '
                   f'y2="{H_ - PAD_B}" stroke="{c}" class="ridge"/>')
        legend.append((c, f"{r['label']} (ridge {ridge:.3g} FLOP/B)", True))
    groups = sorted({p["group"] for p in pts})
    for gi, g in enumerate(groups):
        c = COLORS[(gi + len(spec["roofs"])) % len(COLORS)]
        for p in pts:
            if p["group"] == g and p["intensity"] > 0 and p["flops_per_s"] > 0:
                out.append(_point(ax.x(p["intensity"]), ax.y(p["flops_per_s"]), c,
                                  p["kind"] == "measured", f"{p['label']} ({p['kind']})",
                                  {"intensity FLOP/B": p["intensity"],
                                   "FLOP/s": p["flops_per_s"], **p["hover"]}))
        kinds = {p["kind"] for p in pts if p["group"] == g}
        legend.append((c, g + (" (hollow: predicted on the roof; filled: measured)"
                               if kinds == {"predicted", "measured"} else
                               " (measured)" if kinds == {"measured"} else " (on the roof)"),
                       False))
    return _svg(out, legend, spec["title"], ax)


def lines(spec: dict) -> str:
    series = spec["series"]
    xs = [p[0] for s in series.values() for p in s]
    ys = [p[1] for s in series.values() for p in s]
    ax = _Axes(xs, ys, spec.get("logx", True), spec.get("logy", True))
    out = _frame(ax, spec["xlabel"], spec["ylabel"], spec.get("yunit"))
    legend, same = [], coincide(series)
    for i, (name, pts) in enumerate(series.items()):
        c = COLORS[i % len(COLORS)]
        pts = [p for p in pts if p[1] is not None and p[1] > 0]
        dash = ' stroke-dasharray="5 4"' if name in same else ""
        if len(pts) > 1:
            d = " ".join(f"{'M' if j == 0 else 'L'}{ax.x(x):.1f},{ax.y(y):.1f}"
                         for j, (x, y) in enumerate(pts))
            out.append(f'<path d="{d}" class="line" stroke="{c}"{dash}/>')
        for x, y in pts:
            out.append(_point(ax.x(x), ax.y(y), c, name not in same, name,
                              {spec["xlabel"]: x, spec["ylabel"]: y}))
        legend.append((c, name + (f" (the same as {same[name]}: dashed)" if name in same
                                  else ""), True))
    ax_lines = ax
    for name, marks in spec.get("marks", {}).items():
        for x, text in marks:
            if ax.x0 <= x <= ax.x1:
                out.append(f'<line x1="{ax.x(x):.1f}" x2="{ax.x(x):.1f}" y1="{PAD_T}" '
                           f'y2="{H_ - PAD_B}" class="mark"/><text x="{ax.x(x) + 3:.1f}" '
                           f'y="{PAD_T + 12}" class="markt">{_esc(name)}: {_esc(text)}</text>')
    return _svg(out, legend, spec["title"], ax_lines)


def bars(spec: dict) -> str:
    vals = spec["values"]
    top = max(vals) if vals else 1.0
    n = max(len(vals), 1)
    bw = (W - PAD_L - PAD_R) / n
    out = [_ylabel(spec["ylabel"])]
    for i, (label, v) in enumerate(zip(spec["labels"], vals)):
        h = (H_ - PAD_T - PAD_B - 14) * (v / top if top else 0)
        x = PAD_L + i * bw + bw * 0.15
        shown = tick_label(v, spec.get("yunit"))
        tip = f"{label}: {shown}" if spec.get("yunit") else f"{label}: {v:.4g} {spec['ylabel']}"
        out.append(f'<g class="pt" data-tip="{_esc(tip)}"><rect x="{x:.1f}" '
                   f'y="{H_ - PAD_B - h:.1f}" width="{bw * 0.7:.1f}" height="{h:.1f}" '
                   f'fill="{COLORS[0]}"><title>{_esc(tip)}</title></rect></g>'
                   f'<text x="{x + bw * 0.35:.1f}" y="{H_ - PAD_B + 14}" text-anchor="middle">'
                   f'{_esc(label[:28])}</text><text x="{x + bw * 0.35:.1f}" '
                   f'y="{H_ - PAD_B - h - 4:.1f}" text-anchor="middle">{_esc(shown)}</text>')
    return _svg(out, [], spec["title"])


def _svg(body: list[str], legend, title: str, ax: _Axes | None = None) -> str:
    """The plot with its title as HTML above it (the browser wraps it: never clipped); the
    axes' data range rides along (data-axes) so a test can map pixels back to numbers."""
    items = "".join(
        f'<span class="lg" data-color="{c}"><i style="background:{c}'
        f'{"" if solid else ";opacity:.5"}"></i>{_esc(text)}</span>' for c, text, solid in legend)
    axes = (f' data-axes="{ax.x0!r} {ax.x1!r} {ax.y0!r} {ax.y1!r} {int(ax.logx)} {int(ax.logy)}"'
            f' data-frame="{PAD_L} {W - PAD_R} {PAD_T} {H_ - PAD_B}"' if ax else "")
    return (f'<figure class="plot"><div class="ptitle">{_esc(title)}</div>'
            f'<svg viewBox="0 0 {W} {H_}" width="100%"{axes} '
            f'xmlns="http://www.w3.org/2000/svg" role="img">{"".join(body)}</svg>'
            f'<figcaption>{items}</figcaption></figure>')


RENDER = {"roofline": roofline, "lines": lines, "bars": bars}


def render(spec: dict) -> str:
    return RENDER[spec["kind"]](spec)
