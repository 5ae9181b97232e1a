"""Rich tables for the terminal. Views only: each function renders a dict it is given."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from rooflab import units
from rooflab.units import CV_UNSTABLE, secs, si

from rooflab.report.progress import Progress, _LogTicks, err, note  # noqa: F401 - the views' API

# a pipe or CI log gets a wide table instead of rich's 80-column default
out = Console(width=None if sys.stdout.isatty() else 160)


def table(title: str, columns: list[str], rows: list[list]) -> None:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right" if c not in (columns[0],) else "left")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    out.print(t)


UNSTABLE_NOTE = (f"±N%: an unstable timing, its robust CV shown (above {CV_UNSTABLE:.0%}): its "
                 "calls varied that much (another process, clocks, caches); compare it with "
                 "care, or run again")


def timed(r: dict, key: str = "device_s", cv: str = "cv", flag: str = "unstable") -> str:
    """A row's time in the unit that reads best, its CV after it when the timer flagged it."""
    return secs(r.get(key)) + (f" ±{r[cv]:.0%}" if r.get(flag) else "")


def noise_note(rows: list[dict], flag: str = "unstable") -> None:
    if any(r.get(flag) for r in rows):
        out.print(UNSTABLE_NOTE)


def _num(v, scale: float) -> str:
    """A datasheet figure in the table's unit (v / scale); '-' where the datasheet has none."""
    return "-" if not v else f"{v / scale:.4g}"


def specs(data: dict) -> None:
    dtypes = ["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]
    rows = []
    for g in data["gpus"]:
        mark = "* " if g["detected"] else ""
        peaks = [_num(g["peak_flops_per_s"].get(d), 1e12) for d in dtypes]
        rows.append([mark + g["name"], *peaks, _num(g["mem_bandwidth_bytes_per_s"], 1e9),
                     _num(g["mem_bytes"], 1e9), _num(g["l2_bytes"], 1 << 20),
                     g["sm_count"] or "-"])
    table("GPU datasheet table: dense peak TFLOP/s per dtype (* = detected)",
          ["gpu", *dtypes, "GB/s", "mem GB", "L2 MiB", "SMs"], rows)
    out.print(f"detected: {data['detected']}  (sources: `rooflab specs --json`)")


def cost(d: dict) -> None:
    table(d["name"], ["macs", "flops", "bytes", "intensity (FLOP/B)"],
          [[f"{d['macs']:,}", f"{d['flops']:,}", f"{d['bytes']:,}", f"{d['intensity']:.4g}"]])


def lab_summary(res: dict, out_dir: str) -> None:
    rows = []
    for n, title in res["meta"]["titles"].items():
        p = res["parts"].get(n)
        if p is None:
            continue
        head = (p.get("result") or {}).get("headline") or p.get("error") or p.get("reason", "")
        rows.append([f"{n}. {title}", p["status"], f"{p.get('time_s', 0):.1f} s", head])
    table(f"rooflab lab on {res['meta']['device_name']}", ["part", "status", "time", "headline"],
          rows)
    if res["meta"].get("unstable_note"):
        out.print(res["meta"]["unstable_note"])
    out.print(f"report: {out_dir}/index.html")


def gelu(d: dict) -> None:
    rows = [[r["variant"], timed(r), f"{r.get('kernels_per_call', 0):.0f}",
             si(r.get("bytes_predicted"), "B"), si(r.get("achieved_bandwidth_bytes_per_s"), "B/s"),
             f"{r['fraction_of_copy_bw']:.0%}" if r.get("fraction_of_copy_bw") else "-",
             f"{r['max_abs_err']:.2g}" if "max_abs_err" in r else r.get("error", "")]
            for r in d["rows"]]
    table(f"GeLU-tanh, {d['numel']:,} {d['dtype']} elements on {d['device']}",
          ["variant", "device time", "kernels", "bytes", "bandwidth", "of copy BW", "max err"],
          rows)
    noise_note(d["rows"])
    for s in d["skipped"]:
        out.print(f"{s['variant']}: {s['reason']}")
    out.print(d["explanation"])


def mlp(d: dict) -> None:
    rows = [[r["mode"], timed(r), secs(r.get("wall_s")), secs(r.get("kernel_s")),
             f"{r.get('kernels_per_call', 0):.0f}", secs(r.get("first_call_s")),
             r.get("error") or r.get("overhead_flag", "")] for r in d["rows"]]
    table(f"MLP {d['hidden']}->{d['intermediate']}, {d['tokens']} tokens, {d['dtype']}",
          ["mode", "device time", "wall time", "kernel time", "kernels", "first call", "note"],
          rows)
    noise_note(d["rows"])
    for n in d["notes"]:
        out.print(n)


def attention(d: dict) -> None:
    rows = [[r["impl"], r["seq"], r["status"], si(r.get("extra_peak_bytes"), "B"),
             timed(r), f"{r['tflops_per_s']:.3g}" if "tflops_per_s" in r else "-"]
            for r in d["rows"]]
    table(f"Attention B={d['batch']} H={d['heads']} D={d['head_dim']} {d['dtype']} "
          f"causal={d['causal']}", ["impl", "seq", "status", "extra memory", "device time",
                                    "TFLOP/s"],
          rows)
    noise_note(d["rows"])
    for k, why in d["skipped"].items():
        out.print(f"{k}: {why}")
    slopes = ", ".join(f"{k} {v:.2f}" for k, v in sorted(d["analysis"]["memory_slope"].items())
                       if v is not None)
    out.print(f"extra memory grows as N^slope (log-log fit): {slopes or '- (too few points)'}")


def decode_attention(d: dict) -> None:
    rows = [[r["impl"], r["kv_len"], r["status"], timed(r),
             si(r.get("bandwidth_bytes_per_s"), "B/s"),
             f"{r['fraction_of_copy_bw']:.0%}" if r.get("fraction_of_copy_bw") else "-"]
            for r in d["rows"]]
    table(f"Decode attention: B={d['batch']} H={d['heads']} Hkv={d['kv_heads']} "
          f"D={d['head_dim']} {d['dtype']}, one query per head",
          ["impl", "cached tokens", "status", "device time", "bandwidth", "of copy"], rows)
    noise_note(d["rows"])
    for k, why in d["skipped"].items():
        out.print(f"{k}: {why}")


def ceilings(d: dict) -> None:
    st = d.get("stability", {})
    mark = lambda k: ("stable" if st[k]["stable"] else "UNSTABLE") if k in st else "-"  # noqa: E731
    cv = lambda k: f"{st[k]['cv']:.1%}" if k in st else "-"  # noqa: E731
    size = lambda k: st[k]["size"] if k in st else "-"  # noqa: E731
    rows = [[f"matmul {dt}", si(v, "FLOP/s"), size(dt), cv(dt), mark(dt)]
            for dt, v in d["peak_flops_per_s"].items()]
    rows.append(["copy bandwidth", si(d["mem_bandwidth_bytes_per_s"], "B/s"), size("copy"),
                 cv("copy"), mark("copy")])
    cached = (" (cached, confirmed by a short probe; --refresh to re-measure)" if d.get("cached")
              else "")
    table(f"Measured ceilings: {d['device_name']} on {d['date']}{cached}",
          ["ceiling", "best sustained", "at size", "CV", "stability"], rows)
    if d.get("details", {}).get("remeasured"):
        out.print(f"Measured again: {d['details']['remeasured']}.")
    if not all(s["stable"] for s in st.values()):
        out.print("Some figures stayed unstable (another process is using this device?): they "
                  "are used for this run only and not cached.")


def _cost_rows(items: list[dict]) -> list[list]:
    return [[c["name"], f"{c['macs']:,}", f"{c['flops']:,}", f"{c['bytes']:,}",
             f"{c['bytes_fused']:,}", f"{c['intensity']:.3g}", c.get("bound", "-"),
             secs(c.get("time_floor_s"))] for c in items]


COST_COLUMNS = ["component", "MACs", "FLOPs", "bytes (eager)", "bytes (fused)", "FLOP/B",
                "bound", "time floor"]


def layer(d: dict) -> None:
    rows = _cost_rows(d["components"]) + _cost_rows(list(d["groups"].values()) + [d["total"]])
    where = f" on {d['roof']}" if d["roof"] else " (no roof: pass --gpu)"
    kv = f"kv={d['kv_len']}" + (f" ({d['precision']})" if d.get("precision") else "")
    if d.get("kv_attended", d["kv_len"]) != d["kv_len"]:
        kv += f" (attends {d['kv_attended']}: sliding window)"
    table(f"{d['model']} {d['layer_type']} layer, {d['phase']} B={d['batch']} "
          f"L={d['seq']} {kv} {d['dtype']}{where}", COST_COLUMNS, rows)
    out.print(f"KV cache: read {d['kv_cache_read_bytes']:,} B, written "
              f"{d['kv_cache_write_bytes']:,} B; causal attention MACs {d['causal']['macs']:,}")
    if d.get("latent_ways"):
        out.print(latent_sentence(d["latent_ways"]))
    _communication(d)


def latent_sentence(w: dict) -> str:
    """A latent attention's two ways at this phase, each way's MACs and bytes, and which way
    round the difference goes."""
    e, a = w["expand"], w["absorb"]

    def ratio(x: float, y: float, fewer: str, more: str) -> str:  # x: expand's, y: absorb's
        f = x / y if x >= y else y / x
        return f"{f:.{2 if f < 2 else 1 if f < 10 else 0}f}x {fewer if x >= y else more}"
    return (f"latent attention: as transformers runs it (the whole cache through kv_b_proj each "
            f"step) {e['macs']:,} MACs and {si(e['bytes'], 'B')}; with kv_b_proj absorbed into q "
            f"and o {a['macs']:,} MACs and {si(a['bytes'], 'B')}: absorbing moves "
            f"{ratio(e['bytes'], a['bytes'], 'fewer bytes', 'more bytes')} and does "
            f"{ratio(e['macs'], a['macs'], 'fewer MACs', 'more MACs')}")


def _communication(d: dict) -> None:
    c = d.get("communication") or {}
    if d.get("tp", 1) > 1:
        out.print(f"tensor parallel over {d['tp']} GPUs (figures above: one GPU's share): "
                  f"{c['all_reduces']} all-reduces of {c['message_bytes']:,} B, "
                  f"{c['all_reduce_bytes']:,} B per GPU"
                  + (f", and {c['all_gathers']} all-gather of the logits, {c['all_gather_bytes']:,} B"
                     if c.get("all_gathers") else "") + "; time floor "
                  f"{secs(c['predicted_s']) if c['predicted_s'] is not None else '- (no link figure: pass --gpu)'}"
                  + (f" ({c['link']})" if c["link"] else ""))


def model(d: dict) -> None:
    table(f"{d['model']}: {d['phase']} B={d['batch']} L={d['seq']} kv={d['kv_len']}"
          + (f" ({d['precision']})" if d.get("precision") else ""),
          COST_COLUMNS, _cost_rows(d["parts"] + [d["total"]]))
    out.print(f"parameters {d['params']:,}"
              + (f" ({d['active_params']:,} active a token)" if d.get("active_params") else "")
              + f"; KV cache {d['kv_cache_bytes']:,} B")
    if d.get("experts_at_decode"):
        out.print(experts_sentence(d["experts_at_decode"]))
    if d.get("replicated"):
        out.print("whole on every GPU: " + ", ".join(d["replicated"])
                  + ("; the embedding and lm_head split by vocabulary" if d.get("vocab_parallel")
                     else ""))
    _communication(d)


def experts_sentence(e: dict) -> str:
    """Where a mixture's experts at decode stop being bound by the weights they read."""
    rows = e["rows"]
    first, last = rows[0], rows[-1]
    head = (f"experts at decode, B={first['batch']}..{last['batch']}: "
            f"{first['experts_hit']:.1f} to {last['experts_hit']:.1f} experts a layer read, "
            f"{first['intensity']:.1f} to {last['intensity']:.1f} FLOP/B")
    if e["ridge"] is None:
        return head + " (pass --gpu for the roof)"
    if e["compute_bound_from_batch"] is None:
        return head + f"; memory-bound at every batch (ridge {e['ridge']:.0f} FLOP/B)"
    return head + (f"; compute-bound from B={e['compute_bound_from_batch']} "
                   f"(ridge {e['ridge']:.0f} FLOP/B)")


def experts_run_sentence(e: dict) -> str:
    """How a mixture's experts ran in a decode step and what they cost against the active
    floor, predicted."""
    over = e["predicted_s"] / e["active_floor_s"] if e["active_floor_s"] else None
    return (f"experts at decode: transformers ran them as {e['how']}, {e['kernels']} kernels a "
            f"step, {si(e['bytes'], 'B')} read, predicted {secs(e['predicted_s'])} against "
            f"{secs(e['active_floor_s'])} for the active experts' {si(e['active_bytes'], 'B')} at "
            f"the copy bandwidth" + (f" ({over:.1f}x the active floor)" if over else ""))


def routing_sentence(r: dict) -> str:
    """How evenly a prefill's router spread its rows over the experts, against a uniform
    router's draw of the same rows, and how the prediction timed its grouped GEMMs: as routed
    (``as_routed`` of them), else on that draw, from the figures beside it."""
    (lo, hi), ref = r["largest_over_mean"], r["reference_largest_over_mean"]
    spread = (f"the largest expert's share was {lo:.1f}-{hi:.1f}x the mean" if hi - lo >= 0.05
              else f"the largest expert's share was {hi:.1f}x the mean")
    if ref is None:  # a decode's few rows a group: priced on even groups, as a decode is
        return f"experts at prefill: {spread}; a few rows a group, priced as a decode's"
    more = hi > 1.1 * ref
    routed = r.get("as_routed", 0)
    return (f"experts at prefill: {spread}; {'more' if more else 'no more'} uneven than a "
            f"uniform router's draw ({ref:.1f}x)"
            + (f"; {routed} grouped GEMMs timed as routed" if routed else
               "; the grouped GEMMs timed on that draw"
               + (", and the difference is not priced" if more else "")))


def collectives(d: dict) -> None:
    rows = [[r["op"], si(r["message_bytes"], "B"), secs(r["time_s"]),
             si(r["algbw_bytes_per_s"], "B/s"), si(r["busbw_bytes_per_s"], "B/s")]
            for r in d["rows"]]
    table(f"{d['backend']} collectives, {d['world_size']} x {d['device_name']} ({d['dtype']})"
          + (" [cached]" if d.get("cached") else ""),
          ["op", "message", "time", "algorithm bw", "bus bw"], rows)
    for op in d["latency_floor_s"]:
        floor, peak = d["latency_floor_s"][op], d["peak_busbw_bytes_per_s"][op]
        out.print(f"{op}: latency floor {secs(floor) if floor else '-'}, peak bus bandwidth "
                  f"{si(peak, 'B/s') if peak else '-'}")


def analysis(d: dict) -> None:
    t = d["total"]
    rows = [[o["op"][:60], o["calls"], si(o["flops"], "FLOP"), si(o["bytes"], "B"),
             f"{o['intensity']:.3g}", o.get("bound") or "no formula", secs(o.get("floor_s")),
             secs(o["measured_s"]) if o.get("measured_s") else "-",
             f"{o['fraction_of_roof']:.0%}" if o.get("fraction_of_roof") else "-"]
            for o in d["ops"][:20]]
    table(f"{d['module']} on {d['device']} ({d['dtype']}): ops, most time lost first",
          ["op", "calls", "FLOPs", "bytes", "FLOP/B", "bound", "roof floor", "measured",
           "of roof"], rows)
    table("modules (roll-ups)", ["module", "type", "MACs", "FLOPs", "bytes", "measured"],
          [["  " * m["depth"] + m["module"], m["type"], f"{m['macs']:,}", si(m["flops"], "FLOP"),
            si(m["bytes"], "B"), secs(m["measured_s"]) if m.get("measured_s") else "-"]
           for m in d["modules"]])
    out.print(f"total {t['macs']:,} MACs, {t['flops']:,} FLOPs, {t['bytes']:,} bytes; roofline "
              f"floor {secs(t['floor_s'])}" + (f", measured {secs(t['measured_s'])}"
                                                if t.get("measured_s") else ""))
    for raised in d.get("roof_notes", []):
        out.print(f"The measured roof was raised for this run: {raised}.")
    above = [o for o in d["ops"] if o.get("above_roof")]
    for o in above[:5]:
        out.print(f"{o['op'][:60]} is above the roof: {o['above_roof']}.")
    if d.get("unsupported_ops"):
        share = t.get("no_formula_share")
        out.print("no FLOP formula, so not placed on the roof: " + ", ".join(d["unsupported_ops"])
                  + (f" ({share:.0%} of the measured time)" if share is not None else ""))
    if d.get("html"):
        out.print(f"page: {d['html']}")


def generation(d: dict) -> None:
    p, dec = d["prefill"], d["decode"]
    ratio = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
    rows = [["prefill (TTFT), eager", secs(p["wall_s"]), timed(p), secs(p["predicted_s"]),
             ratio(p["predicted_over_eager_device"]), ratio(p["roofline_over_eager_device"])]]
    if p.get("graph_device_s"):
        rows.append(["prefill (TTFT), CUDA graph", secs(p["graph_wall_s"]),
                     timed(p, "graph_device_s", "graph_cv", "graph_unstable"),
                     secs(p["predicted_s"]), ratio(p["predicted_over_graph_device"]),
                     ratio(p["roofline_over_graph_device"])])
    rows.append(["decode step, eager", secs(dec["eager_wall_s"]),
                 timed(dec, "eager_device_s", "eager_cv", "eager_unstable"),
                 secs(dec["predicted_s"]), ratio(dec["predicted_over_eager_device"]),
                 ratio(dec["roofline_over_eager_device"])])
    if dec.get("graph_device_s"):
        rows.append(["decode step, CUDA graph", secs(dec["graph_wall_s"]),
                     secs(dec["graph_device_s"]), secs(dec["predicted_s"]),
                     ratio(dec["predicted_over_graph_device"]),
                     ratio(dec["roofline_over_graph_device"])])
    table(f"{d['model']} generating on {d['device']}: B={d['batch']}, {d['seq']} prompt tokens, "
          f"{d['new_tokens']} new ({d['dtype']}, {d.get('attn', 'sdpa')} attention, lm_head at "
          f"prefill: {d['lm_head']})",
          ["call", "wall", "device", "predicted", "predicted/device", "roofline/device"], rows)
    if p.get("unstable") or p.get("graph_unstable") or dec.get("eager_unstable"):
        out.print(UNSTABLE_NOTE)
    out.print(f"kernel time (profiler): prefill {secs(p['kernel_s'])}, decode step "
              f"{secs(dec['kernel_s'])}; predicted/kernel {ratio(p['predicted_over_kernel'])} and "
              f"{ratio(dec['predicted_over_kernel'])}")
    for name, x in (("prefill", p), ("eager decode step", dec)):
        if x.get("host_bound"):
            graphed = " or the CUDA graph's" if x.get("graph_device_s") else ""
            out.print(f"{name}: bound by the host (kernels busy {x['kernel_busy_fraction']:.0%} "
                      f"of its device time); read the prediction against the kernel time"
                      + graphed)
    if d.get("attention_summary"):
        out.print("attention kernels, each kind timed on a reference shape of its kind: "
                  + d["attention_summary"])
    if d.get("experts"):
        out.print(experts_run_sentence(d["experts"]))
        if d["experts"].get("prefill_routing"):
            out.print(routing_sentence(d["experts"]["prefill_routing"]))
    ttft = secs(d["ttft_s"]) + (f" eager, {secs(d['ttft_graph_s'])} in a CUDA graph"
                                if d.get("ttft_graph_s") else "")
    out.print(f"TTFT {ttft}, TPOT {secs(d['tpot_s'])} (a loop of "
              f"{d['new_tokens']} steps), {d['tokens_per_s']:,.0f} tokens/s")
    for name, x in (("prefill", p), ("decode step", dec)):
        if x.get("graph_error"):
            out.print(f"CUDA graph of the {name}: not captured ({x['graph_error']})")
    m = d["memory_predicted"]
    line = (f"memory predicted {m['total_bytes'] / 2**30:.2f} GiB (weights "
            f"{m['weights_bytes'] / 2**30:.2f}, KV cache {m['kv_cache_bytes'] / 2**30:.2f}, "
            f"activations {m['activation_bytes'] / 2**30:.2f})")
    if d.get("memory_measured_peak_bytes"):
        line += (f"; measured peak {d['memory_measured_peak_bytes'] / 2**30:.2f} GiB "
                 f"(predicted/measured {d['memory_predicted_over_measured']:.2f})")
    out.print(line)
    if d.get("rests_on"):
        out.print(f"the prediction rests on: ceilings {d['rests_on']['ceilings']}; "
                  f"{d['rests_on']['op_costs']}")
    if d.get("attention_paths") is not None:
        out.print("rooflab's attention, calls by path: " + (", ".join(
            f"{k} {v}" for k, v in sorted(d["attention_paths"].items())) or "none"))


def sweep(d: dict) -> None:
    rows = [[r["n"], f"{r['intensity']:.4g}", si(r["attainable_flops_per_s"], "FLOP/s"),
             r["bound"], secs(r["time_floor_s"])] for r in d["rows"]]
    table(f"{d['family'].upper()} on {d['gpu']}, {d['dtype']}: ridge {d['ridge']:.4g} FLOP/B",
          ["n", "intensity (FLOP/B)", "attainable", "bound", "time floor"], rows)
    cn = d["crossover_n"]
    out.print(f"compute-bound from n = {cn}" if cn else "never compute-bound at any n")
    if d.get("plot"):
        out.print(f"plot: {d['plot']}")


def check(d: dict) -> None:
    num = lambda v: "-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.4g}"  # noqa: E731
    reveal = d.get("revealed")
    rows = [[r["id"], num(r["value"]), *([num(r["expected"])] if reveal else []), r["verdict"],
             r["message"] + (f" (lab settings used for {', '.join(r['defaulted'])})"
                             if r.get("defaulted") and r["verdict"] != "missing" else "")]
            for r in d["rows"]]
    table("Your answers against rooflab's", ["question", "yours",
                                             *(["rooflab"] if reveal else []), "verdict", "why"],
          rows)
    out.print(("all hold" if d["all_hold"] else "not all hold (exit code 1)") +
              ("" if reveal else "; --reveal shows rooflab's values"))


def _figure(name: str, v) -> str:
    """A compared figure in the unit its name states (the field after "id: ", or "(unit)")."""
    if v is None:
        return "-"
    field = name.split(": ", 1)[-1]
    shown = units.column(field, v)
    if shown is not None:
        return shown
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    unit = name[name.rfind("(") + 1:-1] if name.endswith(")") else ""
    return si(v, unit if unit in ("B/s", "FLOP/s") else "") + (
        f" {unit}" if unit and unit not in ("B/s", "FLOP/s") else "")


def compare(d: dict) -> None:
    changed = [r for r in d["rows"] if r.get("changed", True)]
    rows = [[r["figure"], _figure(r["figure"], r["a"]), _figure(r["figure"], r["b"]),
             "-" if r["b_over_a"] is None else f"{r['b_over_a']:.3g}x"] for r in changed]
    side = lambda k: f"{d[k]['device']}, --gpu {d[k]['gpu']} ({d[k]['date']})"  # noqa: E731
    same, within = len(d["rows"]) - len(changed), f"{d['changed_past']:.0%}"
    if not changed:
        out.print(f"A: {side('a')}  B: {side('b')}: all {same} figures agree within {within}.")
        return
    table(f"A: {side('a')}  B: {side('b')}: the figures that changed by more than {within}, most "
          "first", ["figure", "A", "B", "B / A"], rows)
    if same:
        out.print(f"{same} more figures agree within {within} (--json lists every one).")
