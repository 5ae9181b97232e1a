"""Quantised what-ifs, analytically: one decoder layer when its weights, activations and KV cache
are stored in other dtypes. Standard library only.

MACs and FLOPs do not change; bytes do. A projection reads its input and writes its output in
the activation dtype and reads its weights in the weight dtype; int4 packs two weights per byte,
and with a group size every group of that many weights also carries one fp16 scale (2 bytes).
The attention core reads K and V (the cache, at decode) in the KV dtype and Q, the scores and
O in the activation dtype; norms, RoPE and the elementwise ops run in the activation dtype.
The roof is the activation dtype's: W8A8 computes in int8, W4A16 in bf16 (weights are
dequantised on the way in), fp8 in fp8.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rooflab import cost as C
from rooflab import models as M
from rooflab.errors import RooflabError

WEIGHT_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
ACT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")  # activations and KV: whole bytes
SCALE_BYTES = 2  # one fp16 scale per group of weights


class PrecisionError(RooflabError):
    """A dtype rooflab cannot store a tensor role in."""


@dataclass(frozen=True)
class Precision:
    weight: str
    act: str
    kv: str
    group_size: int | None = None

    def __post_init__(self):
        if self.weight not in WEIGHT_BITS:
            raise PrecisionError(f"weight dtype must be one of {', '.join(WEIGHT_BITS)}, got "
                                 f"{self.weight!r}")
        for role, dt in (("activation", self.act), ("KV", self.kv)):
            if dt not in ACT_DTYPES:
                raise PrecisionError(f"{role} dtype must be one of {', '.join(ACT_DTYPES)}, got "
                                     f"{dt!r}")
        if self.group_size is not None:
            C._sizes(group_size=self.group_size)

    @property
    def label(self) -> str:
        group = f", groups of {self.group_size}" if self.group_size else ""
        return f"weights {self.weight}{group}, activations {self.act}, KV {self.kv}"

    def weight_bytes(self, n: int) -> int:
        scales = math.ceil(n / self.group_size) * SCALE_BYTES if self.group_size else 0
        return math.ceil(n * WEIGHT_BITS[self.weight] / 8) + scales


# the lab's serving recipes (Lecture 13's W8A8 for batched serving, W4A16 for one user)
RECIPES = {"W16A16": Precision("bf16", "bf16", "bf16"), "W8A8": Precision("int8", "int8", "int8"),
           "W4A16": Precision("int4", "bf16", "bf16", 128), "FP8": Precision("fp8", "fp8", "fp8")}


def _projections(cfg: M.ModelConfig) -> dict[str, tuple[int, int]]:
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return {"attn.q_proj": (cfg.hidden, q), "attn.k_proj": (cfg.hidden, kv),
            "attn.v_proj": (cfg.hidden, kv), "attn.o_proj": (q, cfg.hidden),
            "mlp.gate_proj": (cfg.hidden, cfg.intermediate),
            "mlp.up_proj": (cfg.hidden, cfg.intermediate),
            "mlp.down_proj": (cfg.intermediate, cfg.hidden)}


def layer_costs(cfg: M.ModelConfig, ph: M.Phase, layer_type: str, p: Precision) -> list[C.Cost]:
    """models.layer_costs with each tensor role's bytes in its own dtype."""
    act_cfg = replace(cfg, dtype=p.act)
    a, k = C.elem_bytes(p.act), C.elem_bytes(p.kv)
    t, projs, out = ph.tokens, _projections(cfg), []
    for c in M.layer_costs(act_cfg, ph, layer_type):
        if c.name in projs:
            d_in, d_out = projs[c.name]
            bias = a * d_out if cfg.attn_bias and c.name in ("attn.q_proj", "attn.k_proj",
                                                              "attn.v_proj") else 0
            b = a * (t * d_in + t * d_out) + p.weight_bytes(d_in * d_out) + bias
            c = replace(c, bytes=b, bytes_fused=b)
        elif c.name == "attn.core":
            kv_pos = c.detail["kv_positions"]
            q = o = t * cfg.heads * cfg.head_dim
            kv = ph.batch * cfg.kv_heads * kv_pos * cfg.head_dim  # K, and V alike
            scores = c.macs // (2 * cfg.head_dim)
            kv_token = 2 * ph.batch * cfg.kv_heads * cfg.head_dim * k
            c = replace(c, bytes=a * (q + (2 + C.SOFTMAX_PASSES) * scores + o) + k * 2 * kv,
                        bytes_fused=a * (q + o) + k * 2 * kv, detail={
                            **c.detail,
                            "kv_cache_read_bytes": kv_token * (kv_pos - 1) if ph.kind == "decode"
                            else 0,
                            "kv_cache_write_bytes": kv_token * ph.seq})
        out.append(c)
    return out
