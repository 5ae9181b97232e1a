#!/usr/bin/env bash
# session 15, device call 4: routing tests; the kernels benchmark with the Gluon defaults
set -uo pipefail
out=$1; cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== tests $(date +%T)"
timeout 120 python3 -m pytest -q -p no:cacheprovider --junitxml=$out/pytest_gluon_routes.xml \
  tests/test_kernels.py -k "sm90_ws or runs_the_gluon or flash_attention_gpu" 2>&1 | tail -4
echo "=== flash $(date +%T)"
timeout 200 python3 benchmarks/kernels.py $out/flash flash_default 2>&1 | grep "^flash" | cut -c1-230
echo "=== rest $(date +%T)"
timeout 260 python3 benchmarks/kernels.py $out/rest gelu,decode_default,lab_decode 2>&1 | tail -3
echo "=== done $(date +%T)"
