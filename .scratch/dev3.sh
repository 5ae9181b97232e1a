#!/usr/bin/env bash
# session 15, device call 3: warp-specialized Gluon; Q in registers; head_dim 64 routed to Gluon
set -uo pipefail
out=$1; cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
echo "=== ws tests $(date +%T)"
timeout 100 python3 -m pytest -q -p no:cacheprovider -x --junitxml=$out/pytest_sm90_ws.xml \
  tests/test_kernels.py -k "sm90_ws" 2>&1 | tail -5
echo "=== tests $(date +%T)"
timeout 150 python3 -m pytest -q -p no:cacheprovider --junitxml=$out/pytest_sm90_qreg.xml \
  tests/test_kernels.py -k "(sm90 and not ws) or gluon or flash_attention_gpu or extra_memory" 2>&1 | tail -5
echo "=== ab $(date +%T)"
R='[(4, 32, 32, 2048, 64, "fp16", False), (4, 32, 32, 2048, 64, "bf16", True), (2, 32, 8, 4096, 64, "bf16", True), (1, 16, 16, 16384, 128, "fp16", False), (2, 16, 16, 4096, 128, "bf16", False), (4, 16, 16, 4096, 128, "fp16", True), (1, 32, 8, 8192, 128, "bf16", True), (2, 8, 8, 4096, 256, "bf16", False), (1, 8, 8, 4096, 256, "fp16", True)]'
timeout 260 python3 benchmarks/ab_flash.py $out --name ab_flash_gluon3 --rounds 3 --rows "$R" \
  --variant 'triton={}' --variant 'g={"GLUON": {}}' --variant 'gq={"GLUON": {"BLOCK_N": 64, "Q_REG": true}}' \
  --variant 'ws={"GLUON_WS": {}}' --variant 'ws_nopp={"GLUON_WS": {"PINGPONG": false}}' \
  --variant 'ws64={"GLUON_WS": {"BLOCK_N": 64}}' 2>&1 | grep -v "^wrote\|Warn\|_warn" | tail -12
echo "=== done $(date +%T)"
