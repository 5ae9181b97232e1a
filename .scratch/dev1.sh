#!/usr/bin/env bash
# session 15, device call 1: the review commit's decode tests, the Gluon kernel's tests, A/B
set -uo pipefail
out=$1; cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $out/smi.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
echo "=== tests $(date +%T)"
timeout 200 python3 -m pytest -q -p no:cacheprovider -x --junitxml=$out/pytest_sm90_decode.xml \
  tests/test_kernels.py -k "sm90 or flash_decode" 2>&1 | tail -15
echo "=== ab $(date +%T)"
NC='[(2, 16, 16, 4096, 128, "bf16", False), (1, 16, 16, 16384, 128, "fp16", False), (2, 8, 8, 4096, 256, "fp16", False), (2, 8, 8, 4096, 256, "bf16", False), (4, 32, 32, 2048, 64, "fp16", False), (4, 32, 32, 2048, 64, "bf16", False)]'
timeout 330 python3 benchmarks/ab_flash.py $out --name ab_flash_gluon1 --rows "$NC" --rounds 3 \
  --variant 'g={"GLUON": {}}' \
  --variant 'g64x64s2={"GLUON": {"BLOCK_N": 64, "STAGES": 2}}' \
  --variant 'g64x128s2={"GLUON": {"BLOCK_N": 128, "STAGES": 2}}' \
  --variant 'g128x64w8={"GLUON": {"BLOCK_M": 128, "BLOCK_N": 64, "STAGES": 2, "num_warps": 8}}' \
  --variant 'g64x32s2={"GLUON": {"BLOCK_N": 32, "STAGES": 2}}' 2>&1 | grep -v "^wrote" | tail -20
echo "=== done $(date +%T)"
