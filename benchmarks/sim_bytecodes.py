"""Python bytecodes and calls per warp instruction of the timing model: a load-independent measure of its
cost (the machine this is developed on runs at load 10-17 on 2 cores, where process times move by
+-30% between runs of the same code).

    PYTHONPATH=. python benchmarks/sim_bytecodes.py [--kernels sgemm_64,mma_64]

Counts every bytecode executed (sys.settrace with per-opcode events) during `simulate`, with the lock-step
records made beforehand (not counted), on two small kernels: the sgemm fixture at 64^3 and a kernelgen
mma f16 64^3 GEMM (h200.yaml). C functions (numpy, builtins) count as the one call that enters them.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

KERNELS = ("sgemm_64", "mma_64")


def build(name: str):
    from sim.hw import load_hw

    hw = load_hw("h200")
    if name == "sgemm_64":
        from tests.test_timing_speed import _sgemm

        prog, launch = _sgemm(64)
        return prog, launch, hw
    if name == "mma_64":
        from tests.recorded_sim import build as rbuild

        prog, launch = rbuild("kernelgen:mma:64x64x64:f16", "h200")
        return prog, launch, hw
    raise ValueError(f"unknown kernel {name!r}: one of {', '.join(KERNELS)}")


def count(name: str) -> tuple[int, int, int]:
    """(warp instructions, bytecodes, Python calls) of one timing simulation."""
    import sim.timing.engine as eng

    hook = "recorded" if hasattr(eng, "recorded") else "replay_for"
    made = getattr(eng, hook)
    prog, launch, hw = build(name)
    rec = made(prog, launch, 10**7)
    setattr(eng, hook, lambda *a, **k: rec)
    n = [0, 0]

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            n[1] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            n[0] += 1
        return tracer

    try:
        sys.settrace(tracer)
        r = eng.simulate(prog, launch, hw)
    finally:
        sys.settrace(None)
        setattr(eng, hook, made)
    return r.warp_instructions, n[0], n[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=",".join(KERNELS))
    a = ap.parse_args()
    for name in a.kernels.split(","):
        w, ops, calls = count(name)
        print(f"{name}: {w:,} warp instructions, {ops / w:.1f} bytecodes and {calls / w:.2f} Python calls "
              "per warp instruction", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
