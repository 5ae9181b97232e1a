"""The README: its quickstart is exactly two commands, CI runs its test command verbatim, and its
headline figures are those of the files they name."""
import json
import pathlib
import re
import shlex
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CURRENT = ROOT / "benchmarks" / "results" / "current"  # the files the headline figures name


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_two_commands_main_job_and_tests():
    cmds = quickstart_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("rooflab lab")
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command_and_the_slow_tests():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert quickstart_commands()[1] in ci and quickstart_commands()[1] + " -m slow" in ci


def test_every_python_snippet_runs():
    """The README's Python blocks, run as written, in order, in one namespace."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    ns: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), ns)  # noqa: S102 - our own documentation
    assert ns["t"].device_s > 0 and ns["t"].p20_s > 0 and ns["n"].total_flops == 2 * 512 * 512 * 1024 + 512 * 1024


ANALYTIC = {"specs", "cost", "roofline", "layer", "model"}  # need no device, run in a second


def tour_lines() -> list[tuple[list[str], str]]:
    """(argv, comment) of each line of the README's CLI tour; [--optional] parts dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Tour of the CLI", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    out = []
    for line in block.splitlines():
        cmd, _, comment = line.partition("#")
        cmd = re.sub(r"\[[^]]*\]", "", cmd.split(">")[0])
        if cmd.strip():
            out.append((shlex.split(cmd), comment.strip()))
    return out


def test_the_tour_runs_its_cpu_safe_commands_and_reads_their_output(tmp_path, monkeypatch,
                                                                    capsys):
    """Each analytic line runs as written (with --json) and its output holds what its comment
    says; every other line (a GPU's sweep, a file of the reader's) is a real command whose
    --help exits 0."""
    from rooflab.cli import main
    monkeypatch.chdir(tmp_path)  # --plot gemm.png lands here
    ran = 0
    for argv, comment in tour_lines():
        assert argv[0] == "rooflab"
        words = argv[1:]
        if words[0] in ANALYTIC and not any("path/to" in w for w in words):
            code = main([*words, *([] if "--json" in words else ["--json"])])
            out = capsys.readouterr().out
            assert code == 0, (argv, out)
            d = json.loads(out)
            n = re.search(r"compute-bound from n = (\d+)", comment)
            if n:
                assert d["crossover_n"] == int(n.group(1)), argv
            if "never compute-bound" in comment:
                assert d["crossover_n"] is None, argv
            if "--tp" in words:
                assert d["communication"]["all_reduces"] == 2, argv
            if words[0] == "model":
                assert d["kv_cache_bytes"] > 0, argv
            if "experts" in comment:
                assert d["active_params"] < d["params"] and d["experts_at_decode"]["rows"], argv
            if "latent attention both ways" in comment:  # absorbing reads less at decode
                ways = d["latent_ways"]
                assert ways["absorb"]["bytes"] < ways["expand"]["bytes"], argv
            ran += 1
        else:
            sub = [w for w in words if not w.startswith("-")][:2]
            cmd = sub if sub[0] in ("cost", "roofline", "fusion") else sub[:1]
            assert main([*cmd, "--help"]) == 0, argv
            capsys.readouterr()
    assert ran >= 8 and (tmp_path / "gemm.png").stat().st_size > 10_000


def test_the_models_table_reads_its_files():
    """Each row of "rooflab's kernels inside models" is the figures of the file and commit it
    names."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### rooflab's kernels inside models", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and "`attn" in line]
    assert len(rows) >= 10
    models = {r[0].split(" (")[0] for r in rows}  # and the headline row counts them
    assert f"inside {len(models)} models" in text and f"{len(rows)} shapes" in text
    def ms(cell: str) -> list[float]:  # "967.5 / 968.4 ms" -> [967.5, 968.4]
        return [float(x) for x in re.findall(r"[\d.]+(?= /| ms)", cell.replace(",", ""))]

    ttft_apart, tpot_x, ttft_x, eager_x = [], [], [], []  # the headline row's ratios
    for model, shape, ttft, tpot, logits, commit, folder in rows:
        data = json.loads((CURRENT / folder.strip("`/") / "generate_attn.json").read_text())
        assert data["meta"]["commit"] == commit, folder
        b, n = (int(x.replace(",", "")) for x in shape.split(" x "))
        got = {r["attn"]: r for r in data["rows"] if r["model"] == model.split(" (")[0]
               and (r["batch"], r["seq"]) == (b, n)}
        ours, peer = got["rooflab"], got.get("sdpa") or got["eager"]
        key = "ttft_s" if "both eager" in ttft else "ttft_graph_s"
        assert ms(ttft) == [round(ours[key] * 1e3, 1), round(peer[key] * 1e3, 1)], (model, shape)
        assert ms(tpot) == [round(ours["tpot_s"] * 1e3, 2), round(peer["tpot_s"] * 1e3, 2)]
        err = ours.get("logits_rel_err_vs_sdpa", ours.get("logits_rel_err_vs_eager"))
        assert logits.startswith(f"{err:.1%}"), (model, shape)
        if "sdpa" in got:
            tpot_x.append(peer["tpot_s"] / ours["tpot_s"])
        if model.startswith(("Llama", "Qwen3", "DeepSeek")):
            ttft_apart.append(abs(ours[key] / peer[key] - 1))
        elif "sdpa" in got:  # sliding windows and softcaps
            ttft_x.append(peer[key] / ours[key])
        else:
            eager_x.append(peer[key] / ours[key])
    assert (f"TPOT as a graph {min(tpot_x):.2f}-{max(tpot_x):.2f}x faster (SDPA copies KV heads "
            f"under a mask); TTFT as a graph within {max(ttft_apart):.1%} of SDPA's for Llama, "
            f"Qwen3 and DeepSeek, {min(ttft_x):.2f}-{max(ttft_x):.2f}x faster with sliding windows "
            f"and softcaps; gpt-oss-20b, which no SDPA runs, {min(eager_x):.1f}x and "
            f"{max(eager_x):.1f}x eager's TTFT") in text


def test_the_h100_models_row_is_its_files():
    """The H100 row of rooflab's kernels inside models: TPOT and TTFT as a graph against SDPA and
    how far apart the logits are, from the newest run of each model and shape in its folders."""
    said = headline_rows(r"^\| the same on an H100: (.*?) \| (TPOT as a graph .*) \| "
                         r"(`.+`) \|$")[0]
    newest = {}
    runs = sorted((json.loads((CURRENT / f / "generate_attn.json").read_text())
                   for f in re.findall(r"`([^`]+)/`", said[3])), key=lambda d: d["meta"]["date"])
    for d in runs:  # each folder's models, at the commit the row gives them
        models = sorted({r["model"] for r in d["rows"]})
        assert f"{' and '.join(models)} at " in said[1]
        assert re.search(rf"{re.escape(models[-1])} at [^()]*\({d['meta']['commit']}\)", said[1])
        newest |= {(r["model"], r["batch"], r["seq"], r["attn"]): r for r in d["rows"]}
    pairs = [(r, newest[k[:3] + ("sdpa",)]) for k, r in newest.items() if k[3] == "rooflab"]
    tpot = [peer["tpot_s"] / ours["tpot_s"] for ours, peer in pairs]
    apart = max(abs(ours["ttft_graph_s"] / peer["ttft_graph_s"] - 1) for ours, peer in pairs)
    def of(models, key):
        return sorted(ours[key] for ours, _ in pairs if ours["model"].startswith(models))
    dense, dense_peers = of(("Llama", "Qwen3"), "logits_rel_err_vs_sdpa"), of(
        ("Llama", "Qwen3"), "logits_rel_diff_sdpa_flash_vs_cudnn")
    latent, latent_peers = of("DeepSeek", "logits_rel_err_vs_sdpa"), of(
        "DeepSeek", "logits_rel_diff_sdpa_efficient_vs_cudnn")
    assert len(pairs) == 8 and len(latent) == 2
    assert min(tpot) > 1  # the row says "faster"
    assert said[2] == (
        f"TPOT as a graph {min(tpot):.2f}-{max(tpot):.2f}x faster, TTFT as a graph within "
        f"{apart:.1%} of SDPA's; logits {dense[0] * 100:.1f}-{dense[-1]:.1%} apart for Llama and "
        f"Qwen3 (SDPA's flash and cuDNN backends "
        f"{dense_peers[0] * 100:.1f}-{dense_peers[-1]:.1%}), "
        f"{latent[0]:.1%} and {latent[1]:.1%} for DeepSeek-V2-Lite (SDPA's efficient and cuDNN "
        f"backends {latent_peers[0]:.1%} and {latent_peers[1]:.1%})")


def headline_rows(pattern: str) -> list[re.Match]:
    """The README lines that ``pattern`` finds, as its matches."""
    found = (re.search(pattern, line) for line in (ROOT / "README.md").read_text().splitlines())
    return [m for m in found if m]


def ttft(run: dict) -> float:
    """A generation run's TTFT, predicted over measured as a graph (decode's is in the file)."""
    return run["prefill"]["predicted_s"] / run["prefill"]["graph_device_s"]


def span(values: list[float]) -> tuple[str, str]:
    """A range as the README writes it: "0.93-1.06"."""
    return f"{min(values):.2f}", f"{max(values):.2f}"


def test_the_class_sweep_rows_count_their_files():
    """The headline table's "prefill N of M at or past ..., decode N of M", counted from the
    sweep each row names."""
    rows_said = headline_rows(r"prefill (\d+) of (\d+).*decode (\d+) of (\d+).*"
                              r"`(attention_classes(_h100)?\.json)`")
    for said in rows_said:
        rows = json.loads((CURRENT / said[5]).read_text())["rows"]
        for phase, n, of in (("prefill", said[1], said[2]), ("decode", said[3], said[4])):
            mine = [r["rooflab_over_best_peer"] >= 1 for r in rows if r["phase"] == phase]
            assert (int(n), int(of)) == (sum(mine), len(mine)), (said[5], phase)
    assert len(rows_said) == 2  # the H200's and the H100's


def test_the_generation_rows_are_their_files():
    """Headline rows of whole models generating ("N of N within 10%: TTFT a-b, TPOT a-b, peak
    memory a-b", predicted over measured as a graph) are the ranges of the files they name, the
    newest run of each model, shape and attention where two files hold one."""
    rows_said = headline_rows(r"(\d+) of (\d+) within 10%: TTFT ([\d.]+)-([\d.]+).*?TPOT "
                              r"([\d.]+)-([\d.]+), peak memory ([\d.]+)-([\d.]+).*? \| (`.+`) \|")
    for said in rows_said:
        files = [f for p in re.findall(r"`([^`]+)`", said[9])
                 for f in CURRENT.glob(p + ("generate*.json" if p.endswith("/") else ""))]
        newest = {}
        runs = sorted((json.loads(f.read_text()) for f in files), key=lambda d: d["meta"]["date"])
        for d in runs:
            newest |= {(r["model"], r["batch"], r["seq"], r.get("attn")): r for r in d["rows"]}
        rows = list(newest.values())
        first = [ttft(r) for r in rows]
        tpot = [r["decode"]["predicted_over_graph_device"] for r in rows]
        mem = [r["memory_predicted_over_measured"] for r in rows]
        within = sum(all(abs(x[i] - 1) <= 0.10 for x in (first, tpot)) for i in range(len(rows)))
        assert (int(said[1]), int(said[2])) == (within, len(rows)), said[9]
        for got, lo, hi in ((first, said[3], said[4]), (tpot, said[5], said[6]),
                            (mem, said[7], said[8])):
            assert span(got) == (lo, hi), said[9]
    assert len(rows_said) == 5  # gemma/, the 8B models (two attentions), heldout (2 GPUs), moe/


def test_the_decoder_layer_rows_are_their_files():
    """One decoder layer's rows, "N of N within 10% ... prefill a-b, decode a-b" (predicted over
    profiled kernel time), are what the files they name hold."""
    rows_said = headline_rows(r"(\d+) of (\d+) within 10%.*?prefill ([\d.]+)-([\d.]+), decode "
                              r"([\d.]+)-([\d.]+).*\| `(decoder\w*\.json)`")
    for said in rows_said:
        d = json.loads((CURRENT / said[7]).read_text())
        assert (int(said[1]), int(said[2])) == (d["within_10pct"], d["total"]), said[7]
        for phase, lo, hi in (("prefill", said[3], said[4]), ("decode", said[5], said[6])):
            got = [r["predicted_over_kernel"] for r in d["rows"] if r["phase"] == phase]
            assert span(got) == (lo, hi), (said[7], phase)
    assert len(rows_said) == 5  # the layer, held-out configs (H200, H100), the mixtures, gpt-oss


def test_the_kernel_rows_are_their_files():
    """The FlashAttention, flash-decoding and GeLU rows' figures, from kernels.json."""
    text = (ROOT / "README.md").read_text()
    k = json.loads((CURRENT / "kernels.json").read_text())
    flash = k["flash_default"]
    past = sorted(r["triton_over_sdpa_cudnn"] for r in flash if r["triton_over_sdpa_cudnn"] >= 1)
    below = [r["triton_over_sdpa_cudnn"] for r in flash if r["triton_over_sdpa_cudnn"] < 1]
    best = {d: max(r["median_of_3_tflops_per_s"]["triton"] for r in flash if r["head_dim"] == d)
            for d in (128, 256)}
    assert (f"{len(past)} of {len(flash)} rows, {past[0]:.2f}-{past[-1]:.2f}x ({best[256]:.0f} "
            f"TFLOP/s at d=256, {best[128]:.0f} at d=128); {below[0]:.2f}x") in text
    lab = {r["kv_len"]: r for r in k["lab_decode"]["rows"]}
    rest = [r["triton_decode_over_fastest_sdpa"] for n, r in lab.items() if n >= 1024]
    assert (f"{lab[512]['triton_decode_over_fastest_sdpa']:.2f}x at 512 cached tokens, "
            f"{min(rest):.2f}-{max(rest):.3f}x from 1k to 32k; "
            f"{lab[4096]['triton_decode_fraction_of_copy_ceiling']:.2f} of the copy ceiling") in text
    fusion = json.loads((CURRENT / "fusion.json").read_text())
    kernels = {v["kernels"]["unfused (basic ops)"] for v in fusion["summary"].values()}
    slower = [v["unfused_over_fused_time"] for v in fusion["summary"].values()]
    numel = {v["numel"] for v in fusion["gelu"].values()}
    assert len(kernels) == len(numel) == 1 and (
        f"unfused ({numel.pop():,} elements): {kernels.pop():.0f} kernels, "
        f"{min(slower):.1f}-{max(slower):.1f}x slower") in text
    gelu = k["gelu"]
    assert (f"at least {min(r['triton_over_fgelu'] for r in gelu):.2f}x `F.gelu` and "
            f"{min(r['triton_over_copy'] for r in gelu):.2f} of a copy") in text
    assert f"{len({r['numel'] for r in gelu})} lengths x {len({r['dtype'] for r in gelu})}" in text


def test_the_in_place_row_is_its_files():
    """transformers' latent v read in place against a contiguous copy: "in place faster at N of
    M (the copy takes a-bx its time); cuDNN c-dx its time, below at B x L (r) ..."."""
    rows = [r for f in sorted((CURRENT.parent / "ab").glob("ab_flash_*_in_place_h200.json"))
            for r in json.loads(f.read_text())["rows"]]
    copy, cudnn = ([r["median_s"][k] / r["median_s"]["after"] for r in rows]
                   for k in ("copy", "cudnn"))
    below = " and ".join(f"{r['shape'][0]} x {r['shape'][3]:,} ({x:.2f})"
                         for r, x in zip(rows, cudnn) if x < 1)
    lo, hi = span(copy)
    assert (f"in place faster at {sum(x > 1 for x in copy)} of {len(rows)} (the copy takes "
            f"{lo}-{hi}x its time); cuDNN {'-'.join(span(cudnn))}x its time, below at "
            f"{below} |") in (ROOT / "README.md").read_text()


def test_the_gelu_any_and_gpt_oss_rows_are_their_files():
    """GeLU at odd lengths ("a-bx `F.gelu`") and gpt-oss-20b generating under rooflab's kernels
    ("TTFT a and b, TPOT a and b, peak memory a and b", predicted over measured as a graph)."""
    text = (ROOT / "README.md").read_text()
    gelu = json.loads((CURRENT / "gelu_any" / "kernels.json").read_text())["gelu_any"]
    lo, hi = span([r["triton_over_fgelu"] for r in gelu])
    assert (f"GeLU at {len({r['numel'] for r in gelu})} lengths near no power of two x "
            f"{len({r['dtype'] for r in gelu})} dtypes, aligned and one element off | "
            f"{lo}-{hi}x `F.gelu` |") in text
    rows = [r for r in json.loads((CURRENT / "attn_deepseek_gptoss" / "generate_attn.json")
                                  .read_text())["rows"]
            if r["model"] == "gpt-oss-20b" and r["attn"] == "rooflab"]
    pairs = {"TTFT": [ttft(r) for r in rows],
             "TPOT": [r["decode"]["predicted_over_graph_device"] for r in rows],
             "peak memory": [r["memory_predicted_over_measured"] for r in rows]}
    said = ", ".join(f"{k} {a:.2f} and {b:.2f}" for k, (a, b) in pairs.items())
    assert f"under rooflab's kernels (never tuned on) | {said} | `attn_deepseek_gptoss/` |" in text


@pytest.mark.parametrize("gpu, folder", [("the H200", "report"), ("an H100", "report_h100")])
def test_the_lab_row_is_its_run(gpu, folder):
    """"the lab on <gpu>[ (commit)] | parts a-b ok in N min; ceilings X copy, Y bf16": the
    report's parts, commit and ceilings, the time its manifest gives the part."""
    report = json.loads((CURRENT / folder / "results.json").read_text())
    ok = [k for k, p in report["parts"].items() if p["status"] == "ok"]
    seconds = [p["seconds"] for f in CURRENT.glob("manifest-*.json")
               for p in json.loads(f.read_text())["parts"] if folder in p["files"]]
    copy, *peaks = report["meta"]["ceilings_summary"].split(", ")  # "4.25 TB/s copy", "bf16 ..."
    bf16 = next(c.removeprefix("bf16 ") for c in peaks if c.startswith("bf16 "))
    commit = "" if folder == "report" else f" ({report['meta']['commit']})"
    assert len(seconds) == 1 and (
        f"| the lab on {gpu}{commit} | parts {ok[0]}-{ok[-1]} ok in {seconds[0] / 60:.1f} min; "
        f"ceilings {copy}, {bf16} bf16 |") in (ROOT / "README.md").read_text()


def test_the_grouped_routing_row_is_its_file():
    """"N routings x M mixtures x P projections x T lengths | exactly even groups take a-bx a
    uniform router's draw's time at T1 tokens and c-dx at T2; the other routings e-fx and g-hx"."""
    rows = json.loads((CURRENT / "grouped_routing.json").read_text())["rows"]
    n = [len({r[k] for r in rows}) for k in ("routing", "model", "proj", "tokens")]
    t1, t2 = sorted({r["tokens"] for r in rows})
    def rng(tokens: int, even: bool) -> str:
        return "-".join(span([r["over_reference"] for r in rows
                              if r["tokens"] == tokens and (r["routing"] == "even") == even]))
    assert (f"under {n[0]} routings x {n[1]} mixtures x {n[2]} projections x {n[3]} lengths | "
            f"exactly even groups take {rng(t1, True)}x a uniform router's draw's time at "
            f"{t1:,} tokens and {rng(t2, True)}x at {t2:,}; the other routings {rng(t1, False)}x "
            f"and {rng(t2, False)}x |") in (ROOT / "README.md").read_text()


def test_the_earlier_mixture_row_is_its_files():
    """"N runs: TTFT a-b, the b <model> at ... , the rest c-d; TPOT e-f" over every run the
    row's folders hold, each under its own commit's cost model."""
    said = headline_rows(r"earlier cost models \| (\d+) runs: TTFT (.*?), the ([\d.]+) (.*?) at "
                         r".*?, the rest (.*?); TPOT (.*?) \(.*\| (`.+`) \|")[0]
    rows = [r for p in re.findall(r"`([^`]+)`", said[7]) for f in CURRENT.glob(p + "generate.json")
            for r in json.loads(f.read_text())["rows"]]
    first = sorted((ttft(r), r["model"]) for r in rows)
    assert int(said[1]) == len(rows) and said[2] == "-".join(span([t for t, _ in first]))
    assert (said[3], said[4]) == (f"{first[-1][0]:.2f}", first[-1][1])
    assert said[5] == "-".join(span([t for t, _ in first[:-1]]))
    assert said[6] == "-".join(span([r["decode"]["predicted_over_graph_device"] for r in rows]))


def test_the_attention_sweep_row_is_its_file():
    """"the N x N backends (a, b) out of memory at L; flash, efficient, cuDNN and rooflab's at
    every length": which backends the sweep ran out of memory in, and where."""
    sweep = json.loads((CURRENT / "attention_sweep.json").read_text())["sweep"]
    oom = {(r["impl"], r["seq"]) for r in sweep["rows"] if r["status"] != "ok"}
    every = {r["impl"] for r in sweep["rows"]} - {i for i, _ in oom}
    assert {i for i, _ in oom} == {"standard", "math"} and {n for _, n in oom} == {32768}
    assert every == {"flash", "efficient", "cudnn", "triton"}
    assert all(len([r for r in sweep["rows"] if r["impl"] == i]) == len(sweep["seqs"])
               for i in every)
    assert ("| attention memory and time, 512-32,768 tokens, every SDPA backend and rooflab's "
            "kernel | the N x N backends (standard, math) out of memory at 32,768; flash, "
            "efficient, cuDNN and rooflab's at every length |") in (ROOT / "README.md").read_text()
    assert (min(sweep["seqs"]), max(sweep["seqs"])) == (512, 32768)


def test_the_gpu_tests_row_is_its_files():
    """Each "N passed[, M skipped] (...; commit)" of the GPU tests row is a pytest XML of that
    commit (its manifest's), with no failure."""
    runs = {}
    for m in CURRENT.glob("manifest-*.json"):
        manifest = json.loads(m.read_text())
        for f in manifest["files"]:
            if f.startswith("pytest-") and f.endswith(".xml"):
                s = ET.parse(CURRENT / f).getroot()
                s = s if s.tag == "testsuite" else s.find("testsuite")
                tests, failed, errors, skipped = (int(s.get(k)) for k in
                                                  ("tests", "failures", "errors", "skipped"))
                runs.setdefault(manifest["commit"], set()).add(
                    (tests - failed - errors - skipped, skipped, failed + errors))
    row = headline_rows(r"^\| GPU tests \| (.*) \|")[0][1]
    said = re.findall(r"(\d+) passed(?:, (\d+) skipped)? \((?:[^()]*; )?([0-9a-f]{7})\)", row)
    assert len(said) >= 4
    for passed, skipped, commit in said:
        assert (int(passed), int(skipped or 0), 0) in runs.get(commit, set()), (passed, commit)


def test_the_gpu_tests_rows_notebooks_are_their_files():
    """"N checks NOT YET ... (commit)" and "N checks OK (commit)": the notebook's printed checks,
    counted in the file its manifest at that commit names, whose part exited 0."""
    row = headline_rows(r"^\| GPU tests \| (.*) \|")[0][1]
    said = re.findall(r"(\d+) checks (OK|NOT YET)[^;]*\(([0-9a-f]{7})\)", row)
    assert {w for _, w, _ in said} == {"OK", "NOT YET"}
    manifests = [json.loads(f.read_text()) for f in CURRENT.glob("manifest-*.json")]
    for n, word, commit in said:
        [part] = [p for m in manifests if m["commit"] == commit for p in m["parts"]
                  if p["part"].startswith("notebook")]
        lines = (CURRENT / part["files"][0]).read_text().splitlines()
        assert part["rc"] == 0 and sum(x.startswith(word + ":") for x in lines) == int(n)


@pytest.mark.parametrize("name", ["attention_classes.json", "attention_classes_h100.json"])
def test_the_sweep_rows_below_the_best_peer_are_their_files(name):
    """Each sweep's row (the H200's, the H100's): prefill and decode rows at or past the best
    peer of how many, then the rows below: the lowest of each phase (to as many places as it
    takes to read below 1), then the second ("and ... x") or "the other N a-b" (a phase with
    none below goes unnamed); the decode rows below, each placed on the run's roof: their bound
    and how near rooflab and the peer come to it; and the row of two heads a KV head."""
    said = headline_rows(r"prefill (\d+) of (\d+) .*decode (\d+) of (\d+) .*below: (.*) \| "
                         rf"`{re.escape(name)}`")[0]
    rows = json.loads((CURRENT / name).read_text())["rows"]
    below = ""
    for phase in ("prefill", "decode"):
        ratios = [r["rooflab_over_best_peer"] for r in rows if r["phase"] == phase]
        low = sorted(x for x in ratios if x < 1)
        assert said.group(1 if phase == "prefill" else 3) == str(len(ratios) - len(low))
        assert said.group(2 if phase == "prefill" else 4) == str(len(ratios))
        if low:
            lowest = next(f"{low[0]:.{n}f}" for n in (2, 3, 4, 5) if f"{low[0]:.{n}f}" < "1")
            below += (f"{'; ' if below else ''}{phase} .*? {lowest}x"
                      + (f" and .*? {low[1]:.3f}x" if len(low) == 2 else
                         f", the other {len(low) - 1} {low[1]:.3f}-{low[-1]:.3f}x"
                         if len(low) > 2 else ""))
    assert re.fullmatch(below, said.group(5)), (below, said.group(5))
    decode_below = [r for r in rows
                    if r["phase"] == "decode" and r["rooflab_over_best_peer"] < 1]
    assert {r["placed"]["bound"] for r in decode_below} == {"memory"}
    mine = [r["placed"]["of_roof"]["rooflab"] for r in decode_below]
    peer = [r["placed"]["of_roof"][r["best_peer"]] for r in decode_below]
    assert (f"every decode row below the peer is memory-bound, rooflab at {min(mine):.0%}-"
            f"{max(mine):.0%} of the roof against the peer's {min(peer):.0%}-{max(peer):.0%}"
            .replace("%-", "-")) in said.group(0)
    [short] = [r["rooflab_over_best_peer"] for r in rows if r["class"] == "gqa group, short"]
    assert f"two heads a KV head, 64 x 16/8 x 384 causal, {short:.2f}x" in said.group(0)


def test_the_h100_sweeps_repeat_is_its_files():
    """"the kernels at <commit> ... in another device call gave the N rows both ran within
    a-bx of this run's ratio, M of them on the other side of 1": the earlier run's file, row by
    row; and the short row's "a-bx in four repeats in one run": cuDNN's time over rooflab's."""
    said = headline_rows(r"the kernels at (\w+) \(.*?\) in another device call gave the (\d+) "
                         r"rows both ran within ([\d.]+)-([\d.]+)x of this run's ratio, (\d+) of "
                         r"them on the other side of 1")[0]
    now = json.loads((CURRENT / "attention_classes_h100.json").read_text())["rows"]
    then = json.loads((CURRENT / f"attention_classes_h100_{said[1]}.json").read_text())
    assert then["meta"]["commit"] == said[1]
    def key(r: dict) -> str:
        return json.dumps({k: v for k, v in r.items() if k in (
            "phase", "class", "b", "h", "hkv", "lq", "lkv", "d", "dt", "causal", "layout",
            "keep", "window", "dv", "softcap", "sinks")}, sort_keys=True)
    earlier = {key(r): r["rooflab_over_best_peer"] for r in then["rows"]}
    both = [(earlier[key(r)], r["rooflab_over_best_peer"]) for r in now if key(r) in earlier]
    assert len(both) == len(earlier) == int(said[2])
    assert (said[3], said[4]) == span([x / e for e, x in both])
    assert int(said[5]) == sum((e < 1) != (x < 1) for e, x in both)
    repeats = json.loads((CURRENT / "spread_prefill_h100.json").read_text())["rows"]
    x = [r["median_s"]["cudnn"] / r["median_s"]["after"] for r in repeats]
    assert len(x) == 4 and (f"{span(x)[0]}-{span(x)[1]}x in four repeats in one run"
                            in (ROOT / "README.md").read_text())


def test_the_class_sweep_rows_past_cudnn_are_its_file():
    """The H200 sweep's figures for the classes at or past cuDNN, each from its class's rows."""
    rows = json.loads((CURRENT / "attention_classes.json").read_text())["rows"]
    def x(phase: str, test) -> list[float]:
        return sorted(r["rooflab_over_best_peer"] for r in rows
                      if r["phase"] == phase and test(r["class"]))
    latent = x("prefill", lambda c: c == "latent attention, transformers' v")
    past = [v for v in latent if v >= 1]
    fused = x("prefill", lambda c: c == "fused projection")
    windows = x("prefill", lambda c: "sliding window" in c and "softcap" not in c
                and "sinks" not in c)
    eager = x("prefill", lambda c: c.startswith(("softcap", "sinks")))
    one = {c: x("decode", lambda k, c=c: k == c)[0]
           for c in ("head dim 256", "latent attention", "four queries, causal")}
    padded = x("prefill", lambda c: c == "padded batch")[0]
    said = (f"latent attention with transformers' v, read where it lies, {past[0]:.2f}-"
            f"{past[-1]:.2f}x at {len(past)} of {len(latent)} rows, fused q, k, v {fused[0]:.2f}x "
            f"and {fused[1]:.2f}x, sliding windows {windows[0]:.1f}-{windows[-1]:.1f}x cuDNN "
            f"given the mask, a padded batch {padded:.2f}x, "
            f"softcaps and sinks {eager[0]:.1f}-{eager[-1]:.0f}x eager")
    decode = (f"(head dim 256 {one['head dim 256']:.2f}x, latent attention "
              f"{one['latent attention']:.2f}x, four queries {one['four queries, causal']:.1f}x)")
    text = (ROOT / "README.md").read_text()
    assert said in text and decode in text


def test_the_mixtures_router_aside_is_its_file():
    """"Qwen3-30B-A3B at B=1, its router a-bx uneven, timed as routed: c": the largest expert
    group over the mean in its prefill's layers, and its TTFT predicted over measured."""
    rows = json.loads((CURRENT / "moe" / "generate.json").read_text())["rows"]
    r = next(r for r in rows if r["model"] == "Qwen3-30B-A3B" and r["batch"] == 1)
    lo, hi = r["experts"]["prefill_routing"]["largest_over_mean"]
    assert (f"(Qwen3-30B-A3B at B=1, its router {lo:.1f}-{hi:.0f}x uneven, timed as routed: "
            f"{ttft(r):.2f};") in (ROOT / "README.md").read_text()


def test_the_drawn_sweeps_row_is_its_files():
    """The drawn sweeps' row: each seed's prefill and decode rows at or past the best peer, and
    how many of the prefill rows below it are head dim 256, and of those at lengths that are not
    whole 128-row tiles, counted from the files it names; and the same draws' counts at an
    earlier commit, from its files."""
    [commit] = [m[1] for m in headline_rows(r"drawn at random across them.*\(H100, (\w+),")]
    [said] = headline_rows(r"seed 1: prefill (\d+) of (\d+) at or past the best peer, decode "
                           r"(\d+) of (\d+); seed 2: prefill (\d+) of (\d+), decode (\d+) of "
                           r"(\d+); of the (\d+) prefill rows below it, (\d+) are head dim 256, "
                           r"(\d+) of them at lengths that are not whole tiles")
    counts, below = [], []
    for seed in (1, 2):
        d = json.loads((CURRENT / f"attention_drawn_s{seed}_h100.json").read_text())
        assert d["seed"] == seed and d["meta"]["commit"] == commit
        for phase in ("prefill", "decode"):
            mine = [r["rooflab_over_best_peer"] >= 1 for r in d["rows"] if r["phase"] == phase]
            counts += [sum(mine), len(mine)]
            assert d["at_or_past_best_peer"][phase] == counts[-2:]
        below += [r for r in d["rows"]
                  if r["phase"] == "prefill" and r["rooflab_over_best_peer"] < 1]
    wide = [r for r in below if r["d"] == 256]
    ragged = [r for r in wide if r["lq"] % 128 or r["lkv"] % 128]
    assert [int(x) for x in said.groups()] == [*counts, len(below), len(wide), len(ragged)]
    [m] = headline_rows(r"the same draws at (\w+), .*?: prefill (\d+) and (\d+) of 32, "
                        r"decode (\d+) and (\d+) of 32")
    then, *earlier = m.groups()
    runs = [json.loads((CURRENT / f"attention_drawn_s{seed}_h100_{then}.json").read_text())
            for seed in (1, 2)]
    assert all(d["meta"]["commit"] == then for d in runs)
    assert [int(x) for x in earlier] == [d["at_or_past_best_peer"][phase][0]
                                         for phase in ("prefill", "decode") for d in runs]


def test_the_h100_sweep_rows_figures_are_its_file():
    """The H100 sweep's figures for named rows (head dim 256 at ragged lengths, the short-cache
    decode row, latent attention, the short row without a mask; the few-pairs row's bytes and
    time, the least of the other decode rows below the peer on the roof), and the drawn row's
    head-dim-256 rows below the peer under 1,024 queries, each from its file."""
    rows = json.loads((CURRENT / "attention_classes_h100.json").read_text())["rows"]
    def one(phase: str, cls: str, **shape) -> dict:
        [r] = [r for r in rows if r["phase"] == phase and r["class"] == cls
               and all(r[k] == v for k, v in shape.items())]
        return r
    x = lambda r: r["rooflab_over_best_peer"]  # noqa: E731
    latent = sorted(x(r) for r in rows if r["phase"] == "prefill" and "latent" in r["class"])
    few = one("decode", "batch 1, few pairs")
    others = [r["placed"]["of_roof"]["rooflab"] for r in rows if r["phase"] == "decode"
              and x(r) < 1 and r is not few]
    said = [f"8 x 4/1 x 700 causal {x(one('prefill', 'head dim 256, ragged', lq=700)):.2f}x",
            f"4 x 8/4 x 2,500 causal {x(one('prefill', 'head dim 256, ragged', lq=2500)):.2f}x",
            f"latent attention {latent[0]:.2f}-{latent[-1]:.2f}x",
            f"64 x 32/8 x 300 without a mask in transformers' layout "
            f"{x(one('prefill', 'batch, no mask, short')):.2f}x",
            f"2 x 8/4 x 480, {x(one('decode', 'head dim 256, short cache')):.2f}x",
            f"reads {few['placed']['bytes'] / 1e6:.1f} MB in "
            f"{few['times_s']['rooflab'] * 1e6:.1f} us",
            f"the others from {min(others):.0%}"]
    [row] = headline_rows(r"^\| the same sweep on an H100 .*")
    for s in said:
        assert s in row.group(0), s
    [drawn] = headline_rows(r"4 are head dim 256, 3 of them .*? \((\w+) under 1,024 queries")
    short = [r for seed in (1, 2) for r in json.loads(
        (CURRENT / f"attention_drawn_s{seed}_h100.json").read_text())["rows"]
        if r["phase"] == "prefill" and x(r) < 1 and r["d"] == 256 and r["lq"] < 1024
        and (r["lq"] % 128 or r["lkv"] % 128)]
    assert drawn[1] == {1: "one", 2: "two", 3: "three"}[len(short)]
