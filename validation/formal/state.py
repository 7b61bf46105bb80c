"""Types of the symbolic executor: PTX type widths, a thread state, and the records (accesses,
branches, loops) that the property checks read."""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from sim.ptx.ir import Instruction
from sim.ptx.types import TYPES
from sim.ptx.types import type_mods as ptx_type_mods

# PTX type -> (bits, kind letter: b u s f pred), from the one table (packed halves count as float)
_LETTER = {"bits": "b", "uint": "u", "int": "s", "float": "f", "packed": "f", "pred": "pred"}
TYPE_INFO: dict[str, tuple[int, str]] = {name: (t.bits, _LETTER[t.kind]) for name, t in TYPES.items()}


DSMEM = "dsmem"  # the tag of a shared::cluster address made by mapa (its rank byte names a CTA of the cluster)


def hname(e: z3.ExprRef) -> str:
    return e.decl().name()


def type_mods(ins: Instruction) -> list[str]:
    return ptx_type_mods(ins.mods)


@dataclass
class State:
    pc: z3.BoolRef
    regs: dict[str, z3.ExprRef]
    tags: dict[str, frozenset]

    def copy(self) -> State:
        return State(self.pc, dict(self.regs), dict(self.tags))


@dataclass
class Access:
    index: int
    line: int
    text: str
    space: str  # "global" | "shared" | "unknown"
    kind: str  # "read" | "write" | "atomic" | "async" (cp.async destination write)
    addr: z3.BitVecRef  # 64-bit for global, 32-bit for shared
    width: z3.BitVecRef  # bytes, same width as addr
    pc: z3.BoolRef
    tags: frozenset
    sync: dict[str, z3.ExprRef]  # pseudo-register values at the access
    block: int = 0
    collective: bool = False  # a warp's wmma.load/store: one element of the tile, whichever (see memory.py)
    cta: z3.BitVecRef | None = None  # a shared::cluster (mapa) address's rank byte: 0 own CTA, r + 1 rank r


@dataclass
class BranchRec:
    block: int
    index: int
    line: int
    pc: z3.BoolRef
    cond: z3.BoolRef
    ks: tuple


@dataclass
class LoopRec:
    header: int
    line: int
    k: z3.BitVecRef
    forms: dict[str, str]
    invariants: list[str]
    back_pc: z3.BoolRef | None
    has_exit: bool
    local: set
    next_pairs: list
    notes: list[str] = field(default_factory=list)
    load_lines: list[int] = field(default_factory=list)
    status: str = "unknown"
    text: str = ""
    violation: z3.BoolRef | None = None


@dataclass
class WgmmaRec:
    """One wgmma.mma_async: its accumulator and A-fragment registers, the shared-memory footprints of
    its descriptor operands (records in ``accesses``, kind "read") and the counters at its issue."""

    index: int
    line: int
    text: str
    pc: z3.BoolRef
    sync: dict[str, z3.ExprRef]
    acc: frozenset
    a_regs: frozenset
    footprints: list[Access]


@dataclass
class RegTouch:
    """An instruction other than wgmma.mma_async that reads or writes a register some wgmma uses."""

    index: int
    line: int
    text: str
    pc: z3.BoolRef
    sync: dict[str, z3.ExprRef]
    reads: frozenset
    writes: frozenset


@dataclass
class MbarEvent:
    """An mbarrier event of one thread: "expect" (arrive.expect_tx / expect_tx), "copy" (a bulk copy
    signalling ``bar``, whose shared destination is ``dst``), "complete" (complete_tx), "arrive" (any
    arrival: arrive, arrive.expect_tx), "wait" (try_wait / test_wait.parity, ``parity`` the operand) or
    "exit"; ``sync`` holds the counters just before it."""

    kind: str
    index: int
    line: int
    text: str
    pc: z3.BoolRef
    sync: dict[str, z3.ExprRef]
    bar: z3.BitVecRef | None = None
    nbytes: z3.BitVecRef | None = None
    dst: Access | None = None
    parity: z3.BitVecRef | None = None
    cta: z3.BitVecRef | None = None  # a copy's mbarrier on another CTA (mapa): its rank byte (Access.cta)


@dataclass
class NamedBarrier:
    """One execution of a named barrier (a thread count below the CTA's: bar.sync / barrier.sync / bar.red
    id, count, or bar.arrive): its id and count operands, and whether the thread waits (sync, red) or
    only arrives."""

    index: int
    line: int
    text: str
    pc: z3.BoolRef
    bid: z3.BitVecRef
    count: z3.BitVecRef | None
    wait: bool
    aligned: bool
