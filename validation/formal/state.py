"""Types of the symbolic executor: PTX type widths, a thread state, and the records (accesses,
branches, loops) that the property checks read."""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from sim.ptx.ir import Instruction

TYPE_INFO: dict[str, tuple[int, str]] = {}
for _w in (8, 16, 32, 64):
    for _k in ("b", "u", "s"):
        TYPE_INFO[f"{_k}{_w}"] = (_w, _k)
TYPE_INFO.update({"f16": (16, "f"), "bf16": (16, "f"), "f16x2": (32, "f"), "bf16x2": (32, "f"),
                  "f32": (32, "f"), "tf32": (32, "f"), "f64": (64, "f"), "pred": (1, "pred"),
                  "e4m3x2": (16, "f"), "e5m2x2": (16, "f")})

MEM_OPS = ("ld", "ldu", "st", "atom", "red", "ldmatrix", "stmatrix", "cp", "prefetch", "prefetchu")


def hname(e: z3.ExprRef) -> str:
    return e.decl().name()


def type_mods(ins: Instruction) -> list[str]:
    return [m for m in ins.mods if m in TYPE_INFO]


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


class Unsupported(Exception):
    pass
