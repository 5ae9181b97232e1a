#!/usr/bin/env bash
# GPU tests + benchmarks in one go, into OUT/current/ (packed as OUT/current.tar.gz), with a
# manifest-PARTS.json of each part's command, exit code and time; unpacked into
# benchmarks/results/current/ by benchmarks/ingest.py (each name marked with the device; an A/B
# part's files into results/ab/) and indexed by benchmarks/index.py. On a remote GPU, whose
# copy's .git can be older than its files, pass the commit from here:
# ROOFLAB_COMMIT=<git rev-parse --short HEAD run locally>.
# PART_TIMEOUT=SECONDS stops a part that runs longer (exit code 124 in the manifest).
# Usage: scripts/gpu_check.sh OUT [parts]   (no parts: a full run, the tests and every benchmark;
# far longer than one device call's 10 minutes, so a remote run names a few parts a call)
#   parts: any of
#     tests, kernel_tests, other_tests, gpu_tests  the GPU tests: all; the kernels' alone (they
#          outlast one device call: give them TESTS_WORKERS); the rest; the rest that use the GPU
#          (marked gpu or on_device)
#     measure, timer, fusion, kernels, l2, gelu_any (GeLU at lengths near no power of two)
#     generate (three models generating; generate_gemma and generate_8b split it, GEN_SHAPES
#          narrows them; all three take about 7 min), generate_heldout (configs never tuned on,
#          HELDOUT_SHAPES), generate_moe (three mixtures of experts; MOE_MODELS, MOE_SHAPES;
#          generate_mixtral: the largest alone), generate_attn (models under SDPA and under
#          rooflab's kernels, the same weights; ATTN_MODELS, ATTN_SHAPES)
#     decoder, decoder_heldout, decoder_moe (one layer predicted against profiled: the lab's
#          configs, those never tuned on, the mixtures with MLA), decode_ops (a decode's small
#          ops one by one against their prediction, with their launches), decode_attn
#     diagnose (a model's step op by op; DIAGNOSE="MODEL BxL prefill|decode [sdpa|rooflab]"),
#          grouped_routing (a prefill's grouped GEMMs under uneven routings, against even),
#          attn_agree (rooflab's attention call by call inside a model against fp32;
#          AGREE_MODELS, AGREE_SHAPE)
#     attn_classes (rooflab's kernels on every class of input, beside SDPA), attn_drawn (the
#          same on shapes drawn across the classes; DRAWN=N,SEED, default 32,1), attn_paths
#          (the rows of sweeps, PATHS_OF, below 0.97x their peer on each path), attn_tiles,
#          attn_ratios, attn_sweep, spread (a prefill and three decode rows of the class sweep
#          near or below cuDNN, each repeated in one run: how far a ratio to it moves)
#     ncu (Nsight Compute on benchmarks/ncu_targets.py's kernels; NCU_TARGETS)
#     ab_before (BEFORE=REV: the Triton FlashAttention kernel and flash-decoding against their
#          files at REV), ab_decode_four_rule (its H100 rows, owed on an H200), ab_decode_p1
#          (head dim 64: one program an SM, more stages; run on an H100, owed on an H200),
#          ab_ws_ragged256_short (head dim 256, ragged, under 1,024 queries on a wave of tiles
#          whose last is more than half full: Gluon or Triton)
#     lab, notebook (over 5 min: the triple loop's 60 s budget), notebook_quick (its small
#          sizes), notebook_solutions, notebook_t4; on two or more GPUs: collectives, lab6
# A kernel experiment's A/B is a part here until it has run; then it leaves (its rows and
# figures are in the kernel's decision log, docs/kernels/): ab_short, ab_latent, ab_latent_v,
# ab_ws_* and ab_decode_* are as they ran in `git show 3936aee:scripts/gpu_check.sh`,
# ab_latent_blocks in `git show 8259403:scripts/gpu_check.sh`, ab_ws_pad in
# `git show e84045d:scripts/gpu_check.sh`, ab_ws_pad_heldout and ab_decode_trim in
# `git show a132983:scripts/gpu_check.sh`, ab_plain_first in
# `git show ee86308:scripts/gpu_check.sh`, ab_deep_causal in
# `git show 70f746c:scripts/gpu_check.sh`, ab_decode_whole_deep in
# `git show b31eb8b:scripts/gpu_check.sh`, ab_ws_ragged256 and ab_ws_ragged256_rule in
# `git show c807c58:scripts/gpu_check.sh`, ab_ws_ragged256_long and ab_decode_short256 in
# `git show b20d911:scripts/gpu_check.sh`, ab_ws_ragged256_wave and ab_decode_cut256 in
# `git show 77bf23b:scripts/gpu_check.sh`, ab_plain_nomask in
# `git show a52850f:scripts/gpu_check.sh`, ab_nomask_many in `git show a596e61:scripts/gpu_check.sh`.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [parts]}
parts=${2:-tests,measure,timer,fusion,kernels,gelu_any,l2,generate,generate_attn,generate_moe,decode_attn,decoder,decoder_heldout,generate_heldout,decoder_moe,decode_ops,grouped_routing,attn_classes,attn_tiles,attn_ratios,attn_sweep,lab,notebook}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ROOFLAB_CACHE=$out/cache
cur=$out/current
drawn=${DRAWN:-32,1}  # not exported: the manifest's knobs are what the caller set
rm -rf "$cur" && mkdir -p "$cur"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$cur/nvidia-smi.txt"
run() {  # run PART CMD...: the part's command, exit code, seconds and new files go to the manifest
  local part=$1 t0=$SECONDS rc before; shift; before=$(ls -1 "$cur" | sort)
  echo "=== $part ($(date +%T))"
  if [[ $(type -t "$1") == function ]]; then "$@"; else timeout "${PART_TIMEOUT:-0}" "$@"; fi
  rc=$?; echo "=== rc=$rc ($(date +%T))"
  NEW=$(comm -13 <(echo "$before") <(ls -1 "$cur" | sort) | grep -v '^parts.jsonl$') python3 -c \
    'import json, os, sys; print(json.dumps(dict(part=sys.argv[1], rc=int(sys.argv[2]), seconds=int(sys.argv[3]), command=" ".join(sys.argv[4:]).replace(os.environ["OUT"], "OUT") if os.environ.get("OUT") else " ".join(sys.argv[4:]), files=os.environ["NEW"].split())))' \
    "$part" "$rc" "$((SECONDS - t0))" "$@" >> "$cur/parts.jsonl"
}
has() { [[ ",$parts," == *",$1,"* ]]; }
# -v: each test's name as it ends, so a part stopped by PART_TIMEOUT (no XML then) still says
# which failed; the host has no package index: tests that need one are left out. TESTS_K: a -k
# expression narrowing the tests parts (tests, kernel_tests, other_tests, gpu_tests);
# TESTS_WORKERS=N: N pytest processes sharing the GPU (the kernel tests mostly compile)
py_test() { timeout "${PART_TIMEOUT:-0}" python3 -m pytest -v -p no:cacheprovider -o addopts= -m "not network" ${TESTS_K:+-k "$TESTS_K"} ${TESTS_WORKERS:+-n "$TESTS_WORKERS"} "$@"; }
has tests && run tests py_test --junitxml="$cur/pytest-gpu.xml" tests
has kernel_tests && run kernel_tests py_test --junitxml="$cur/pytest-gpu-kernels.xml" \
  tests/test_kernels_*.py
has other_tests && run other_tests py_test --junitxml="$cur/pytest-gpu-other.xml" tests \
  --ignore-glob="tests/test_kernels_*.py"
has gpu_tests && run gpu_tests py_test --junitxml="$cur/pytest-gpu-marked.xml" \
  -m "(gpu or on_device) and not network" tests --ignore-glob="tests/test_kernels_*.py"
has measure && run measure python3 benchmarks/measurement.py "$cur"
has fusion && run fusion python3 benchmarks/fusion.py "$cur"
has kernels && run kernels python3 benchmarks/kernels.py "$cur" gelu,decode_default,lab_decode,flash_default
has l2 && run l2 python3 benchmarks/l2_bandwidth.py "$cur"
has timer && run timer python3 benchmarks/timer_agreement.py "$cur"
has generate && run generate python3 benchmarks/generate.py "$cur"
has generate_gemma && run generate_gemma python3 benchmarks/generate.py "$cur/gemma" \
  gemma-3-270m-it "${GEN_SHAPES:-}"
has generate_8b && run generate_8b python3 benchmarks/generate.py "$cur/8b" \
  Llama-3.1-8B,Qwen3-8B "${GEN_SHAPES:-}"
has attn_classes && run attn_classes python3 benchmarks/attention_classes.py "$cur"
# the same, on shapes drawn at random across the classes (none a tuning row; DRAWN=N,SEED)
has attn_drawn && run attn_drawn python3 benchmarks/attention_classes.py "$cur" prefill,decode \
  --drawn "${drawn%%,*}" --seed "${drawn##*,}"
# each row of the drawn sweeps below 0.97x its peer, timed on every path rooflab has for it
has attn_paths && run attn_paths python3 benchmarks/attention_paths.py "$cur" \
  ${PATHS_OF:-benchmarks/results/current/attention_drawn_s1_h100.json \
  benchmarks/results/current/attention_drawn_s2_h100.json}
# the same row, the same tensors, timed again and again: a ratio's spread within one run
has spread && run spread_prefill python3 benchmarks/ab_flash.py "$cur" --name spread_prefill \
  --rounds 5 --rows "[$(printf '(64,16,8,384,128,"bf16",True),%.0s' 1 2 3 4)]"
has spread && run spread_decode python3 benchmarks/ab_decode.py "$cur" --name spread_decode \
  --rounds 5 --rows "[$(printf '(8,32,8,1,4096,128),(8,32,8,1,4096,64),(64,32,8,1,1024,128),%.0s' \
  1 2 3)]"
has generate_attn && run generate_attn python3 benchmarks/generate.py "$cur/attn" \
  "${ATTN_MODELS:-Llama-3.1-8B,Qwen3-8B}" "${ATTN_SHAPES:-1x512,8x4096,64x512}" sdpa,rooflab
has generate_moe && run generate_moe python3 benchmarks/generate.py "$cur/moe" \
  "${MOE_MODELS:-Qwen3-30B-A3B,DeepSeek-V2-Lite,Mixtral-8x7B}" "${MOE_SHAPES:-1x1024,8x1024}"
has generate_heldout && run generate_heldout python3 benchmarks/generate.py "$cur/heldout" \
  "$(ls tests/data/heldout/*.json | paste -sd, -)" "${HELDOUT_SHAPES:-1x4096,8x1024,64x512}"
has generate_mixtral && run generate_mixtral python3 benchmarks/generate.py "$cur/mixtral" \
  Mixtral-8x7B 1x1024,8x1024
has diagnose && run diagnose python3 benchmarks/generate.py "$cur/diagnose" --diagnose \
  ${DIAGNOSE:-Mixtral-8x7B 1x1024 prefill}
has grouped_routing && run grouped_routing python3 benchmarks/grouped_routing.py "$cur"
has attn_agree && run attn_agree python3 benchmarks/attention_agreement.py "$cur" \
  "${AGREE_MODELS:-gpt-oss-20b,DeepSeek-V2-Lite}" "${AGREE_SHAPE:-1x4096}"
has decode_ops && run decode_ops python3 benchmarks/decode_ops.py "$cur"
ncu_targets() {  # ncu_targets NAMES: each kernel's launch, occupancy and memory sections
  local names=$1 include=() n
  for n in ${names//,/ }; do include+=(--nvtx-include "$n/"); done
  timeout "${PART_TIMEOUT:-0}" ncu --clock-control none --nvtx "${include[@]}" --section \
    SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    python3 benchmarks/ncu_targets.py "$names" > "$cur/ncu_${names//,/_}.txt" 2>&1
}
has ncu && run ncu ncu_targets "${NCU_TARGETS:-decode_d64,cudnn_d64,decode_b64,cudnn_b64}"
has gelu_any && run gelu_any python3 benchmarks/kernels.py "$cur/gelu_any" gelu_any
# the Triton FlashAttention kernel and flash-decoding against themselves at git revision BEFORE
# (each file as it was there, its own defaults; flash_resources.py --before first, on a CPU)
ab_before() {
  local tag=${BEFORE:?ab_before takes BEFORE=REV}; tag=${tag//[^A-Za-z0-9._-]/_}  # a file name
  python3 benchmarks/ab_flash.py "$cur" --before "$BEFORE" --triton \
    --name "ab_flash_triton_before_$tag" || return
  python3 benchmarks/ab_decode.py "$cur" --before "$BEFORE" --name "ab_decode_before_$tag" \
    --rows "$(python3 -c 'import sys; sys.path.insert(0, "benchmarks")
from kernels import DECODE_SHAPES; print(DECODE_SHAPES)')"
}
has ab_before && run ab_before ab_before
# the head-dim-64 rule of four programs an SM (27732e4), set and checked on an H100, owed on an
# H200: its check's rows as they ran there (results/ab/ab_decode_four_rule_h100.json)
has ab_decode_four_rule && run ab_decode_four_rule python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_four_rule --variant 'two={"programs": "2 an SM"}' --rows '[(67,64,8,1,2000,64),
    (144,16,4,1,1500,64),(40,32,16,1,3000,64),(96,64,8,1,777,64),(1000,8,1,1,400,64),
    (128,64,8,1,2048,64),(128,16,8,4,2048,64),(60,16,16,1,5000,64),(550,4,1,1,3000,64),
    (64,64,8,1,1024,128),(200,32,8,1,700,128)]'
# head dim 64 below the whole-heads bound: one program an SM (two runs a head, merged by the
# last) with more stages in flight, and the last program's merge at the default cut; the
# class sweep's d64 row, rows of the H100's occupancy A/B, four held out, two GQA rows at 128
# (on an H100 no rule, flash_decoding.md; owed on an H200, about 150 s)
has ab_decode_p1 && run ab_decode_p1 python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_p1 --variant 'p1={"programs": "1 an SM"}' \
  --variant 'p1_s4={"programs": "1 an SM", "num_stages": 4}' \
  --variant 'p1_s5={"programs": "1 an SM", "num_stages": 5}' --variant 'last={"LAST_MERGES": 1}' \
  --rows '[(8,32,8,1,4096,64),(8,64,8,1,4096,64),(4,32,8,1,8192,64),(2,64,8,1,16384,64),
    (6,32,8,1,5000,64),(4,16,16,1,6000,64),(12,32,8,1,3000,64),(5,32,8,1,7000,64),
    (8,40,8,1,2500,64),(3,16,16,1,5000,64),(8,4,4,1,4096,128),(8,64,4,1,4096,128)]'
# head dim 256 at ragged lengths under 1,024 queries, on a wave of 128-row tiles or more whose
# last tile a head is more than half full: the warp-specialized kernel (RAGGED forced) against
# the routed Triton kernel on the first eight causal and three unmasked seed-9 draws it would
# take, and two outside it (a half-empty last tile, reported); flash_attention_sm90.md "Head dim
# 256, ragged and short, on many tiles", about 100 s
has ab_ws_ragged256_short && run ab_ws_ragged256_short python3 benchmarks/ab_flash.py "$cur" \
  --name ab_ws_ragged256_short --variant 'ws_ragged={"GLUON_WS": {"RAGGED": true}}' --rows '[
    (61,7,1,709,256,"bf16",True),(28,12,4,763,256,"fp16",True),(9,8,2,206,256,"bf16",True),
    (7,20,4,217,256,"bf16",True),(2,56,8,458,256,"bf16",True),(33,80,16,322,256,"fp16",True),
    (1,96,16,482,256,"fp16",True),(16,40,8,978,256,"bf16",True),(25,16,16,236,256,"fp16",False),
    (6,16,8,1001,256,"bf16",False),(24,20,4,369,256,"bf16",False),(20,14,2,666,256,"bf16",True),
    (2,56,8,559,256,"bf16",False)]'
has decode_attn && run decode_attn python3 benchmarks/decode_attention.py "$cur"
has decoder && run decoder python3 benchmarks/decoder.py "$cur"
has decoder_heldout && run decoder_heldout python3 benchmarks/decoder.py "$cur" --heldout
has decoder_moe && run decoder_moe python3 benchmarks/decoder.py "$cur" --moe
for a in tiles ratios sweep; do
  has attn_$a && run attn_$a python3 benchmarks/attention.py "$cur" $a
done
has lab && run lab python3 -m rooflab lab --out "$cur/report"
has collectives && run collectives bash -c "python3 -m rooflab collectives --json > $cur/collectives.json"
has lab6 && run lab6 python3 -m rooflab lab --parts 6 --out "$cur/report6"
# the notebooks' code cells, in order, as one script each (the device has no Jupyter kernel);
# notebook_t4 runs the solutions on the T4 code path (no native bf16) forced on this GPU, quick
root=$PWD
nb() {  # nb NAME LOG [env...]: in a folder of its own outside OUT (its report is many files)
  local name=$1 log=$2 dir; shift 2; dir=$(mktemp -d)
  (cd "$dir" && env MPLBACKEND=Agg "$@" \
    python3 -c "import json; cells = json.load(open('$root/notebooks/$name'))['cells'];
exec(compile(chr(10).join(''.join(c['source']) for c in cells if c['cell_type'] == 'code'), '$name', 'exec'))" \
    > "$cur/$log" 2>&1); local rc=$?; grep -c '^OK:' "$cur/$log"; grep -c '^NOT YET:' "$cur/$log"
  tail -5 "$cur/$log"; return $rc
}
has notebook && run notebook nb lab1.ipynb notebook.txt
has notebook_quick && run notebook_quick nb lab1.ipynb notebook_quick.txt ROOFLAB_QUICK=1
has notebook_solutions && run notebook_solutions nb lab1_solutions.ipynb notebook_solutions.txt
has notebook_t4 && run notebook_t4 nb lab1_solutions.ipynb notebook_t4.txt ROOFLAB_QUICK=1 \
  PYTHONPATH="$root:$root/scripts/t4_path"
rm -rf "$cur/traces" "$cur/report/traces"
python3 - "$cur" <<'PY'
import json, os, sys
from rooflab.measure import provenance
cur = sys.argv[1]
parts = [json.loads(line) for line in open(os.path.join(cur, "parts.jsonl"))]
os.remove(os.path.join(cur, "parts.jsonl"))
files = {f: {"part": p["part"], "command": p["command"]} for p in parts for f in p["files"]}
files["nvidia-smi.txt"] = {"part": "setup", "command": "nvidia-smi --query-gpu=..."}
name = "manifest-" + "-".join(p["part"] for p in parts) + ".json"  # one a call: calls merge
knobs = {k: v for k, v in os.environ.items() if k in (  # what narrowed the call's parts
    "AGREE_MODELS AGREE_SHAPE ATTN_MODELS ATTN_SHAPES BEFORE DIAGNOSE GEN_SHAPES HELDOUT_SHAPES "
    "DRAWN PATHS_OF MOE_MODELS MOE_SHAPES NCU_TARGETS PART_TIMEOUT TESTS_K TESTS_WORKERS").split()}
json.dump({**provenance.record(), "knobs": knobs, "parts": parts, "files": files},
          open(os.path.join(cur, name), "w"), indent=1)
PY
tar -czf "$out/current.tar.gz" -C "$out" current && rm -rf "$cur" "$out/cache"
ls -la "$out"
