"""Register allocation model: live ranges -> peak 32-bit registers per thread, spill prediction.

Live across the K loop (the peak): accumulators, the operand fragments of one k step (ptxas keeps
the next step's fragments live too, so they count twice for mma), the loop's address and bound
registers, the kernel parameters. The analytic count is scaled by a per-shape factor (per
thread/warp tile, TILE_K, copy width, epilogue flavour and block size; coarser keys as fallback)
measured with
``ptxas -arch=sm_90a -v`` (``calibrate_registers.py`` writes ``registers_calibration.json``), so the
prediction tracks what ptxas allocates. Fields used: hw.limits.regs_per_thread,
hw.registers.per_thread (spill threshold), hw.core.registers (occupancy, in schedule.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling
from kernelgen.variants import get

CALIBRATION = Path(__file__).with_name("registers_calibration.json")


@dataclass(frozen=True)
class RegisterEstimate:
    accumulators: int
    fragments: int
    addressing: int
    params: int
    analytic: int  # sum of the live ranges above
    factor: float  # ptxas calibration factor for this shape (1.0 when uncalibrated)
    per_thread: int  # predicted registers per thread
    limit: int  # hw.limits.regs_per_thread
    spill: bool
    calibrated: bool


def calibration_key(spec: GemmSpec, t: Tiling) -> str:
    flavour = "plain" if not (spec.has_c or spec.epilogue) else "epi"
    return f"{t.variant}:{t.tm}x{t.tn}:k{t.bk}:v{min(t.vec_a, t.vec_b)}:{flavour}"


@lru_cache(maxsize=1)
def _table() -> dict[str, float]:
    try:
        return json.loads(CALIBRATION.read_text())
    except (OSError, ValueError):
        return {}


def live_ranges(spec: GemmSpec, t: Tiling) -> tuple[int, int, int, int]:
    nbuf = 3 + spec.has_c + spec.has_bias + spec.has_scale
    params = 2 * nbuf + 4 + spec.has_c  # 64-bit pointers, M N K alpha (beta)
    acc, frag, addressing = get(t.variant).live_ranges(t)
    return acc, frag, addressing, params


def estimate(spec: GemmSpec, t: Tiling, regs_limit: int) -> RegisterEstimate:
    """regs_limit: hw.limits.regs_per_thread (min'd with the spec's hard constraint by the caller)."""
    acc, frag, addressing, params = live_ranges(spec, t)
    analytic = acc + frag + addressing + params
    key = calibration_key(spec, t)
    tab = _table()
    fine = f"{key}:T{t.threads}"
    finer = f"{fine}:g{t.grid_n}"  # variant.calibrate_by_grid: the grid's shape changes ptxas's scheduling
    factor = tab.get(finer, tab.get(fine, tab.get(key, 1.0)))
    key = finer if finer in tab else (fine if fine in tab else key)
    per_thread = int(round(analytic * factor))
    per_thread = max(per_thread, 16)
    return RegisterEstimate(acc, frag, addressing, params, analytic, factor, per_thread, regs_limit,
                            per_thread > regs_limit, key in tab)
