"""The console views: a timing the timer flagged unstable reads as such in every timed table."""
from rooflab.units import noise
from rooflab.report import console


def _row(**kw):
    return {"cv": 0.02, "unstable": False, **kw}


def test_an_unstable_timing_carries_its_cv_and_the_note(capsys):
    slow = {"cv": 0.123, "unstable": True}
    console.gelu({"numel": 1024, "dtype": "fp32", "device": "cpu", "skipped": [],
                  "explanation": "-",
                  "rows": [_row(variant="F.gelu", device_s=2e-3),
                           _row(variant="unfused", device_s=3e-3, **slow)]})
    console.mlp({"hidden": 8, "intermediate": 16, "tokens": 4, "dtype": "fp32", "notes": [],
                 "rows": [_row(mode="eager", device_s=1e-3, wall_s=1e-3, kernels_per_call=11,
                               first_call_s=0.1, **slow)]})
    console.attention({"batch": 1, "heads": 2, "head_dim": 8, "dtype": "fp32", "causal": False,
                       "skipped": {}, "analysis": {"memory_slope": {}},
                       "rows": [_row(impl="flash", seq=512, status="ok", device_s=4e-3,
                                     **slow)]})
    console.decode_attention({"batch": 1, "heads": 2, "kv_heads": 1, "head_dim": 8,
                              "dtype": "fp32", "skipped": {},
                              "rows": [_row(impl="math", kv_len=256, status="ok",
                                            device_s=5e-4, **slow)]})
    text = capsys.readouterr().out
    assert text.count("±12%") == 4  # one per table, after the flagged time only
    assert "3 ms ±12%" in text and "2 ms ±" not in text
    assert text.count(console.UNSTABLE_NOTE[:40]) == 4


def test_stable_timings_carry_no_mark(capsys):
    console.mlp({"hidden": 8, "intermediate": 16, "tokens": 4, "dtype": "fp32", "notes": [],
                 "rows": [_row(mode="eager", device_s=1e-3, wall_s=1e-3, kernels_per_call=11,
                               first_call_s=0.1)]})
    text = capsys.readouterr().out
    assert "±" not in text and console.UNSTABLE_NOTE[:40] not in text


def test_an_answer_names_the_unstable_timings_it_compares():
    rows = [{"impl": "flash", "cv": 0.02, "unstable": False},
            {"impl": "standard", "cv": 0.31, "unstable": True}]
    text = noise(rows, lambda r: r["impl"])
    assert "standard (CV 31%)" in text and "flash" not in text
    assert noise(rows[:1], lambda r: r["impl"]) == ""
    many = [{"impl": str(i), "cv": 0.1, "unstable": True} for i in range(6)]
    assert "and 2 more" in noise(many, lambda r: r["impl"])


def test_progress_in_a_pipe_prints_a_line_now_and_then(monkeypatch):
    """No terminal, no bar: a plain line every 30 s and at the end, with the pace's estimate."""
    import io

    from rich.console import Console

    from rooflab.report import progress as V

    buf = io.StringIO()
    monkeypatch.setattr(V, "err", Console(file=buf, force_terminal=False, width=200))
    now = [0.0]
    tick = V._LogTicks("attention", 4, clock=lambda: now[0])
    for t in (10.0, 40.0, 50.0, 60.0):  # 4 points done at these times
        now[0] = t
        tick()
    assert buf.getvalue().splitlines() == [
        "attention: 2/4 in 40 s, about 40 s more at this pace",
        "attention: 4/4 in 60 s"]
    with V.Progress() as prog:  # the same through the bar's own entry point
        assert isinstance(prog.task("decode", 2), V._LogTicks)


def test_the_plain_eta_follows_weighted_steps(monkeypatch):
    """A sweep whose later points are longer: after the first two of four (weights 1, 1, 8, 8)
    took 2 s, the rest takes 16 s, not the 2 s a per-step pace says."""
    import io

    from rich.console import Console

    from rooflab.report import progress

    buf = io.StringIO()
    monkeypatch.setattr(progress, "err", Console(file=buf, force_terminal=False, width=200))
    now = [0.0]
    tick = progress._LogTicks("attention", 4, every_s=0, clock=lambda: now[0], weights=[1, 1, 8, 8])
    for t in (1.0, 2.0):
        now[0] = t
        tick()
    assert buf.getvalue().splitlines()[-1] == "attention: 2/4 in 2 s, about 16 s more at this pace"


def test_the_routing_sentence_follows_the_figures_both_ways():
    """Within a tenth of a uniform draw's spread or past it; timed as routed, or (groups
    unknown to the prediction, as in files of earlier rounds) on the draw, where a more uneven
    routing is not priced."""
    even = console.routing_sentence({"largest_over_mean": [1.05, 1.18],
                                     "reference_largest_over_mean": 1.11})
    assert "1.1-1.2x the mean; no more uneven than" in even and "(1.1x)" in even
    assert even.endswith("the grouped GEMMs timed on that draw")
    uneven = console.routing_sentence({"largest_over_mean": [1.8, 3.8],
                                       "reference_largest_over_mean": 1.11})
    assert "1.8-3.8x the mean; more uneven than" in uneven
    assert uneven.endswith("(1.1x); the grouped GEMMs timed on that draw, and the difference "
                           "is not priced")
    for spread in ([1.05, 1.18], [1.8, 3.8]):
        routed = console.routing_sentence({"largest_over_mean": spread, "as_routed": 96,
                                           "reference_largest_over_mean": 1.11})
        assert routed.endswith("(1.1x); 96 grouped GEMMs timed as routed")
        assert ("; more uneven" in routed) == (spread[1] > 1.1 * 1.11)
    one = console.routing_sentence({"largest_over_mean": [1.3, 1.32],
                                    "reference_largest_over_mean": 1.25})
    assert "share was 1.3x the mean; no more uneven" in one
    few = console.routing_sentence({"largest_over_mean": [2.0, 4.0],
                                    "reference_largest_over_mean": None})
    assert few.endswith("2.0-4.0x the mean; a few rows a group, priced as a decode's")

