"""The README's quickstart is exactly two commands, and CI runs its test command verbatim."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_every_cli_line_of_the_tour_parses():
    """Each command of the README's CLI tour is a real command with real options (--help
    exits 0 for it); the analytic ones run."""
    from rooflab.cli import main
    text = (ROOT / "README.md").read_text()
    section = text.split("## Tour of the CLI", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    for line in block.splitlines():
        argv = line.split("#")[0].split()
        if not argv:
            continue
        assert argv[0] == "rooflab"
        words = [w for w in argv[1:] if not w.startswith("-")][:2]
        cmd = [w for w in words if w in ("specs", "cost", "gemm", "gemv", "attention", "roofline",
                                        "ceilings", "layer", "model", "fusion", "gelu", "mlp", "check",
                                        "compare")]
        assert main([*cmd, "--help"]) == 0, line
