"""`rooflab analyze`: a user's module op by op (counted, profiled, placed on the roof) and its
module tree; the totals cross-checked against PyTorch's own FlopCounterMode."""
import json

import pytest

from rooflab.studies import analyze as A
from rooflab.measure import ceilings as CE

CEIL = CE.Ceilings("cpu", "test cpu", 1e10, {"fp32": 1e11})
TARGET = '''
import torch


class Block(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), Block()), (torch.randn(4, 16, 32),)


def not_a_pair():
    return 3
'''


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(TARGET)
    return str(path)


def test_ops_modules_and_totals(target):
    module, inputs = A.load_target(target + ":build")
    d = A.analyze(module, inputs, "cpu", CEIL)
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        module(*inputs)
    assert 2 * d["total"]["macs"] == fc.get_total_flops()  # matmul FLOPs, counted independently
    assert d["total"]["macs"] == 2 * 2 * 64 * 32 * 128  # two blocks, up and down, 64 rows
    for o in d["ops"]:
        assert o["floor_s"] == max(o["flops"] / 1e11, o["bytes"] / 1e10)
        assert o["measured_s"] and o["lost_s"] == o["measured_s"] - o["floor_s"]
    lost = [o["lost_s"] for o in d["ops"]]
    assert lost == sorted(lost, reverse=True)
    mods = {m["module"]: m for m in d["modules"]}
    assert mods["(root)"]["flops"] == d["total"]["flops"] == mods["0"]["flops"] + mods["1"]["flops"]
    assert mods["0"]["macs"] == mods["0.up"]["macs"] + mods["0.down"]["macs"]
    assert mods["0.up"]["type"] == "Linear" and mods["0.up"]["depth"] == 2
    assert mods["(root)"]["measured_s"] == pytest.approx(
        mods["0"]["measured_s"] + mods["1"]["measured_s"])


def test_cli_json_html_and_counts_only(target, tmp_path, monkeypatch, capsys):
    from rooflab.cli import main

    monkeypatch.setattr(CE, "get", lambda device, **kw: CEIL)
    page = tmp_path / "page.html"
    assert main(["analyze", target + ":build", "--device", "cpu", "--json", "--html",
                 str(page)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["total"]) >= {"macs", "flops", "bytes"} and d["ops"] and d["modules"]
    text = page.read_text()
    assert "<svg" in text and "addmm" in text and "0.up" in text
    assert main(["analyze", target + ":build", "--device", "cpu", "--no-profile"]) == 0
    assert "Sequential on cpu" in capsys.readouterr().out  # the console view renders
    d = A.analyze(*A.load_target(target + ":build"), "cpu", CEIL, profile=False)
    assert all(o["measured_s"] is None for o in d["ops"])
    assert "not profiled" in __import__("rooflab.report.html", fromlist=["x"]).analysis_page(
        d).lower()


def test_analyze_page_in_headless_chromium(target, tmp_path, browser):
    """The page a user opens: the per-op roofline draws, hovering a point shows its numbers, no
    console errors."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from rooflab.report import html

    page = tmp_path / "page.html"
    page.write_text(html.analysis_page(A.analyze(*A.load_target(target + ":build"), "cpu",
                                                 CEIL)))
    browser.get(page.as_uri())
    points = browser.find_elements(By.CSS_SELECTOR, "svg .pt")
    assert points
    ActionChains(browser).move_to_element(points[0]).perform()
    tip = browser.find_element(By.ID, "tip")
    assert tip.is_displayed() and "FLOP/s" in tip.text
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("spec, message", [
    ("nofile.py:build", "no such file"), ("{t}", "FILE.py:FUNCTION"),
    ("{t}:missing", "no function"), ("{t}:not_a_pair", "must return")])
def test_bad_targets_are_one_line_exit_2(target, spec, message, capsys):
    from rooflab.cli import main

    assert main(["analyze", spec.format(t=target), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.gpu
def test_analyze_on_the_gpu(target):
    module, inputs = A.load_target(target + ":build")
    d = A.analyze(module, inputs, "cuda", CE.get("cuda"))
    timed = [o for o in d["ops"] if o["measured_s"]]
    assert timed and all(o["achieved_flops_per_s"] > 0 for o in timed)
    assert d["total"]["measured_s"] > 0


def test_no_op_above_a_low_cached_roof_without_its_reason():
    """The busy machine's case: ceilings cached under load far below what the ops reach. The
    run's roof is raised (and says so), and an op still above it says why."""
    import torch
    low = CE.Ceilings("cpu", "test cpu", 1e8, {"fp32": 1e9})
    m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    d = A.analyze(m, (torch.randn(64, 256),), "cpu", low)
    assert d["roof_notes"] and d["roof"]["peak_flops_per_s"] > 1e9
    for o in d["ops"]:
        if (o.get("fraction_of_roof") or 0) > 1.03:
            assert o.get("above_roof"), o


def test_an_op_with_no_formula_is_named_with_its_share_and_never_on_the_roof():
    """cumprod has no formula here: the total says it is incomplete and how much of the measured
    time such ops took; the op keeps its bytes and time but gets no bound, floor or point."""
    import torch

    from rooflab.report import html

    class Scan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 64)

        def forward(self, x):
            return self.proj(x).cumprod(-1)

    d = A.analyze(Scan(), (torch.randn(32, 64),), "cpu", CEIL)
    assert d["unsupported_ops"] == {"cumprod": 1} and d["total"]["complete"] is False
    scan = next(o for o in d["ops"] if o["op"].startswith("cumprod"))
    assert scan["counted"] is False and scan["measured_s"] > 0
    assert "bound" not in scan and "floor_s" not in scan and "achieved_flops_per_s" not in scan
    share = d["total"]["no_formula_share"]
    assert share == pytest.approx(scan["measured_s"] / d["total"]["measured_s"]) and 0 < share < 1
    assert all(not p["label"].startswith("cumprod")
               for p in html.analysis_roofline(d)["points"])
    assert "No FLOP formula, so not on the roof: cumprod" in html.analysis_page(d)
    linear = A.analyze(torch.nn.Linear(8, 8), (torch.randn(2, 8),), "cpu", CEIL, profile=False)
    assert linear["total"]["complete"] is True and linear["total"]["no_formula_share"] is None
