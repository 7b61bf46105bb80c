"""s4 on the H200 against the planner's emulation model (hwconfigs/h200.yaml pipes[tensor].s4_unpack_alu,
kernelgen/int4.py): one invocation on the GPU machine, JSON under --out.

s4 4096^3 (s32 out) with two tilings: the one measured on 2026-12-01 (128x256x128, 3.2852 ms; one CTA per SM,
two warps per scheduler) and the planner's pick under the emulation model; the s8 kernel of the planner's
pick for scale. Each D is compared with numpy's product (float64: |sums| <= 64 K < 2^53, so exact), each
time (median of 10 after 2 warm-ups, validation.gpu.run_on_gpu) is printed next to the planner's prediction
for that tiling and its ALU-pipe bound (the cycle model's res_alu term).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 benchmarks/s4_gpu.py --out $OUT [--profile]

--profile emits the kernels with clock64 stamps (kernelgen's profile slots) and runs the measured tile, the
planner's pick (NEW_TILE) and s8: each CTA's SM cycles against the prediction, and the SM clock they imply.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPE = (4096, 4096, 4096)
NEW_TILE = dict(variant="mma", bm=64, bn=128, bk=128, tm=32, tn=16, stages=2, pad_a=0, pad_b=0, vec_a=16, vec_b=16,
                unroll_k=0, mma_k=32)  # the planner's pick under the emulation model (measured 2.934 ms, 2026-12-01)
MEASURED_TILE = dict(variant="mma", bm=128, bn=256, bk=128, tm=64, tn=64, stages=2, pad_a=16, pad_b=16,
                     vec_a=16, vec_b=16, unroll_k=0, mma_k=32)


def pack(np: Any, x: Any) -> Any:
    x = (x & 0xF).astype(np.uint8).reshape(-1)
    return (x[0::2] | (x[1::2] << 4)).astype(np.uint8)


def one(np: Any, dtype: str, tiling: Any, A: Any, Bt: Any, ref: Any, profile: bool = False) -> dict[str, Any]:
    from kernelgen.planner import plan
    from kernelgen.spec import parse_spec
    from kernelgen.variants import get
    from sim.hw import load_hw
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu

    hw = load_hw("h200")
    M, N, K = SHAPE
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": dtype, "out": "s32"}})
    p = plan(spec, hw, "mma", only=[tiling] if tiling is not None else None)
    e = p.best
    ptx = get("mma").emit(spec, e.tiling, {}, profile=profile)
    launch = launch_from_metadata(read_metadata(ptx), np.random.default_rng(0))
    roles = {a.role: i for i, a in enumerate(launch.args)}
    launch.args[roles["A"]].array = pack(np, A) if dtype == "s4" else A.astype(np.int8).reshape(-1)
    launch.args[roles["B"]].array = pack(np, Bt) if dtype == "s4" else Bt.astype(np.int8).reshape(-1)
    m = run_on_gpu(ptx, launch, warmup=2, repeats=10, profile_slots=4 if profile else None)
    got = m.outputs[roles["D"]].reshape(M, N).astype(np.float64)
    ms = 1e3 / (hw.clock_mhz * 1e6)
    alu = e.model.terms.get("res_alu")
    ktiles = -(-(K // (2 if dtype == "s4" else 1)) // e.tiling.bk)
    return {"dtype": dtype, "tiling": e.tiling.key(), "exact": bool(np.array_equal(got, ref)),
            "measured_ms": m.wall_ms_median, "measured_ms_all": m.wall_ms_all,
            "predicted_ms": e.cycles * ms, "ratio_predicted_over_measured": e.cycles * ms / m.wall_ms_median,
            "bound": e.model.bound, "resident_ctas": e.model.resident, "rounds": e.model.rounds,
            "alu_bound_ms": (e.model.pre_cycles + ktiles * alu + e.model.post_cycles) * e.model.rounds * ms
            if alu else None, "iter_cycles": e.model.iter_cycles,
            "terms": {k: round(v, 1) for k, v in e.model.terms.items()},
            **(clock64(np, m, e, ktiles) if profile else {})}


def clock64(np: Any, m: Any, e: Any, ktiles: int) -> dict[str, Any]:
    """What the CTAs' own clock64 stamps say (thread 0: CTA start, before the K loop, after it, CTA end): the
    median CTA in SM cycles, the K loop's mean, and the SM clock they imply with the wall time (rounds of
    resident CTAs x median CTA cycles / wall time)."""
    per = m.per_cta_cycles or []
    med = float(np.median(per)) if per else None
    phases = m.extra.get("profile_phase_cycles") if hasattr(m, "extra") and m.extra else None
    return {"profile": True, "cta_cycles_median": med, "cta_cycles_predicted": e.cycles_per_cta,
            "phase_cycles_mean": phases, "k_loop_cycles_predicted": ktiles * e.model.iter_cycles,
            "implied_clock_mhz": e.model.rounds * med / (m.wall_ms_median * 1e3) if med else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "s4_gpu_out"))
    ap.add_argument("--profile", action="store_true", help="clock64 stamps per CTA (SM cycles, implied clock)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"load_average_start": os.getloadavg()[0], "runs": [], "errors": []}
    try:
        import numpy as np

        from kernelgen.tiling import Tiling

        M, N, K = SHAPE
        rng = np.random.default_rng(3)
        A = rng.integers(-8, 8, (M, K))
        Bt = rng.integers(-8, 8, (N, K))
        t0 = time.perf_counter()
        ref = A.astype(np.float64) @ Bt.T.astype(np.float64)
        res["reference_s"] = time.perf_counter() - t0
        runs = [("s4", Tiling(**MEASURED_TILE)), ("s4", Tiling(**NEW_TILE) if args.profile else None), ("s8", None)]
        for dtype, tiling in runs:
            try:
                res["runs"].append(one(np, dtype, tiling, A, Bt, ref, args.profile))
                print(json.dumps(res["runs"][-1]))
            except Exception:  # noqa: BLE001 - keep the other runs
                res["errors"].append(traceback.format_exc())
    except Exception:  # noqa: BLE001
        res["errors"].append(traceback.format_exc())
    res["load_average_end"] = os.getloadavg()[0]
    (out / ("s4_gpu_profile.json" if args.profile else "s4_gpu.json")).write_text(json.dumps(res, indent=1))
    return 1 if res["errors"] or not all(r["exact"] for r in res["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
