source .devwheels/install.sh
export PYTHONPATH=$PWD:${PYTHONPATH:-}
set -x
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
time python3 -m validation probe -o $OUT/probe_h200.yaml 2>&1
time python3 -m validation probe --calibrate -o $OUT/probe_h200_calibrated.yaml 2>&1
python3 -m pytest -q -m gpu tests/test_probe.py 2>&1 | tail -3
python3 -m sim run examples/sgemm_tiled.ptx --hw $OUT/probe_h200_calibrated.yaml 2>&1 | tail -3
uptime
