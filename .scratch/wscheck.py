import sys, os, re, subprocess, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon import language as gl
from triton.backends.nvidia.compiler import get_ptxas
from rooflab.kernels import flash_attention_sm90_ws as W
d = int(sys.argv[1]); extra = eval(sys.argv[2]) if len(sys.argv) > 2 else {}
cfg = {**W.config(d), **extra}
names = W.flash_fwd_sm90_ws.arg_names
opts = {"num_warps": cfg["num_warps"], "maxnreg": cfg.pop("maxnreg")}
consts = {"HEAD_DIM": d, "CAUSAL": cfg.pop("CAUSAL", False), **cfg}
sig = {n: "constexpr" if n in consts else "i32" for n in names}
for n, rows in (("q_desc", cfg["BLOCK_M"]), ("k_desc", cfg["BLOCK_N"]), ("v_desc", cfg["BLOCK_N"]), ("o_desc", cfg["BLOCK_M"])):
    sig[n] = f"tensordesc<fp16[{rows}, {d}],{gl.NVMMASharedLayout.get_default_for([rows, d], gl.float16)!r}>"
sig.update(LSE="*fp32", qk_scale="fp32")
src = GluonASTSource(fn=W.flash_fwd_sm90_ws, signature=sig, constexprs={(names.index(k),): v for k, v in consts.items()},
                     attrs={(names.index("LSE"),): [["tt.divisibility", 16]]})
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
p = os.environ.get("PTX_OUT") or tempfile.mktemp(suffix=".ptx"); open(p, "w").write(k.asm["ptx"])
out = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", p, "-o", p + ".cubin"], capture_output=True, text=True).stderr
print(d, extra, "regs", re.findall(r"Used (\d+) registers", out), "smem", k.metadata.shared, [l for l in out.splitlines() if "C75" in l or "spill" in l.lower()][:3])
