"""`rooflab check`: a student's numbers for the lab's computable questions against rooflab's own,
for the settings the student chose, with no published solutions.

The answers file is JSON, ``{"answers": {id: {setting: value, ..., "value": number}}}``;
``template()`` writes one with the lab's settings and every value null. Each answer is ``ok``
(equal; within 0.5% for a ratio, so a rounded ridge holds and a residual add does not),
``convention`` (what another stated convention gives, named: it holds), ``wrong`` (the slip named
where a known one explains it: FLOPs for MACs, MACs over bytes, 2- vs 4-byte elements, C not
written, ...; otherwise "off by x%"), or ``missing``. rooflab's own value is shown only when
asked for (``reveal``). All hold when none is wrong or missing.
"""
from __future__ import annotations

import math
from typing import Callable

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import models as M
from rooflab import roofline as R
from rooflab.errors import RooflabError

RATIO_TOL = 0.005


class CheckError(RooflabError):
    """An answers file that cannot be read, or names unknown questions or bad settings."""


def _gemm(s) -> C.Cost:  # the lab's A (N, K) @ B (K, M)
    return C.gemm(s["N"], s["K"], s["M"], s.get("dtype", "fp32"))


def _attn(s, **kw) -> C.Cost:
    return C.attention(s["B"], s["H"], s["Lq"], s["Lkv"], s["D"], **kw)


BYTES_DTYPE = {8: "fp64", 4: "fp32", 2: "bf16", 1: "int8"}


def _attn_io(s, passes=None, e=None, fused=False) -> int:
    """The lab's I/O (cost.attention's eager bytes: Q K^T reads Q, K and writes S; softmax's
    passes over S; P V reads P, V and writes O) in ``e``-byte elements, with ``passes`` in place
    of cost.py's SOFTMAX_PASSES."""
    e = s["bytes_per_elem"] if e is None else e
    if e not in BYTES_DTYPE:
        raise CheckError(f"bytes_per_elem is one of {', '.join(map(str, BYTES_DTYPE))}, got {e}")
    c = _attn(s, dtype=BYTES_DTYPE[e])
    if fused:
        return c.bytes_fused
    passes = s["softmax_passes"] if passes is None else passes
    return c.bytes + e * (passes - C.SOFTMAX_PASSES) * s["B"] * s["H"] * s["Lq"] * s["Lkv"]


def _mlp_parts(s) -> dict[str, C.Cost]:
    cfg = M.load(s["model"])
    return {p.name: p for p in M.layer_costs(cfg, M.Phase.prefill(s["batch"], s["seq"]),
                                             M.layer_type_of(cfg))}


def _mlp(s) -> C.Cost:
    return M.groups(list(_mlp_parts(s).values()))["mlp"]


def _mlp_alt(s, flops_extra=0, bytes_extra=0, fused=False) -> float:
    cfg, mlp = M.load(s["model"]), _mlp(s)
    t, e = s["batch"] * s["seq"], C.elem_bytes(cfg.dtype)
    nbytes = M.mlp_one_kernel_bytes(cfg, t) if fused else mlp.bytes
    return (mlp.flops + flops_extra * t * cfg.hidden) / (nbytes + bytes_extra * e * t * cfg.hidden)


def _module(s) -> int:
    cfg = M.load(s["model"])
    ph = (M.Phase.prefill(s["batch"], s["query_len"]) if s["query_len"] == s["kv_len"]
          else M.Phase.decode(s["batch"], s["kv_len"]))
    return M.groups(M.layer_costs(cfg, ph, "full"))["attention"].macs


def _roof(s) -> R.Roof:
    return R.Roof.of(H.lookup(s["gpu"]), s["dtype"])


def _oom(s) -> int:
    return math.isqrt(H.lookup(s["gpu"]).mem_bytes // (s["bytes_per_score"] * s["batch"]
                                                       * s["heads"]))


# id -> (the lab's settings, rooflab's value, [(what a known alternative gives, its name, whether
# it is a stated convention that holds or a slip)])
Alt = tuple[Callable[[dict], float], str, bool]
Question = tuple[dict, Callable[[dict], float], list[Alt]]
GEMM = {"N": 512, "K": 512, "M": 512}
ATTN = {"B": 1, "H": 4, "Lq": 173, "Lkv": 256, "D": 128}
MLP = {"model": "gemma-3-270m-it", "batch": 8, "seq": 2048}
QUESTIONS: dict[str, Question] = {
    "1.3.gemm_mac": (GEMM, lambda s: _gemm(s).macs, [
        (lambda s: _gemm(s).flops, "that is FLOPs: 1 MAC = 2 FLOPs", False)]),
    "1.4.gemm_io": ({**GEMM, "dtype": "fp32"}, lambda s: _gemm(s).bytes, [
        (lambda s: C.elem_bytes(s["dtype"]) * (s["N"] * s["K"] + s["K"] * s["M"]),
         "C is not written: add N*M elements", False),
        (lambda s: s["N"] * s["K"] + s["K"] * s["M"] + s["N"] * s["M"],
         "that counts elements; bytes multiply by the element size", False),
        (lambda s: 2 * (s["N"] * s["K"] + s["K"] * s["M"] + s["N"] * s["M"]),
         "that is 2 bytes an element (bf16/fp16); these settings are", False),
        (lambda s: 4 * (s["N"] * s["K"] + s["K"] * s["M"] + s["N"] * s["M"]),
         "that is 4 bytes an element (fp32); these settings are", False),
        (lambda s: 2 * _gemm(s).bytes, "each element counted twice (read and written?)", False)]),
    "2.1.1.gemm_intensity": ({"n": 4096, "dtype": "fp32"},
                             lambda s: C.gemm(s["n"], s["n"], s["n"], s["dtype"]).intensity, [
        (lambda s: C.gemm(s["n"], s["n"], s["n"], s["dtype"]).macs
         / C.gemm(s["n"], s["n"], s["n"], s["dtype"]).bytes, "that is MACs over bytes; "
         "intensity is FLOPs (2 a MAC) over bytes", False)]),
    "2.1.2.ridge": ({"gpu": "RTX A6000", "dtype": "fp32"}, lambda s: _roof(s).ridge, [
        (lambda s: 1 / _roof(s).ridge, "that is bandwidth over peak: the ridge is peak FLOP/s "
         "over bytes/s", False)]),
    "2.1.2.crossover_n": (
        {"gpu": "RTX A6000", "dtype": "fp32"},
        lambda s: R.crossover(_roof(s), lambda n: C.gemm(n, n, n, s["dtype"])),
        [(lambda s: 6 * _roof(s).ridge, "the unrounded n = 6 x ridge; n is an integer: round up",
          False),
         (lambda s: math.floor(6 * _roof(s).ridge), "rounded down: at that n the intensity is "
          "still under the ridge", False)]),
    "2.2.gemv_intensity": ({"n": 4096, "dtype": "fp32"},
                           lambda s: C.gemv(s["n"], s["n"], s["dtype"]).intensity, [
        (lambda s: C.gemv(s["n"], s["n"], s["dtype"]).macs / C.gemv(s["n"], s["n"],
                                                                   s["dtype"]).bytes,
         "that is MACs over bytes; intensity is FLOPs (2 a MAC) over bytes", False)]),
    "3.1.attn_mac": (ATTN, lambda s: _attn(s).macs, [
        (lambda s: _attn(s).flops, "that counts FLOPs (with softmax and the scale); MACs are "
         "the multiply-adds of Q K^T and P V", False),
        (lambda s: 2 * _attn(s).macs, "that is FLOPs: 1 MAC = 2 FLOPs", False),
        (lambda s: _attn(s).macs // 2, "Q K^T or P V alone: the core is both", False),
        (lambda s: _attn(s, causal=True).macs if s["Lq"] <= s["Lkv"] else -1,
         "the causal pairs only (the lab counts every pair, dense)", True)]),
    "3.2.attn_io": ({**ATTN, "bytes_per_elem": 4, "softmax_passes": 5}, _attn_io, [
        (lambda s: _attn_io(s, e=2), "that is 2 bytes an element; these settings are", False),
        (lambda s: _attn_io(s, e=4), "that is 4 bytes an element; these settings are", False),
        (lambda s: _attn_io(s, fused=True), "that is the fused I/O (Q, K, V, O once); the lab's eager I/O adds the score matrix's "
         "trips", False),
        (lambda s: _attn_io(s) - s["bytes_per_elem"] * s["B"] * s["H"] * s["Lq"] * s["D"],
         "O is not written: P V writes B*H*Lq*D elements", False),
        (lambda s: _attn_io(s) + s["bytes_per_elem"] * s["B"] * s["H"] * s["Lq"] * s["Lkv"],
         "one pass too many: the scaling has no separate term (the lab's hint)", False),
        *[(lambda s, p=p: _attn_io(s, passes=p), f"that is {p} softmax passes over the scores; "
           "these settings say", False) for p in (1, 2, 3, 4, 6)]]),
    "3.4.mlp_intensity": (MLP, lambda s: _mlp(s).intensity, [
        (lambda s: _mlp_parts(s)["mlp.gate_proj"].intensity,
         "that is one projection's intensity; the MLP is gate, up, act, the product and down",
         False),
        (lambda s: _mlp_alt(s, fused=True), "that uses fused-ideal bytes (x, weights, y once); "
         "the worked example's I/O is eager (every kernel reads its inputs, writes its output)",
         False),
        (lambda s: _mlp_alt(s, flops_extra=1, bytes_extra=3),
         "that counts the residual add: it is outside the MLP", False),
        (lambda s: _mlp(s).macs / _mlp(s).bytes, "that is MACs over bytes; intensity is FLOPs "
         "over bytes", False)]),
    "5.1.score_bytes": ({"batch": 1, "heads": 16, "seq": 32768, "bytes_per_elem": 2},
                        lambda s: s["batch"] * s["heads"] * s["seq"] ** 2 * s["bytes_per_elem"], [
        (lambda s: s["batch"] * s["heads"] * s["seq"] ** 2 * s["bytes_per_elem"] / 1e9,
         "that is GB; the answer is in bytes", False),
        (lambda s: s["batch"] * s["heads"] * s["seq"] ** 2 * s["bytes_per_elem"] / 2**30,
         "that is GiB (2^30 bytes); the answer is in bytes", False),
        (lambda s: s["batch"] * s["heads"] * s["seq"] ** 2, "that counts elements; bytes "
         "multiply by the element size", False),
        (lambda s: s["batch"] * s["heads"] * s["seq"] * (s["seq"] + 1) // 2 * s["bytes_per_elem"],
         "the causal half only; the eager kernel writes the whole N x N matrix", False)]),
    "5.1.oom_seq": ({"gpu": "A100-80GB", "batch": 1, "heads": 16, "bytes_per_score": 10}, _oom,
                    []),
    "B.attn_module_mac": ({"model": "gemma-3-270m-it", "batch": 1, "query_len": 1024,
                           "kv_len": 1024}, _module, []),
}
RATIOS = {"2.1.1.gemm_intensity", "2.1.2.ridge", "2.2.gemv_intensity", "3.4.mlp_intensity",
          "5.1.score_bytes"}  # compared within RATIO_TOL (a GB answer is a float too)


def template() -> dict:
    return {"answers": {q: {**d, "value": None} for q, (d, _, _) in QUESTIONS.items()}}


def _same(q: str, got: float, want: float) -> bool:
    if q in RATIOS or isinstance(want, float) or isinstance(got, float):
        return math.isclose(got, want, rel_tol=RATIO_TOL)
    return got == want


def _settings(q: str, entry: dict) -> tuple[dict, list[str]]:
    """The student's settings over the lab's, each of its setting's type, and those left out."""
    defaults = QUESTIONS[q][0]
    unknown = sorted(set(entry) - set(defaults) - {"value"})
    if unknown:
        raise CheckError(f"{q}: unknown setting {unknown[0]!r}; its settings: "
                         f"{', '.join(defaults)}")
    out = dict(defaults)
    for k, v in entry.items():
        if k == "value":
            continue
        want = type(defaults[k])
        if want is int and (isinstance(v, bool) or not isinstance(v, int)) or \
                want is str and not isinstance(v, str):
            raise CheckError(f"{q}: setting {k!r} must be {'an integer' if want is int else 'a string'}"
                             f", got {v!r}")
        if want is int and v <= 0:
            raise CheckError(f"{q}: setting {k!r} must be positive, got {v}")
        out[k] = v
    return out, [k for k in defaults if k not in entry]


def judge(q: str, got, **settings) -> dict:
    """One answer's row: verdict, why (the slip or convention named, or how far off), and
    rooflab's value under "expected" (shown by the views only when revealed)."""
    if q not in QUESTIONS:
        raise CheckError(f"unknown question id {q!r}; ids: {', '.join(QUESTIONS)}")
    s, defaulted = _settings(q, settings)
    _, compute, alternatives = QUESTIONS[q]
    try:
        want = compute(s)
    except (RooflabError, KeyError, ValueError, ZeroDivisionError) as e:
        raise CheckError(f"{q}: bad settings ({e})") from None
    row = {"id": q, "settings": s, "defaulted": defaulted, "value": got, "expected": want}
    if got is None:
        return {**row, "verdict": "missing", "why": "no value given"}
    if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
        return {**row, "verdict": "wrong", "why": f"not a number: {got!r}"}
    if _same(q, got, want):
        return {**row, "verdict": "ok", "why": ""}
    for f, name, holds in alternatives:
        try:
            alt = f(s)
        except (RooflabError, KeyError, ValueError, ZeroDivisionError):
            continue
        if _same(q, got, alt):
            if name.endswith(("settings are", "settings say")):
                name += " " + ", ".join(f"{k}={s[k]}" for k in ("dtype", "bytes_per_elem",
                                                               "softmax_passes") if k in s)
            return {**row, "verdict": "convention" if holds else "wrong", "why": name}
    off = (got - want) / want if want else math.inf
    return {**row, "verdict": "wrong", "why": f"off by {off:+.1%}" if abs(off) < 10 else
            f"off by a factor of {got / want:.3g}" if want and got else "off"}


def check_answers(data: dict) -> dict:
    """Each answer's verdict, and whether all hold."""
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict):
        raise CheckError('an answers file is {"answers": {id: {settings..., "value": n}}}; '
                         "`rooflab check --template` writes one")
    rows = []
    for q, entry in answers.items():
        if q not in QUESTIONS:
            raise CheckError(f"unknown question id {q!r}; ids: {', '.join(QUESTIONS)}")
        if not isinstance(entry, dict):
            raise CheckError(f"{q}: expected an object of settings and a value, got {entry!r}")
        if "value" not in entry:
            raise CheckError(f"{q}: no \"value\" field (null for an answer not given yet)")
        rows.append(judge(q, entry["value"], **{k: v for k, v in entry.items() if k != "value"}))
    return {"rows": rows, "all_hold": all(r["verdict"] in ("ok", "convention") for r in rows)}


def _num(v) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:.6g}"


def message(row: dict, reveal: bool = False) -> str:
    """A verdict as one line; rooflab's value only when ``reveal``."""
    shown = f" (rooflab: {_num(row['expected'])})" if reveal else ""
    if row["verdict"] == "ok":
        return "correct" + shown
    if row["verdict"] == "convention":
        return f"holds under another convention: {row['why']}" + shown
    return row["why"] + shown


def check_one(qid: str, value, reveal: bool = False, **settings) -> tuple[bool, str]:
    """One answer, for a notebook cell: (holds, a line saying why)."""
    r = judge(qid, value, **settings)
    return r["verdict"] in ("ok", "convention"), message(r, reveal)
