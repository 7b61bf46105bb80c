"""Checks shared by the generated-kernel tests (wgmma_tma, wgmma_fp8): a kernel's numpy check in the
simulator from its header alone (with a persistent grid of our choosing) and a corrupted D failing the same
check; ptxas -arch=sm_90a without spills, warnings, and with the register count setmaxnreg needs."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import numpy as np


def sim_check(ptx: str, grid: int, seed: int, corrupt: bool = True) -> tuple[dict, Any, dict, dict]:
    """Run `ptx` in the functional simulator over `grid` persistent CTAs with the header's random inputs and
    assert the numpy check passes (and, with `corrupt`, that every 7th byte of D flipped fails it). Returns
    (metadata, launch before the run, outputs, check)."""
    from sim.functional.runner import run_functional
    from sim.launch import launch_from_metadata, read_metadata
    from sim.ptx.parser import parse_ptx
    from sim.reference import check_from_metadata

    meta = read_metadata(ptx)
    assert meta is not None, "no kernelgen metadata header"
    meta["grid"] = [grid, 1, 1]
    launch = launch_from_metadata(meta, np.random.default_rng(seed))
    before = launch.copy()
    res = run_functional(parse_ptx(ptx, f"{meta['kernel']}.ptx"), launch)
    chk = check_from_metadata(meta, before, res.outputs)
    assert chk is not None and chk["passed"], chk
    if corrupt:
        d = next(i for i, p in enumerate(meta["params"]) if p.get("role") == "D")
        bad = {**res.outputs, d: res.outputs[d].copy()}
        bad[d].view(np.uint8)[::7] ^= 0x40
        with np.errstate(invalid="ignore", over="ignore"):
            bad_chk = check_from_metadata(meta, before, bad)
        assert bad_chk is not None and not bad_chk["passed"]
    return meta, before, res.outputs, chk


def ptxas_clean(ptx: str, tmp_path, two_consumers: bool) -> int:
    """ptxas -arch=sm_90a -v: exit 0, no spills, no warnings; with two consumer warpgroups exactly 168 registers
    at entry (setmaxnreg 40 / 232 needs the full 168 x 384 pool), else at most 255. Returns the count."""
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores" in r.stderr and "0 bytes spill loads" in r.stderr, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr
    m = re.search(r"Used (\d+) registers", r.stderr)
    assert m, r.stderr
    regs = int(m.group(1))
    assert regs == 168 if two_consumers else regs <= 255, r.stderr
    return regs
