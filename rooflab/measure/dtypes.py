"""rooflab's dtype names (cost.py) as torch dtypes: the one map the torch layers share."""
import torch

from rooflab.cost import dtype_name

TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
                "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    """'bf16', 'bfloat16', 'torch.bfloat16' ... -> torch.bfloat16 (fp8/int8 have no plain map)."""
    return TORCH_DTYPES[dtype_name(name)]
