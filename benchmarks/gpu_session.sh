#!/usr/bin/env bash
# One device call: GPU tests, sanitizers, benchmarks. Usage on the device machine:
#   source .devwheels/install.sh && bash benchmarks/gpu_session.sh $OUT [bench-args...]
set -u
OUT=$1; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
python3 -m pytest -m gpu -q -rs 2>&1 | tail -40 > "$OUT/pytest_gpu.txt"
{ compute-sanitizer --tool memcheck python3 benchmarks/gpu_sanitize.py 2>&1 | tail -25; } > "$OUT/sanitizer.txt"
{ echo "=== racecheck"; compute-sanitizer --tool racecheck python3 benchmarks/gpu_sanitize.py 2>&1 | tail -25; } >> "$OUT/sanitizer.txt"
python3 benchmarks/gpu_bench.py --out "$OUT" "$@" > "$OUT/bench_log.txt" 2>&1
tail -n 5 "$OUT/pytest_gpu.txt" "$OUT/sanitizer.txt" "$OUT/bench_log.txt"
