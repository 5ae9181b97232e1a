"""compile a kernel-file variant for sm_90 with Triton 3.6 and report ptxas C7514 warnings"""
import importlib.util, subprocess, sys, tempfile, os, re
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon import language as gl
path, d, extra = sys.argv[1], int(sys.argv[2]), eval(sys.argv[3]) if len(sys.argv) > 3 else {}
spec = importlib.util.spec_from_file_location("varmod", path); G = importlib.util.module_from_spec(spec); spec.loader.exec_module(G)
cfg = {**G.config(d), **extra}
bm, bn, nw = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"]
names = G.flash_fwd_sm90.arg_names
consts = {k: v for k, v in cfg.items() if k in names or k == "num_warps"}
consts.update(HEAD_DIM=d, CAUSAL=cfg.get("CAUSAL", False))
consts = {k: v for k, v in consts.items() if k in names}
sig = {n: "constexpr" if n in consts else "i32" for n in names}
for n, rows in (("q_desc", bm), ("k_desc", bn), ("v_desc", bn), ("o_desc", bm)):
    if n in sig:
        sig[n] = f"tensordesc<fp16[{rows}, {d}],{gl.NVMMASharedLayout.get_default_for([rows, d], gl.float16)!r}>"
for n in names:
    if n in ("LSE", "Q", "O"): sig[n] = "*fp32" if n == "LSE" else "*fp16"
    if n == "qk_scale": sig[n] = "fp32"
src = GluonASTSource(fn=G.flash_fwd_sm90, signature=sig, constexprs={(names.index(k),): v for k, v in consts.items()},
                     attrs={(names.index(n),): [["tt.divisibility", 16]] for n in names if sig[n].startswith("*")})
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw, **({"maxnreg": cfg["maxnreg"]} if "maxnreg" in cfg else {})})
p = os.environ.get("PTX_OUT") or tempfile.mktemp(suffix=".ptx"); open(p, "w").write(k.asm["ptx"])
out = subprocess.run([triton.knobs.nvidia.ptxas.path, "-arch=sm_90a", "-v", p, "-o", p + ".cubin"], capture_output=True, text=True).stderr
warn = [l for l in out.splitlines() if "C75" in l]
regs = re.findall(r"Used (\d+) registers", out)
print(d, extra, "regs", regs, "smem", k.metadata.shared, "SERIALIZED" if warn else "ok", warn[:1])
