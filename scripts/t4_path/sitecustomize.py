"""On the PYTHONPATH, makes this GPU report no native bf16, as a T4 does: the T4 code path
(fp16 for bf16, no bf16 peak) runs on any GPU. Used by scripts/gpu_check.sh notebook_t4."""
import torch

torch.cuda.is_bf16_supported = lambda including_emulation=True: False
torch.cuda.get_device_capability = lambda device=None: (7, 5)  # a T4's: no bf16 or tf32 peak
