"""Part 2: the roofline: GEMM and GEMV sweeps, crossover n per GPU and dtype, measured matmuls."""
from __future__ import annotations

import torch

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import roofline as R
from rooflab.lab.answers import answer
from rooflab.lab.context import Context, pt, result, roof_spec, table
from rooflab.measure.achieved import hold
from rooflab.measure.achieved import measure_point
from rooflab.measure.dtypes import torch_dtype
from rooflab.roofline import ABOVE_ROOF_TOLERANCE as TOLERANCE
from rooflab.units import si

TITLE = "Roofline"


def crossover_table() -> list[dict]:
    rows = []
    for hw in H.PRESETS.values():
        for dt in ("fp32", "tf32", "bf16", "fp16", "fp8"):
            if dt in hw.peak_flops_per_s:
                roof = R.Roof.of(hw, dt)
                rows.append({"gpu": hw.name, "dtype": dt, "ridge": roof.ridge,
                             "gemm_crossover_n": R.crossover(
                                 roof, lambda n, dt=dt: C.gemm(n, n, n, dt))})
    return rows


def run(ctx: Context) -> dict:
    gpu_roof = R.Roof.of(ctx.lab_card, "fp32")  # the lab's card: --gpu, else its A6000
    sizes = [1024, 2048, 4096, 8192]
    gemm, gemv = R.sweep("gemm", gpu_roof, sizes), R.sweep("gemv", gpu_roof, sizes)
    mdt = ctx.measured_dtype
    m_roof = ctx.measured_roof(mdt)
    tdt = torch_dtype(mdt)
    m_sizes = [256, 512, 1024] if ctx.device == "cpu" else [512, 1024, 2048, 4096, 8192]
    if ctx.quick:
        m_sizes = m_sizes[:3]
    achieved = []
    tick = ctx.progress("part 2: measured GEMM/GEMV", 2 * len(m_sizes))
    for n in m_sizes:
        a = torch.randn(n, n, device=ctx.device, dtype=tdt)
        x = torch.randn(n, 1, device=ctx.device, dtype=tdt)
        for fam, c, args in (("GEMM", C.gemm(n, n, n, mdt), (a, a)), ("GEMV", C.gemv(n, n, mdt), (a, x))):
            p = measure_point(torch.matmul, c.named(f"{fam} n={n}"), m_roof, *args,
                              device=ctx.device, budget_s=0.1)
            achieved.append({"family": fam, "n": n, **p})
            tick()
    m_roof, achieved, roof_notes = hold(m_roof, achieved, ctx.cache_bytes)
    ctx.beaten(roof_notes)
    plots = [
        {"kind": "roofline", "name": "p2_gemm_gemv", "title": f"GEMM and GEMV, fp32, on "
         f"{ctx.lab_card.name} (datasheet)", "roofs": [roof_spec(gpu_roof)],
         "points": [pt(f"GEMM n={r.name[2:]}", r.intensity, r.attainable_flops_per_s,
                       group="GEMM", flops=r.flops, bytes=r.bytes, time_floor_s=r.time_floor_s)
                    for r in gemm.points] +
                   [pt(f"GEMV n={r.name[2:]}", r.intensity, r.attainable_flops_per_s,
                       group="GEMV", flops=r.flops, bytes=r.bytes, time_floor_s=r.time_floor_s)
                    for r in gemv.points]},
        {"kind": "roofline", "name": "p2_measured", "title": f"Measured matmuls on this "
         f"{ctx.device} ({ctx.ceilings.device_name}), {mdt}", "roofs": [roof_spec(m_roof)],
         "points": [pt(p["name"], p["intensity"], p["attainable_flops_per_s"], "predicted",
                       p["family"], flops=p["flops"], bytes=p["bytes"],
                       predicted_s=p["time_floor_s"]) for p in achieved] +
                   [pt(p["name"], p["intensity"], p["achieved_flops_per_s"], "measured",
                       p["family"], flops=p["flops"], bytes=p["bytes"],
                       predicted_s=p["time_floor_s"], measured_s=p["measured_s"],
                       **({"above_roof": p["above_roof"]} if "above_roof" in p else {}))
                    for p in achieved]},
    ]
    answers = questions(ctx.lab_card.name, gemm.as_dict(), gemv.as_dict(), achieved,
                        crossover_table(), roof_notes, ctx.gpu.name)
    return result(f"fp32 GEMM compute-bound from n = {gemm.crossover_n} on {ctx.lab_card.name}",
                  {"gemm": gemm.as_dict(), "gemv": gemv.as_dict(), "achieved": achieved,
                   "crossover_table": crossover_table(),
                   "measured_roof": roof_spec(m_roof)}, plots, answers,
                  tables=[table("p2_achieved", f"Measured on {ctx.ceilings.device_name}", achieved,
                                ["name", "flops", "bytes", "intensity", "measured_s",
                                 "time_floor_s", "achieved_flops_per_s",
                                 "achieved_bandwidth_bytes_per_s", "fraction_of_roof", "bound",
                                 "above_roof"]),
                          table("p2_crossover", "GEMM (M=N=K=n) turns compute-bound at n >= "
                                "crossover, per GPU and dtype (datasheet)", crossover_table(),
                                ["gpu", "dtype", "ridge", "gemm_crossover_n"])])


# --- its questions, answered from its numbers -----------------------------------------------
def questions(gpu: str, gemm: dict, gemv: dict, achieved: list[dict], table: list[dict],
              roof_notes: list[str], here: str | None = None) -> dict:
    """``gpu``: the lab's card (its questions' answers); ``here``: the card rooflab detected or
    was given, whose crossovers are added beside where it differs."""
    best = max((p for p in achieved if p["family"] == "GEMM"), key=lambda p: p["n"])
    gv = max((p for p in achieved if p["family"] == "GEMV"), key=lambda p: p["n"])
    fp32 = [r for r in table if r["dtype"] == "fp32"]
    low = min(fp32, key=lambda r: r["ridge"])
    gemv_i = gemv["rows"][-1]["intensity"]
    everywhere = gemv_i < low["ridge"]
    frac = best["fraction_of_roof"]
    measured = (f" Measured here: GEMM n = {best['n']} reached "
                f"{si(best['achieved_flops_per_s'], 'FLOP/s')}, " + (
                    f"{frac:.0%} of the measured roof at its intensity." if frac <= 1 else
                    f"at the measured roof ({frac:.0%}: within the {TOLERANCE:.0%} that separate "
                    "two runs of the same matmul, so the roof stands)."))
    rows = gemm["rows"]
    points = "; ".join(f"N = {r['n']:,}: {r['intensity']:.0f} FLOP/byte, {r['bound']}-bound, "
                       f"{si(r['attainable_flops_per_s'], 'FLOP/s')} attainable" for r in rows)
    beside = [r for r in table if r["gpu"] == here and here != gpu]
    other = (" On this run's own card, " + here + ": " + ", ".join(
        f"{r['dtype']} ridge {r['ridge']:.1f}, n >= {r['gemm_crossover_n']}" for r in beside)
        + "." if beside else "")
    return {
        "2.1.1": answer(
            f"GEMM (M = N = K = n, fp32) on {gpu}'s datasheet roof (ridge {gemm['ridge']:.1f} "
            f"FLOP/byte): {points}." + measured + "".join(
                f" The measured roof was raised for this run: {n}." for n in roof_notes),
            gpu=gpu, ridge=gemm["ridge"],
            intensities={r["n"]: r["intensity"] for r in rows},
            measured_gemm_flops_per_s=best["achieved_flops_per_s"],
            fraction_of_roof=best["fraction_of_roof"]),
        "2.1.2": answer(
            f"On {gpu} in fp32 the ridge is {gemm['ridge']:.1f} FLOP/byte; GEMM with M = N = K = "
            f"n does 2n^3 FLOPs over 12n^2 bytes, intensity n/6, so it turns compute-bound once "
            f"n/6 >= {gemm['ridge']:.1f}: n >= {gemm['crossover_n']}." + other,
            gpu=gpu, ridge=gemm["ridge"], crossover_n=gemm["crossover_n"]),
        "2.2": answer(
            f"GEMV's intensity stays near {gemv_i:.2f} FLOP/byte at every size (each weight is "
            "read once and used once), " + (
                f"below the lowest fp32 ridge in the table ({low['ridge']:.1f} on {low['gpu']}): "
                "memory-bound on every GPU listed, and it never crosses." if everywhere else
                f"above the lowest fp32 ridge in the table ({low['ridge']:.1f} on {low['gpu']}).")
            + " Decode, one token at a time, is a GEMV. Measured here: GEMV n = "
            f"{gv['n']} moved {si(gv['achieved_bandwidth_bytes_per_s'], 'B/s')} "
            f"({gv['fraction_of_roof']:.0%} of the roof)" + (
                f": above the roof because {gv['above_roof']}." if gv.get("above_roof") else "."),
            gemv_intensity=gemv_i, lowest_fp32_ridge=low["ridge"], lowest_ridge_gpu=low["gpu"],
            measured_gemv_bandwidth_bytes_per_s=gv["achieved_bandwidth_bytes_per_s"]),
    }
