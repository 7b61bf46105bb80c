"""A pipe unit of the timing model (a free-at resource; units.py has the others)."""

from __future__ import annotations

from sim.hw import Pipe


class PipeUnit:
    """One pipe unit (Pipe.lanes lane-operations per cycle, Pipe.interval, Pipe.latency)."""

    __slots__ = ("pipe", "free", "busy", "queued", "busy_at", "mgen", "mmin")

    def __init__(self, pipe: Pipe):
        self.pipe = pipe
        self.free = 0  # cycle at which it accepts the next instruction (St.occ cycles after the last)
        self.busy = 0  # cycles occupied (for utilization)
        # issue cycle -> cycles occupied by the instructions issued then (the utilization series), summed
        # as they issue: memory grows with the cycles, not with the instructions
        self.busy_at: dict[int, int] = {}
        self.queued = 0  # cycle at which its queued asynchronous work (wgmma MACs) is done
        # WarpT.recompute's scratch: the earliest operand-ready cycle of an older plan entry on this unit
        # (mmin), valid while mgen is that plan's number (Core.plan_gen)
        self.mgen = 0
        self.mmin = 0
