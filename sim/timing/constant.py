"""The indexed constant cache of one core, empty at every launch (docs/const-cold.md).

A kernel reads its parameters (constant bank 0) and __constant__ data (bank 3) through the SM's constant
caches. Measured on the H200 (benchmarks/data/const_cold_2026-12-01.json): an LDC of a parameter line no LDC
of this launch has read costs about 100 cycles, later ones about 30 (hits); the line is 64 B; the immediate
operands (ULDC, c[bank][offset] in an ALU instruction) take a cache of their own, which an LDC miss does not
find filled and which the kernel's first instructions find ready. __constant__ data costs 313 on the launch
after the one that cached it (benchmarks/data/first_touch_2026-12-01.json): the parameters are placed near
the SM at launch, the rest comes from the L2. A read of a line whose fill is in flight waits for that fill
(one miss per line and core); the cache lives as long as the core's simulation of one launch.

PTX mode asks it for ld.param / ld.const (sim/timing/memory.py), SASS mode for LDC (sim/sass/timing.py).
SASS mode also asks `imm_read` for the immediate operands (ULDC, c[bank][offset] in an ALU instruction) when
the hwconfig describes the immediate-constant cache (constant.imm_line): 32 B lines, a miss costs ~86 cycles
(const_cold's imm case), the warp stalls at the instruction until the line is there (Nsight Compute's
imc_miss stall), the descriptor's line c[0x0][0x200..0x21f] is there at launch.
"""

from __future__ import annotations

from collections.abc import Iterable

from sim.hw import Constant


class ConstantCache:
    def __init__(self, c: Constant):
        self.line = c.line
        self.miss_latency = c.miss_latency
        self.user_miss_latency = c.user_miss_latency
        self.ldc_latency = c.ldc_latency
        self.fill: dict[tuple[int, int], int] = {}  # (bank, line) -> cycle its data is there
        # the immediate-constant cache (SASS mode), when the hwconfig describes it: (bank, line) -> cycle
        self.imm_line = c.imm_line or 0
        self.imm_miss = c.imm_miss_latency or 0
        self.imm: dict[tuple[int, int], int] = {(0, o // self.imm_line): 0 for o in c.imm_ready} if c.imm_line else {}

    def read(self, t: int, bank: int, offsets: Iterable[int]) -> int:
        """The cycle the bytes at `offsets` of constant bank `bank`, read at cycle t, are there (t on a
        hit); a line not yet asked for starts its fill at t."""
        ready = t
        for ln in {int(o) // self.line for o in offsets}:
            at = self.fill.setdefault((bank, ln), t + (self.miss_latency if bank == 0 else self.user_miss_latency))
            ready = max(ready, at)
        return ready

    def peek(self, bank: int, offsets: Iterable[int]) -> int:
        """The cycle the lines of `offsets` are there, without asking for any (0: every line is there or
        none was asked for)."""
        return max((self.fill.get((bank, int(o) // self.line), 0) for o in offsets), default=0)

    def imm_read(self, t: int, consts: Iterable[tuple[int, int]]) -> int:
        """The cycle the immediate operands `consts` ((bank, offset) pairs) of an instruction issuing at t are
        in the immediate-constant cache (t when there; a line not yet asked for starts its fill at t)."""
        ready = t
        if not self.imm_line:
            return t
        for bank, off in consts:
            at = self.imm.setdefault((bank, off // self.imm_line), t + self.imm_miss)
            ready = max(ready, at)
        return ready
