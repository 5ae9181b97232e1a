#!/usr/bin/env bash
# session 15, device call 2: the Gluon kernel with causal and the early Q K^T; all 14 rows
set -uo pipefail
out=$1; cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
echo "=== tests $(date +%T)"
timeout 200 python3 -m pytest -q -p no:cacheprovider --junitxml=$out/pytest_sm90_causal.xml \
  tests/test_kernels.py -k "sm90" 2>&1 | tail -8
echo "=== ab $(date +%T)"
timeout 330 python3 benchmarks/ab_flash.py $out --name ab_flash_gluon2 --rounds 3 \
  --variant 'g={"GLUON": {}}' --variant 'gE={"GLUON": {"EARLY_QK": true}}' \
  --variant 'gE64={"GLUON": {"EARLY_QK": true, "BLOCK_N": 64}}' \
  --variant 'gE8w={"GLUON": {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "EARLY_QK": true}}' 2>&1 | grep -v "^wrote" | tail -20
echo "=== done $(date +%T)"
