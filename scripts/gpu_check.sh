#!/usr/bin/env bash
# GPU tests + benchmarks in one go; results land in the folder given as $1 (e.g. $OUT).
# Usage: scripts/gpu_check.sh OUT [parts]
#   parts: any of tests,kernel_tests,measure,fusion,kernels,l2,generate,decode_attn,decoder,
#          attn_tiles,attn_ratios,attn_sweep,lab,notebook, and on two or more GPUs: collectives,lab6;
#          kernel_tests and other_tests split tests (on the H200: about 150 s and 360 s);
#          generate_gemma and generate_8b split generate (all three models take about 7 min)
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [parts]}
parts=${2:-tests,measure,fusion,kernels,l2,generate,decoder,attn_tiles,attn_ratios,attn_sweep,lab,notebook}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ROOFLAB_CACHE=$out/cache
mkdir -p "$out/bench"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/bench/nvidia-smi.txt"
run() { echo "=== $1 ($(date +%T))"; shift; "$@"; echo "=== rc=$? ($(date +%T))"; }
has() { [[ ",$parts," == *",$1,"* ]]; }
has tests && run tests python3 -m pytest -q -p no:cacheprovider --junitxml="$out/bench/pytest-gpu.xml" tests
has kernel_tests && run kernel_tests python3 -m pytest -q -p no:cacheprovider \
  --junitxml="$out/bench/pytest-gpu-kernels.xml" tests/test_kernels.py
has other_tests && run other_tests python3 -m pytest -q -p no:cacheprovider \
  --junitxml="$out/bench/pytest-gpu-other.xml" tests --deselect tests/test_kernels.py
has measure && run measure python3 benchmarks/measurement.py "$out/bench"
has fusion && run fusion python3 benchmarks/fusion.py "$out/bench"
has kernels && run kernels python3 benchmarks/kernels.py "$out/bench"
has l2 && run l2 python3 benchmarks/l2_bandwidth.py "$out/bench"
has generate && run generate python3 benchmarks/generate.py "$out/bench"
has generate_gemma && run generate_gemma python3 benchmarks/generate.py "$out/bench/gemma" \
  gemma-3-270m-it
has generate_8b && run generate_8b python3 benchmarks/generate.py "$out/bench/8b" \
  Llama-3.1-8B,Qwen3-8B
has decode_attn && run decode_attn python3 benchmarks/decode_attention.py "$out/bench"
has decoder && run decoder python3 benchmarks/decoder.py "$out/bench"
for a in tiles ratios sweep; do
  has attn_$a && run attn_$a python3 benchmarks/attention.py "$out/bench" $a
done
has lab && run lab python3 -m rooflab lab --out "$out/bench/report"
has collectives && run collectives bash -c "python3 -m rooflab collectives --json > $out/bench/collectives.json"
has lab6 && run lab6 python3 -m rooflab lab --parts 6 --out "$out/bench/report6"
# the notebooks' code cells, in order, as one script each (the device has no Jupyter kernel);
# notebook_t4 runs the solutions on the T4 code path (no native bf16) forced on this GPU, quick
root=$PWD
nb() {  # nb NAME LOG [env...]
  local name=$1 log=$2; shift 2
  mkdir -p "$out/bench/nb_${log%.txt}" && (cd "$out/bench/nb_${log%.txt}" && env MPLBACKEND=Agg "$@" \
    python3 -c "import json; cells = json.load(open('$root/notebooks/$name'))['cells'];
exec(compile(chr(10).join(''.join(c['source']) for c in cells if c['cell_type'] == 'code'), '$name', 'exec'))" \
    > "$out/bench/$log" 2>&1); local rc=$?; grep -c '^OK:' "$out/bench/$log"; grep -c '^NOT YET:' "$out/bench/$log"
  tail -5 "$out/bench/$log"; return $rc
}
has notebook && run notebook nb lab1.ipynb notebook.txt
has notebook_solutions && run notebook_solutions nb lab1_solutions.ipynb notebook_solutions.txt
has notebook_t4 && run notebook_t4 nb lab1_solutions.ipynb notebook_t4.txt ROOFLAB_QUICK=1 \
  PYTHONPATH="$root:$root/scripts/t4_path"
rm -rf "$out/bench/traces"
tar -czf "$out/bench.tar.gz" -C "$out" bench && rm -rf "$out/bench" "$out/cache"
ls -la "$out"
