"""The house's layers, held in code: data flows one way, and a lower layer never imports a
higher one. The core is the standard library alone; views compute nothing."""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = {"cost", "errors", "hardware", "models", "parallel", "precision", "roofline", "units"}
TORCH_SIDE = {"count", "formulas", "hf", "predict", "measure", "kernels"}
# what each layer may import from rooflab (its own layer included)
ALLOWED = {
    "core": {"core"},
    "torch": {"core", "torch"},
    "studies": {"core", "torch", "studies"},
    "report": {"core", "report"},
    "lab": {"core", "torch", "studies", "report", "lab"},
    "cli": {"core", "torch", "studies", "report", "lab", "cli"},
    "benchmarks": {"core", "torch", "studies"},
}


def layer_of(module: str) -> str:
    """'rooflab.measure.timer' -> 'torch'; the layer a rooflab module belongs to."""
    parts = [p for p in module.split(".") if p != "__init__"]
    top = parts[1] if len(parts) > 1 else ""
    if top in CORE or top == "":  # rooflab itself: its __init__ imports nothing
        return "core"
    if top in TORCH_SIDE:
        return "torch"
    if top in ("studies", "lab", "report", "cli"):
        return top
    if top == "__main__":
        return "cli"
    raise AssertionError(f"{module}: no layer (add it to tests/test_layers.py)")


def imports(path: pathlib.Path) -> set[str]:
    """Every rooflab module ``path`` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rooflab")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rooflab"):
            if node.module == "rooflab":  # from rooflab import cost, hf: each is a module
                out |= {f"rooflab.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    return out


def files(folder: str):
    return sorted((ROOT / folder).rglob("*.py"))


def test_layer_of_names_every_module():
    for path in files("rooflab"):
        layer_of(".".join(path.relative_to(ROOT).with_suffix("").parts))


@pytest.mark.parametrize("folder", ["rooflab", "benchmarks"])
def test_no_module_imports_a_higher_layer(folder):
    broken = []
    for path in files(folder):
        rel = path.relative_to(ROOT)
        mine = "benchmarks" if folder == "benchmarks" else layer_of(
            ".".join(rel.with_suffix("").parts))
        for target in imports(path):
            if target == "rooflab":
                continue
            if layer_of(target) not in ALLOWED[mine]:
                broken.append(f"{rel} ({mine}) imports {target} ({layer_of(target)})")
    assert not broken, "\n".join(broken)


def test_the_rule_catches_a_breach(tmp_path):
    """The check above sees imports inside functions too (the three old breaches were there)."""
    f = tmp_path / "console.py"
    f.write_text("def view(d):\n    from rooflab.measure import op_classes as OC\n")
    assert imports(f) == {"rooflab.measure"}
    assert layer_of("rooflab.measure") not in ALLOWED["report"]


def test_the_core_imports_with_torch_blocked():
    """cost, hardware, roofline, models, parallel, precision, units and errors need nothing but
    the standard library: imported with torch, numpy, triton and transformers made unimportable,
    and the GPU table and a roofline still answer."""
    code = f"""
import sys
BLOCKED = {{"torch", "numpy", "triton", "transformers", "matplotlib", "rich", "typer"}}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked: {{name}}")
sys.meta_path.insert(0, Block())
import importlib
for m in {sorted(CORE)!r}:
    importlib.import_module("rooflab." + m)
from rooflab import cost, hardware, roofline
roof = roofline.Roof.of(hardware.lookup("H200"), "bf16")
print(roofline.crossover(roof, lambda n: cost.gemm(n, n, n, "bf16")))
assert not BLOCKED & set(sys.modules), BLOCKED & set(sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout.strip()) > 0
