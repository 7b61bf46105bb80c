"""Registers per thread for occupancy: what ptxas allocates, where the hardware names an architecture
that ptxas targets (HwConfig.arch) and ptxas is installed; otherwise the PTX-declared count, which the
result marks as an estimate (on the H200 it is 2 to 9 times what ptxas allocates: docs/sass-census.md).
"""

from __future__ import annotations

from sim.errors import WorkbenchError
from sim.hw import HwConfig
from sim.ptx.ir import Kernel, Program
from sim.sass.tools import INSTALL_HINT, find_tool, resources
from sim.timing.static import regs_per_thread

PTXAS = "ptxas"


def registers_for_occupancy(prog: Program, k: Kernel, hw: HwConfig) -> tuple[int, str]:
    """(registers per thread, where the count comes from: "ptxas" or "ptx-declared (estimate: why)")."""
    declared = regs_per_thread(k, hw)
    if hw.arch is None:
        return declared, f"ptx-declared (estimate: {hw.name} names no architecture ptxas targets)"
    if find_tool("ptxas") is None or find_tool("nvdisasm") is None:
        return declared, f"ptx-declared (estimate: ptxas/nvdisasm not installed; {INSTALL_HINT})"
    try:
        r = resources(prog.text, hw.arch, k.file).get(k.name)
    except WorkbenchError as e:
        return declared, f"ptx-declared (estimate: ptxas failed: {e.one_line()[:160]})"
    if r is None:
        return declared, f"ptx-declared (estimate: ptxas reported no entry {k.name})"
    return max(1, min(r.regs, hw.limits.regs_per_thread)), PTXAS
