"""The benchmarks that CI can check without a GPU: ab_flash.py (the same-run A/B of the
FlashAttention kernel) run as a user runs it, and l2_bandwidth.py's read kernel."""
import json
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ab_flash_before_after_and_variants(tmp_path, device):
    """The kernel at a git revision loads and answers as the working tree's, variants are
    measured, a variant that cannot run is recorded, not fatal."""
    rows = "[(1, 2, 2, 40, 64, 'fp16', False), (1, 4, 2, 33, 32, 'bf16', True)]"
    env = {**os.environ, "PYTHONPATH": ROOT}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--before", "HEAD",
         "--variant", 'qreg={"Q_REG": true}', "--variant", 'bad={"BLOCK_M": 48}',
         "--rows", rows, "--rounds", "1", "--device", device],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.load(open(tmp_path / "ab_flash.json"))
    assert data["before"] == "HEAD" and len(data["rows"]) == 2
    for r in data["rows"]:
        diff = r["max_abs_diff_vs_after"]["before"]  # HEAD's kernel, loaded from git: the
        assert diff == 0.0 if "changes" not in data["after"] else diff < 1e-2  # same, if clean
        assert r["max_abs_diff_vs_after"]["qreg"] < 1e-2
        assert "bad" in r["errors"] and "bad" not in r["tflops"]
        assert {"after", "before", "qreg"} <= set(r["tflops"])
        assert all(t > 0 for t in r["tflops"].values())
        assert r["time_ratio_over_after"]["after"] == 1.0


def test_l2_read_kernel_sums_each_slice_every_pass(device):
    """l2_bandwidth.py's kernel reads what it says: program p's sum of its slice, `passes` times."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import l2_bandwidth as L
    x = torch.randn(4 * 256, dtype=torch.bfloat16, device=device)
    out = torch.empty(4, device=device)
    L._read[(4,)](x, out, 256, 3, BLOCK=128)
    assert torch.allclose(out, x.float().view(4, 256).sum(1) * 3, rtol=1e-4, atol=1e-3)
