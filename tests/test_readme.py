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


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quickstart_commands()[1] in [line.strip() for line in ci]
