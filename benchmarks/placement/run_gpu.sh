#!/usr/bin/env bash
# One device call: CTA placement (placement.cu) and Triton PTX fixtures; results under $OUT.
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
date -u >> "$OUT/device.txt"
nvcc -arch=sm_90a -O2 benchmarks/placement/placement.cu -o /tmp/placement && /tmp/placement > "$OUT/placement.csv" 2>> "$OUT/device.txt"
[ -n "${SKIP_TRITON:-}" ] || { mkdir -p /tmp/tf && python3 benchmarks/triton_fixtures/make.py /tmp/tf > "$OUT/triton_log.txt" 2>&1; tar -C /tmp -czf "$OUT/triton_fixtures.tgz" tf; }
tail -5 "$OUT/triton_log.txt"; wc -l "$OUT/placement.csv"; cat "$OUT/device.txt"
