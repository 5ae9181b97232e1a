"""rooflab's dtype names (cost.py) as torch dtypes: the one map the torch layers share."""
import torch

from rooflab.cost import dtype_name

TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
                "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    """'bf16', 'bfloat16', 'torch.bfloat16' ... -> torch.bfloat16 (fp8/int8 have no plain map)."""
    return TORCH_DTYPES[dtype_name(name)]


def runnable(name: str, device: str) -> str:
    """``name``, or the dtype this device runs in its place: fp16 for bf16 on a GPU without
    native bf16 (a T4, a V100: PyTorch emulates it there, far below the GPU's fp16 rate and
    with no measured roof), fp32 for a half dtype on a CPU (its measured roof is fp32)."""
    name = dtype_name(name)
    if device == "cpu" and name in ("bf16", "fp16"):
        return "fp32"
    if (device == "cuda" and name == "bf16"
            and not torch.cuda.is_bf16_supported(including_emulation=False)):
        return "fp16"
    return name
