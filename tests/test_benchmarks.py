"""The benchmarks that CI can check without a GPU: ab_flash.py and ab_decode.py (the same-run
A/Bs of the FlashAttention and flash-decoding kernels) run as a user runs them, l2_bandwidth.py's
read kernel, and flash_resources.py (the kernel compiled for sm_90, which needs no GPU)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from rooflab.roofline import Roof

pytestmark = pytest.mark.slow  # run by CI's second command: pytest -m slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _unchanged(path: str) -> bool:
    """Whether the working tree's ``path`` is HEAD's (a revision compared with HEAD is then the
    same file)."""
    return not subprocess.run(["git", "status", "--porcelain", "--", path], cwd=ROOT,
                              capture_output=True, text=True).stdout


def test_ab_flash_before_after_and_variants(tmp_path, device):
    """The kernel at a git revision loads and answers as the working tree's, variants are
    measured (the plain Gluon kernel from a file among them), a variant that cannot run is
    recorded, not fatal."""
    rows = "[(1, 2, 2, 40, 64, 'fp16', False), (1, 4, 2, 33, 32, 'bf16', True)]"
    env = {**os.environ, "PYTHONPATH": ROOT}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--before", "HEAD",
         "--variant", 'qreg={"Q_REG": true}', "--variant", 'bad={"BLOCK_M": 48}',
         "--variant", 'file={"GLUON": {}, "FROM": "rooflab/kernels/flash_attention_sm90.py"}',
         "--rows", rows, "--rounds", "1", "--device", device],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.load(open(tmp_path / "ab_flash.json"))
    assert data["before"] == "HEAD" and len(data["rows"]) == 2
    for r in data["rows"]:
        assert "before" in r["max_abs_diff_vs_after"], r["errors"]
        diff = r["max_abs_diff_vs_after"]["before"]  # HEAD's kernel, loaded from git: the
        assert diff == 0.0 if "changes" not in data["after"] else diff < 1e-2  # same, if clean
        assert r["max_abs_diff_vs_after"]["qreg"] < 1e-2
        assert "bad" in r["errors"] and "bad" not in r["tflops"]
        # the plain Gluon kernel loaded from a file: where it runs, the tree's own answers
        assert ("does not take this row" in r["errors"].get("file", "") if device == "cpu"
                else "file" in r["errors"] or r["max_abs_diff_vs_after"]["file"] < 1e-2), r
        assert {"after", "before", "qreg"} <= set(r["tflops"])
        assert all(t > 0 for t in r["tflops"].values())
        assert r["time_ratio_over_after"]["after"] == 1.0
    # --triton: both revisions' Triton kernel, the one a GPU without Gluon runs
    run = subprocess.run(
        [sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--before", "HEAD",
         "--triton", "--rows", rows, "--rounds", "1", "--device", device, "--name", "tri"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    for r in json.load(open(tmp_path / "tri.json"))["rows"]:
        assert r["triton"] and r["max_abs_diff_vs_after"]["before"] < 1e-2, r
    run = subprocess.run(  # transformers' layout: the same kernels on transposed views
        [sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--layout", "blhd",
         "--variant", 'qreg={"Q_REG": true}', "--rows", "[(1, 4, 2, 33, 32, 'bf16', True)]",
         "--rounds", "1", "--device", device, "--name", "blhd"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    (r,) = json.load(open(tmp_path / "blhd.json"))["rows"]
    assert r["layout"] == "blhd" and r["max_abs_diff_vs_after"]["qreg"] < 1e-2, r
    run = subprocess.run(  # latent attention: q, k 48 wide, v 32 of each head's 64 columns
        [sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--layout", "latent",
         "--v-dim", "32", "--variant", "triton={}", "--variant", 'copy={"COPY": true}',
         "--rows", "[(1, 4, 4, 33, 48, 'bf16', True)]",
         "--rounds", "1", "--device", device, "--name", "latent"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    (r,) = json.load(open(tmp_path / "latent.json"))["rows"]
    assert r["layout"] == "latent" and r["v_dim"] == 32, r
    assert r["max_abs_diff_vs_after"]["triton"] < 1e-2 and r["tflops"]["after"] > 0, r
    assert r["max_abs_diff_vs_after"]["copy"] < 1e-2 and r["tflops"]["copy"] > 0, r
    bad = subprocess.run([sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--layout",
                          "latent"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--layout latent takes --v-dim" in bad.stderr
    bad = subprocess.run([sys.executable, "benchmarks/ab_flash.py", str(tmp_path), "--variant",
                          'old={"GLUON": {}, "FROM": "no/such/file.py"}'], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "FROM takes a file" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    if not torch.cuda.is_available():  # the default device without a GPU: one line, exit 2
        bad = subprocess.run([sys.executable, "benchmarks/ab_flash.py", str(tmp_path)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and "no CUDA GPU" in bad.stderr
        assert "Traceback" not in bad.stderr


def test_ab_decode_default_and_variants(tmp_path, device):
    """Variants (with their own program counts, as programs an SM and as programs a pair) are
    measured and answer as the default; one that cannot run is recorded, not fatal; bad rows or
    program counts are one line and exit 2."""
    rows = "[(1, 8, 2, 16, 70, 64), (1, 4, 4, 1, 40, 32)]"
    env = {**os.environ, "PYTHONPATH": ROOT}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, "benchmarks/ab_decode.py", str(tmp_path), "--device", device]
    run = subprocess.run(
        cmd + ["--variant", 's2={"num_stages": 2, "programs": 3}', "--variant",
               'three={"programs": "3 an SM"}', "--variant", 'halves={"programs": "2 a pair"}',
               "--variant", 'bad={"BLOCK_N": 48}', "--rows",
               rows, "--rounds", "1", "--before", "HEAD"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.load(open(tmp_path / "ab_decode.json"))
    assert [r["shape"] for r in data["rows"]] == [[1, 8, 2, 16, 70, 64], [1, 4, 4, 1, 40, 32]]
    for r in data["rows"]:
        assert r["max_abs_diff_vs_default"]["s2"] < 1e-2
        assert r["max_abs_diff_vs_default"]["three"] < 1e-2
        assert r["max_abs_diff_vs_default"]["halves"] < 1e-2
        assert r["max_abs_diff_vs_default"]["before"] < 1e-2  # HEAD's file, loaded from git
        assert "bad" in r["errors"] and "bad" not in r["median_s"]
        assert {"default", "s2", "before", "read_same_bytes"} <= set(r["median_s"])
        assert all(t > 0 for t in r["median_s"].values())
        assert r["time_ratio_over_default"]["default"] == 1.0
    bad = subprocess.run(cmd + ["--rows", "[(1, 2)]"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()[-1]) > 0
    assert "Traceback" not in bad.stderr
    for many in ("many", "0 a pair"):
        bad = subprocess.run(cmd + ["--variant", f'x={{"programs": "{many}"}}'], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and "programs takes a count" in bad.stderr
        assert "Traceback" not in bad.stderr
    bad = subprocess.run(cmd + ["--before", "no-such-revision"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--before no-such-revision" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_ab_decode_with_a_static_caches_kept_keys(tmp_path, device):
    """--kept: each row keeps its first slots (a quarter to half of the cache along the batch),
    the default and a variant given the same mask and answering alike; a bad --kept is one
    line and exit 2."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, "benchmarks/ab_decode.py", str(tmp_path), "--device", device,
           "--rows", "[(3, 8, 2, 1, 200, 64)]"]
    run = subprocess.run(cmd + ["--kept", "0.25,0.5", "--variant", 's2={"num_stages": 2}',
                                "--rounds", "1"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    (r,) = json.load(open(tmp_path / "ab_decode.json"))["rows"]
    assert r["kept"] == [0.25, 0.5] and 0.3 < r["kept_fraction"] < 0.4  # 50, 75, 100 of 200
    assert r["max_abs_diff_vs_default"]["s2"] < 1e-2 and not r["errors"]
    bad = subprocess.run(cmd + ["--kept", "0.5"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--kept takes LO,HI" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_l2_read_kernel_sums_each_slice_every_pass(device, monkeypatch):
    """l2_bandwidth.py's kernel reads what it says: program p's sum of its slice, `passes` times."""
    # for this test only: benchmarks/kernels.py would shadow the `kernels` package transformers
    # imports
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import l2_bandwidth as L
    x = torch.randn(4 * 256, dtype=torch.bfloat16, device=device)
    out = torch.empty(4, device=device)
    L._read[(4,)](x, out, 256, 3, BLOCK=128)
    assert torch.allclose(out, x.float().view(4, 256).sum(1) * 3, rtol=1e-4, atol=1e-3)


def test_flash_resources_compiles_for_hopper_without_a_gpu(tmp_path):
    """Registers, shared memory and programs an SM of real sm_90 builds; the shared memory of
    a Q-in-shared-memory config against the hand count of its tiles; a config that cannot
    compile is recorded, and bad input is one line and exit 2."""
    triton = pytest.importorskip("triton")
    if not os.path.exists(triton.knobs.nvidia.cuobjdump.path):
        pytest.skip("this Triton has no CUDA tools to compile for a GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    cmd = [sys.executable, "benchmarks/flash_resources.py", str(tmp_path), "--head-dims", "64",
           "--variant", 'smem_q={"Q_REG": false}', "--variant", 'bad={"BLOCK_M": 48}']
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {r["name"]: r for r in json.load(open(tmp_path / "flash_resources.json"))["rows"]}
    for r in (rows["default"], rows["smem_q"]):
        assert 0 < r["registers_per_thread"] <= 255 and r["spill_bytes"] == 0
        assert r["programs_per_sm"] == min(r["programs_per_sm_by"].values()) >= 1
    c = rows["smem_q"]["config"]  # Q's tile and every stage's K and V tiles, 2 bytes each
    hand = (c["BLOCK_M"] + 2 * c["num_stages"] * c["BLOCK_N"]) * 64 * 2
    assert hand <= rows["smem_q"]["shared_bytes"] <= hand + 2048
    assert "error" in rows["bad"]
    bad = subprocess.run(cmd[:3] + ["--variant", "nojson"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr  # argparse: usage, one error
    assert bad.stderr.strip().splitlines()[-1].startswith("flash_resources.py: error: --variant")


def test_flash_resources_counts_a_revision_against_the_tree(tmp_path):
    """--before REV compiles the kernel file at REV with the same config: at HEAD (a clean
    tree) the same registers and instructions; at ecf1ed3, whose loop loaded V after the
    scores (Triton then gave K and V a barrier each), instructions that differ; a revision git
    does not know is one line and exit 2."""
    triton = pytest.importorskip("triton")
    if not os.path.exists(triton.knobs.nvidia.cuobjdump.path):
        pytest.skip("this Triton has no CUDA tools to compile for a GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    clean = _unchanged("rooflab/kernels/flash_attention.py")
    known = subprocess.run(["git", "cat-file", "-e", "ecf1ed3"], cwd=ROOT).returncode == 0
    for rev in ("HEAD", "ecf1ed3") if known else ("HEAD",):
        cmd = [sys.executable, "benchmarks/flash_resources.py", str(tmp_path), "--head-dims",
               "128", "--before", rev]
        run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        data = json.load(open(tmp_path / "flash_resources.json"))
        r = data["rows"][0]
        assert data["before"] == rev and r["sass_instructions"] > 0, r
        if rev == "ecf1ed3":
            assert r["instructions_not_in_both"] > 0, r
        elif clean:
            assert r["instructions_not_in_both"] == 0, r
            assert r["before"]["registers_per_thread"] == r["registers_per_thread"], r
    bad = subprocess.run(cmd[:5] + ["--before", "no-such-revision"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "--before no-such-revision" in bad.stderr.strip().splitlines()[-1]


def _gluon_compiled(tmp_path, kind: str, head_dims: str, variants: list[str],
                    more: tuple = ()) -> list[dict]:
    """flash_resources.py's rows for a Gluon kernel (--gluon or --gluon-ws), causal and not,
    each variant NAME=JSON beside the default, ``more`` options too; skips where this Triton
    cannot build for sm_90."""
    triton = pytest.importorskip("triton")
    if not os.path.exists(triton.knobs.nvidia.ptxas.path):
        pytest.skip("this Triton has no CUDA tools to compile for a GPU")
    from rooflab.kernels import flash_attention_sm90 as F9
    if F9.GLUON_MISSING:
        pytest.skip(F9.GLUON_MISSING)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    rows = []
    for causal in ([], ["--causal"]):
        cmd = [sys.executable, "benchmarks/flash_resources.py", str(tmp_path), kind,
               "--head-dims", head_dims, *causal, *more,
               *[x for v in variants for x in ("--variant", v)]]
        run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        name = "flash_resources_gluon_ws" if kind == "--gluon-ws" else "flash_resources_gluon"
        rows += json.load(open(tmp_path / f"{name}.json"))["rows"]
    return rows


def test_the_gluon_kernel_compiles_for_hopper_unserialized(tmp_path):
    """The Gluon FlashAttention, compiled for sm_90 by the installed Triton with no GPU: no
    spills, and ptxas keeps its wgmma ops in flight (it does not serialize them) at every head
    dim, causal too, and with v tokens first apart from k; its default tiles fit at least two
    programs an SM; its shared memory is the hand count of its tiles (Q's, and every stage's K
    and V)."""
    rows = _gluon_compiled(tmp_path, "--gluon", "64,128,256",
                           ['n64={"BLOCK_N": 64}', 'v_apart={"V_STRIDED": true}'])
    by = {(r["head_dim"], r["causal"], r["name"]): r for r in rows}
    for (d, causal, name), r in by.items():
        assert "error" not in r, r
        assert r["spill_bytes"] == 0 and r["serialized"] == [], r
        assert r["programs_per_sm"] >= (2 if name == "default" else 1), r
    for d in (64, 128):  # Q's 64 x d tile and two stages of 64 keys of K and V, 2 bytes each
        hand = (64 + 2 * 2 * 64) * d * 2
        assert hand <= by[(d, False, "n64")]["shared_bytes"] <= hand + 2048


def test_flash_resources_compiles_flash_decoding(tmp_path):
    """--decode: flash-decoding's split kernel for sm_90 with no GPU, by its default config
    and the launcher's flags (a whole head a program, several in one loop, the merge by its
    last program, 64 rows): no spills, and at HEAD (a clean tree) the same instructions;
    --window is refused."""
    triton = pytest.importorskip("triton")
    if not os.path.exists(triton.knobs.nvidia.cuobjdump.path):
        pytest.skip("this Triton has no CUDA tools to compile for a GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    cmd = [sys.executable, "benchmarks/flash_resources.py", str(tmp_path), "--decode",
           "--head-dims", "128", "--before", "HEAD", "--variant", 'whole={"WHOLE": true}',
           "--variant", 'across={"WHOLE": true, "ACROSS": true}', "--variant",
           'last={"LAST_MERGES": true}', "--variant", 'm64={"BLOCK_M": 64}']
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    clean = _unchanged("rooflab/kernels/flash_decoding.py")
    rows = json.load(open(tmp_path / "flash_resources_decode.json"))["rows"]
    assert [r["name"] for r in rows] == ["default", "whole", "across", "last", "m64"]
    for r in rows:
        assert "error" not in r and r["spill_bytes"] == 0 and r["programs_per_sm"] >= 1, r
        assert r["instructions_not_in_both"] == 0 or not clean, r
    bad = subprocess.run(cmd[:4] + ["--causal", "--window"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--window takes" in bad.stderr


def test_fits_counts_what_an_sm_holds(monkeypatch):
    """A program's registers (taken in steps of 8 a thread), shared memory (plus 1 KB) and
    warps against an sm_90 SM's 65,536, 228 KB and 64: the plain kernel's one stage at head
    dim 128 (138 registers, 48 KB: three by registers), the warp-specialized kernel (168
    registers, 12 warps: one)."""
    pytest.importorskip("triton")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import flash_resources as FR
    assert FR.fits(138, 49192, 4) == {"registers": 3, "shared_memory": 4, "warps": 16}
    assert FR.fits(161, 65576, 4) == {"registers": 3, "shared_memory": 3, "warps": 16}
    assert min(FR.fits(168, 200000, 12).values()) == 1
    assert FR.fits(186, 65576, 4)["registers"] == 2


def test_flash_resources_compiles_an_older_kernel_only_with_flags_it_has(monkeypatch):
    """An earlier revision's kernel lacks later flags: off, they are dropped; on, refused (the
    two compiled kernels would not be the same config)."""
    pytest.importorskip("triton")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import flash_resources as FR
    names = ["HEAD_DIM", "CAUSAL"]
    assert FR.known({"HEAD_DIM": 64, "CAUSAL": True, "RAGGED": False, "QK_EXTRA": 0},
                    names) == {"HEAD_DIM": 64, "CAUSAL": True}
    with pytest.raises(ValueError, match="no RAGGED"):
        FR.known({"HEAD_DIM": 64, "RAGGED": True}, names)


def test_flash_resources_counts_a_gluon_kernel_at_a_revision(tmp_path):
    """--gluon --before HEAD: the plain Gluon kernel's file at HEAD compiles as the tree's (a
    clean tree), causal and not."""
    rows = _gluon_compiled(tmp_path, "--gluon", "64", [], ("--before", "HEAD"))
    clean = _unchanged("rooflab/kernels/flash_attention_sm90.py")
    assert len(rows) == 2
    for r in rows:
        assert "error" not in r and "error" not in r["before"], r
        assert r["instructions_not_in_both"] == 0 or not clean, r


def test_the_warp_specialized_kernel_compiles_for_hopper_unserialized(tmp_path):
    """flash_attention_sm90_ws, whole tiles, RAGGED (a masked tail, stores without TMA past the
    last row), q, k, v in transformers' layout, and such a q with k, v from a cache, compiled
    for sm_90 with no GPU: no spills, no wgmma serialized; its shared memory is the hand count
    of its tiles (two warpgroups' Q, every stage's K and V)."""
    rows = _gluon_compiled(tmp_path, "--gluon-ws", "128,256", [
        'rag={"RAGGED": true}', 'rag64={"RAGGED": true, "BLOCK_N": 64, "OWN_BLOCKS": true}',
        'hf={"RAGGED": true, "Q_STRIDED": true, "K_STRIDED": true, "V_STRIDED": true}',
        'cache={"Q_STRIDED": true}'])
    assert len(rows) == 20
    for r in rows:
        assert "error" not in r and r["spill_bytes"] == 0 and r["serialized"] == [], r
        c = r["config"]
        hand = (2 * c["BLOCK_M"] + 2 * c["STAGES"] * c["BLOCK_N"]) * r["head_dim"] * 2
        assert hand <= r["shared_bytes"] <= hand + 2048, r


def test_the_warp_specialized_walk_compiles_for_hopper_unserialized(tmp_path):
    """PERSISTENT (a program an SM walking the tiles), whole tiles and ragged in transformers'
    layout, causal and not, compiled for sm_90 with no GPU: no spills, no wgmma serialized, one
    program an SM; its shared memory the hand count of two tiles' Q and every stage's K and V."""
    rows = _gluon_compiled(tmp_path, "--gluon-ws", "64,128", [
        'walk={"PERSISTENT": true}', 'walk_hf={"PERSISTENT": true, "RAGGED": true, '
        '"Q_STRIDED": true, "K_STRIDED": true, "V_STRIDED": true}'])
    assert len(rows) == 12
    for r in rows:
        assert "error" not in r and r["spill_bytes"] == 0 and r["serialized"] == [], r
        c = r["config"]
        q_tiles = 4 if c["PERSISTENT"] else 2
        hand = (q_tiles * c["BLOCK_M"] + 2 * c["STAGES"] * c["BLOCK_N"]) * r["head_dim"] * 2
        assert hand <= r["shared_bytes"] <= hand + 2048 and r["programs_per_sm"] == 1, r


def test_the_short_causal_and_latent_walks_compile_for_hopper_unserialized(tmp_path):
    """The walk at 64-key blocks: short causal rows (OWN_BLOCKS, four stages, by length) at head
    dim 128, and latent attention's (q and k 192 wide, v 128, two stages), compiled for sm_90
    with no GPU: no spills, no wgmma serialized, one program an SM; its shared memory the hand
    count of two tiles' Q and every stage's K and V."""
    rows = _gluon_compiled(tmp_path, "--gluon-ws", "128", [
        'short={"PERSISTENT": true, "BLOCK_N": 64, "OWN_BLOCKS": true, "STAGES": 4, '
        '"BY_LENGTH": true}'])
    rows += _gluon_compiled(tmp_path, "--gluon-ws", "128", [
        'walk={"PERSISTENT": true, "BLOCK_N": 64, "OWN_BLOCKS": true}'], ("--qk-extra", "64"))
    walked = [r for r in rows if r["config"]["PERSISTENT"]]
    assert len(walked) == 4
    for r in walked:
        assert "error" not in r and r["spill_bytes"] == 0 and r["serialized"] == [], r
        c, qk = r["config"], 128 + r["qk_extra"]
        hand = (4 * c["BLOCK_M"] * qk + c["STAGES"] * c["BLOCK_N"] * (qk + 128)) * 2
        assert hand <= r["shared_bytes"] <= hand + 2048 and r["programs_per_sm"] == 1, r


def test_the_warp_specialized_kernel_compiles_for_latent_attention(tmp_path):
    """flash_attention_sm90_ws with q and k 64 dims wider than v (latent attention's 192 and
    128), whole tiles, RAGGED, transformers' layout, and v alone tokens first (as DeepSeek-V2
    passes it), compiled for sm_90 with no GPU: no spills, no wgmma serialized (S is two
    wgmma ops into one accumulator); 128-key blocks (two stages fit); its shared memory the
    hand count of two warpgroups' Q (192 wide), every stage's K (192) and V (128)."""
    rows = _gluon_compiled(tmp_path, "--gluon-ws", "128", [
        'rag={"RAGGED": true}',
        'hf={"RAGGED": true, "Q_STRIDED": true, "K_STRIDED": true, "V_STRIDED": true}',
        'latent_v={"V_STRIDED": true}'], ("--qk-extra", "64"))
    assert len(rows) == 8
    for r in rows:
        assert "error" not in r and r["spill_bytes"] == 0 and r["serialized"] == [], r
        c = r["config"]
        assert r["qk_extra"] == 64 and c["BLOCK_N"] == 128
        hand = (2 * c["BLOCK_M"] * 192 + c["STAGES"] * c["BLOCK_N"] * (192 + 128)) * 2
        assert hand <= r["shared_bytes"] <= hand + 2048, r

@pytest.mark.parametrize("phase,change", [
    ("prefill", {"lq": 40, "lkv": 70}),                               # fewer queries, causal
    ("prefill", {"lq": 37, "lkv": 37, "layout": "blhd"}),              # HF's layout, ragged
    ("prefill", {"lq": 40, "lkv": 40, "layout": "cache"}),             # a static cache's rows
    ("prefill", {"lq": 40, "lkv": 40, "layout": "dynamic"}),           # a dynamic cache's
    ("prefill", {"lq": 37, "lkv": 37, "window": 9, "layout": "blhd"}),  # a sliding window
    ("prefill", {"lq": 37, "lkv": 37, "d": 48, "dv": 32}),            # latent attention
    ("prefill", {"lq": 37, "lkv": 37, "d": 48, "dv": 32, "layout": "latent"}),  # HF's v
    ("prefill", {"lq": 37, "lkv": 37, "layout": "fused"}),            # fused projections
    ("prefill", {"lq": 37, "lkv": 37, "keep": True, "window": 9}),    # a padded batch
    ("decode", {"lq": 1, "lkv": 50, "d": 48, "dv": 32, "causal": False}),
    ("decode", {"lq": 1, "lkv": 50, "keep": True, "causal": False}),   # kept keys
    ("decode", {"lq": 3, "lkv": 45, "hkv": 1}),                        # causal queries, MQA
    ("prefill", {"lq": 37, "lkv": 37, "window": 9, "softcap": 0.5}),  # softcapped scores
    ("prefill", {"lq": 37, "lkv": 37, "window": 9, "sinks": True}),   # attention sinks
    ("decode", {"lq": 1, "lkv": 50, "softcap": 0.5, "sinks": True, "causal": False}),
])
def test_attention_classes_rows_hold_rooflab_to_fp32(device, monkeypatch, phase, change):
    """The class sweep's own logic (layouts, masks as SDPA takes them, the kernel each phase
    runs), on small rows: rooflab's output within bf16 rounding of fp32 attention."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import attention_classes as AC
    monkeypatch.setattr(AC, "DEVICE", device)
    r = AC.row(phase, {"b": 2, "h": 4, "hkv": 2, "d": 32, **change})
    assert r["rel_err"]["rooflab"] < 2e-2 and r["times_s"]["rooflab"] > 0
    assert set(r["cv"]) == set(r["times_s"]) and all(x >= 0 for x in r["cv"].values())
    from rooflab.units import CV_UNSTABLE
    assert set(r.get("unstable", [])) == {n for n, x in r["cv"].items() if x > CV_UNSTABLE}
    sdpa = {"sdpa_flash", "sdpa_cudnn", "sdpa_efficient"}
    if change.get("softcap") or change.get("sinks"):  # eager the peer, SDPA without them a floor
        sdpa = {"eager"} | {f"{n} without" for n in sdpa}
        assert r["times_s"]["eager"] > 0 and r["best_peer"] == "eager"
    ours = {"rooflab"} | ({"rooflab, Triton"} if change.get("dv") and phase == "prefill" else set())
    assert ours <= set(r["times_s"]) and r.get("best_peer") not in ours
    assert all(r["rel_err"][n] < 2e-2 for n in ours)
    if change.get("layout") == "latent":  # q, k contiguous; v 32 of a head's 64 columns
        q, k, v, _ = AC.inputs({**AC.BASE, "b": 2, "h": 4, "hkv": 2, "d": 32, **change})
        assert q.is_contiguous() and k.is_contiguous() and v.shape == (2, 2, 37, 32)
        assert v.stride() == (37 * 2 * 64, 64, 2 * 64, 1)
    if change.get("layout") == "fused":  # each a third of a row of 3 x heads x 32
        q, k, v, _ = AC.inputs({**AC.BASE, "b": 2, "h": 4, "hkv": 2, "d": 32, **change})
        assert q.stride() == (37 * 3 * 4 * 32, 32, 3 * 4 * 32, 1)
        assert v.stride() == (37 * 3 * 2 * 32, 32, 3 * 2 * 32, 1)
    if device == "cuda":  # SDPA's backends are GPU-only: each timed or its refusal recorded
        assert set(r["times_s"]) | set(r["errors"]) == ours | sdpa


@pytest.mark.parametrize("roof,bound", [(Roof("slow memory", 1e30, 1.0), "memory"),
                                        (Roof("slow compute", 1.0, 1e30), "compute")])
def test_attention_classes_rows_are_placed_on_the_run_roof(monkeypatch, roof, bound):
    """A row on the run's roof: its count is rooflab.cost.attention's (the causal pairs of
    queries last), the bound follows the roof, each time is read against the roof's; a row below
    its peer lists both figures."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import attention_classes as AC
    from rooflab import cost as C
    monkeypatch.setattr(AC, "DEVICE", "cpu")
    change = {"b": 2, "h": 4, "hkv": 2, "d": 32, "lq": 40, "lkv": 70}
    r = AC.row("prefill", change, {"bf16": roof, "fp16": roof})
    c = C.attention(2, 4, 40, 70, 32, 2, "bf16", causal=True)
    p = r["placed"]
    assert (p["flops"], p["bytes"], p["bound"]) == (c.flops, c.bytes_fused, bound)
    floor = c.bytes_fused if bound == "memory" else c.flops  # at a rate of 1 a second
    assert p["roof_s"] == pytest.approx(floor)
    assert p["of_roof"] == pytest.approx({n: floor / t for n, t in r["times_s"].items()})
    ahead = {**r, "phase": "prefill", "rooflab_over_best_peer": 1.2}
    behind = {**ahead, "rooflab_over_best_peer": 0.9, "best_peer": "rooflab, Triton",
              "placed": {**p, "of_roof": {"rooflab": 0.5, "rooflab, Triton": 0.6}}}
    assert AC.below([ahead, behind]) == [{
        "phase": "prefill", "class": "prefill", "rooflab_over_best_peer": 0.9, "bound": bound,
        "rooflab_of_roof": 0.5, "best_peer_of_roof": 0.6}]


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_drawn_attention_rows_are_the_seeds_and_fit(monkeypatch, phase):
    """--drawn: the same rows for a seed, others for another; every row within its phase's
    ranges and size caps, labelled with the classes it is in, and the draws reach every
    layout, head dim and dtype."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import attention_classes as AC
    rows = AC.drawn(phase, 60, 3)
    assert rows == AC.drawn(phase, 60, 3) and rows != AC.drawn(phase, 60, 4) and len(rows) == 60
    seen = {"layout": set(), "d": set(), "dt": set()}
    for label, change in rows:
        s = {**AC.BASE, **change}
        group = s["h"] // s["hkv"]
        assert s["h"] == group * s["hkv"] and 1 <= s["hkv"] <= 16
        assert 4 * s["b"] * s["hkv"] * s["lkv"] * s["d"] <= 2 << 30
        if phase == "decode":
            assert 1 <= group <= 16 and s["lq"] <= 8 and (s["lq"] > 1) == s["causal"]
            assert 1 <= s["b"] <= 256 and 128 <= s["lkv"] <= 32768
        else:
            assert 1 <= group <= 8 and AC.DECODE_MAX_Q < s["lq"] <= s["lkv"] <= 8192
            assert s["b"] * s["h"] * s["lq"] * s["lkv"] <= 1 << 30
        assert label.startswith(f"{s['b']} x {s['h']}/{s['hkv']}, head dim {s['d']}, {s['dt']}")
        assert (f"gqa group {group}" in label) == bool(group & (group - 1))
        assert ("kept keys" in label) == s["keep"] and ("ragged" in label) == bool(s["lkv"] % 128)
        for key in seen:
            seen[key].add(s[key])
    assert seen == {"layout": {"bhld", "blhd", "dynamic"}, "d": {64, 128, 256},
                    "dt": {"bf16", "fp16"}}


def test_attention_classes_tally_and_refusals(monkeypatch, capsys):
    """The count at or past the peer a phase (a row with no peer left out), and bad arguments
    one line and exit 2, before anything is measured."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import attention_classes as AC
    rows = [{"phase": "decode", "rooflab_over_best_peer": x} for x in (1.0, 0.99, 1.2)]
    rows += [{"phase": "prefill", "rooflab_over_best_peer": 0.9}, {"phase": "prefill"}]
    assert AC.tally(rows) == {"decode": [2, 3], "prefill": [0, 1]}
    monkeypatch.setattr(AC, "roofs", lambda: pytest.fail("measured before the arguments"))
    for argv in (["out", "train"], ["out", "--drawn", "0"], ["out", "--drawn", "x"]):
        with pytest.raises(SystemExit) as e:
            AC.main(argv)
        assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()[-1]) > 0


def test_attention_paths_times_each_path_of_the_rows_below(monkeypatch, tmp_path):
    """attention_paths.py on a sweep of three rows: the two below 0.97x each timed again by
    rooflab's paths (under the interpreter: the Triton kernels; the Gluon ones and SDPA's
    GPU backends give why not), in their layout and contiguous; the row at 1.0x left out."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import attention_classes as AC
    import attention_paths as AP
    monkeypatch.setattr(AC, "DEVICE", "cpu")
    small = {"b": 2, "h": 4, "hkv": 2, "d": 32}
    rows = [{**AC.BASE, **small, "phase": "prefill", "class": "p", "lq": 37, "lkv": 37,
             "layout": "blhd", "rooflab_over_best_peer": 0.9},
            {**AC.BASE, **small, "phase": "decode", "class": "d", "lq": 1, "lkv": 50,
             "causal": False, "rooflab_over_best_peer": 0.5},
            {**AC.BASE, **small, "phase": "decode", "class": "x", "lq": 1, "lkv": 50,
             "causal": False, "rooflab_over_best_peer": 1.0}]
    (tmp_path / "sweep.json").write_text(json.dumps({"meta": {"commit": "abc"}, "rows": rows}))
    AP.main([str(tmp_path), str(tmp_path / "sweep.json")])
    out = json.loads((tmp_path / "attention_paths.json").read_text())
    assert out["meta"]["commit"] and [r["class"] for r in out["rows"]] == ["p", "d"]
    prefill, decode = out["rows"]
    assert set(prefill) >= {"blhd", "bhld"} and "bhld" in decode and "blhd" not in decode
    for r in (prefill["blhd"], prefill["bhld"]):
        assert r["routed"] == "flash_attention" and r["rooflab"] > 0 and r["triton"] > 0
        assert isinstance(r["flash_attention_sm90"], str) and isinstance(r["cudnn"], str)
    from rooflab.kernels import flash_decoding as FD
    launch = decode["bhld"]["launch"]  # the interpreter's config: 16 keys a step
    assert launch["BLOCK_N"] == 16 and launch["schedule"] == list(
        FD.schedule(2, 2, 50, 16, launch["programs"]))
    assert decode["bhld"]["64 keys a step"] > 0 and decode["bhld"]["128 keys a step"] > 0
    (tmp_path / "other.json").write_text(json.dumps({"meta": {}}))
    for bad in ("missing.json", "other.json"):  # one line, exit 2, nothing timed
        with pytest.raises(SystemExit) as e:
            AP.main([str(tmp_path / "again"), str(tmp_path / "sweep.json"), str(tmp_path / bad)])
        assert e.value.code == 2 and not (tmp_path / "again").exists()


def test_decode_ops_rows_count_time_and_profile_each_small_op(device, monkeypatch):
    """decode_ops.py's rows on small shapes: each family's op counted once, predicted from the
    costs given, timed, and its launches read from a profile."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import decode_ops as D
    from rooflab.measure import op_classes as OC
    from rooflab.roofline import Roof
    monkeypatch.setattr(D, "DEVICE", device)
    roof = Roof("test", 1e11, 1e10)
    costs = OC.OpCosts("test", {k: 1e-6 for k in OC.CLASSES}, {2: 1e9, 4: 1e9})
    rows = [D.row(f, s, fn, roof, costs) for f, s, fn in D.cases(
        gemv=[(1, 64, 128)], reduce=[(8, 256)], elementwise=[(8, 128)], narrow=[(8, 64, 32)],
        cache=[(2, 2, 16)])]
    assert [r["family"] for r in rows] == ["gemv", "narrow", "narrow+bias", "cache_cat", "mean",
                                           "widen", "broadcast", "weight", "strided"]
    for r in rows:
        assert r["device_s"] > 0 and r["predicted_s"] >= 1e-6 and r["launches"] >= 1, r
        assert r["predicted_model_s"] >= 1e-6, r  # the model alone, no shape timed alone
        assert r["warm_s"] > 0 and r["chained_s"] > 0, r
    assert rows[8]["ops"] == ["neg"] and rows[7]["ops"] == ["mul"]
    assert rows[0]["ops"] == ["mm"] and rows[5]["ops"] == ["_to_copy"]
    assert rows[1]["ops"] == ["mm"] and rows[2]["ops"] == ["addmm"] and rows[3]["ops"] == ["cat"]


def test_grouped_routing_times_each_routing_against_even_and_the_reference(monkeypatch):
    """grouped_routing.py on a CPU at a small shape: the six routings of the same rows (even;
    tile edges crossed; rooflab's uniform draw; Dirichlet 10, 2, 0.5), each timed and over the
    even routing's and the draw's time."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import grouped_routing as G
    from rooflab.measure import op_classes as OC
    ways = G.routings(512, 8)
    assert list(ways) == ["even", "edges crossed", "uniform draw", "dirichlet 10",
                          "dirichlet 2", "dirichlet 0.5"]
    assert all(len(s) == 8 and sum(s) == 512 for s in ways.values())
    assert ways["even"] == [64] * 8 and ways["edges crossed"][:2] == [63, 65]
    assert ways["uniform draw"] == OC.uniform_draw(512, 8)
    rows = G.timed(16, 32, 8, 512, "cpu", torch.float32)
    assert [r["routing"] for r in rows] == list(ways)
    assert all(r["device_s"] > 0 for r in rows)
    assert rows[0]["over_even"] == 1.0 and rows[2]["over_reference"] == 1.0


def test_attention_agreement_holds_each_call_to_fp32_inside_a_model(tmp_path, monkeypatch):
    """attention_agreement.py on a tiny gpt-oss (sinks, a window of 8, 40 tokens): every layer's
    call to rooflab's attention, on the inputs the model's own attention gets, as near its fp32
    attention as the model's own bf16 attention is, and each call on the kernel, not a
    fallback."""
    monkeypatch.setattr(sys, "path", [*sys.path, os.path.join(ROOT, "benchmarks")])
    import attention_agreement as AA
    config = tmp_path / "tiny-gpt-oss.json"
    config.write_text(json.dumps({
        "model_type": "gpt_oss", "hidden_size": 128, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "vocab_size": 256, "num_local_experts": 8, "num_experts_per_tok": 2,
        "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8}))
    rows = AA.agreement(str(config), 1, 40, "cpu")
    assert [r["layer"] for r in rows] == [0, 1] and [r["window"] for r in rows] == [8, None]
    for r in rows:
        assert 0 < r["own_vs_fp32"] < 1e-2 and r["rooflab_vs_fp32"] < 3 * r["own_vs_fp32"], r
    assert rows[0]["paths"] == {"flash_attention (Triton, sliding window, sinks)": 1,
                                "flash_attention (Triton, sinks)": 1}
