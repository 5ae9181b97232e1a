"""What each FlashAttention tile config asks of a Hopper SM, with no GPU: registers a thread,
spills, shared memory, and so how many programs fit an SM (the kernel compiled by the installed
Triton for sm_90, its cubin read by cuobjdump). The A/Bs measure speed; this says why a config
can or cannot overlap more programs (an SM's limits: fits()).
With --gluon, the Gluon kernel of flash_attention_sm90.py instead (variants merged over its
config), and whether ptxas serialized its tensor-core ops (warnings C7510-C7519: every wgmma
then waits for the one before it, which undoes the kernel's overlap); --gluon-ws the
warp-specialized one of flash_attention_sm90_ws.py; --decode flash-decoding's split kernel
(flash_decoding.py; its launcher's flags, BLOCK_M rows of a KV head's queries, WHOLE,
ACROSS, LAST_MERGES and PDL, as variants over 16 rows and cut heads merged apart, PDL on). Triton
versions compile the same source
differently: to see what a GPU host's Triton makes of it, install that version apart
(pip install --no-deps --target DIR triton==X.Y.Z) and run this under PYTHONPATH=DIR:.
(the JSON records the version). --before REV compiles the kernel file as it was at git revision
REV too, with the same config, and counts its SASS against the tree's: a source change that
moves what the compiler makes (registers, instructions, a TMA barrier split in two) shows here
before any GPU run; timing it is ab_flash.py's.
Usage: python benchmarks/flash_resources.py OUT_DIR [--head-dims 64,128,256] [--causal [--window]]
           [--qk-extra N] [--keep] [--sinks] [--softcap] [--gluon | --gluon-ws | --decode]
           [--variant NAME=JSON ...] [--before REV]   (JSON merged over the config, as in
           ab_flash.py; --window: the Triton kernel with a sliding window; --qk-extra: q and k
           N dims wider than v, as latent attention's 64 rotary dims; --keep: with kept keys, a
           padded batch's; --sinks: with attention sinks; --softcap: with softcapped scores)
"""
from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from rooflab.kernels import flash_attention as FA
from rooflab.kernels import flash_decoding as FD
from rooflab.kernels import flash_attention_sm90 as F9
from rooflab.kernels import flash_attention_sm90_ws as F9W
from rooflab.kernels.inputs import HEAD_DIMS

from common import module_before, variants as parse_variants, write

KERNELS = {"triton": "rooflab/kernels/flash_attention.py",  # each kind's file, for --before
           "gluon": "rooflab/kernels/flash_attention_sm90.py",
           "gluon_ws": "rooflab/kernels/flash_attention_sm90_ws.py",
           "decode": "rooflab/kernels/flash_decoding.py"}

def known(consts: dict, names: list) -> dict:
    """The constants a kernel takes (``names``, its arguments): a flag it does not have (a kernel
    from an earlier revision) is dropped where off, and refused where on."""
    on = [k for k, v in consts.items() if k not in names and v]
    if on:
        raise ValueError(f"this kernel has no {', '.join(on)}")
    return {k: v for k, v in consts.items() if k in names}


def compiled(head_dim: int, causal: bool, cfg: dict, local: bool = False, qk_extra: int = 0,
             keep: bool = False, sinks: bool = False, softcap: bool = False, module=FA):
    """flash_fwd compiled for sm_90 (fp16 q, k, v; whole blocks) under ``cfg``; ``local``: with
    a sliding window, ``keep``: with kept keys (as flash_attention runs them: no fixed max);
    ``qk_extra``: q and k that much wider than v (by addresses, as flash_attention runs it);
    ``sinks``, ``softcap``: with attention sinks, with softcapped scores; ``module``: the
    kernel's module, if not the tree's (its arguments as it names them)."""
    # Hopper, aligned tensors: TMA where the kernel takes it
    bm, bn, flags, options = module.resolved(cfg, tma_possible=not qk_extra)
    if local or keep:
        flags["FIXED_MAX"] = False
    consts = {"HEAD_DIM": head_dim, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal,
              "EVEN_N": True, "UPCAST": False, "LOCAL": local, "QK_EXTRA": qk_extra,
              "HAS_KEEP": keep, "HAS_SINK": sinks, "SOFTCAP": softcap, **flags}
    tma = flags["TMA"]
    names = module.flash_fwd.arg_names
    consts = known(consts, names)
    sig = {n: "constexpr" if n in consts else "i32" for n in names}
    for n, rows in (("Q", bm), ("K", bn), ("V", bn), ("O", bm)):
        sig[n] = f"tensordesc<fp16[1, 1, {rows}, {head_dim}]>" if tma else "*fp16"
    sig.update({n: t for n, t in (("LSE", "*fp32"), ("KEEP", "*u8"), ("SINKS", "*fp32"),
                                  ("sm_scale", "fp32"), ("softcap", "fp32")) if n in names})
    aligned = [n for n in names if sig[n] in ("*fp16", "*fp32")  # pointers and strides
               or (sig[n] == "i32" and n.startswith("s"))]  # (s..): multiples of 16
    src = ASTSource(fn=module.flash_fwd, signature=sig,
                    constexprs={(names.index(k),): v for k, v in consts.items()},
                    attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compiled_gluon(head_dim: int, causal: bool, cfg: dict, ws: bool = False, qk_extra: int = 0,
                   module=None):
    """flash_fwd_sm90 (or, ``ws``, flash_fwd_sm90_ws) compiled for sm_90 (fp16) under ``cfg``
    (its config's keys); ``qk_extra``: q and k that much wider than v (``ws`` only);
    ``module``: the kernel's module, if not the tree's."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    module = module or (F9W if ws else F9)
    fn = module.flash_fwd_sm90_ws if ws else module.flash_fwd_sm90
    c = dict(cfg)
    options = {"num_warps": c["num_warps"], **({"maxnreg": c.pop("maxnreg")} if "maxnreg" in c
                                               else {})}
    consts = {"HEAD_DIM": head_dim, "CAUSAL": causal, **c}  # num_warps is a kernel argument too
    names = fn.arg_names
    if ws:
        consts["QK_EXTRA"] = qk_extra
    consts = known(consts, names)
    sig = {n: "constexpr" if n in consts else "i32" for n in names}
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    for n, rows, d in (("q_desc", bm, head_dim), ("k_desc", bn, head_dim), ("v_desc", bn, head_dim),
                       ("o_desc", bm, head_dim), ("q2_desc", bm, qk_extra or head_dim),
                       ("k2_desc", bn, qk_extra or head_dim)):
        if n not in names:
            continue
        layout = gl.NVMMASharedLayout.get_default_for([rows, d], gl.float16)
        sig[n] = f"tensordesc<fp16[{rows}, {d}],{layout!r}>"
    sig.update(LSE="*fp32", qk_scale="fp32", **({"O": "*fp16"} if "O" in names else {}))
    pointers = [n for n in ("O", "LSE") if n in names]
    src = GluonASTSource(fn=fn, signature=sig,
                         constexprs={(names.index(k),): v for k, v in consts.items()},
                         attrs={(names.index(n),): [["tt.divisibility", 16]] for n in pointers})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compiled_decode(head_dim: int, causal: bool, cfg: dict, qk_extra: int = 0,
                    keep: bool = False, sinks: bool = False, softcap: bool = False, module=FD):
    """flash-decoding's split_kv_fwd compiled for sm_90 (bf16) under ``cfg``: FD.config's keys
    and the launcher's flags (BLOCK_M, WHOLE, ACROSS, LAST_MERGES, PDL); ``qk_extra``, ``keep``,
    ``sinks``, ``softcap`` as in compiled(); ``module``: the kernel's, if not the tree's."""
    c = {"BLOCK_M": 16, "WHOLE": False, "ACROSS": False, "LAST_MERGES": False, "PDL": True,
         **cfg}
    options = {k: c.pop(k) for k in ("num_warps", "num_stages") if k in c}
    tma = c.pop("TMA", True) and not qk_extra  # as the launcher: extra dims by address
    names = module.split_kv_fwd.arg_names
    consts = known({"HEAD_DIM": head_dim, "CAUSAL": causal, "UPCAST": False, "TMA": tma,
                    "HAS_KEEP": keep, "QK_EXTRA": qk_extra, "HAS_SINK": sinks,
                    "SOFTCAP": softcap, **c}, names)
    sig = {n: "constexpr" if n in consts else "i32" for n in names}
    kv = f"tensordesc<bf16[1, 1, {c['BLOCK_N']}, {head_dim}]>" if tma else "*bf16"
    part = "*bf16" if c["WHOLE"] else "*fp32"  # a whole head's partial is its answer
    sig.update({n: t for n, t in (
        ("Q", "*bf16"), ("K", kv), ("V", kv), ("KEEP", "*u8" if keep else "*bf16"),
        ("SINKS", "*fp32"), ("O_PART", part), ("LSE_PART", "*fp32"), ("O", "*bf16"),
        ("LSE", "*fp32"), ("ARRIVED", "*i32" if c["LAST_MERGES"] else "*fp32"),
        ("qk_scale", "fp32"), ("softcap", "fp32")) if n in names})
    aligned = [n for n in names if sig[n].startswith("*")
               or (sig[n] == "i32" and n.startswith("s"))]  # pointers and strides
    src = ASTSource(fn=module.split_kv_fwd, signature=sig,
                    constexprs={(names.index(k),): v for k, v in consts.items()},
                    attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def serialized(kernel) -> list[str]:
    """ptxas's warnings that it serialized the kernel's wgmma ops (its PTX assembled again)."""
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "k.ptx"), "w") as f:
        f.write(kernel.asm["ptx"])
    from triton.backends.nvidia.compiler import get_ptxas  # the one Triton itself runs
    err = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v",
                          os.path.join(d, "k.ptx"), "-o", os.path.join(d, "k.cubin")],
                         capture_output=True, text=True, check=True).stderr
    return [line.split("info    : ")[-1] for line in err.splitlines() if "(C751" in line]


def fits(regs: int, smem: int, warps: int) -> dict:
    """Programs of a kernel (``regs`` registers a thread, ``smem`` bytes of shared memory,
    ``warps`` warps) that an sm_90 SM holds at once, by each of its limits: 65,536 registers (a
    warp's taken in steps of 8 a thread), 228 KB of shared memory (1 KB reserved a program), 64
    warps."""
    return {"registers": 65536 // (-(-regs // 8) * 8 * 32 * warps),
            "shared_memory": (228 << 10) // (smem + 1024), "warps": 64 // warps}


def resources(kernel, num_warps: int) -> dict:
    """Registers, spills and shared memory from the cubin; programs an SM by each limit."""
    path = os.path.join(tempfile.mkdtemp(), "flash_fwd.cubin")
    with open(path, "wb") as f:
        f.write(kernel.asm["cubin"])
    out = subprocess.run([triton.knobs.nvidia.cuobjdump.path, "-res-usage", path],
                         capture_output=True, text=True, check=True).stdout
    use = {k: int(v) for k, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", out)}
    smem = kernel.metadata.shared
    by = fits(use["REG"], smem, num_warps)
    return {"registers_per_thread": use["REG"], "spill_bytes": use.get("LOCAL", 0),
            "stack_bytes": use.get("STACK", 0), "shared_bytes": smem, "programs_per_sm_by": by,
            "programs_per_sm": min(by.values()), "limited_by": min(by, key=by.get)}


def sass(kernel) -> collections.Counter:
    """The kernel's SASS instructions, counted by opcode (predicates and operands dropped)."""
    path = os.path.join(tempfile.mkdtemp(), "flash_fwd.cubin")
    with open(path, "wb") as f:
        f.write(kernel.asm["cubin"])
    out = subprocess.run([triton.knobs.nvidia.cuobjdump.path, "-sass", path],
                         capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", out, re.M)
    return collections.Counter(ops)


def against(kernel, build, num_warps: int) -> dict:
    """The tree's kernel against the one ``build()`` compiles (the same config at another
    revision): registers and SASS instructions of each, and how many instructions one has that
    the other has not (by opcode; 0: the same instructions, at most in another order)."""
    now = sass(kernel)
    try:
        before = build()
    except Exception as e:  # noqa: BLE001 - its arguments may not be this config's
        return {"sass_instructions": sum(now.values()),
                "before": {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}"}}
    was = sass(before)
    return {"sass_instructions": sum(now.values()),
            "before": {"registers_per_thread": resources(before, num_warps)[
                "registers_per_thread"], "sass_instructions": sum(was.values())},
            "instructions_not_in_both": sum(((now - was) + (was - now)).values())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--head-dims", default="64,128,256")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--window", action="store_true")
    p.add_argument("--qk-extra", type=int, default=0)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--sinks", action="store_true")
    p.add_argument("--softcap", action="store_true")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--gluon", action="store_true")
    kind.add_argument("--gluon-ws", action="store_true")
    kind.add_argument("--decode", action="store_true")
    p.add_argument("--variant", action="append", default=[], help="NAME=JSON")
    p.add_argument("--before", metavar="REV")
    a = p.parse_args(argv)
    variants = parse_variants(p, a.variant)
    try:
        dims = [int(d) for d in a.head_dims.split(",")]
    except ValueError as e:  # argparse: one line, exit 2
        p.error(f"--head-dims takes integers separated by commas ({e})")
    if FA.INTERPRET:
        p.error("unset TRITON_INTERPRET: this compiles the kernel for a GPU")
    gluon = a.gluon or a.gluon_ws
    if a.window and (gluon or a.decode or not a.causal):
        p.error("--window takes --causal and the Triton kernel (no --gluon, --decode)")
    if (a.keep or a.sinks or a.softcap) and gluon:
        p.error("--keep, --sinks and --softcap take the Triton kernel (no --gluon)")
    if a.qk_extra and (a.gluon or a.qk_extra not in HEAD_DIMS):
        p.error(f"--qk-extra takes one of {HEAD_DIMS} and the Triton kernel or --gluon-ws")
    if gluon and F9.GLUON_MISSING:
        p.error(F9.GLUON_MISSING)
    kind = "gluon_ws" if a.gluon_ws else "gluon" if a.gluon else "decode" if a.decode else \
        "triton"
    before = module_before(p, a.before, KERNELS[kind])
    rows = []
    for d in dims:
        for name, over in {"default": {}, **variants}.items():
            base = (F9W.config(d + a.qk_extra, a.causal, v_dim=d) if a.gluon_ws
                    else F9.config(d) if a.gluon else FD.config(d) if a.decode
                    else FA.config(d, a.causal))
            cfg = {**base, **over}
            r = {"head_dim": d, "causal": a.causal, "window": a.window,
                 "qk_extra": a.qk_extra, "keep": a.keep, "sinks": a.sinks,
                 "softcap": a.softcap, "name": name, "config": cfg}
            build = (functools.partial(compiled_gluon, d, a.causal, cfg, a.gluon_ws,
                                       a.qk_extra) if gluon else
                     functools.partial(compiled_decode, d, a.causal, cfg, a.qk_extra, a.keep,
                                       a.sinks, a.softcap) if a.decode else
                     functools.partial(compiled, d, a.causal, cfg, a.window, a.qk_extra,
                                       a.keep, a.sinks, a.softcap))
            # the warp-specialized program: two consumer warpgroups and a producer warp,
            # which holds a warpgroup's registers (setmaxnreg works by warpgroup)
            warps = 12 if a.gluon_ws else cfg["num_warps"]
            try:
                kernel = build()
                r.update(resources(kernel, warps))
                if gluon:
                    r["serialized"] = serialized(kernel)
                if before is not None:
                    r.update(against(kernel, functools.partial(build, module=before), warps))
            except Exception as e:  # noqa: BLE001 - a config that does not compile is a result
                r["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}"
            rows.append(r)
            print(d, name, {k: r.get(k) for k in ("registers_per_thread", "spill_bytes",
                                                  "shared_bytes", "programs_per_sm",
                                                  "limited_by", "serialized", "before",
                                                  "instructions_not_in_both", "error")
                                  if k in r}, flush=True)
    write(a.out_dir, f"flash_resources_{kind}" if kind != "triton" else "flash_resources",
          {"target": "cuda sm_90", "triton": triton.__version__, "before": a.before,
           "rows": rows, "note": __doc__})


if __name__ == "__main__":
    sys.exit(main())
