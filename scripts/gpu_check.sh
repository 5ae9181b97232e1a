#!/usr/bin/env bash
# GPU tests + benchmarks in one go, into OUT/current/ (packed as OUT/current.tar.gz), with a
# manifest-PARTS.json of each part's command, exit code and time; unpacked as benchmarks/results/current/
# and indexed by benchmarks/index.py. On a remote GPU, whose copy's .git can be older than its
# files, pass the commit from here: ROOFLAB_COMMIT=<git rev-parse --short HEAD run locally>.
# PART_TIMEOUT=SECONDS stops a part that runs longer (exit code 124 in the manifest).
# Usage: scripts/gpu_check.sh OUT [parts]   (no parts: a full run, the tests and every benchmark;
# far longer than one device call's 10 minutes, so a remote run names a few parts a call)
#   parts: any of tests,kernel_tests,measure,timer,fusion,kernels,l2,generate,decode_attn,decoder,
#          decoder_heldout (the held-out configs, never tuned on; generate_heldout: the same
#          configs as whole models generating, HELDOUT_SHAPES), decoder_moe (one layer of
#          each mixture of experts, MLA included), attn_classes (rooflab's
#          kernels on every class of input, beside SDPA), generate_attn (the 8B models under
#          SDPA and under rooflab's kernels, same weights; ATTN_MODELS, ATTN_SHAPES narrow it),
#          generate_moe (three mixtures of
#          experts generating, predicted against measured; MOE_MODELS, MOE_SHAPES narrow or
#          widen it; generate_mixtral: the largest alone), gelu_any (GeLU at lengths near no power of two, aligned and not),
#          diagnose (a whole model's step op by op; DIAGNOSE="MODEL BxL prefill|decode [sdpa|rooflab]"),
#          grouped_routing (a prefill's grouped GEMMs under uneven routings, against even),
#          attn_agree (rooflab's attention call by call inside a model, on the model's own
#          inputs, against fp32; AGREE_MODELS, AGREE_SHAPE),
#          ncu (Nsight Compute on benchmarks/ncu_targets.py's kernels, NCU_TARGETS: by default
#          the class sweep's decode rows furthest below cuDNN, rooflab's and cuDNN's kernel each),
#          decode_ops (a decode's small ops
#          one by one against their prediction, with their launches),
#          ab_short (the plain Gluon kernel's tests, then the short rows' A/B of its key
#          blocks; AB_SETS="short heldout" by default, the others listed above ab_rows),
#          ab_latent (latent attention on the warp-specialized kernel: tests, then A/B),
#          ab_ws_persistent (PERSISTENT on the warp-specialized kernel: tests, then A/B;
#          ab_ws_walks: the rule that followed, on rows neither ran, and causal rows;
#          ab_ws_walks_causal: causal walks past 1,024 keys, on rows neither ran;
#          ab_ws_snake: causal walks with every other round reversed;
#          ab_ws_walks_causal_rule: the rule that followed, on rows neither ran;
#          ab_ws_walks_bound: its bound at 8,192 keys, on rows neither ran;
#          ab_ws_short_causal_rule: the rule that followed, on rows neither ran;
#          ab_ws_by_length: causal walks by tile length against by head;
#          ab_ws_bands: by length in bands of heads, against both;
#          ab_ws_by_length_rule: the rule that followed, on rows neither ran;
#          ab_ws_shortest: 128-key blocks walked on the shortest causal rows, latent walked;
#          ab_ws_shortest_rule: the rule that followed, on rows neither ran;
#          ab_ws_next: where it missed, on new rows; ab_ws_next_heldout: rows to check
#          the rule placed on them; ab_ws_next_rule: the rules that followed, on new rows;
#          ab_latent_blocks: latent attention's walk and key blocks apart),
#          ab_latent_v (transformers' latent v and fused projections read where they lie:
#          tests, then A/B against copying them), ab_before (BEFORE=REV: the Triton
#          FlashAttention kernel and flash-decoding against their files at REV),
#          ab_decode_d64 (flash-decoding's merge variants at head dim 64, held-out rows;
#          ab_decode_d64_rule: the rule that followed, on rows neither ran; ab_decode_whole:
#          whole heads where the pairs are fewer than the SMs; ab_decode_whole_rule: the rule
#          that followed, against the cut before it; ab_decode_whole_bw: the bound by
#          bandwidth after it; ab_decode_d64_occupancy: more programs an SM below the bound;
#          ab_decode_flat: one loop across a program's heads against a loop a head;
#          ab_decode_across: the rule that followed, where a run is several whole heads;
#          ab_decode_short_pairs: short heads a program each past one wave;
#          ab_decode_per_sm: three programs an SM where the launcher counts two;
#          ab_decode_d64_wave: four an SM past one wave at head dim 64;
#          ab_decode_four_rule: the rule that followed, on rows neither ran;
#          ab_decode_last_merges: a head's last program merges past two runs),
#          attn_tiles,attn_ratios,attn_sweep,lab,notebook (over 5 min: the triple loop's 60 s
#          budget), notebook_quick (its small sizes), and on two or more GPUs: collectives,lab6;
#          kernel_tests and other_tests split tests (kernel_tests alone outlasts one device
#          call: give it TESTS_WORKERS);
#          gpu_tests: only the other tests that use the GPU (marked gpu or on_device);
#          generate_gemma and generate_8b split generate (all three models take about 7 min;
#          GEN_SHAPES narrows them)
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [parts]}
parts=${2:-tests,measure,timer,fusion,kernels,gelu_any,l2,generate,generate_attn,generate_moe,decode_attn,decoder,decoder_heldout,generate_heldout,decoder_moe,decode_ops,grouped_routing,attn_classes,attn_tiles,attn_ratios,attn_sweep,lab,notebook}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ROOFLAB_CACHE=$out/cache
cur=$out/current
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
# the plain Gluon kernel's GPU tests (AB_TESTS: their -k), then the A/B of its key blocks and
# stages beside the warp-specialized and Triton kernels and ``after``, what flash_attention runs
# (why these rows and the rules they set: docs/kernels/flash_attention_sm90.md). AB_SETS picks:
#   short, heldout        the 32-key rule's rows and rows held out from it (head dim 128)
#   d64, d64_heldout      the same at head dim 64
#   stages                rows held out from the one-stage rule
#   long, long_heldout    past 512 keys; held out: one stage up to 1,024 keys
#   ragged                lengths that are not whole tiles
#   d64_keys_heldout      held out: 64-key blocks at 64 where keys are not whole 128-key blocks
#   causal_heldout        held out: one stage on causal rows up to 2,048 keys at 128
#   shallow_heldout       held out: that rule past 1,024 keys only from three programs an SM
#   nomask_heldout        held out: at 128 without a mask, 513-1,024 keys, the plain kernel
#                         only from six programs an SM (two waves of three)
# (held-out rows were written here before any of them ran)
declare -A ab_rows=(
  [short]='[(16,32,8,256,128,"bf16",True),(64,32,8,256,128,"bf16",True),(128,32,8,256,128,"bf16",True),(128,32,8,256,128,"bf16",False),(8,16,4,256,128,"fp16",True),(32,32,8,512,128,"bf16",True),(16,32,8,512,128,"bf16",False),(16,32,8,1024,128,"bf16",True)]'
  [heldout]='[(24,32,8,384,128,"bf16",True),(48,28,4,320,128,"bf16",True),(96,16,16,256,128,"fp16",False),(12,32,8,448,128,"bf16",False),(64,64,8,128,128,"bf16",True),(6,32,8,448,128,"bf16",True),(4,32,8,512,128,"bf16",True),(2,32,8,512,128,"fp16",False),(128,32,8,256,64,"bf16",True),(32,32,8,512,64,"bf16",False)]'
  [d64]='[(128,32,8,256,64,"bf16",True),(64,32,8,256,64,"bf16",False),(32,32,8,512,64,"bf16",True),(32,32,8,512,64,"bf16",False),(16,32,8,1024,64,"bf16",True),(8,32,8,512,64,"bf16",True),(2,32,8,512,64,"bf16",True)]'
  [stages]='[(32,32,8,384,128,"bf16",False),(20,40,8,320,128,"bf16",True),(48,32,8,192,128,"bf16",True),(200,16,4,128,128,"fp16",False),(3,32,8,256,128,"bf16",True),(10,32,8,512,128,"bf16",False),(1,32,8,512,128,"bf16",True),(16,28,4,448,128,"fp16",True)]'
  [long]='[(8,32,8,1024,128,"bf16",True),(8,32,8,1024,128,"bf16",False),(2,32,8,2048,128,"bf16",True),(4,32,8,2048,128,"bf16",False),(1,32,8,4096,128,"bf16",True)]'
  [long_heldout]='[(4,32,8,1024,128,"bf16",True),(12,32,8,768,128,"bf16",True),(6,28,4,896,128,"bf16",False),(24,32,8,640,128,"bf16",True),(2,32,8,1024,128,"fp16",True),(3,40,8,1024,128,"bf16",False),(1,32,8,2048,128,"bf16",True),(16,32,8,1536,128,"bf16",True)]'
  [ragged]='[(2,32,8,1000,128,"bf16",True),(4,32,8,700,128,"bf16",False),(8,28,4,333,128,"fp16",True),(16,32,8,200,128,"bf16",True),(1,32,8,1000,128,"bf16",False),(2,32,8,1500,128,"bf16",True),(2,32,8,1000,64,"bf16",True),(8,32,8,500,64,"bf16",False),(4,16,4,777,64,"fp16",True),(16,32,8,300,64,"bf16",False)]'
  [d64_keys_heldout]='[(4,32,8,700,64,"bf16",False),(2,28,4,1100,64,"fp16",False),(1,32,8,3000,64,"bf16",False),(32,16,16,200,64,"bf16",False),(8,32,8,640,64,"bf16",False),(8,32,8,768,64,"bf16",False)]'
  [causal_heldout]='[(4,32,8,1280,128,"bf16",True),(1,32,8,1800,128,"bf16",True),(8,28,4,1536,128,"fp16",True),(3,32,8,2000,128,"bf16",True),(6,40,8,1152,128,"bf16",True),(2,32,8,2560,128,"bf16",True)]'
  [shallow_heldout]='[(1,8,8,1536,128,"bf16",True),(2,4,4,1280,128,"bf16",True),(1,12,4,1100,128,"fp16",True),(1,16,8,2048,128,"bf16",True),(2,8,8,1792,128,"bf16",True),(1,24,8,1400,128,"bf16",True)]'
  [nomask_heldout]='[(1,32,8,768,128,"bf16",False),(1,40,8,1024,128,"fp16",False),(2,32,8,896,128,"bf16",False),(1,64,8,640,128,"bf16",False),(4,16,4,1000,128,"bf16",False),(2,24,8,576,128,"bf16",False)]'
  [d64_heldout]='[(48,32,8,384,64,"bf16",True),(96,14,2,256,64,"bf16",True),(24,14,2,512,64,"bf16",False),(64,16,16,320,64,"fp16",True),(4,32,8,448,64,"bf16",True),(16,32,8,768,64,"bf16",True)]'
  [latent]='[(8,16,16,1024,192,"bf16",True),(1,16,16,4096,192,"bf16",True),(8,16,16,1024,192,"bf16",False)]'
  [latent_hf_heldout]='[(2,16,16,2048,192,"bf16",True),(2,16,16,768,192,"bf16",True),(1,16,16,1500,192,"bf16",True),(8,16,16,512,192,"bf16",True),(4,16,16,1024,192,"bf16",True),(1,128,128,1024,192,"bf16",True),(1,16,16,640,192,"bf16",True)]'
  [latent_v_short]='[(4,16,16,512,192,"bf16",True),(16,16,16,256,192,"bf16",True),(4,16,16,512,192,"bf16",False)]'
  [latent_heldout]='[(1,128,128,2048,192,"bf16",True),(2,16,16,3001,192,"bf16",True),(4,16,16,700,192,"bf16",False),(16,16,16,512,192,"bf16",True),(2,32,32,2048,192,"fp16",True),(64,16,16,256,192,"bf16",True)]')
ab_short() {
  py_test --junitxml="$cur/pytest-gpu-plain.xml" tests/test_kernels_flash_attention.py -k \
    "${AB_TESTS:-sm90_takes or sm90_matches_fp64 or sm90_ws or runs_the_gluon or narrower_key_blocks}" \
    || return
  local set
  for set in ${AB_SETS:-short heldout}; do
    python3 benchmarks/ab_flash.py "$cur" --name "ab_flash_${set}_keys" --rows "${ab_rows[$set]}" \
      --variant 'plain_n128={"GLUON": {"BLOCK_N": 128, "STAGES": 2}}' \
      --variant 'plain_n64={"GLUON": {"BLOCK_N": 64, "STAGES": 2}}' \
      --variant 'plain_n64_s1={"GLUON": {"BLOCK_N": 64, "STAGES": 1}}' \
      --variant 'plain_n32={"GLUON": {"BLOCK_N": 32, "STAGES": 2}}' \
      --variant 'ws={"GLUON_WS": {}}' --variant 'triton={}' || return
  done
}
has ab_short && run ab_short ab_short
# PERSISTENT on the warp-specialized kernel, a program an SM walking the tiles (as cuDNN's kernel
# does at the short rows, ncu): why, each rule and its figures in
# docs/kernels/flash_attention_sm90.md ("PERSISTENT again"). walk_ab NAME ROWS [ab_flash
# options]: the rows as routed (`after`) beside the plain kernel, the warp-specialized one a
# program a tile (`ws`) and walking (`wsp`);
# walk_tests NAME: the walk's and the routing's GPU tests
walk_ab() {
  local name=$1 rows=$2; shift 2
  python3 benchmarks/ab_flash.py "$cur" --name "ab_flash_$name" --rows "$rows" \
    --variant 'plain={"GLUON": {}}' --variant 'ws={"GLUON_WS": {"PERSISTENT": false}}' \
    --variant 'wsp={"GLUON_WS": {"PERSISTENT": true}}' "$@"
}
walk_tests() {
  py_test --junitxml="$cur/pytest-gpu-$1.xml" tests/test_kernels_flash_attention.py \
    -k "sm90_ws_persistent or sm90_ws_short_causal or runs_the_gluon or walks or short_rows"
}
# the first A/B, rows without a mask (the kernel as routed then: plain up to 1,024 keys)
ab_ws_persistent() {
  walk_tests ws-persistent && walk_ab ws_persistent '[(16,32,8,512,128,"bf16",False),
    (10,32,8,512,128,"bf16",False),(32,32,8,384,128,"bf16",False),(128,32,8,256,128,"bf16",False),
    (8,32,8,1024,128,"bf16",False),(4,32,8,2048,128,"bf16",False),(2,32,8,4096,128,"bf16",False),
    (200,16,4,128,128,"fp16",False),(1,32,8,1000,128,"bf16",False),(4,32,8,700,128,"bf16",False),
    (32,32,8,512,64,"bf16",False),(64,32,8,256,64,"bf16",False)]' \
    --variant 'wsp_n64={"GLUON_WS": {"PERSISTENT": true, "BLOCK_N": 64}}'
}
# walks() without a mask (where 128-row tiles pad no more than 64-row ones) on rows neither ran,
# in transformers' layout too; then the walk on causal rows (a static walk, longest tiles first)
ab_ws_walks() {
  walk_tests ws-walks && walk_ab ws_walks '[(6,28,4,896,128,"bf16",False),
    (3,40,8,1024,128,"bf16",False),(12,32,8,448,128,"bf16",False),(1,64,8,640,128,"bf16",False),
    (24,16,16,768,128,"fp16",False),(2,12,4,3000,128,"bf16",False),(5,32,8,1500,128,"bf16",False),
    (64,8,8,320,128,"bf16",False),(48,32,8,192,128,"fp16",False),(16,32,8,200,128,"bf16",False),
    (1,32,8,16384,128,"bf16",False)]' &&
  walk_ab ws_walks_blhd '[(8,32,8,1024,128,"bf16",False),(2,32,8,1536,128,"bf16",False),
    (16,32,8,512,128,"bf16",False)]' --layout blhd &&
  walk_ab ws_persistent_causal '[(128,32,8,256,128,"bf16",True),(32,32,8,512,128,"bf16",True),
    (16,32,8,1024,128,"bf16",True),(2,32,8,2048,128,"bf16",True),(64,32,8,512,128,"bf16",True),
    (1,32,8,8192,128,"bf16",True)]'
}
# causal rows past 1,024 keys, written before they ran: the static walk's held-out rows
CAUSAL_WALK_ROWS='[(3,32,8,1536,128,"bf16",True),(1,40,8,3000,128,"bf16",True),
  (2,64,8,2048,128,"bf16",True),(4,16,16,1280,128,"fp16",True),(1,32,4,4096,128,"bf16",True),
  (2,12,4,2048,128,"bf16",True),(1,28,4,6000,128,"bf16",True),(8,32,8,1100,128,"bf16",True),
  (4,32,8,2048,128,"bf16",True)]'
has ab_ws_walks_causal && run ab_ws_walks_causal walk_ab ws_walks_causal "$CAUSAL_WALK_ROWS"
# every other round of programs reversed (a program's long and short tiles alternate), on the
# causal rows of both runs above
ab_ws_snake() {
  walk_tests ws-snake && walk_ab ws_snake_causal '[(128,32,8,256,128,"bf16",True),
    (32,32,8,512,128,"bf16",True),(16,32,8,1024,128,"bf16",True),(2,32,8,2048,128,"bf16",True),
    (64,32,8,512,128,"bf16",True),(1,32,8,8192,128,"bf16",True),'"${CAUSAL_WALK_ROWS:1}"
}
# the causal rule (walk past 1,024 keys) on rows neither ran (the last three off under it:
# 128-row tiles pad more), then in transformers' layout
ab_ws_walks_causal_rule() {
  walk_ab ws_walks_causal_rule '[(2,32,8,1500,128,"bf16",True),(1,64,8,2500,128,"bf16",True),
    (6,32,8,1280,128,"bf16",True),(2,40,8,1792,128,"fp16",True),(1,16,16,4096,128,"bf16",True),
    (3,28,4,2048,128,"bf16",True),(1,32,8,12000,128,"bf16",True),(5,32,8,1152,128,"bf16",True),
    (2,16,4,3072,128,"bf16",True),(2,48,8,1200,128,"bf16",True),(4,20,4,1600,128,"fp16",True),
    (10,32,8,1088,128,"bf16",True)]' &&
  walk_ab ws_walks_causal_rule_blhd '[(2,32,8,2048,128,"bf16",True),
    (1,32,8,3072,128,"bf16",True)]' --layout blhd
}
# the bound that followed (causal walks up to 8,192 keys), on rows neither ran: two under it
# and three past it (its GPU tests: kernel_tests)
ab_ws_walks_bound() {
  walk_ab ws_walks_bound '[(2,32,8,7000,128,"bf16",True),(1,64,8,6144,128,"bf16",True),
    (1,32,8,10240,128,"bf16",True),(1,16,4,16384,128,"bf16",True),(1,40,8,8704,128,"bf16",True)]'
}
# the rule that followed (causal rows walk past 256 keys; the warpgroups take a tile's halves
# in turn; four stages at 64-key blocks) on rows neither ran, written before any did, beside
# the walk of the kernel before it (`old`: WS_BEFORE, that flash_attention_sm90_ws.py from
# git show 9900120~1:rooflab/kernels/flash_attention_sm90_ws.py, made where git has it)
ab_ws_short_causal_rule() {
  local old='old={"GLUON_WS": {"PERSISTENT": true}, "FROM": "'"${WS_BEFORE:?a file}"'"}'
  walk_tests ws-short-causal-rule && walk_ab ws_short_causal_rule '[(40,32,8,384,128,"bf16",True),
    (24,40,8,512,128,"bf16",True),(16,28,4,512,128,"fp16",True),(80,16,16,384,128,"fp16",True),
    (8,64,8,512,128,"bf16",True),(12,32,8,640,128,"bf16",True),(8,32,8,768,128,"bf16",True),
    (10,40,8,896,128,"bf16",True),(6,32,8,1024,128,"fp16",True),(4,64,8,1000,128,"bf16",True),
    (3,32,8,1536,128,"bf16",True),(2,32,8,4096,128,"bf16",True),(1,40,8,6000,128,"bf16",True),
    (64,32,8,256,128,"bf16",True),(20,16,4,576,128,"bf16",True)]' --variant "$old" &&
  walk_ab ws_short_causal_rule_blhd '[(16,32,8,512,128,"bf16",True),
    (8,32,8,768,128,"bf16",True)]' --layout blhd --variant "$old"
}
# causal walks by length (every head's longest tile first, then every head's next) against
# the walk by head (`by_head`: WS_BY_HEAD, that flash_attention_sm90_ws.py from git show
# 2c03068:rooflab/kernels/flash_attention_sm90_ws.py), both as routed, on the rule's rows
# where it lost and won, long rows, and five rows neither ran
ab_ws_by_length() {
  local by_head='by_head={"GLUON_WS": {}, "FROM": "'"${WS_BY_HEAD:?a file}"'"}'
  walk_tests ws-by-length && python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_by_length \
    --variant "$by_head" --variant 'plain={"GLUON": {}}' --rows '[(12,32,8,640,128,"bf16",True),
    (10,40,8,896,128,"bf16",True),(80,16,16,384,128,"fp16",True),(8,32,8,768,128,"bf16",True),
    (6,32,8,1024,128,"fp16",True),(40,32,8,384,128,"bf16",True),(24,40,8,512,128,"bf16",True),
    (32,32,8,512,128,"bf16",True),(16,32,8,1024,128,"bf16",True),(3,32,8,1536,128,"bf16",True),
    (2,32,8,2048,128,"bf16",True),(2,32,8,4096,128,"bf16",True),(1,40,8,6000,128,"bf16",True),
    (1,32,8,8192,128,"bf16",True),(7,32,8,640,128,"bf16",True),(20,24,8,896,128,"bf16",True),
    (4,32,8,1280,128,"bf16",True),(9,40,8,640,128,"fp16",True),(3,48,8,1408,128,"bf16",True)]'
}
# by length in bands of as many heads as programs (a band's K and V stay in L2) against by
# length over all heads (`by_length`: WS_BY_LENGTH, from git show 6806ac1:...) and by head
# (`by_head`, as above), on rows with many heads, MHA among them, and rows of ab_ws_by_length
ab_ws_bands() {
  local by_head='by_head={"GLUON_WS": {}, "FROM": "'"${WS_BY_HEAD:?a file}"'"}'
  local by_length='by_length={"GLUON_WS": {}, "FROM": "'"${WS_BY_LENGTH:?a file}"'"}'
  walk_tests ws-bands && python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_bands \
    --variant "$by_length" --variant "$by_head" --variant 'plain={"GLUON": {}}' \
    --rows '[(80,16,16,384,128,"fp16",True),(64,32,32,512,128,"bf16",True),
    (40,16,16,1024,128,"bf16",True),(128,32,8,512,128,"bf16",True),(200,16,4,384,128,"bf16",True),
    (24,32,32,768,128,"fp16",True),(50,40,8,640,128,"bf16",True),(12,32,8,640,128,"bf16",True),
    (10,40,8,896,128,"bf16",True),(3,32,8,1536,128,"bf16",True),(1,40,8,6000,128,"bf16",True),
    (32,32,8,512,128,"bf16",True),(7,32,8,640,128,"bf16",True),(8,32,8,768,128,"bf16",True),
    (2,32,8,4096,128,"bf16",True)]'
}
# the rule that followed (by length from BY_LENGTH_GROUP heads a KV head, by head below) on
# rows neither ran, groups 1-8, written before any did, against by head (`by_head`, as above)
# and by length for every group (`bands`: WS_BANDS, from git show b97383e:...)
ab_ws_by_length_rule() {
  local by_head='by_head={"GLUON_WS": {}, "FROM": "'"${WS_BY_HEAD:?a file}"'"}'
  local bands='bands={"GLUON_WS": {}, "FROM": "'"${WS_BANDS:?a file}"'"}'
  walk_tests ws-by-length-rule && python3 benchmarks/ab_flash.py "$cur" \
    --name ab_flash_ws_by_length_rule --variant "$by_head" --variant "$bands" \
    --variant 'plain={"GLUON": {}}' --rows '[(48,16,16,512,128,"bf16",True),
    (60,32,32,384,128,"fp16",True),(30,32,16,640,128,"bf16",True),(10,16,8,1280,128,"bf16",True),
    (16,24,8,768,128,"bf16",True),(2,36,12,2560,128,"bf16",True),(20,32,8,896,128,"fp16",True),
    (100,32,8,384,128,"bf16",True),(6,48,8,1536,128,"bf16",True),(4,64,8,2048,128,"bf16",True),
    (2,28,4,3584,128,"bf16",True),(9,56,8,1024,128,"bf16",True)]' &&
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_by_length_rule_blhd --layout blhd \
    --variant "$by_head" --variant "$bands" --variant 'plain={"GLUON": {}}' \
    --rows '[(12,40,8,1024,128,"bf16",True),(24,16,16,512,128,"bf16",True)]'
}
# the shortest causal rows, where the plain kernel or cuDNN still leads: the walk with 128-key
# blocks (`n128`, each warpgroup to its tile's end) beside the walk as flags() has it; latent
# attention walked (q and k 192 wide, v as transformers passes it), three stages and two
ab_ws_shortest() {
  py_test --junitxml="$cur/pytest-gpu-ws-shortest.xml" tests/test_kernels_flash_attention.py \
    -k "latent" || return
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_shortest --variant 'plain={"GLUON": {}}' \
    --variant 'wsp={"GLUON_WS": {"PERSISTENT": true}}' \
    --variant 'n128={"GLUON_WS": {"PERSISTENT": true, "BLOCK_N": 128, "OWN_BLOCKS": false}}' \
    --rows '[(128,32,8,256,128,"bf16",True),(64,32,8,256,128,"bf16",True),
    (60,32,32,384,128,"fp16",True),(80,16,16,384,128,"fp16",True),(40,32,8,384,128,"bf16",True),
    (32,32,8,512,128,"bf16",True)]' &&
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_shortest_latent --v-dim 128 \
    --layout latent --variant 'wsp={"GLUON_WS": {"PERSISTENT": true}}' \
    --variant 'wsp2={"GLUON_WS": {"PERSISTENT": true, "STAGES": 2}}' --variant 'triton={}' \
    --rows '[(16,16,16,256,192,"bf16",True),(4,16,16,512,192,"bf16",True),
    (8,16,16,384,192,"bf16",True),(32,16,16,256,192,"bf16",True)]'
}
# the rule that followed (causal rows walk past 128 keys by length, past 384 by head; latent
# attention's causal rows of 129-512 keys walk) on rows neither ran, written before any did,
# rows it leaves among them: as routed beside the walk forced on and off
ab_ws_shortest_rule() {
  py_test --junitxml="$cur/pytest-gpu-ws-shortest-rule.xml" tests/test_kernels_flash_attention.py \
    -k "sm90_ws_persistent or sm90_ws_short_causal or runs_the_gluon or walks or short_rows or \
    latent" || return
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_shortest_rule \
    --variant 'plain={"GLUON": {}}' --variant 'wsp={"GLUON_WS": {"PERSISTENT": true}}' \
    --variant 'nowalk={"GLUON_WS": {"PERSISTENT": false}}' \
    --rows '[(96,32,8,256,128,"bf16",True),(150,24,8,256,128,"fp16",True),
    (56,28,4,256,128,"bf16",True),(24,40,8,384,128,"bf16",True),(36,32,16,512,128,"bf16",True),
    (30,16,16,640,128,"fp16",True),(120,16,16,256,128,"bf16",True),(90,16,8,384,128,"bf16",True),
    (72,32,16,384,128,"fp16",True),(256,32,8,128,128,"bf16",True)]' &&
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_shortest_rule_latent --v-dim 128 \
    --layout latent --variant 'nowalk={"GLUON_WS": {"PERSISTENT": false}}' \
    --variant 'wsp={"GLUON_WS": {"PERSISTENT": true, "BLOCK_N": 64, "OWN_BLOCKS": true}}' \
    --variant 'triton={}' --rows '[(24,16,16,256,192,"bf16",True),(6,16,16,512,192,"bf16",True),
    (12,16,16,384,192,"bf16",True),(2,16,16,1024,192,"bf16",True),(64,16,16,128,192,"bf16",True)]'
}
# ab_flash.py on latent attention rows (transformers' v), causal and then not: latent_both NAME
# ROWS [ab_flash.py's options]; NAME's @ becomes causal or plain, ROWS's C True or False
latent_both() {
  local name=$1 rows=$2 set; shift 2
  for set in causal plain; do
    python3 benchmarks/ab_flash.py "$cur" --name "${name/@/$set}" --v-dim 128 --layout latent \
      --rows "${rows//C/$([[ $set == causal ]] && echo True || echo False)}" "$@" || return
  done
}
latent_walk='walk={"GLUON_WS": {"PERSISTENT": true, "BLOCK_N": 64, "OWN_BLOCKS": true}}'
# where the rule above missed, on rows none of these ran (written before any did): two heads a
# KV head at 256-384 keys walked by head and by length against the plain kernel; latent
# attention walked past 512 keys with 64-key blocks, causal and not, against as routed
ab_ws_next() {
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_next_group2 \
    --variant 'plain={"GLUON": {}}' --variant 'by_head={"GLUON_WS": {"PERSISTENT": true}}' \
    --variant 'by_length={"GLUON_WS": {"PERSISTENT": true, "BY_LENGTH": true}}' \
    --rows '[(64,32,16,384,128,"bf16",True),(48,24,12,384,128,"fp16",True),
    (80,32,16,256,128,"bf16",True),(40,16,8,384,128,"bf16",True),(20,40,20,512,128,"bf16",True)]' &&
  latent_both ab_flash_ws_next_latent_@ '[(1,16,16,2048,192,"bf16",C),(4,16,16,768,192,"bf16",C),
    (2,16,16,1536,192,"bf16",C),(1,128,128,1024,192,"bf16",C),(8,16,16,512,192,"bf16",C)]' \
    --variant "$latent_walk" --variant 'triton={}'
}
# ab_ws_next's held-out rows, written with it and before either ran: a rule is placed on
# ab_ws_next's rows and read here on rows it never saw (the same variants)
ab_ws_next_heldout() {
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_next_group2_heldout \
    --variant 'plain={"GLUON": {}}' --variant 'by_head={"GLUON_WS": {"PERSISTENT": true}}' \
    --variant 'by_length={"GLUON_WS": {"PERSISTENT": true, "BY_LENGTH": true}}' \
    --rows '[(32,32,16,320,128,"bf16",True),(100,16,8,288,128,"fp16",True),
    (24,64,32,384,128,"bf16",True),(56,28,14,352,128,"bf16",True),(64,32,16,192,128,"bf16",True),
    (12,48,24,448,128,"fp16",True)]' &&
  latent_both ab_flash_ws_next_latent_@_heldout '[(2,16,16,1280,192,"bf16",C),
    (1,32,32,3072,192,"bf16",C),(6,16,16,640,192,"bf16",C),(1,128,128,768,192,"bf16",C),
    (3,16,16,4096,192,"bf16",C)]' --variant "$latent_walk" --variant 'triton={}'
}
# the rules that followed (two heads a KV head walk by head past 256 keys; latent attention
# walks up to 1,024 keys, causal past 128, with 64-key blocks) on rows none of these ran, written
# before any did, rows they leave among them: as routed beside the walk forced on and off
ab_ws_next_rule() {
  py_test --junitxml="$cur/pytest-gpu-ws-next-rule.xml" tests/test_kernels_flash_attention.py \
    -k "sm90_ws_persistent or sm90_ws_short_causal or runs_the_gluon or walks or latent or \
    flags_follow" || return
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_ws_next_rule_group2 \
    --variant 'plain={"GLUON": {}}' --variant 'by_head={"GLUON_WS": {"PERSISTENT": true}}' \
    --rows '[(40,32,16,336,128,"bf16",True),(96,8,4,384,128,"fp16",True),
    (16,64,32,360,128,"bf16",True),(28,40,20,384,128,"bf16",True),(120,16,8,256,128,"bf16",True)]' &&
  latent_both ab_flash_ws_next_rule_latent_@ '[(3,16,16,896,192,"bf16",C),
    (1,64,64,1024,192,"bf16",C),(5,16,16,576,192,"bf16",C),(2,32,32,1152,192,"bf16",C),
    (1,16,16,1792,192,"bf16",C),(16,16,16,256,192,"bf16",C),(1,128,128,512,192,"bf16",C)]' \
    --variant "$latent_walk" --variant 'nowalk={"GLUON_WS": {"PERSISTENT": false}}'
}
# latent attention's walk apart from its 64-key blocks (ab_ws_next_rule could not tell them
# apart past 1,024 keys): walk and no walk at 64- and 128-key blocks, on rows none of these ran,
# written before any did (batch 1 and 2-4, 640-4,096 keys, whole tiles)
ab_latent_blocks() {
  latent_both ab_flash_latent_blocks_@ '[(1,16,16,1536,192,"bf16",C),(1,32,32,2560,192,"bf16",C),
    (2,16,16,1024,192,"bf16",C),(2,16,16,2048,192,"bf16",C),(3,32,32,768,192,"bf16",C),
    (4,16,16,1408,192,"bf16",C),(1,16,16,4096,192,"bf16",C),(2,64,64,640,192,"bf16",C)]' \
    --variant "$latent_walk" \
    --variant 'nowalk64={"GLUON_WS": {"PERSISTENT": false, "BLOCK_N": 64, "OWN_BLOCKS": true}}' \
    --variant 'nowalk128={"GLUON_WS": {"PERSISTENT": false, "BLOCK_N": 128, "OWN_BLOCKS": false}}'
}
for p in ab_ws_persistent ab_ws_walks ab_ws_snake ab_ws_walks_causal_rule ab_ws_walks_bound \
    ab_ws_short_causal_rule ab_ws_by_length ab_ws_bands ab_ws_by_length_rule \
    ab_ws_shortest ab_ws_shortest_rule ab_ws_next ab_ws_next_heldout ab_ws_next_rule \
    ab_latent_blocks; do
  has $p && run $p $p
done
# latent attention (q and k 192 wide, v 128) on the warp-specialized kernel: its GPU tests, then
# the A/B of its key blocks beside the Triton kernel and ``after``, contiguous (LATENT_SETS:
# latent, latent_heldout) and in transformers' layout (the latent rows)
ab_latent() {
  py_test --junitxml="$cur/pytest-gpu-latent.xml" tests/test_kernels_flash_attention.py -k \
    "latent or runs_the_gluon" || return
  local set
  for set in ${LATENT_SETS:-latent latent_heldout}; do
    python3 benchmarks/ab_flash.py "$cur" --name "ab_flash_$set" --rows "${ab_rows[$set]}" \
      --v-dim 128 --variant 'ws_n64={"GLUON_WS": {"BLOCK_N": 64}}' --variant 'triton={}' || return
  done
  python3 benchmarks/ab_flash.py "$cur" --name ab_flash_latent_blhd --rows "${ab_rows[latent]}" \
    --v-dim 128 --layout blhd --variant 'triton={}'
}
# transformers' latent v (128 of each head's 256 columns, tokens first) and slices of fused
# projections, read where they lie by TMA: the GPU tests of every layout, then ``after`` (v in
# place) against contiguous copies of k and v before the same kernel (what ran until the
# kernels read v in place) and the Triton kernel, on the copy rule's rows and its held-out
# ones, and short rows where the copy lost to the Triton kernel. Expected, written before the
# run: in place at or past the copy at every row, within 3% of contiguous inputs (ab_latent)
ab_latent_v() {
  py_test --junitxml="$cur/pytest-gpu-latent-v.xml" tests/test_kernels_flash_attention.py \
    tests/test_hf_attention.py -k "latent or takes_each_layout or takes_transformers_layout or \
    runs_the_gluon or where_it_lies" || return
  local set
  for set in latent latent_hf_heldout latent_v_short; do
    python3 benchmarks/ab_flash.py "$cur" --name "ab_flash_${set}_in_place" --layout latent \
      --rows "${ab_rows[$set]}" --v-dim 128 --variant 'copy={"COPY": true}' \
      --variant 'triton={}' || return
  done
}
has ab_latent_v && run ab_latent_v ab_latent_v
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
# flash-decoding at head dim 64, where the class sweep's row is furthest below cuDNN (the merge
# kernel, docs/kernels/flash_decoding.md): the in-kernel merge at four runs a head, 128 keys a
# step, the one-row merge; the sweep's row, then rows held out from it (gpt-oss's 64/8 heads,
# MHA, other batches and caches), written before any of them ran
ab_decode_d64() {
  python3 benchmarks/ab_decode.py "$cur" --name ab_decode_d64 --rows '[(8,32,8,1,4096,64),
    (1,64,8,1,4096,64),(8,64,8,1,4096,64),(4,32,8,1,8192,64),(16,32,8,1,2048,64),
    (8,16,16,1,4096,64),(32,32,8,1,1024,64),(2,64,8,1,16384,64)]' \
    --variant 'last={"LAST_MERGES": 1}' --variant 'n128={"BLOCK_N": 128}' \
    --variant 'one_row={"MERGE_ROWS": 0}'
}
has ab_decode_d64 && run ab_decode_d64 ab_decode_d64
# the rule that followed it (128 keys a step at head dim 64 up to two pairs an SM) on rows
# neither A/B ran, on both sides of its bound (264 pairs on the H200); n128_pairs: each pair
# whole in one program past the bound too (Triton 3.6 fits three such programs an SM)
has ab_decode_d64_rule && run ab_decode_d64_rule python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_d64_rule --rows '[(4,32,8,1,4096,64),(24,32,8,1,2048,64),(48,32,8,1,1024,64),
    (64,32,8,1,1024,64),(33,64,8,1,3000,64),(34,64,8,1,3000,64),(2,16,16,1,8192,64),
    (12,40,8,1,1500,64)]' --variant 'n64={"BLOCK_N": 64}' --variant 'n128={"BLOCK_N": 128}' \
  --variant 'n128_pairs={"BLOCK_N": 128, "programs": "pairs"}'
# whole heads (one program a (batch, KV head) pair, no merge) against the default's cut where
# the pairs are fewer than the SMs and a head is 10-24 key blocks; the last row, from
# ab_decode_d64_rule, showed it, the others were written before any ran
has ab_decode_whole && run ab_decode_whole python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_whole --rows '[(12,32,8,1,1500,128),(16,32,8,1,2048,128),(8,16,16,1,1200,128),
    (24,32,4,1,1500,128),(8,32,8,1,3000,128),(10,32,8,1,1536,64),(8,64,8,1,2048,64),
    (16,32,8,1,1200,64),(12,40,8,1,1500,64)]' --variant 'whole={"programs": "pairs"}'
# the rule that followed (whole heads from 0.6 of the SMs' worth of pairs) against the cut before
# it, on rows neither ran, both sides of the bound (79.2 pairs with 132 SMs)
has ab_decode_whole_rule && run ab_decode_whole_rule python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_whole_rule --before aff38a5 --rows '[(10,64,8,1,4096,64),(21,32,4,1,2200,64),
    (13,32,8,1,1700,64),(15,64,8,1,3333,64),(8,32,16,1,6000,64),(26,40,5,1,1900,64),
    (19,32,4,1,2600,64),(9,64,8,1,8192,64)]'
# the rule that followed on the H200 (whole heads from the pairs that draw the HBM's bandwidth at
# 44 GB/s each: 109 pairs on an H200, 76 on an H100) on rows neither ran, 88-124 pairs: whole
# heads and the cut, both timed (the 0.6 share it replaced beside them, at c32e729)
has ab_decode_whole_bw && run ab_decode_whole_bw python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_whole_bw --before c32e729 --rows '[(11,32,8,1,3000,64),(24,32,4,1,2000,64),
    (25,16,4,1,3500,64),(27,40,4,1,1800,64),(14,64,8,1,2200,64),(29,32,4,1,2700,64),
    (31,16,4,1,5000,64),(6,16,16,1,4000,64)]' --variant 'whole={"programs": "pairs"}' \
  --variant 'split={"programs": "split"}'
# the tree's kernel against 707934c's (a loop a head) on the class sweep's decode rows below
# cuDNN (bf16 for its fp16 one), then rows written before any ran, runs of several whole heads
# and runs that cross from head to head among them (what each run compared:
# docs/kernels/flash_decoding.md, "One loop across a run's whole heads")
has ab_decode_flat && run ab_decode_flat python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_flat --before 707934c --rows '[(64,32,8,1,1024,128),(256,32,8,1,512,128),
    (8,32,8,1,4097,128),(8,32,8,1,2049,128),(8,32,8,1,4096,64),(8,64,4,1,4096,128),
    (8,28,4,1,4096,128),(8,32,8,1,4096,128),(48,32,8,1,1500,128),(32,32,8,1,3000,128),
    (16,40,8,1,3001,128),(8,32,8,1,3100,128),(4,32,8,1,6000,128),(128,32,8,1,700,128),
    (96,16,4,1,2000,64),(40,32,8,1,1000,64),(512,8,1,1,800,128),(200,32,8,1,333,128),
    (3,32,8,1,10000,128)]'
# head dim 64 below the whole-heads bound (the class sweep's row, 64 pairs, first; the
# others written before any ran): more programs an SM than the default's two, with fewer stages
# or 64-key tiles, 8 warps, and one program an SM of 4 or 8 warps (132 SMs: 128 programs are
# two runs a head at 64 pairs, 396 three programs an SM, 528 four)
# the rule that followed (the one loop only where a run is several whole heads, ACROSS) against
# 707934c on rows neither ran, written before any did: ten where it applies (head dims 64-256,
# 2-5 heads a run), then six where it does not (a head's last program merging, whole heads
# alone, cut runs), whose code is 707934c's
has ab_decode_across && run ab_decode_across python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_across --before 707934c --rows '[(24,32,8,1,2000,128),(80,8,8,1,900,128),
    (36,32,4,1,1700,128),(300,16,2,1,600,128),(160,32,8,1,256,128),(72,64,8,1,1000,64),
    (100,16,8,1,700,64),(40,16,4,1,2000,256),(150,8,1,1,1200,256),(33,40,8,1,1100,128),
    (8,32,8,1,4097,128),(8,32,8,1,2049,128),(8,32,8,1,4096,64),(8,64,4,1,4096,128),
    (40,32,8,1,1000,64),(6,16,16,1,4000,64)]'
# every (batch, KV head) pair its own program past one wave, where heads are short (8 blocks or
# fewer), against the default's runs of several heads, on rows written after a first look
# (ab_decode_short_many; docs/kernels/flash_decoding.md) and before any of them ran
has ab_decode_short_pairs && run ab_decode_short_pairs python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_short_pairs --rows '[(96,32,8,1,256,128),(192,16,4,1,400,128),
    (128,32,8,1,200,128),(320,32,8,1,128,128),(48,64,8,1,512,128),(100,32,8,1,300,64),
    (256,16,16,1,256,64),(600,8,1,1,256,128)]' --variant 'pairs={"programs": "pairs"}'
# three programs an SM where the launcher counts two (it counts three stages of shared memory,
# Triton 3.6 keeps two: 72 KB at head dim 128 with 64 keys a step), against the default and a
# program a pair, on cut and short-head rows; written before any ran
has ab_decode_per_sm && run ab_decode_per_sm python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_per_sm --rows '[(8,64,4,1,4096,128),(4,32,8,1,8192,128),(160,32,8,1,256,128),
    (320,32,8,1,128,128),(48,64,8,1,512,128),(96,32,8,1,256,128),(128,32,8,1,200,128),
    (600,8,1,1,256,128),(100,32,8,1,300,64),(256,16,16,1,256,64)]' \
  --variant 'three={"programs": "3 an SM"}' --variant 'pairs={"programs": "pairs"}'
# head dim 64 past one wave (more than 528 pairs): the launcher goes from a program a pair, four
# an SM, to runs of whole heads for two an SM; four an SM past it too, against the default and a
# program a pair, on the twelve rows of ab_decode_short_*, _q_stream and _d64_pairs (none run so)
has ab_decode_d64_wave && run ab_decode_d64_wave python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_d64_wave --rows '[(72,64,8,1,1000,64),(100,16,8,1,700,64),
    (100,32,8,1,300,64),(256,16,16,1,256,64),(80,32,8,1,2000,64),(200,16,4,1,1000,64),
    (64,64,16,1,1500,64),(300,8,2,1,800,64),(128,32,8,1,512,64),(48,64,16,1,3000,64),
    (96,32,8,1,4096,64),(700,8,1,1,600,64)]' --variant 'four={"programs": "4 an SM"}' \
  --variant 'pairs={"programs": "pairs"}'
# the rule that followed (runs for four an SM past one wave at head dim 64) on rows neither ran,
# against the cut for two an SM before it (`two`); the last two rows (head dim 128) do not change
has ab_decode_four_rule && run ab_decode_four_rule python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_four_rule --variant 'two={"programs": "2 an SM"}' --rows '[(67,64,8,1,2000,64),
    (144,16,4,1,1500,64),(40,32,16,1,3000,64),(96,64,8,1,777,64),(1000,8,1,1,400,64),
    (128,64,8,1,2048,64),(128,16,8,4,2048,64),(60,16,16,1,5000,64),(550,4,1,1,3000,64),
    (64,64,8,1,1024,128),(200,32,8,1,700,128)]'
# the merge by a head's last program past two runs a head (LAST_MERGES; the H200's A/B at
# 062100e: 0.981-0.985 at four runs, 1.03-1.47 at 8-32), against the merge kernel, on rows of 3-33
# runs a head at head dims 64 and 128 (the class sweep's below cuDNN among them), written first
has ab_decode_last_merges && run ab_decode_last_merges python3 benchmarks/ab_decode.py "$cur" \
  --name ab_decode_last_merges --variant 'last={"LAST_MERGES": true}' \
  --rows '[(8,32,8,1,4096,64),(8,32,8,1,4096,128),(8,4,4,1,4096,128),(7,32,8,1,3000,64),
    (16,16,4,1,2048,64),(9,64,8,1,5000,128),(6,40,8,1,6000,128),(1,32,8,1,32768,128),
    (8,28,4,1,4096,128),(5,32,8,1,2500,64)]'
has ab_decode_d64_occupancy && run ab_decode_d64_occupancy python3 benchmarks/ab_decode.py \
  "$cur" --name ab_decode_d64_occupancy --rows '[(8,32,8,1,4096,64),(8,64,8,1,4096,64),
    (4,32,8,1,8192,64),(2,64,8,1,16384,64),(6,32,8,1,5000,64),(4,16,16,1,6000,64)]' \
  --variant 's2_p3={"num_stages": 2, "programs": 396}' \
  --variant 'n64_p3={"BLOCK_N": 64, "programs": 396}' \
  --variant 'n64_p4={"BLOCK_N": 64, "programs": 528}' --variant 'w8={"num_warps": 8}' \
  --variant 'p1={"programs": 128}' --variant 'p1_w8={"programs": 128, "num_warps": 8}'
has ab_latent && run ab_latent ab_latent
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
    "AB_SETS AB_TESTS AGREE_MODELS AGREE_SHAPE ATTN_MODELS ATTN_SHAPES BEFORE DIAGNOSE GEN_SHAPES "
    "HELDOUT_SHAPES LATENT_SETS MOE_MODELS MOE_SHAPES NCU_TARGETS PART_TIMEOUT TESTS_K "
    "TESTS_WORKERS").split()}
json.dump({**provenance.record(), "knobs": knobs, "parts": parts, "files": files},
          open(os.path.join(cur, name), "w"), indent=1)
PY
tar -czf "$out/current.tar.gz" -C "$out" current && rm -rf "$cur" "$out/cache"
ls -la "$out"
