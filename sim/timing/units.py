"""Hardware units of the timing model, one small class each, configured from HwConfig fields only.

Every unit is a "free-at" resource: it records the cycle at which it can accept work again, so
the model computes start and finish times at issue without ticking idle cycles.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from sim.hw import Cache, GlobalMemory, HwConfig, RegisterFile, SharedMemory


class RegBanks:
    """Register-file operand bank conflicts: RegisterFile.banks, RegisterFile.read_ports."""

    def __init__(self, rf: RegisterFile):
        self.rf = rf

    def extra_cycles(self, srcs: tuple[str, ...]) -> int:
        """RegisterFile.conflict_cycles of the distinct source registers (number = the name's digits)."""
        nums = []
        for r in set(srcs):
            digits = "".join(c for c in r if c.isdigit())
            nums.append(int(digits) if digits else 0)
        return self.rf.conflict_cycles(nums)


class SharedBanks:
    """Shared memory: SharedMemory.banks x SharedMemory.bank_width; a warp access is split into
    conflict-free passes by its real addresses (one word read by several lanes is a broadcast).
    Wide accesses go in phases of banks*bank_width bytes (v4 = 8 lanes per phase, v2 = 16)."""

    def __init__(self, sm: SharedMemory, memo: dict[tuple[bytes, str, int], int] | None = None):
        self.sm = sm
        self.row = sm.banks * sm.bank_width  # bytes one conflict-free pass serves
        self._cache: dict[tuple[bytes, int], int] = {}  # (addresses relative to their row, size) -> passes
        # (address bytes, dtype, size) -> passes; memo: one dict shared by the cores of a simulation,
        # as the passes depend only on SharedMemory
        self._raw: dict[tuple[bytes, str, int], int] = {} if memo is None else memo
        self.free = [0] * sm.ports  # one slot per port (SharedMemory.ports accesses in parallel)
        self.busy = 0

    def passes(self, addrs: np.ndarray, size: int) -> int:
        raw = (addrs.tobytes(), addrs.dtype.char, size)  # the same addresses recur (other CTAs, loops)
        hit = self._raw.get(raw)
        if hit is not None:
            return hit
        if len(self._raw) >= 1 << 16:
            self._raw.clear()
        self._raw[raw] = n = self._passes(addrs, size)
        return n

    def _passes(self, addrs: np.ndarray, size: int) -> int:
        if addrs.size == 0:
            return 1
        a = addrs.astype(np.int64)
        key = ((a - (int(a[0]) // self.row) * self.row).tobytes(), size)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        bw = self.sm.bank_width
        words_per_lane = max(1, size // bw)
        lanes_per_phase = max(1, self.row // max(size, bw))
        phase = np.arange(a.size) // lanes_per_phase
        words = (a[:, None] // bw + np.arange(words_per_lane)[None, :]).ravel()
        ph = np.repeat(phase, words_per_lane)
        # distinct words per phase (broadcast is free): np.unique's sorted values, by sorting (np.unique imports
        # numpy.ma at its first call)
        uniq = np.sort(ph * (1 << 40) + words)
        if uniq.size > 1:
            uniq = uniq[np.concatenate(([True], uniq[1:] != uniq[:-1]))]
        uph, uw = uniq >> 40, uniq & ((1 << 40) - 1)
        nph = int(uph.max()) + 1
        per_bank = np.bincount(uph * self.sm.banks + (uw % self.sm.banks), minlength=nph * self.sm.banks)
        total = int(per_bank.reshape(nph, self.sm.banks).max(axis=1).sum())
        self._cache[key] = total
        return total

    def take(self, t: int, passes: int) -> int:
        """Occupy the earliest-free port for `passes` cycles from t; returns the start cycle."""
        free = self.free
        i = 0 if len(free) == 1 else min(range(len(free)), key=free.__getitem__)
        start = max(t, free[i])
        free[i] = start + passes
        self.busy += passes
        return start


class SetAssocCache:
    """Cache.size / line / assoc, LRU (Cache.policy), hit latency Cache.hit_latency. A line holds the
    sectors (Cache.sector bytes) fetched into it: a request hits only when all its sectors are there.
    A miss fetches the aligned Cache.fill-byte blocks around the missing sectors."""

    def __init__(self, c: Cache):
        self.c = c
        self.assoc: int = c.assoc  # (a native int: lookup reads it at every allocation)
        self.sets = c.size // (c.line * c.assoc)
        spl = c.line // c.sector
        self.full = (1 << spl) - 1  # every sector of a line
        k = (c.fill or c.sector) // c.sector  # sectors per fill block
        self.widen: tuple[int, ...] | None = None  # sector mask -> the fill blocks it touches
        if k > 1:
            block = (1 << k) - 1
            self.widen = tuple(sum(block << i for i in range(0, spl, k) if m >> i & block)
                               for m in range(1 << spl))
        # set -> (line -> sectors), each set made at its first use (the H200's L2 has 30,720 of them)
        self.lines: list[OrderedDict[int, int] | None] = [None] * self.sets
        self.hits = 0
        self.misses = 0
        self.victim: int | None = None  # the line the last lookup evicted

    def lookup(self, line_addr: int, mask: int, allocate: bool = True, fetch: bool = True) -> int:
        """The sectors a miss fetches (0: a hit): those of `mask` that are not present, widened to
        Cache.fill blocks when `fetch` (a plain store allocates only what it writes). On a miss they
        are filled when allocate (the line allocated first if absent, its set's LRU line evicted into
        `victim`)."""
        self.victim = None
        s = self.lines[line_addr % self.sets]
        if s is None:
            s = self.set_at(line_addr % self.sets)
        have = s.get(line_addr)
        if have is not None:
            s.move_to_end(line_addr)
            missing = mask & ~have
            if not missing:
                self.hits += 1
                return 0
            self.misses += 1
            if self.widen is not None and fetch:
                missing = self.widen[missing] & ~have
            if allocate:
                s[line_addr] = have | missing
            return missing
        self.misses += 1
        if self.widen is not None and fetch:
            mask = self.widen[mask]
        if allocate:
            if len(s) >= self.assoc:
                self.victim = s.popitem(last=False)[0]
            s[line_addr] = mask
        return mask

    def set_at(self, i: int) -> OrderedDict[int, int]:
        """Set i (line -> sectors, in LRU order), made empty at its first use."""
        s = self.lines[i]
        if s is None:
            s = self.lines[i] = OrderedDict()
        return s

    def access(self, line_addr: int, allocate: bool = True) -> bool:
        """True on a hit of the whole line; on a miss the line is filled when allocate."""
        return self.lookup(line_addr, self.full, allocate) == 0

    def invalidate(self, line_addr: int) -> None:
        s = self.lines[line_addr % self.sets]
        if s is not None:
            s.pop(line_addr, None)

    def hit_rate(self) -> float | None:
        n = self.hits + self.misses
        return self.hits / n if n else None


class L2Port:
    """The path that brings read data from the device L2 to one core. The L2's throughput
    (HwConfig.l2_bytes_per_cycle, all cores together) is shared fairly by the cores the launch keeps
    busy at once, as Dram's is: a read of n bytes holds this core's share n / (l2_bytes_per_cycle /
    sharing_cores) cycles and later reads queue behind it; the core's own port
    (Core.fill_bytes_per_cycle, docs/micro-fill.md; for TMA copies `port`, tma.bytes_per_cycle) caps it
    when few cores share. Without either it never waits."""

    def __init__(self, hw: HwConfig, sharing_cores: int | None = None, port: float | None = None):
        total = hw.l2_bytes_per_cycle
        n = max(1, min(hw.core.count, sharing_cores or hw.core.count))
        port = port or hw.core.fill_bytes_per_cycle
        self.cycles_per_byte = max(0.0 if total is None else n / total, 1.0 / port if port else 0.0)
        self.free = 0.0

    def take(self, t: int, nbytes: int) -> int:
        """Cycle at which a read of nbytes arriving at t gets the path: the cycle in which the reads
        before it leave it free (a path busy for a fraction of a cycle does not cost a whole one)."""
        start = max(float(t), self.free)
        self.free = start + nbytes * self.cycles_per_byte
        return int(start)


class Dram:
    """GlobalMemory.banks banks, GlobalMemory.burst bytes per burst. The device bandwidth
    (HwConfig.dram_bytes_per_cycle) is shared fairly by the cores the launch keeps busy at once
    (`sharing_cores` = min(Core.count, CTAs / CTAs per core)), so one core gets
    dram_bytes_per_cycle / sharing_cores bytes per cycle, spread over the banks: one burst holds its
    bank banks * burst / (bytes per cycle of this core) cycles and requests to a busy bank queue.
    Bursts are spread over banks by an XOR fold of the burst address, as memory controllers hash
    addresses, so that power-of-two row strides do not pile onto a few banks.
    Load-to-use = queueing + GlobalMemory.latency."""

    def __init__(self, hw: HwConfig, sharing_cores: int | None = None):
        g: GlobalMemory = hw.dram
        self.g = g
        n = max(1, min(hw.core.count, sharing_cores or hw.core.count))
        per_core = hw.dram_bytes_per_cycle / n
        self.burst_cycles = g.banks * g.burst / per_core
        self.shift = max(1, (g.banks - 1).bit_length())
        self.free = [0.0] * g.banks
        self.capacity = float(g.banks)  # bank-cycles per cycle (utilization's denominator)
        self.bytes = 0
        self.busy = 0.0

    def bank_of(self, addr: int) -> int:
        line = addr // self.g.burst
        h = 0
        while line:
            h ^= line
            line >>= self.shift
        return h % self.g.banks

    def request(self, t: int, addr: int, nbytes: int) -> tuple[int, int]:
        """(done cycle, queueing cycles) for nbytes at addr arriving at t."""
        bursts = max(1, -(-nbytes // self.g.burst))
        bank = self.bank_of(addr)
        start = max(float(t), self.free[bank])
        service = bursts * self.burst_cycles
        self.free[bank] = start + service
        self.busy += service
        self.bytes += nbytes
        wait = int(math.ceil(start - t))
        return t + wait + self.g.latency, wait
