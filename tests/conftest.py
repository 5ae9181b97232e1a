import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Triton kernels are checked on the CPU by Triton's interpreter; the flag must be set before
    # triton.jit decorates them, i.e. before any test module imports rooflab.kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("ROOFLAB_CACHE", os.path.join(os.path.dirname(__file__), ".cache"))


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return "cuda" if HAS_CUDA else "cpu"
