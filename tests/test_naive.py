import ast
import inspect
import random

import torch

from rooflab.kernels import naive


def test_matches_torch_on_odd_shapes():
    rng = random.Random(0)
    for m, k, n in [(1, 1, 1), (3, 5, 7), (13, 1, 4), (7, 9, 2)]:
        a = [[rng.uniform(-1, 1) for _ in range(k)] for _ in range(m)]
        b = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(k)]
        ref = torch.tensor(a, dtype=torch.float64) @ torch.tensor(b, dtype=torch.float64)
        got = torch.tensor(naive.matmul(a, b), dtype=torch.float64)
        assert torch.allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_plain_python_only():
    tree = ast.parse(inspect.getsource(naive))
    imported = {a.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for a in (node.names if isinstance(node, ast.Import) else
                          [ast.alias(node.module or "")])}
    assert imported <= {"__future__"}, imported
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"torch", "numpy", "np"}
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For)]
    assert len(loops) >= 3  # the triple loop


def test_shape_mismatch():
    import pytest
    with pytest.raises(ValueError, match="inner dimensions"):
        naive.matmul([[1.0, 2.0]], [[1.0]])
