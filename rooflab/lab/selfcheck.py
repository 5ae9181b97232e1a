"""`rooflab check`: a student's numbers for the lab's computable questions against rooflab's own,
for the same settings, with no published solutions.

The answers file is JSON, ``{"answers": {id: {setting: value, ..., "value": number}}}``;
``template()`` writes one with rooflab's default settings and every value null. Each answer is
``ok`` (equal; within 1% for a ratio), ``convention`` (it is what another stated convention gives,
named in the verdict: it holds, with a comment), ``wrong`` (with the slip named where rooflab
recognises it: FLOPs for MACs, C not written, ...), or ``missing``. All hold when none is wrong or
missing.
"""
from __future__ import annotations

import math
from typing import Callable

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import models as M
from rooflab import roofline as R
from rooflab.errors import RooflabError


class CheckError(RooflabError):
    """An answers file that cannot be read or names unknown settings."""


def _gemm(s):
    return C.gemm(s["m"], s["k"], s["n"], s["dtype"])


def _phase(s) -> M.Phase:
    return (M.Phase.prefill(s["batch"], s["seq"]) if s["phase"] == "prefill"
            else M.Phase.decode(s["batch"], s["kv_len"]))


def _layer(s) -> dict[str, C.Cost]:
    cfg = M.load(s["model"])
    return {p.name: p for p in M.layer_costs(cfg, _phase(s), M.layer_type_of(cfg))}


def _core(s) -> C.Cost:
    return _layer(s)["attn.core"]


def _mlp(s) -> C.Cost:
    return M.groups(list(_layer(s).values()))["mlp"]


def _roof(s) -> R.Roof:
    return R.Roof.of(H.lookup(s["gpu"]), s["dtype"])


# id -> (default settings, rooflab's value, [(what a known alternative gives, its name, whether
# it is a stated convention that holds or a slip)])
Alt = tuple[Callable[[dict], float], str, bool]
Question = tuple[dict, Callable[[dict], float], list[Alt]]
QUESTIONS: dict[str, Question] = {
    "1.1.gemm_macs": (
        {"m": 1024, "k": 1024, "n": 1024, "dtype": "fp32"}, lambda s: _gemm(s).macs,
        [(lambda s: _gemm(s).flops, "that is FLOPs: 1 MAC = 2 FLOPs", False)]),
    "1.1.gemm_bytes": (
        {"m": 1024, "k": 1024, "n": 1024, "dtype": "fp32"}, lambda s: _gemm(s).bytes,
        [(lambda s: C.elem_bytes(s["dtype"]) * (s["m"] * s["k"] + s["k"] * s["n"]),
          "you did not count writing C (M*N elements)", False),
         (lambda s: s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"],
          "that counts elements; bytes multiply by the element size", False)]),
    "2.1.ridge": (
        {"gpu": "RTX A6000", "dtype": "fp32"}, lambda s: _roof(s).ridge, []),
    "2.1.crossover_n": (
        {"gpu": "RTX A6000", "dtype": "fp32"},
        lambda s: R.crossover(_roof(s), lambda n: C.gemm(n, n, n, s["dtype"])),
        [(lambda s: 6 * _roof(s).ridge, "the unrounded n/6 = ridge; n is an integer: round up",
          False)]),
    "2.2.gemv_intensity": (
        {"n": 4096, "dtype": "fp32"}, lambda s: C.gemv(s["n"], s["n"], s["dtype"]).intensity, []),
    "3.1.attention_macs": (
        {"model": "gemma-3-270m-it", "phase": "prefill", "batch": 1, "seq": 1024, "kv_len": None},
        lambda s: _core(s).macs,
        [(lambda s: _core(s).detail["macs_causal"],
          "the causal pairs only (the lab's convention counts every pair, dense)", True),
         (lambda s: _core(s).macs // 2, "QK^T or PV alone: the core is both", False)]),
    "3.2.attention_bytes": (
        {"model": "gemma-3-270m-it", "phase": "prefill", "batch": 1, "seq": 1024, "kv_len": None},
        lambda s: _core(s).bytes,
        [(lambda s: _core(s).bytes_fused,
          "fused-ideal I/O (Q, K, V, O once; the lab's eager I/O adds the score matrix's trips)",
          True)]),
    "3.4.mlp_intensity": (
        {"model": "gemma-3-270m-it", "phase": "decode", "batch": 1, "seq": None, "kv_len": 1024},
        lambda s: _mlp(s).intensity,
        [(lambda s: _layer(s)["mlp.gate_proj"].intensity,
          "that is one projection's intensity; the MLP adds the activation and product", False)]),
    "5.1.oom_seq": (
        {"gpu": "A100-80GB", "batch": 1, "heads": 16, "bytes_per_score": 10},
        lambda s: math.isqrt(H.lookup(s["gpu"]).mem_bytes // (s["bytes_per_score"] * s["batch"]
                                                              * s["heads"])),
        []),
}
RATIOS = {"2.1.ridge", "2.2.gemv_intensity", "3.4.mlp_intensity"}  # compared within 1%


def template() -> dict:
    return {"answers": {q: {**d, "value": None} for q, (d, _, _) in QUESTIONS.items()}}


def _same(q: str, got: float, want: float) -> bool:
    if q in RATIOS:
        return math.isclose(got, want, rel_tol=0.01)
    return got == want


def check(data: dict) -> dict:
    """Each answer's verdict, and whether all hold."""
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict):
        raise CheckError('an answers file is {"answers": {id: {settings..., "value": n}}}; '
                         "`rooflab check --template` writes one")
    unknown = sorted(set(answers) - set(QUESTIONS))
    if unknown:
        raise CheckError(f"unknown question id {unknown[0]!r}; ids: {', '.join(QUESTIONS)}")
    rows = []
    for q, entry in answers.items():
        defaults, compute, conventions = QUESTIONS[q]
        if not isinstance(entry, dict):
            raise CheckError(f"{q}: expected an object of settings and a value")
        settings = {**defaults, **{k: v for k, v in entry.items() if k != "value"}}
        try:
            want = compute(settings)
        except (RooflabError, KeyError, TypeError, ValueError) as e:
            raise CheckError(f"{q}: bad settings ({e})") from None
        got = entry.get("value")
        row = {"id": q, "settings": settings, "value": got, "expected": want}
        if got is None:
            row.update(verdict="missing", why="no value given")
        elif not isinstance(got, (int, float)) or isinstance(got, bool):
            row.update(verdict="wrong", why=f"not a number: {got!r}")
        elif _same(q, got, want):
            row.update(verdict="ok", why="")
        else:
            alt = next(((name, holds) for f, name, holds in conventions
                        if _same(q, got, f(settings))), None)
            row.update(verdict="convention" if alt and alt[1] else "wrong",
                       why=alt[0] if alt else f"rooflab gets {want:,} for these settings")
        rows.append(row)
    return {"rows": rows, "all_hold": all(r["verdict"] in ("ok", "convention") for r in rows)}


def check_one(qid: str, value, **settings) -> tuple[bool, str]:
    """One answer, for a notebook cell: (holds, a line saying why)."""
    r = check({"answers": {qid: {**settings, "value": value}}})["rows"][0]
    if r["verdict"] == "ok":
        return True, f"correct: {r['expected']:,}" if isinstance(r["expected"], int) else \
            f"correct: {r['expected']:.4g}"
    if r["verdict"] == "convention":
        return True, f"holds under another convention: {r['why']}"
    return False, r["why"]
