"""Issue 'decoder layer': measured vs predicted for gemma-3-270m-it and a 7B-class layer, prefill
(B=8, L=2048) and decode (B=1, 16, 64; kv_len 4096), eager and in a CUDA graph."""
from __future__ import annotations

import sys

from rooflab import models as M
from rooflab.studies import layer_measure as LM
from rooflab.measure import ceilings as CE
from rooflab.measure import op_classes as OC

from common import write


def main(out_dir: str) -> None:
    ceil = CE.get("cuda")
    costs = OC.measure_op_costs("cuda")
    print("op costs:", costs)
    rows = []
    for name in ("gemma-3-270m-it", "Mistral-7B"):
        cfg = M.load(name)
        phases = [M.Phase.prefill(8, 2048)] + [M.Phase.decode(b, 4096) for b in (1, 16, 64)]
        for ph in phases:
            for graph in (False, True):
                r = LM.measure_layer(cfg, ph, "full", ceil, "cuda", graph=graph, costs=costs)
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
                              f"{(o['kernel_s'] or 0) * 1e6:7.1f} us")
    within = [abs(r["predicted_over_kernel"] - 1) <= 0.25 for r in rows]
    write(out_dir, "decoder", {"op_costs": costs.as_dict(), "ceilings": ceil.as_dict(), "rows": rows,
                               "within_25pct": sum(within), "total": len(rows)})


if __name__ == "__main__":
    main(sys.argv[1])
