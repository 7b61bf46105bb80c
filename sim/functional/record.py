"""`Executed`: what one warp instruction did, as the functional step returns it to the timing model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Direction = Literal["read", "write", "atomic"]


@dataclass(slots=True)
class Executed:
    """One executed warp instruction: its active lanes, control outcome and memory access.

    `space` is "" when the instruction made no memory access; then `addrs` is None. `addrs` are
    the byte addresses of the accessing lanes in lane order, relative to the state space (a
    generic address is resolved to shared/local/global when a load or store runs)."""

    mask: np.ndarray  # active lanes: the SIMT stack's mask and the guard predicate
    ctl: int | None = None  # None, or BRANCH, EXIT, BARRIER, ARRIVE (sim.functional.ops_mem)
    next_pc: int = -1  # the warp's pc after this instruction (-1 when the warp is done)
    landed: int = 0  # cp.async groups landed in shared memory by waits so far
    space: str = ""  # global, shared, local, param, const ("generic" for an atomic that names none)
    addrs: np.ndarray | None = None
    size: int = 0  # bytes per lane
    direction: Direction = "read"
    bulk: list[Any] | None = None  # the bulk (TMA) copies it issued (sim.functional.ops_tma.BulkCopy)
