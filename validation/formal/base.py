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
from validation.formal.state import Access, BranchRec, LoopRec, MbarEvent, NamedBarrier, RegTouch, State, WgmmaRec

# One loop-summary / invariant / descriptor query may use SUMMARY_RLIMIT units of Z3's resource counter (about
# 2.5 s of CPU on the 2-core machine, 3-4M units per CPU second): deterministic, so a summary does not depend on
# the machine's load (a 2 s wall-clock limit did: under load the Triton fp8 matmul's and llm.c softmax's
# summaries lost invariants). SUMMARY_TIMEOUT_MS is only a wall-clock safety net; a give-up of either kind is
# recorded (ExecutorBase.gave_up) and makes a later counterexample unknown.
SUMMARY_RLIMIT = 10_000_000
SUMMARY_TIMEOUT_MS = 60_000


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
        # shared stores' values: (the store's Access, [(value, bits)]) (properties.shared_value_facts reads them)
        self.stored: list[tuple[Access, list[tuple[z3.BitVecRef, int]]]] = []
        # a shared buffer's tag -> (bits, max, alignment) that every value a load of that width reads from it
        # satisfies, under the assumption that a load returns a value some store of the kernel wrote there
        # (properties.Verifier.bounds sets it for a second run when an address depends on loaded data)
        self.load_facts: dict[str, tuple[int, int, int]] = {}
        # loop registers' havoc symbols whose back-edge value is loaded data -> the lines of those loads
        self.data_havocs: dict[str, set[int]] = {}
        self.undef: dict[str, z3.ExprRef] = {}
        self.recording = True
        self.dry = False
        self.kstack: list[z3.BitVecRef] = []
        self.accesses: list[Access] = []
        self.branches: list[BranchRec] = []
        self.barriers: list[tuple[int, int, z3.BoolRef]] = []
        self.named: list[NamedBarrier] = []  # named-barrier executions (validation/formal/barriers.py)
        self.divisions: dict[tuple[int, int], tuple] = {}  # (dividend id, divisor) -> (a, q, r, tie)
        self.nid: z3.BitVecRef | None = None  # the thread's named-barrier id (a thread-local symbol)
        self.loops: list[LoopRec] = []
        self.unsupported: list[tuple[int, str]] = []  # (line, what) instructions not modelled
        self.wgmmas: list[WgmmaRec] = []
        self.reg_touches: list[RegTouch] = []
        self.wgmma_regs: frozenset = frozenset()  # registers any wgmma.mma_async uses (set by asyncops)
        self.mbar_events: list[MbarEvent] = []
        self.mbar_wait_lines: set[int] = set()
        self.bulk_stores: list[Access] = []  # shared reads of cp.async.bulk stores (also in accesses)
        self.mbar_other: list[tuple[int, str]] = []  # (line, text) mbarrier operations not modelled
        # events on a shared::cluster address (another CTA's mbarrier / shared memory through mapa): (line, text,
        # path condition, the address's rank byte, the CTA-independent parts: offset, bytes); see asyncprops
        self.remote: list[tuple[int, str, z3.BoolRef, z3.BitVecRef, list]] = []
        self.untracked_copies: list[int] = []  # lines of bulk copies into shared memory whose bytes are unknown
        # tile-mode tensor copies (load or store): (line, text, path condition, innermost coordinate, element
        # bytes); `bounds` proves each coordinate x element bytes a multiple of 16 (the GPU faults otherwise)
        self.tma_coords: list[tuple[int, str, z3.BoolRef, z3.BitVecRef, int]] = []
        self.solver_timeout_ms = SUMMARY_TIMEOUT_MS
        self.solver_rlimit = SUMMARY_RLIMIT
        # summary queries (loop forms, Houdini) the solver gave up on: each leaves a weaker summary, so a
        # counterexample found under it may not exist (Verifier.first_violation answers unknown then)
        self.gave_up: list[str] = []

    def summary_solver(self) -> z3.Solver:
        """A solver for the executor's own queries: bounded by Z3's resource counter (deterministic), with
        the launch assumptions added."""
        s = z3.Solver()
        s.set("rlimit", self.solver_rlimit)
        s.set("timeout", self.solver_timeout_ms)
        s.add(self.ctx.assumptions)
        return s

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
        def do_wmma(self, st: State, ins: Instruction) -> None: ...
        def do_cp_async(self, st: State, ins: Instruction) -> None: ...
        def sync_snapshot(self, st: State) -> dict[str, z3.ExprRef]: ...
        def access_pc(self, st: State, ins: Instruction) -> z3.BoolRef: ...
        def cluster_split(self, ins: Instruction, addr: z3.BitVecRef, pc: z3.BoolRef,
                          deps: list) -> tuple[z3.BitVecRef, z3.BitVecRef]: ...
        def write_pseudo(self, st: State, ins: Instruction, name: str, v: z3.ExprRef) -> None: ...
        def wait_group(self, st: State, ins: Instruction, committed: str, done: str, what: str) -> None: ...

        # asyncops.py
        def note_touch(self, st: State, ins: Instruction) -> None: ...
        def do_wgmma(self, st: State, ins: Instruction) -> None: ...
        def do_proxy_fence(self, st: State, ins: Instruction) -> None: ...
        def do_mbarrier(self, st: State, ins: Instruction) -> None: ...
        def do_bulk_copy(self, st: State, ins: Instruction) -> None: ...
        def do_bulk_store(self, st: State, ins: Instruction) -> None: ...
        def note_exit(self, st: State, ins: Instruction) -> None: ...
        def address(self, st: State, op: Operand, width: int) -> tuple[z3.BitVecRef, frozenset]: ...
        def record(self, st, ins, space, kind, addr_op, nbytes, extra_pc=None, offset=None) -> None: ...

        # instructions.py
        def udivrem(self, st: State, a: z3.BitVecRef, b: z3.BitVecRef) -> tuple[z3.BitVecRef, z3.BitVecRef]: ...

        # loopproofs.py
        def free_consts(self, e: z3.ExprRef, cache: dict) -> frozenset: ...
        def affine_exit_bound(self, back_pc, hyps, entry_pc, next_pairs, init_pairs, local, cache): ...
        def unsat(self, cs) -> bool: ...
        def unsat_or_model(self, cs) -> tuple[bool, z3.ModelRef | None]: ...
        def probe(self, cs, loaded: list) -> z3.ModelRef | None: ...
        def loaded_consts(self, e: z3.ExprRef) -> list: ...
        def ranking_candidates(self, cond, local, cache): ...
        @staticmethod
        def refuted(models: list, cs) -> bool: ...
        def fresh_copies(self, e, local, cache, skip, tag): ...
        def candidates(self, others, carried_bv, vh, consts=(), lean=False): ...
        def houdini(self, cands, vh, init_vals, back_vals, facts, back_pc, k): ...

        # symexec.py
        def merge(self, states: list[State]) -> State | None: ...
        def exec_region(self, region: set[int], loop_h: int | None, entry: dict[int, list[State]]): ...
