"""On the PYTHONPATH, makes this GPU look like a T4 to rooflab and the notebook: no native bf16
and compute capability 7.5, so the T4 code path (fp16 for bf16, no bf16 or tf32 peak) runs on any
GPU. The compilers still see the real GPU: torch's and Triton's (which asks torch) build kernels
for the capability they are told, and this GPU cannot load a T4's. Used by scripts/gpu_check.sh
notebook_t4."""
import sys

import torch

COMPILERS = ("torch", "triton")


def _as_a_t4(real, t4_answer):
    def ask(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.split(".")[0] in COMPILERS:
            return real(*args, **kwargs)
        return t4_answer
    return ask


torch.cuda.is_bf16_supported = _as_a_t4(torch.cuda.is_bf16_supported, False)
torch.cuda.get_device_capability = _as_a_t4(torch.cuda.get_device_capability, (7, 5))
