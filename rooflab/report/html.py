"""The self-contained HTML report (no CDN, no network): one section per part, rendered from
results.json. Everything that comes from a config, a device name or an error is escaped."""
from __future__ import annotations

import html

from rooflab.report import svg
from rooflab import units

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0 1.2em;display:block;overflow-x:auto}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
td.text{white-space:normal;overflow-wrap:anywhere;text-align:left;min-width:16em;max-width:34em}
.ylabel{font-size:11px;fill:#444}
.ok{color:#1a7f37}.failed{color:#cf222e}.skipped{color:#9a6700}
.plot svg{max-width:760px;background:#fff}.ptitle{font-weight:600;font-size:.9em;max-width:760px}.plot figcaption{font-size:.8em}
.lg{margin-right:1.2em;display:inline-block}.lg i{display:inline-block;width:12px;height:12px;
margin-right:4px;vertical-align:middle}
svg text{font-size:11px;fill:#333}svg .t{font-size:13px;font-weight:600}
svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .roof{fill:none;stroke-width:2.5}
svg .ridge{stroke-dasharray:2 3;stroke-width:1}svg .line{fill:none;stroke-width:2}
svg .mark{stroke:#cf222e;stroke-dasharray:3 3}svg .markt{fill:#cf222e;font-size:10px}
svg .pt{cursor:pointer}svg .pt:hover rect,svg .pt:hover circle{stroke-width:3}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:6px 8px;
border-radius:4px;max-width:480px;display:none;z-index:9}
.notes li{color:#9a6700}.answers dt{font-weight:600;margin-top:.5em}.answers dd{margin-left:1.5em}code{background:#f4f4f4;padding:0 3px}
"""

JS = """
(function(){var tip=document.getElementById('tip');
document.querySelectorAll('.pt').forEach(function(g){
g.addEventListener('mousemove',function(e){tip.textContent=g.getAttribute('data-tip');
tip.style.display='block';tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';});
g.addEventListener('mouseleave',function(){tip.style.display='none';});});})();
"""


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def fmt(v, column: str = "") -> str:
    with_unit = units.column(column, v)  # the unit the column's name states
    if with_unit is not None:
        return with_unit
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):  # no exponent where digits read better: 13,228 not 1.323e+04
        return f"{v:,.0f}" if 1e4 <= abs(v) < 1e15 else f"{v:.4g}"
    return str(v)


def table_html(t: dict) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in t["columns"])
    def cell(c, v) -> str:
        mark = (f" class='skipped' title='unstable: above {units.CV_UNSTABLE:.0%}'"
                if units.unstable_cell(c, v) else
                " class='text'" if isinstance(v, str) and len(v) > 40 else "")  # a note: wraps
        return f"<td{mark}>{esc(fmt(v, c))}</td>"

    body = "".join("<tr>" + "".join(cell(c, v) for c, v in zip(t["columns"], row)) + "</tr>"
                   for row in t["rows"])
    return f"<h3>{esc(t['title'])}</h3><table><tr>{head}</tr>{body}</table>"


def part_html(num: str, title: str, p: dict) -> str:
    status = p.get("status", "missing")
    out = [f'<section id="part{num}" class="part" data-status="{esc(status)}">',
           f'<h2>Part {esc(num)}: {esc(title)} <small class="{esc(status)}">[{esc(status)}]'
           f'</small></h2>']
    if status == "failed":
        out.append(f"<p class='failed'>This part failed: <code>{esc(p.get('error', ''))}</code>. "
                   "The other parts' results are unaffected.</p>")
    if status == "skipped":
        out.append(f"<p class='skipped'>{esc(p.get('reason', 'not run'))}</p>")
    r = p.get("result") or {}
    if r:
        out.append(f"<p><b>{esc(r['headline'])}</b> ({fmt(p.get('time_s'))} s)</p>")
    answers = r.get("answers") or p.get("answers")  # a skipped part answers with its reason
    if answers:
        out.append("<h3>Answers from this run</h3><dl class='answers'>" + "".join(
            f"<dt id='q{esc(q)}'>{esc(q)}</dt><dd>{esc(a['text'])}</dd>"
            for q, a in answers.items()) + "</dl>")
    if r:
        if r["not_measured"]:
            out.append("<h3>Not measured here, and why</h3><ul class='notes'>" +
                       "".join(f"<li>{esc(a)}</li>" for a in r["not_measured"]) + "</ul>")
        for spec in r["plots"]:
            out.append(svg.render(spec))
            out.append(f"<p><a href='figures/{esc(spec['name'])}.png'>static PNG</a></p>")
        for t in r["tables"]:
            out.append(table_html(t))
    out.append("</section>")
    return "\n".join(out)


def report(results: dict, titles: dict[int, str]) -> str:
    meta = results["meta"]
    parts = results["parts"]
    summary = "".join(
        f"<tr><td><a href='#part{n}'>{n}. {esc(t)}</a></td><td class='{esc(parts.get(str(n), {}).get('status', 'missing'))}'>"
        f"{esc(parts.get(str(n), {}).get('status', 'not run'))}</td><td>"
        f"{esc(fmt(parts.get(str(n), {}).get('time_s')))}</td><td>"
        f"{esc((parts.get(str(n), {}).get('result') or {}).get('headline', ''))}</td></tr>"
        for n, t in titles.items())
    versions = ", ".join(f"{esc(k)} {esc(v)}" for k, v in meta["versions"].items())
    body = "\n".join(part_html(str(n), t, parts.get(str(n), {})) for n, t in titles.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rooflab report: {esc(meta['device_name'])}</title>
<style>{CSS}</style></head><body>
<h1>rooflab report</h1>
<p>Device: <b>{esc(meta['device_name'])}</b> ({esc(meta['device'])}); roofline answers use
<b>{esc(meta['gpu'])}</b>; measured ceilings: {esc(meta['ceilings_summary'])}.<br>
{versions}; {esc(meta['date'])}{' (quick sizes)' if meta.get('quick') else ''}.</p>
<table><tr><th>part</th><th>status</th><th>time (s)</th><th>headline</th></tr>{summary}</table>
<p>{esc(meta.get('unstable_note', ''))}</p>
<p>Raw data: <a href="results.json">results.json</a>, CSV tables in <code>tables/</code>,
Chrome traces (open in Perfetto) in <code>traces/</code>.</p>
{body}
<div id="tip"></div><script>{JS}</script></body></html>
"""


def analysis_roofline(d: dict) -> dict:
    """The per-op roofline (what Nsight Compute draws per kernel) as a plot specification."""
    points = [{"label": o["op"][:48], "intensity": o["intensity"],
               "flops_per_s": o["achieved_flops_per_s"], "kind": "measured", "group": o["bound"],
               "hover": {"flops": o["flops"], "bytes": o["bytes"], "measured_s": o["measured_s"],
                         "floor_s": o["floor_s"]}}
              for o in d["ops"] if o.get("achieved_flops_per_s")]
    return {"kind": "roofline", "name": "analyze_roofline",
            "title": f"{d['module']}: each op on the measured roof of {d['roof']['label']}",
            "roofs": [d["roof"]], "points": points}


def analysis_page(d: dict) -> str:
    """`rooflab analyze --html`: the per-op roofline, the ops by time lost, the module tree."""
    op_cols = ["op", "calls", "flops", "bytes", "intensity", "bound", "floor_s", "measured_s",
               "fraction_of_roof", "lost_s"]
    mod_cols = ["module", "type", "macs", "flops", "bytes", "measured_s"]
    ops = {"title": "Ops, most time lost against the roof first", "columns": op_cols,
           "rows": [[o.get(c) for c in op_cols] for o in d["ops"]]}
    mods = {"title": "Modules (roll-ups: a module includes its children)", "columns": mod_cols,
            "rows": [["\u00a0\u00a0" * m["depth"] + m["module"], *[m.get(c) for c in mod_cols[1:]]]
                     for m in d["modules"]]}
    t = d["total"]
    no_formula = "" if t.get("complete", True) else (
        f" No FLOP formula, so not on the roof: {esc(', '.join(d['unsupported_ops']))}"
        + (f" ({t['no_formula_share']:.0%} of the measured time)."
           if t.get("no_formula_share") is not None else "."))
    plot = svg.render(analysis_roofline(d)) if any(o.get("measured_s") for o in d["ops"]) else (
        "<p>Not profiled (--no-profile): counts only.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rooflab analyze: {esc(d['module'])}</title>
<style>{CSS}</style></head><body>
<h1>rooflab analyze: {esc(d['module'])}</h1>
<p>Inputs {esc(d['inputs'])} on {esc(d['device'])} ({esc(d['dtype'])}); roof: {esc(d['roof']['label'])},
ridge {d['roof']['ridge']:.4g} FLOP/B. Total {t['macs']:,} MACs, {t['flops']:,} FLOPs,
{t['bytes']:,} bytes; roofline floor {esc(fmt(t['floor_s'], 'floor_s'))}, measured
{esc(fmt(t['measured_s'], 'measured_s'))}.{no_formula}</p>
{plot}
{table_html(ops)}
{table_html(mods)}
<div id="tip"></div><script>{JS}</script></body></html>
"""
