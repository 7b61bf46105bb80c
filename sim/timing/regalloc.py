"""Registers per thread for occupancy: what ptxas allocates, where the hardware names an architecture
that ptxas targets (HwConfig.arch) and ptxas is installed; otherwise the PTX-declared count, which the
result marks as an estimate (on the H200 it is 2 to 9 times what ptxas allocates: docs/sass-census.md).
The estimate stands in only where the answer cannot change from one run to the next (no architecture, no
ptxas, ptxas rejects the PTX); ptxas failing to run (sim.sass.tools retries it) is an error, never a silent
estimate: the same launch must time the same on a loaded machine.
"""

from __future__ import annotations

from sim.errors import PtxError
from sim.hw import HwConfig
from sim.ptx.ir import Kernel, Program
from sim.sass.tools import INSTALL_HINT, SassError, find_tool, resources
from sim.timing.static import regs_per_thread

PTXAS = "ptxas"


def registers_for_occupancy(prog: Program, k: Kernel, hw: HwConfig) -> tuple[int, str]:
    """(registers per thread, where the count comes from: "ptxas" or "ptx-declared (estimate: why)")."""
    declared = regs_per_thread(k, hw)
    if hw.arch is None:
        return declared, f"ptx-declared (estimate: {hw.name} names no architecture ptxas targets)"
    if find_tool("ptxas") is None:
        return declared, f"ptx-declared (estimate: ptxas not installed; {INSTALL_HINT})"
    try:
        r = resources(prog.text, hw.arch, k.file).get(k.name)
    except PtxError as e:  # ptxas rejected the PTX: the same every time
        return declared, f"ptx-declared (estimate: ptxas failed: {e.one_line()[:160]})"
    except SassError as e:
        raise SassError(f"ptxas, asked for the registers that set occupancy, failed to run: {e.message[:200]} "
                        "(the timing would otherwise depend on it; give regs_per_thread to run without ptxas)",
                        k.file) from e
    if r is None:
        return declared, f"ptx-declared (estimate: ptxas reported no entry {k.name})"
    return max(1, min(r.regs, hw.limits.regs_per_thread)), PTXAS
