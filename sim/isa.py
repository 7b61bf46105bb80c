"""The one ISA table: opcode -> operand syntax, pipe, semantic class, memory, ordering and control roles.

Parser (operand counts), functional model (semantics builders keyed by the same opcodes), timing
model (pipe, latency class, memory direction, ordering), verifier (control flow, barriers, async
groups, uniformity) and docs all read this table through the query functions below; nothing else
switches on opcode strings to decide what kind of instruction it is (tests/test_isa_table.py scans
for that). The decoder caches every per-instruction answer in ``ins.info`` once.

Fields of an ``Op``:
  syntax      operands: ``d`` a destination, ``a b c`` sources, ``[a]`` a memory address, ``L`` a
              label, ``{, x}`` an optional trailing operand
  pipe        a pipe class of ``sim.hw.PIPE_CLASSES``, or PIPE_ARITH / PIPE_CVT (chosen by type)
  cls         semantic class: arith (int or float by type) | alu | compare | sfu | lsu | tensor |
              warp | branch | sync | async
  mem         memory direction: none | read | write | rmw (atomics) | copy (cp.async: reads global,
              writes shared later)
  space       "mods" (the .global/.shared/... modifier, else generic) or a fixed space
  mem_bytes   bytes one thread accesses when that is not type size x vector width (ldmatrix rows)
  order       ordering role: "" | fence | barrier (bar.sync / bar.arrive / bar.warp.sync: barrier_role)
  ordered     the issue stage serialises it (branches, barriers, fences, sleep)
  flow        control flow: "" | branch | exit (ret, exit, trap end the thread) | call (see sim/ptx/inline.py)
  latency     latency class: pipe (the pipe's) | shared (crosses the shared-memory crossbar)
  nonuniform  results may differ between threads from equal inputs (memory, other lanes)
  packed      accepts packed-half types (f16x2, bf16x2) where the type table gives them a dtype
  group       an asynchronous group family of its own: "wgmma" (roles by modifier: wgmma_role);
              cp.async's groups are async_role's and never mix with these
  returns     ret: leaves a ``.func`` (calls are inlined by sim/ptx/inline.py; in a kernel it exits)

Adding an opcode: (1) one ``Op`` entry here, (2) its semantics builder under the same key in
``sim/functional/ops_alu.py`` or ``ops_mem.py`` (and in ``validation/formal`` if the verifier must
model it beyond "writes a fresh value"), (3) a numpy-checked test in
tests/test_functional_semantics.py and a line in docs/ptx-subset.md. tests/test_isa_table.py fails
until the table, the semantics and the pipes agree. Opcodes not in the table are rejected at parse
time with file:line.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import PtxError, at_instruction
from sim.ptx.ir import Instruction, Kernel, Operand, Program
from sim.ptx.types import TYPES, is_packed, type_mods

PIPE_ARITH = "arith"  # fma for f16/bf16/f32 and packed halves, fp64 for f64, alu otherwise
PIPE_CVT = "convert"  # fp64 when a type is f64, alu otherwise


@dataclass(frozen=True)
class Op:
    syntax: str
    pipe: str
    cls: str
    has_dst: bool = True  # first operand is written
    mem: str = "none"
    space: str = ""
    mem_bytes: int = 0
    order: str = ""
    ordered: bool = False
    flow: str = ""
    latency: str = "pipe"
    nonuniform: bool = False
    packed: bool = False
    group: str = ""
    returns: bool = False  # leaves a .func: the parser turns it into a branch where it inlines the call
    doc: str = ""

    @property
    def arity(self) -> tuple[int, int]:
        req = self.syntax.split("{")[0]
        n_req = len([x for x in req.split(",") if x.strip()])
        n_opt = self.syntax.count("{")
        return n_req, n_req + n_opt


def _arith(syntax: str, doc: str = "", packed: bool = False) -> Op:
    return Op(syntax, PIPE_ARITH, "arith", packed=packed, doc=doc)


def _alu(syntax: str, doc: str = "") -> Op:
    return Op(syntax, "alu", "alu", doc=doc)


def _sfu(syntax: str) -> Op:
    return Op(syntax, "sfu", "sfu")


def _mem(syntax: str, mem: str, has_dst: bool = True, doc: str = "") -> Op:
    return Op(syntax, "lsu", "lsu", has_dst, mem=mem, space="mods", nonuniform=has_dst, doc=doc)


def _flow(flow: str) -> Op:
    return Op("L" if flow == "branch" else "", "branch", "branch", False, ordered=True, flow=flow)


ISA: dict[str, Op] = {
    # integer and float arithmetic
    "add": _arith("d, a, b", "add (wraps for integers; .sat; .rn for floats)", packed=True),
    "sub": _arith("d, a, b", packed=True),
    "mul": _arith("d, a, b", ".lo/.hi/.wide for integers", packed=True),
    "mad": _arith("d, a, b, c", ".lo/.hi/.wide for integers; .rn for floats (fused)"),
    "mul24": _alu("d, a, b"),
    "mad24": _alu("d, a, b, c"),
    "fma": _arith("d, a, b, c", "fused multiply-add, one rounding", packed=True),
    "div": Op("d, a, b", "sfu", "arith", doc="integer division truncates toward zero; float .rn/.approx/.full"),
    "rem": _alu("d, a, b"),
    "abs": _arith("d, a", packed=True),
    "neg": _arith("d, a", packed=True),
    "min": _arith("d, a, b", packed=True),
    "max": _arith("d, a, b", packed=True),
    "copysign": _arith("d, a, b"),
    "rcp": _sfu("d, a"),
    "sqrt": _sfu("d, a"),
    "rsqrt": _sfu("d, a"),
    "sin": _sfu("d, a"),
    "cos": _sfu("d, a"),
    "lg2": _sfu("d, a"),
    "ex2": _sfu("d, a"),
    "tanh": _sfu("d, a"),
    "testp": _alu("d, a"),
    # logic and bits
    "and": _alu("d, a, b"),
    "or": _alu("d, a, b"),
    "xor": _alu("d, a, b"),
    "not": _alu("d, a"),
    "cnot": _alu("d, a"),
    "lop3": _alu("d, a, b, c, e", "lop3.b32 d, a, b, c, immLut"),
    "shl": _alu("d, a, b"),
    "shr": _alu("d, a, b", ".s shifts in the sign, .u/.b zeros"),
    "shf": _alu("d, a, b, c", "funnel shift .l/.r .wrap/.clamp"),
    "popc": _alu("d, a"),
    "clz": _alu("d, a"),
    "brev": _alu("d, a"),
    "bfe": _alu("d, a, b, c"),
    "bfi": _alu("d, a, b, c, e"),
    "prmt": _alu("d, a, b, c"),
    # comparison, selection, data movement, conversion
    "setp": Op("d, a, b{, c}", "alu", "compare", doc="d may be a pair p|q; optional boolean c with .and/.or/.xor"),
    "selp": _alu("d, a, b, c"),
    "slct": _alu("d, a, b, c"),
    "mov": _alu("d, a", "also packs/unpacks vectors: mov.b32 %r, {%h1, %h2}"),
    "cvt": Op("d, a{, b}", PIPE_CVT, "alu", packed=True,
              doc="rounding .rn/.rz/.rm/.rp, .rni/.rzi/.rmi/.rpi, .sat; f16 bf16 f32 f64 ints; "
                  "cvt.rn{.relu}.{f16x2,bf16x2}.f32 d, a, b packs a (high) and b (low)"),
    "cvta": _alu("d, a", "generic <-> state space addresses"),
    # memory
    "ld": _mem("d, [a]", "read", doc="ld{.space}{.cache}{.vN}.type"),
    "ldu": _mem("d, [a]", "read"),
    "st": _mem("[a], b", "write", has_dst=False),
    "atom": _mem("d, [a], b{, c}", "rmw", doc="add min max inc dec and or xor exch cas"),
    "red": _mem("[a], b", "rmw", has_dst=False),
    "ldmatrix": Op("d, [a]", "lsu", "warp", mem="read", space="shared", mem_bytes=16, nonuniform=True,
                   doc="ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16"),
    "stmatrix": Op("[a], b", "lsu", "warp", False, mem="write", space="shared", mem_bytes=16,
                   doc="stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16"),
    "cp": Op("{[d], [a], b, c}", "lsu", "async", False, mem="copy", space="mods",
             doc="cp.async.{ca,cg}.shared.global [d], [a], size{, src-size}; commit_group; wait_group N; "
                 "wait_all (roles: async_role)"),
    "prefetch": Op("[a]", "lsu", "lsu", False, space="mods"),
    "membar": Op("", "sync", "sync", False, order="fence", ordered=True),
    "fence": Op("", "sync", "sync", False, order="fence", ordered=True,
                doc="fence{.sc,.acq_rel}{.cta,.gpu,.sys}; fence.proxy.async{.shared::cta}: a no-op functionally"),
    # control
    "bra": _flow("branch"),
    "ret": Op("", "branch", "branch", False, ordered=True, flow="exit", returns=True),
    "call": Op("a, b, c", "branch", "branch", False, ordered=True, flow="call",
               doc="call{.uni} (results), name, (arguments): a .func of the module is inlined by the "
                   "parser; of the externs only __assertfail is provided (stops the run with its message)"),
    "exit": _flow("exit"),
    "trap": _flow("exit"),
    "bar": Op("{a, b}", "sync", "sync", False, order="barrier", ordered=True,
              doc="bar.sync / bar.arrive / bar.warp.sync mask / bar.red"),
    "barrier": Op("{a, b}", "sync", "sync", False, order="barrier", ordered=True),
    "nanosleep": Op("a", "sync", "sync", False, ordered=True),
    # warp-level
    "shfl": Op("d, a, b, c, e", "lsu", "warp", latency="shared", nonuniform=True, space="mods",
               doc="shfl.sync.{up,down,bfly,idx}.b32 d|p, a, b, c, membermask"),
    "vote": Op("d, a, b", "alu", "warp", nonuniform=True, space="mods", doc="vote.sync.{all,any,uni,ballot}"),
    "activemask": Op("d", "alu", "warp", nonuniform=True, space="mods"),
    "redux": Op("d, a, b", "alu", "warp", nonuniform=True, space="mods"),
    "mma": Op("d, a, b, c", "tensor", "tensor", nonuniform=True, space="mods",
              doc="mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (and m16n8k8)"),
    "wgmma": Op("{d}{, a}{, b}{, c}{, e}{, f}{, g}{, h}", "tensor", "tensor", nonuniform=True, group="wgmma",
                doc="wgmma.mma_async.sync.aligned.m64nNkK (issue), wgmma.fence / commit_group / wait_group N "
                    "(roles: wgmma_role); reads shared memory through matrix descriptors, not the LSU"),
}

_SPACES = ("global", "shared", "local", "const", "param")
_ASYNC_ROLES = (("commit_group", "commit"), ("wait_group", "wait"), ("wait_all", "wait_all"))
_WGMMA_ROLES = (("mma_async", "issue"), ("fence", "fence"), ("commit_group", "commit"), ("wait_group", "wait"))


# -- queries (answers cached in ins.info by decode_instruction) ------------------------------------
def op_of(ins: Instruction) -> Op:
    return ISA[ins.opcode]


def op_class(ins: Instruction) -> str:
    return ins.info["cls"]


def is_branch(ins: Instruction) -> bool:
    return ins.info["flow"] == "branch"


def is_call(ins: Instruction) -> bool:
    """A ``call`` (answered before decoding: the parser inlines calls)."""
    op = ISA.get(ins.opcode)
    return op is not None and op.flow == "call"


def is_return(ins: Instruction) -> bool:
    """``ret``, which leaves a ``.func`` (answered before decoding)."""
    op = ISA.get(ins.opcode)
    return op is not None and op.returns


def is_terminator(ins: Instruction) -> bool:
    """ret / exit / trap: the thread leaves the kernel (when its guard holds)."""
    return ins.info["flow"] == "exit"


def barrier_role(ins: Instruction) -> str:
    """"cta" (bar.sync / barrier.sync / bar.red: every thread waits), "arrive" (a CTA barrier this
    thread does not wait at), "warp" (bar.warp.sync), "" (not a barrier)."""
    return ins.info["bar"]


def is_cta_barrier(ins: Instruction) -> bool:
    return ins.info["bar"] == "cta"


def async_role(ins: Instruction) -> str:
    """cp.async role: "copy" (issue), "commit" (commit_group), "wait" (wait_group N), "wait_all", ""."""
    return ins.info["async"]


def wgmma_role(ins: Instruction) -> str:
    """Warpgroup MMA role: "issue" (wgmma.mma_async: starts asynchronously, its accumulators are
    valid only after a wait covering its group), "fence" (wgmma.fence: orders register and shared
    accesses before the next issue), "commit" (commit_group: closes the open group), "wait"
    (wait_group N: blocks until at most N groups are pending), "" (not a wgmma)."""
    return ins.info["wgmma"]


def mem_dir(ins: Instruction) -> str:
    """none | read | write | rmw | copy (cp.async issue)."""
    return ins.info["mem"]


def mem_space(ins: Instruction) -> str:
    """The state space named by the instruction (or fixed by the opcode), "generic" when none."""
    return ins.info["space"]


def access_bytes(ins: Instruction) -> int:
    """Bytes one thread reads or writes: the element type size times the vector width, or the
    opcode's fixed row size (ldmatrix); 4 when the instruction names no type."""
    fixed = ISA[ins.opcode].mem_bytes
    if fixed:
        return fixed
    tys = type_mods(ins.mods)
    vec = next((int(m[1]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
    return (TYPES[tys[-1]].size if tys else 4) * vec


def is_ordered(ins: Instruction) -> bool:
    """Issues only after every older instruction and before any younger one."""
    return ins.info["ordered"]


def is_nonuniform(ins: Instruction) -> bool:
    """Results may differ between threads even from equal inputs (loads other than .param/.const,
    atomics, warp exchanges, tensor fragments)."""
    return ins.info["nonuniform"]


def latency_class(ins: Instruction) -> str:
    return ISA[ins.opcode].latency


def has_dst(ins: Instruction) -> bool:
    return ins.info["has_dst"]


def pipe_of(ins: Instruction) -> str:
    op = ISA[ins.opcode]
    types = type_mods(ins.mods)
    if op.pipe == PIPE_CVT:
        return "fp64" if "f64" in types else "alu"
    if op.pipe != PIPE_ARITH:
        return op.pipe
    t = types[-1] if types else ""
    if t == "f64":
        return "fp64"
    if t.startswith(("f", "bf")):
        return "fma"
    return "alu"


def _barrier_role(op: Op, mods: tuple[str, ...]) -> str:
    if op.order != "barrier":
        return ""
    if "warp" in mods:
        return "warp"
    if "arrive" not in mods and ("sync" in mods or "red" in mods or not mods):
        return "cta"
    return "arrive"


def _async_role(op: Op, mods: tuple[str, ...]) -> str:
    if op.cls != "async":
        return ""
    return next((role for mod, role in _ASYNC_ROLES if mod in mods), "copy")


def _regs(op: Operand, out: list[str]) -> None:
    if op.kind == "reg":
        out.append(op.name)
    elif op.kind in ("vec", "pair"):
        for x in op.items:
            _regs(x, out)
    elif op.kind == "addr" and op.base is not None and op.base.kind == "reg":
        out.append(op.base.name)


def _check(ins: Instruction, op: Op, k: Kernel) -> None:
    lo, hi = op.arity
    n = len(ins.operands)
    if not op.order and op.cls != "async" and not lo <= n <= hi:
        raise at_instruction(PtxError, f"'{ins.full}' takes {lo}..{hi} operands, found {n} ({ins.text})", k.file,
                             ins)
    if ins.guard is not None and ins.guard not in k.regs:
        raise at_instruction(PtxError, f"guard register {ins.guard} is not declared: add it to a .reg .pred "
                             "directive", k.file, ins)
    for t in type_mods(ins.mods):
        if is_packed(t) and not (op.packed and TYPES[t].np is not None):
            raise at_instruction(PtxError, f"packed type .{t} is not supported for '{ins.opcode}' ({ins.text}); "
                                 "see docs/ptx-subset.md", k.file, ins)


def decode_instruction(ins: Instruction, k: Kernel) -> None:
    op = ISA.get(ins.opcode)
    if op is None:
        raise at_instruction(PtxError, f"unsupported instruction '{ins.full}' ({ins.text}): the simulator does "
                             "not implement it; see docs/ptx-subset.md for the supported subset", k.file, ins)
    _check(ins, op, k)
    ins.pipe = pipe_of(ins)
    dst: list[str] = []
    src: list[str] = []
    ops = ins.operands
    if op.has_dst and ops:
        d0 = ops[0]
        if d0.kind == "addr":
            _regs(d0, src)
        else:
            _regs(d0, dst)
        for o in ops[1:]:
            _regs(o, src)
    else:
        for o in ops:
            _regs(o, src)
    if ins.guard:
        src.append(ins.guard)
    ins.dst_regs = tuple(dst)
    ins.src_regs = tuple(src)
    mods = ins.mods
    role = _async_role(op, mods)
    wg = next((r for mod, r in _WGMMA_ROLES if mod in mods), "") if op.group == "wgmma" else ""
    bar = _barrier_role(op, mods)
    space = next((m for m in mods if m in _SPACES), "generic") if op.space == "mods" else op.space
    mem = op.mem if role in ("", "copy") else "none"
    info = ins.info
    info.update(cls=op.cls, flow=op.flow, bar=bar, has_dst=op.has_dst, mem=mem, space=space,
                ordered=op.ordered or role in ("commit", "wait", "wait_all") or wg in ("fence", "commit", "wait"),
                nonuniform=op.nonuniform and not (mem == "read" and space in ("param", "const")))
    info["async"] = role
    info["wgmma"] = wg
    if op.flow == "branch":
        if not ops or ops[0].kind != "label":
            raise at_instruction(PtxError, f"bra needs a label target ({ins.text})", k.file, ins)
        info["target"] = k.labels[ops[0].name]


def decode_kernel(k: Kernel, prog: Program) -> None:
    for ins in k.body:
        decode_instruction(ins, k)
