#!/usr/bin/env bash
# Compile the silicon suite's CUDA C (micro/ and public/) to PTX with this machine's nvcc (CUDA 13.0),
# check each with ptxas, then write benchmarks/silicon/kernels/*.ptx (launch headers) and the GEMMs.
# Usage: benchmarks/silicon/micro/regen.sh   (from anywhere; needs PYTHONPATH=<repo root>)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
for dir in "$here/micro" "$here/public"; do
    cd "$dir"
    for cu in *.cu; do
        x="${cu%.cu}"
        echo "nvcc -O3 -ptx -arch=sm_90a $cu -o $x.ptx   ($dir)"
        nvcc -O3 -ptx -arch=sm_90a "$cu" -o "$x.ptx"
        ptxas -arch=sm_90a "$x.ptx" -o /dev/null
    done
done
cd "$here/../.."
python3 benchmarks/silicon/build.py
