"""SimResult: what one timing simulation reports (plain dataclass, JSON-serialisable)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

#: stall reasons, in the order reports list them
STALL_REASONS = ("scoreboard", "memory", "pipe_busy", "bank_conflict", "barrier", "branch", "flush",
                 "frontend", "no_eligible")


@dataclass
class SimResult:
    """What a timed run returns: cycles, per-unit utilization, stalls, occupancy, outputs."""

    cycles: int  # total: from the first CTA's launch to the last CTA's end
    cycles_per_cta: list[int]  # end - start of each simulated CTA, in launch order
    warp_instructions: int
    ipc: float  # warp instructions per cycle, whole device
    utilization: dict[str, float]  # unit -> busy / (cycles x units), over the cores in use
    busy: dict[str, int]  # unit -> busy cycles summed over its units
    stalls: dict[str, int]  # reason -> scheduler cycles without an issue
    stalls_by_line: dict[int, dict[str, int]]
    bank_conflicts_by_line: dict[int, int]  # PTX line -> extra shared-memory passes
    cache: dict[str, float | None]  # l1_hit_rate, l2_hit_rate (None when no access)
    dram_bytes: int
    flushes: list[dict]  # [{line, count, text, cycles}]
    occupancy: dict[str, Any]  # ctas_per_core, warps_per_core, regs_per_thread, limiter
    series: dict[str, Any] = field(default_factory=dict)  # {"window", "t", "ipc", unit: [fraction...]}
    trace: list[dict] | None = None  # Chrome trace events (trace=True)
    outputs: dict[int, np.ndarray] = field(default_factory=dict)  # arg index -> buffer (not in JSON)
    hw: str = ""
    kernel: str = ""
    ctas_simulated: int = 0
    ctas_total: int = 0

    def to_json(self) -> dict:
        d: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("outputs", "trace"):
                continue
            v = getattr(self, f.name)
            if f.name in ("stalls_by_line", "bank_conflicts_by_line"):
                v = {str(k): val for k, val in v.items()}
            d[f.name] = v
        return d


def jsonable(o: Any) -> Any:
    """`json.dumps(default=...)` for the numpy scalars/arrays and paths our result dicts carry."""
    import pathlib

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, pathlib.PurePath):
        return str(o)
    raise TypeError(type(o).__name__)
