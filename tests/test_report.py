"""The lab's report (report/html.py, svg.py): escaped, readable units, unstable timings marked, and
in a real browser (headless Chromium) every plot drawn as its numbers say."""
import os

import pytest

from rooflab.report import html

DRAWING_JS = """
const out = {slopes: [], overlaps: [], legends: [], tables: []};
const inv = (px, lo, hi, log, a, b) => { const f = (px - a) / (b - a);
  return log ? 10 ** (Math.log10(lo) + f * (Math.log10(hi) - Math.log10(lo))) : lo + f * (hi - lo); };
for (const svg of document.querySelectorAll('svg[data-axes]')) {
  const [x0, x1, y0, y1, lx, ly] = svg.dataset.axes.split(' ').map(Number);
  const [l, r, t, b] = svg.dataset.frame.split(' ').map(Number);
  for (const p of svg.querySelectorAll('path.roof')) {
    const m = p.getAttribute('d').match(/M([-\\d.]+),([-\\d.]+) L([-\\d.]+),([-\\d.]+)/);
    out.slopes.push([inv(+m[1], x0, x1, lx, l, r), inv(+m[2], y0, y1, ly, b, t),
                     +p.dataset.bw, y0, +p.dataset.peak, inv(+m[4], y0, y1, ly, b, t)]);
  }
  const texts = [...svg.querySelectorAll('text')].filter(e => e.getBoundingClientRect().width > 0);
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const a = texts[i].getBoundingClientRect(), c = texts[j].getBoundingClientRect();
    if (a.left < c.right - 1 && c.left < a.right - 1 && a.top < c.bottom - 1 && c.top < a.bottom - 1)
      out.overlaps.push([texts[i].textContent, texts[j].textContent]);
  }
  const drawn = new Set([...svg.querySelectorAll('[stroke],[fill]')].flatMap(
    e => [e.getAttribute('stroke'), e.getAttribute('fill')]));
  for (const lg of svg.parentElement.querySelectorAll('.lg'))
    if (!drawn.has(lg.dataset.color)) out.legends.push(lg.textContent);
}
for (const tb of document.querySelectorAll('table'))
  for (const td of tb.querySelectorAll('td.text'))
    if (td.scrollWidth > td.clientWidth + 1) out.tables.push(td.textContent.slice(0, 60));
return out;
"""


def test_report_escapes_names():
    meta = {"device": "cpu", "device_name": "<script>alert(1)</script>", "gpu": "H200",
            "ceilings_summary": "x", "versions": {"torch": "<b>"}, "date": "d"}
    page = html.report({"meta": meta, "parts": {}}, {1: "Metrics"})
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page


def test_report_opens_in_headless_chromium(cpu_report, browser):
    """A real browser: no console errors, every part's plot rendered, hover shows a point's
    numbers; a screenshot is kept next to the report."""
    import shutil
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    out, _ = cpu_report
    drv = browser
    drv.get((out / "index.html").as_uri())
    for n in range(1, 6):
        section = drv.find_element(By.ID, f"part{n}")
        assert section.get_attribute("data-status") == "ok"
        assert section.find_elements(By.CSS_SELECTOR, "svg .pt"), f"part {n} has no plot"
    six = drv.find_element(By.ID, "part6")  # no second GPU here: it says why
    assert six.get_attribute("data-status") == "skipped" and "not run: no GPU" in six.text
    point = drv.find_element(By.CSS_SELECTOR, "#part2 svg .pt")
    ActionChains(drv).move_to_element(point).perform()
    tip = drv.find_element(By.ID, "tip")
    assert tip.is_displayed() and "FLOP/s" in tip.text
    errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    shot = out / "screenshot.png"
    drv.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("ROOFLAB_SCREENSHOT")  # where CI or a developer wants a copy
    if keep:
        shutil.copy(shot, keep)


def test_report_tables_show_times_in_readable_units():
    from rooflab.report import html

    assert html.fmt(0.000123, "kernel_s") == "123 us"
    assert html.fmt(1.5, "first_call_s") == "1.5 s"
    assert html.fmt(None, "kernel_s") == "-"
    assert html.fmt(41943040, "bytes") == "41,943,040"  # not a time: as it is
    t = {"title": "t", "columns": ["op", "predicted_s"], "rows": [["mm(2x2,2x2)", 2.5e-06]]}
    assert "<td>2.5 us</td>" in html.table_html(t)


def test_units_come_from_the_column_name_exactly():
    from rooflab.report import html

    assert html.fmt(89.1, "tflops_per_s") == "89.1 TFLOP/s"  # a rate, not "89.1 s"
    assert html.fmt(1.43e11, "achieved_flops_per_s") == "143 GFLOP/s"
    assert html.fmt(3.36e9, "achieved_bandwidth_bytes_per_s") == "3.36 GB/s"
    assert html.fmt(3.33e11, "generic_elements_per_s") == "333 Gelem/s"
    assert html.fmt(42949672960, "extra_peak_bytes") == "42.9 GB"
    assert html.fmt(0.93, "fraction_of_roof") == "93.0%"
    assert html.fmt(3.2, "intensity") == "3.2"


def test_an_unstable_cv_cell_is_marked_in_the_report():
    from rooflab.report import html

    page = html.table_html({"title": "t", "columns": ["impl", "device_s", "cv", "device_cv"],
                            "rows": [["a", 1e-3, 0.02, 0.05], ["b", 2e-3, 0.12, None]]})
    assert page.count("title='unstable") == 1  # 12% only: 5% is the threshold, not above it
    assert "<td class='skipped' title='unstable: above 5%'>12.0%</td>" in page


@pytest.mark.parametrize("width", [700, 1400, 1920])
def test_report_draws_what_it_says(cpu_report, browser, width):
    """In a real browser at three widths: each memory slope starts on its roof's formula
    (bandwidth x intensity) inside the plot, and meets the peak at the ridge; no two text boxes
    of a plot overlap; every legend entry is drawn; a note cell shows its text without
    scrolling."""
    out, _ = cpu_report
    browser.set_window_size(width, 1000)
    browser.get((out / "index.html").as_uri())
    d = browser.execute_script(DRAWING_JS)
    assert d["slopes"]
    for x, y, bw, y0, peak, y_ridge in d["slopes"]:
        assert y == pytest.approx(bw * x, rel=0.02) and y >= y0 * 0.99  # on the slope, inside
        assert y_ridge == pytest.approx(peak, rel=0.02)
    assert not d["overlaps"], sorted(set(map(tuple, d["overlaps"])))
    assert not d["legends"], d["legends"]
    assert not d["tables"], d["tables"]


def test_the_svg_slope_enters_where_the_roof_formula_says():
    """Points far above the slope's left end: the y axis starts above bw * x0, so the slope
    must enter the plot at y0 / bw, not at the axis corner (where it would sit under its
    points)."""
    import re
    from rooflab.report import svg
    spec = {"title": "t", "roofs": [{"label": "r", "peak_flops_per_s": 1e12,
                                     "mem_bandwidth_bytes_per_s": 1e8, "ridge": 1e4,
                                     "measured": True}],
            "points": [{"label": "a", "intensity": 100.0, "flops_per_s": 5e10, "kind": "measured",
                        "group": "g", "hover": {}}]}
    page = svg.roofline(spec)
    x0, x1, y0, y1, _, _ = map(float, re.search(r'data-axes="([^"]+)"', page).group(1).split())
    l, r, t, b = map(float, re.search(r'data-frame="([^"]+)"', page).group(1).split())
    mx, my = map(float, re.search(r'<path d="M([\d.]+),([\d.]+)', page).groups())
    import math
    x = 10 ** (math.log10(x0) + (mx - l) / (r - l) * math.log10(x1 / x0))
    y = 10 ** (math.log10(y0) + (b - my) / (b - t) * math.log10(y1 / y0))
    assert 1e8 * x0 < y0  # the case: the slope starts below the axis
    assert y == pytest.approx(1e8 * x, rel=0.01) and y == pytest.approx(y0, rel=0.01)

