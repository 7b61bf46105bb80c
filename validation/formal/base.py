"""The state every executor mixin shares, and the methods one mixin calls on another.

:class:`~validation.formal.symexec.Executor` is assembled from one mixin per job; each mixin
derives from :class:`ExecutorBase`, so the attributes set here and the cross-mixin methods declared
below (for the type checker only: the mixins define them) are known to all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import z3

from sim.ptx.ir import Instruction, Kernel, Operand
from validation.formal.context import Context
from validation.formal.program import KernelStructure
from validation.formal.state import Access, BranchRec, LoopRec, State


class ExecutorBase:
    """Symbols created so far, the recording switches and the records the property checks read."""

    def __init__(self, ctx: Context, suffix: str = ""):
        self.ctx = ctx
        self.k: Kernel = ctx.k
        self.S: KernelStructure = ctx.S
        self.tid: list[z3.BitVecRef] = ctx.tid
        self.counter = 0
        self.created: list[z3.ExprRef] = []  # thread-local constants, in creation order
        self.created_names: list[str] = []
        self.iter_created: list[z3.ExprRef] = []  # the constants of loop summaries: one iteration's values
        self.by_name: dict[str, z3.ExprRef] = {}
        self.loadsyms: dict[str, int] = {}  # name of a loaded value -> line
        self.undef: dict[str, z3.ExprRef] = {}
        self.recording = True
        self.dry = False
        self.kstack: list[z3.BitVecRef] = []
        self.accesses: list[Access] = []
        self.branches: list[BranchRec] = []
        self.barriers: list[tuple[int, int, z3.BoolRef]] = []
        self.loops: list[LoopRec] = []
        self.unsupported: list[tuple[int, str]] = []  # (line, what) instructions not modelled
        self.solver_timeout_ms = 2000

    if TYPE_CHECKING:
        # operands.py
        def fresh(self, hint: str, width: int | None) -> z3.ExprRef: ...
        def width_of_reg(self, name: str) -> int | None: ...
        def is_float_reg(self, name: str) -> bool: ...
        def read(self, st: State, name: str) -> z3.ExprRef: ...
        @staticmethod
        def fit(v: z3.ExprRef, w: int | None, signed: bool = False) -> z3.ExprRef: ...
        def val(self, st: State, op: Operand, w: int | None, signed: bool = False) -> z3.ExprRef: ...
        def sym_addr(self, name: str) -> z3.BitVecRef: ...
        def tags_of(self, st: State, op: Operand) -> frozenset: ...
        def write(self, st: State, ins: Instruction, op: Operand, v: z3.ExprRef,
                  tags: frozenset = frozenset()): ...
        def guard(self, st: State, ins: Instruction) -> z3.BoolRef: ...

        # memory.py
        def do_memory(self, st: State, ins: Instruction) -> None: ...
        def do_barrier(self, st: State, ins: Instruction) -> None: ...
        def do_cp_async(self, st: State, ins: Instruction) -> None: ...

        # loopproofs.py
        def free_consts(self, e: z3.ExprRef, cache: dict) -> frozenset: ...
        def affine_exit_bound(self, back_pc, hyps, entry_pc, next_pairs, init_pairs, local, cache): ...
        def unsat(self, cs) -> bool: ...
        def fresh_copies(self, e, local, cache, skip, tag): ...
        def candidates(self, others, carried_bv, vh, consts=()): ...
        def houdini(self, cands, vh, init_vals, back_vals, facts, back_pc, k): ...

        # symexec.py
        def merge(self, states: list[State]) -> State | None: ...
        def exec_region(self, region: set[int], loop_h: int | None, entry: dict[int, list[State]]): ...
