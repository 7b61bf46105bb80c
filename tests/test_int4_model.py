"""The planner's s4 timing where the tensor unit has no s4 form (kernelgen/int4.py): sm_90a emulates each
mma.m16n8k64.s4 (ptxas: 2 IMMA.16832.S8.S8 + pipes[tensor].s4_unpack_alu ALU instructions). Measured on the
H200 (2026-12-01, benchmarks/s4_gpu.py, all exact): s4 4096^3 3.312 ms on a 128x256x128 tiling, 2.934 ms on
64x128x128 (the planner's pick under the emulation model), s8 0.252 ms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.analysis import schedule_lines
from kernelgen.int4 import EMULATED_IMMA, emulated_counts, packed_spec, s4_note, unpack_alu
from kernelgen.models.schedule import planner_hw
from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get
from sim.hw import load_hw

ROOT = Path(__file__).resolve().parent.parent
MEASURED_MS = {"128x256": 3.312, "64x128": 2.934}  # H200, 2026-12-01, s4 4096^3 (benchmarks/s4_gpu.py)
TILE = Tiling(variant="mma", bm=128, bn=256, bk=128, tm=64, tn=64, stages=2, pad_a=16, pad_b=16, vec_a=16,
              vec_b=16, unroll_k=0, mma_k=32)
PICK = Tiling(variant="mma", bm=64, bn=128, bk=128, tm=32, tn=16, stages=2, pad_a=0, pad_b=0, vec_a=16,
              vec_b=16, unroll_k=0, mma_k=32)


def _spec(dtype: str, m: int = 4096, n: int = 4096, k: int = 4096):
    return parse_spec({"M": m, "N": n, "K": k, "dtype": {"a": dtype, "out": "s32"}})


def test_h200_emulates_s4_and_npu7nm_does_not():
    s4 = packed_spec(_spec("s4", 64, 64, 128))
    assert unpack_alu(s4, load_hw("h200")) == 152
    assert unpack_alu(s4, load_hw("npu7nm")) is None
    assert unpack_alu(_spec("s8", 64, 64, 128), load_hw("h200")) is None
    assert "EMULATED: h200 (sm_90a) has no s4 tensor path" in s4_note(s4, load_hw("h200"))
    assert "EMULATED" not in s4_note(s4, load_hw("npu7nm"))


def test_emulated_counts_double_the_mmas_and_add_the_unpacking():
    hw = load_hw("h200")
    s4 = packed_spec(_spec("s4"))
    c = get("mma").counts(s4, TILE)
    e = emulated_counts(c, s4, hw)
    n = c.iter["tensor"]
    assert n == TILE.tm // 16 * TILE.tn // 8 * TILE.bk // 32  # the warp's mmas per K tile
    assert e.iter["tensor"] == EMULATED_IMMA * n and e.iter["alu"] == c.iter["alu"] + 152 * n
    assert e.iter["lsu"] == c.iter["lsu"] and e.post == c.post  # nothing else moves
    assert emulated_counts(c, s4, load_hw("npu7nm")) is c


def test_s4_prediction_against_the_h200():
    """Both measured tilings: the planner's ratio of the two times (1.107: one ALU count for both, its latency
    network charging the 2-warps-per-scheduler tiling more) is within 2% of the measured 1.129 (which the
    kernels' own ALU counts, 171 and 152 per mma, explain), and each time is 8-10% short: the two kernels run
    1.16x their ALU-pipe demand at 1980 MHz alike (docs/kernelgen.md: not their warps per scheduler, 2 vs 8;
    an SM clock under 1980 MHz would do it, benchmarks/s4_gpu.py --profile measures it). Before the emulation
    was modelled the prediction was 0.143 ms (0.043x)."""
    hw = load_hw("h200")
    ms = 1e3 / (planner_hw(hw).clock_mhz * 1e6)  # the plan's cycles are at [planner_clock_mhz]
    big = plan(_spec("s4"), hw, "mma", only=[TILE]).best.cycles * ms
    pick = plan(_spec("s4"), hw, "mma", only=[PICK]).best.cycles * ms
    assert abs((big / pick) / (MEASURED_MS["128x256"] / MEASURED_MS["64x128"]) - 1) < 0.02, (big, pick)
    # at the planner's 1550 MHz (the clock of sustained wgmma load) these ALU-bound kernels read 1.15-1.17 of their
    # measured time (0.90-0.92 at 1980 MHz): they ran between the two
    assert 1.05 < big / MEASURED_MS["128x256"] < 1.25 and 1.05 < pick / MEASURED_MS["64x128"] < 1.25, (big, pick)
    s8 = plan(_spec("s8"), hw, "mma", only=[TILE]).best
    # s8 (measured 0.252 ms) in the s4 times' band: 0.87 since the planner stopped charging the PTX registers'
    # bank cycles on the mma's occupancy (session 8; 0.94 before), as the f16 128x256 4096^3 kernel of
    # docs/top4.md, whose per-CTA cycles it now predicts within 1% while its wall time is 11% over cycles x
    # clock_mhz (an SM clock under 1980 MHz under load, launch and wave tail)
    assert 0.95 < s8.cycles * ms / 0.252 < 1.15, s8.cycles * ms  # 1.06 at 1550 MHz (0.83 at 1980)


@pytest.mark.slow
def test_planner_picks_the_faster_s4_tiling():
    """The whole search for s4 4096^3 on h200 lands on the 64x128 tiling measured 11% faster."""
    assert plan(_spec("s4"), load_hw("h200"), "mma").best.tiling == PICK


def test_analysis_says_s4_is_emulated():
    p = plan(_spec("s4", 256, 256, 512), load_hw("h200"), "mma", only=[TILE])
    text = "\n".join(schedule_lines(p))
    assert "EMULATED" in text and "s4_unpack_alu" in text
    assert "EMULATED" in p.log[0]


@pytest.mark.slow
def test_hwconfig_count_matches_what_ptxas_emits():
    """benchmarks/s4_emulation.py reruns the count: the field stays within what ptxas emits per mma."""
    from sim.sass.tools import tools_available

    if not tools_available():
        pytest.skip("ptxas / nvdisasm not found")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "s4_emulation.py"), "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    cases = json.loads(r.stdout)["cases"]
    per_mma = [c["alu_per_mma"] for c in cases.values()]
    assert all(c["imma_per_mma"] == EMULATED_IMMA and c["calls"] > 0 for c in cases.values())
    assert min(per_mma) - 2 <= load_hw("h200").pipe_for("tensor").s4_unpack_alu <= max(per_mma) + 2, per_mma


def test_gemm_shorthand_range_of_s4_takes_even_k():
    from kernelgen.spec import shorthand
    from sim.errors import UsageError

    k = shorthand("16x16x2..64", "int4", "s32").K
    assert (k.lo, k.hi, k.multiple_of) == (2, 64, 2)
    with pytest.raises(UsageError, match="even K"):
        shorthand("16x16x3..64", "int4", "s32")
