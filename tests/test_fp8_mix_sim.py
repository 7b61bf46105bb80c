"""benchmarks/fp8_mix.py --sim: the simulator beside the H200 on two warpgroups of one SM (docs/fidelity.md,
Session 15). A fidelity regression check on three of its cases against the committed H200 figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import fp8_mix
from tests.test_sass_exec import needs_tools

MEASURED = Path(__file__).parent.parent / "benchmarks" / "data" / "fp8_mix_h200_2026-12-02.json"


@needs_tools
@pytest.mark.slow
@pytest.mark.parametrize("roles", [("mma", "idle"), ("promote", "promote"), ("ffma", "idle")], ids="+".join)
def test_sass_mode_within_5_percent_of_the_h200(roles):
    """SASS mode: a lone wgmma group loop (H200 309.1 cycles per iteration), two promotion loops (513.3 / 511.2), an
    FMA stream (67.6) within 5% of the H200; PTX mode's FMA stream is 1.5x slow (its register banks are the PTX
    virtual registers'), which this records too so that a change to it shows."""
    (row,) = fp8_mix.simulate_cases(MEASURED, (roles,))["rows"]
    gpu = {k[4:]: v for k, v in row.items() if k.startswith("gpu_")}
    assert gpu
    for k, g in gpu.items():
        assert abs(row[f"sass_{k}"] - g) / g <= 0.05, (k, row)
        if roles == ("ffma", "idle"):
            assert row[f"ptx_{k}"] / g > 1.4, (k, row)
