"""Quantised what-ifs: where each tensor role of a layer is stored. Standard library only.

MACs and FLOPs do not change; bytes do (cost.py counts them: ``linear``'s weight dtype and group
scales, ``attention``'s KV dtype; models.py applies a Precision to a whole layer). Activations,
norms, RoPE and elementwise ops use the activation dtype, and so does the roof: W8A8 computes in
int8, W4A16 in bf16 (weights are dequantised on the way in), FP8 in fp8.
"""
from __future__ import annotations

from dataclasses import dataclass

from rooflab import cost as C
from rooflab.cost import WEIGHT_BITS
from rooflab.errors import RooflabError

ACT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")  # activations and KV: whole bytes


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


# the lab's serving recipes (Lecture 13's W8A8 for batched serving, W4A16 for one user)
RECIPES = {"W16A16": Precision("bf16", "bf16", "bf16"), "W8A8": Precision("int8", "int8", "int8"),
           "W4A16": Precision("int4", "bf16", "bf16", 128), "FP8": Precision("fp8", "fp8", "fp8")}
