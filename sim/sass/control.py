"""The scheduling control code of a Volta..Hopper SASS instruction.

Each instruction is 128 bits; the control code is bits 105..125, i.e. ``c = hi >> 41`` of the high
64-bit word. Layout published for Volta by Jia et al., "Dissecting the NVIDIA Volta GPU Architecture
via Microbenchmarking" (2018), checked on sm_90a code in /work/shared/hw/sass-control.md:

    bits of c  field          meaning
    0-3        stall          cycles the scheduler waits before issuing this warp's next instruction
    4          yield          scheduler hint (the raw bit); clear = yield (Control.yields)
    5-7        write barrier  scoreboard slot 0-5 set until the result is written; 7 = none
    8-10       read barrier   slot set until the source registers are read; 7 = none
    11-16      wait mask      slots this instruction waits on before it issues
    17-20      reuse          operand reuse-cache flags, one per source slot
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

NO_BARRIER = 7
SLOTS = 6


@dataclass(frozen=True)
class Control:
    stall: int  # 0..15
    yield_flag: bool
    write_barrier: int | None  # scoreboard slot 0..5, None when the field is 7
    read_barrier: int | None
    wait_mask: int  # 6 bits, bit i = waits on slot i
    reuse: int  # 4 bits, bit i = source slot i is kept in the reuse cache

    @property
    def yields(self) -> bool:
        """The scheduler should switch to another warp after this one: the raw bit clear. Sources: maxas's
        and NBAssembler's control-code notation print Y for a clear bit, and NBAssembler's scheduler clears
        it with every stall over 4 because "the yield flag is required to get stall counts 12-15 working"
        (QianyanTech/NBAssembler nbas/grammar.py print_ctrl, nbas/tool.py); in ptxas's sm_90a code for the
        53 silicon-suite kernels all 469 instructions with a stall of 12-15 have the bit clear."""
        return not self.yield_flag

    @cached_property
    def waits(self) -> tuple[int, ...]:
        """The slots this instruction waits on, ascending (computed once per Control)."""
        return tuple(i for i in range(SLOTS) if self.wait_mask >> i & 1)

    def encode(self) -> int:
        """The 21-bit control code (``hi >> 41``) these fields came from."""
        wb = NO_BARRIER if self.write_barrier is None else self.write_barrier
        rb = NO_BARRIER if self.read_barrier is None else self.read_barrier
        return (self.stall | int(self.yield_flag) << 4 | wb << 5 | rb << 8 | self.wait_mask << 11
                | self.reuse << 17)


def control_code(hi: int) -> int:
    """The 21-bit control code of an instruction whose high 64-bit word is ``hi``."""
    return (hi >> 41) & 0x1FFFFF


def decode(hi: int) -> Control:
    """Control fields from the high 64-bit word of a 128-bit instruction."""
    c = control_code(hi)
    wb, rb = (c >> 5) & 7, (c >> 8) & 7
    return Control(
        stall=c & 0xF,
        yield_flag=bool((c >> 4) & 1),
        write_barrier=None if wb == NO_BARRIER else wb,
        read_barrier=None if rb == NO_BARRIER else rb,
        wait_mask=(c >> 11) & 0x3F,
        reuse=(c >> 17) & 0xF,
    )


class _HasControl(Protocol):
    @property
    def control(self) -> Control: ...


def first_waiter(instructions: Sequence[_HasControl], index: int, slot: int | None = None) -> int | None:
    """Index of the first instruction after ``index`` (program order, no branches followed) that waits on
    ``slot`` (default: the write barrier of instruction ``index``); None when none does."""
    if slot is None:
        slot = instructions[index].control.write_barrier
    if slot is None:
        return None
    for j in range(index + 1, len(instructions)):
        if instructions[j].control.wait_mask >> slot & 1:
            return j
    return None
