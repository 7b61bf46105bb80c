#!/usr/bin/env bash
# One device call: the wgmma microbenchmarks on the GPU and the simulator, results under $OUT.
#   source .devwheels/install.sh && bash benchmarks/micro_wgmma/run_gpu.sh
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
python3 benchmarks/micro_wgmma/run.py --out "$OUT" > "$OUT/wgmma_log.txt" 2>&1
tail -n 30 "$OUT/wgmma_log.txt"
