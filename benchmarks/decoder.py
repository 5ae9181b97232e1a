"""A decoder layer measured against its prediction: gemma-3-270m-it and a 7B-class layer, prefill
(B=8, L=2048) and decode (B=1, 16, 64; kv_len 4096), eager and in a CUDA graph. With --heldout,
the configs of tests/data/heldout/ (never tuned on), every layer type, at prefill B=4 x 1024 and
B=1 x 4096 and decode B=1 (cache 8192), 8 (2048), 32 (1024) and 64 (512), written apart
(decoder_heldout).
With --moe, one layer of each mixture of experts (Qwen3-30B-A3B, DeepSeek-V2-Lite with its
latent attention, Mixtral-8x7B, gpt-oss-20b with its biased experts and sinks, MOE_MODELS
narrows them) at prefill B=1 x 1024 and decode B=1 and 8 (cache 1024), its experts one grouped
GEMM as the whole model runs them (decoder_moe).

Usage: python benchmarks/decoder.py OUT_DIR [--heldout | --moe]"""
from __future__ import annotations

import glob
import os
import sys

from rooflab import models as M
from rooflab.studies import layer_measure as LM
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC

from common import write


HELDOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                       "heldout")


def cases(heldout: bool, moe: bool = False):
    """(config, layer type, phases) of the presets, of every held-out config, or of the
    mixtures of experts."""
    if moe:
        phases = [M.Phase.prefill(1, 1024), M.Phase.decode(1, 1024), M.Phase.decode(8, 1024)]
        names = os.environ.get("MOE_MODELS",
                               "Qwen3-30B-A3B,DeepSeek-V2-Lite,Mixtral-8x7B,gpt-oss-20b")
        return [(M.load(n), "full", phases) for n in names.split(",")]
    if not heldout:
        phases = [M.Phase.prefill(8, 2048)] + [M.Phase.decode(b, 4096) for b in (1, 16, 64)]
        return [(M.load(n), "full", phases) for n in ("gemma-3-270m-it", "Mistral-7B")]
    phases = [M.Phase.prefill(4, 1024), M.Phase.prefill(1, 4096), M.Phase.decode(1, 8192),
              M.Phase.decode(8, 2048), M.Phase.decode(32, 1024), M.Phase.decode(64, 512)]
    return [(cfg, lt, phases) for cfg in map(M.load, sorted(glob.glob(f"{HELDOUT}/*.json")))
            for lt in sorted(set(cfg.layer_types))]


def main(out_dir: str, heldout: bool = False, moe: bool = False) -> None:
    ceil = CE.get("cuda")
    costs = OC.measure_op_costs("cuda")
    print("op costs:", costs)
    rows = []
    for cfg, lt, phases in cases(heldout, moe):
        name = f"{cfg.name} {lt}" if heldout else cfg.name
        for ph in phases:
            for graph in (False, True):
                r = LM.measure_layer(cfg, ph, lt, ceil, "cuda", graph=graph, costs=costs)
                r["heldout"] = heldout
                rows.append(r)
                print(f"{name:16s} {ph.kind:7s} B={ph.batch:<3d} {r['mode']:10s} "
                      f"wall {r['wall_s'] * 1e6:8.1f} us  kernel {r['kernel_s'] * 1e6:8.1f} us  "
                      f"pred {r['predicted_s'] * 1e6:8.1f} us  pred/kernel "
                      f"{r['predicted_over_kernel']:.2f}  (plain roofline "
                      f"{r['roofline_s'] / r['kernel_s']:.2f})")
                if not graph:  # per op and shapes: the model checked below the components
                    for o in r["ops"][:6]:
                        print(f"    {o['op'][:60]:60s} {o['class']:11s} pred "
                              f"{o['predicted_s'] * 1e6:7.1f} us  kernel "
                              f"{(o['kernel_s'] or 0) * 1e6:7.1f} us  calls {o['calls']} "
                              f"launches {o['launches']}")
    within = [abs(r["predicted_over_kernel"] - 1) <= 0.25 for r in rows]
    within10 = [abs(r["predicted_over_kernel"] - 1) <= 0.10 for r in rows]
    write(out_dir, "decoder_heldout" if heldout else "decoder_moe" if moe else "decoder",
          {"op_costs": costs.as_dict(), "ceilings": ceil.as_dict(), "rows": rows,
           "within_25pct": sum(within), "within_10pct": sum(within10), "total": len(rows)})


if __name__ == "__main__":
    main(sys.argv[1], "--heldout" in sys.argv[2:], "--moe" in sys.argv[2:])
