"""rooflab's kernels: each module reads as a Triton tutorial (reference, kernel, launcher, cost,
check); inputs checks what the attention kernels take, routing picks which FlashAttention kernel
runs a call, and hf_attention puts the attention kernels inside a transformers model."""


def register_hf_attention() -> str:
    """Register rooflab's attention with transformers under the name "rooflab", so that
    ``attn_implementation="rooflab"`` runs FlashAttention at prefill and flash-decoding at
    decode (SDPA where they do not apply; ``hf_attention.CALLS`` counts each path)."""
    from rooflab.kernels import hf_attention
    return hf_attention.register()
