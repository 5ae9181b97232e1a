"""The parts of the lab, one module each: its computation, its plots and tables, and its
questions answered from its own numbers. Each part is a function of a context returning plain
data (the numbers, plot specifications, answers keyed by question id, tables, and what was not
measured here and why) that the views draw."""
from rooflab.lab.parts import (p1_metrics, p2_roofline, p3_layer, p4_fusion, p5_attention,
                               p6_parallel)

MODULES = (p1_metrics, p2_roofline, p3_layer, p4_fusion, p5_attention, p6_parallel)
PARTS = {n: (m.TITLE, m.run) for n, m in enumerate(MODULES, start=1)}
# a part that needs what this machine may lack (two GPUs) says why it will not run, or None
NEEDS = {n: m.needs for n, m in enumerate(MODULES, start=1) if hasattr(m, "needs")}
QUESTIONS = {n: m.QUESTIONS for n, m in enumerate(MODULES, start=1) if hasattr(m, "QUESTIONS")}
