"""The five parts of the lab, one module each: its computation, its plots and tables, and its
questions answered from its own numbers. Each part is a function of a context returning plain
data (the numbers, plot specifications, answers keyed by question id, tables, and what was not
measured here and why) that the views draw."""
from rooflab.lab.parts import p1_metrics, p2_roofline, p3_layer, p4_fusion, p5_attention

PARTS = {n: (m.TITLE, m.run) for n, m in enumerate(
    (p1_metrics, p2_roofline, p3_layer, p4_fusion, p5_attention), start=1)}
