"""Memory path of one core: shared-memory banks, L1 (if configured), the device L2 and DRAM.

`access` turns one warp access (the memory fields of the functional model's `Executed` record)
into the cycle its data is ready, charging the units it uses. Latencies are load-to-use totals
(docs/hwconfig.md): shared -> SharedMemory.latency (+ SharedMemory.pass_cycles per extra conflict
pass), L1 hit -> l1.hit_latency, L2 hit -> l2.hit_latency, miss -> DRAM (GlobalMemory.latency +
bank queueing).
"""

from __future__ import annotations

import numpy as np

from sim.functional.record import Direction
from sim.hw import HwConfig
from sim.timing.units import Dram, SetAssocCache, SharedBanks


class DeviceMemory:
    """What all cores share: the L2, and the number of cores sharing the DRAM bandwidth."""

    def __init__(self, hw: HwConfig, sharing_cores: int | None = None):
        self.l2 = SetAssocCache(hw.l2)
        self.sharing_cores = sharing_cores
        self.shared_passes: dict[tuple[bytes, str, int], int] = {}  # SharedBanks memo shared by all cores


class CoreMemory:
    def __init__(self, hw: HwConfig, dev: DeviceMemory):
        self.hw = hw
        self.shared = SharedBanks(hw.shared, dev.shared_passes)
        self.l1 = SetAssocCache(hw.l1) if hw.l1 is not None else None
        self.l2 = dev.l2
        self.dram = Dram(hw, dev.sharing_cores)
        self.lsu_latency = hw.pipe_for("lsu").latency

    def shared_access(self, t: int, addrs: np.ndarray, size: int) -> tuple[int, int]:
        """(ready cycle, extra passes)."""
        sm = self.hw.shared
        p = self.shared.passes(addrs, size)
        start = self.shared.take(t, p)
        extra = p - 1
        return start + sm.latency + extra * sm.pass_cycles, extra

    def global_access(self, t: int, addrs: np.ndarray, size: int, is_store: bool, use_l1: bool,
                      atomic: bool = False) -> int:
        """Ready cycle of a global access; coalesced into lines of l2.line bytes and sectors."""
        l2c = self.hw.l2
        a = addrs.astype(np.int64)
        first = a // l2c.sector
        last = (a + size - 1) // l2c.sector
        sectors = np.unique(np.concatenate([first, last])) if size > 1 else np.unique(first)
        per_line: dict[int, int] = {}
        spl = l2c.line // l2c.sector
        for s in sectors.tolist():
            per_line[s // spl] = per_line.get(s // spl, 0) + 1
        worst = t + self.lsu_latency
        for line, nsec in per_line.items():
            if is_store or atomic:
                # write-through, no L1 allocate: the write lands in the L2 (allocated there; write-back
                # traffic to DRAM is not modelled)
                self.l2.access(line)
                lat = t + (l2c.hit_latency if atomic else self.lsu_latency)
            elif use_l1 and self.l1 is not None and self.l1.access(line * l2c.line // self.l1.c.line):
                lat = t + self.l1.c.hit_latency
            elif self.l2.access(line):
                lat = t + l2c.hit_latency
            else:
                lat, _ = self.dram.request(t, line * l2c.line, nsec * l2c.sector)
            worst = max(worst, lat)
        return worst

    def access(self, t: int, space: str, addrs: np.ndarray, size: int, direction: Direction,
               cache_op: str) -> tuple[int, int]:
        """(ready cycle, extra shared passes) of one warp access (the fields of an `Executed` record)."""
        if space == "shared":
            return self.shared_access(t, addrs, size)
        if space in ("global", "local"):
            use_l1 = cache_op not in ("cg", "cs", "cv") and space != "local" or space == "local"
            return self.global_access(t, addrs, size, direction != "read", use_l1, direction == "atomic"), 0
        return t + self.lsu_latency, 0  # .param / .const: constant cache, treated as a hit
