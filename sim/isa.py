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
  mods        the modifiers PTX allows on the opcode besides type suffixes (sim/ptx/check.py rejects
              any other: ptxas says "Illegal modifier")
  types       one role per operand, checked against the declared register classes and the literal
              ranges (sim/ptx/check.py): ``t`` the instruction type (twice as wide on ``.wide``),
              ``T`` the same, twice as wide on ``.wide`` (mul/mad), ``f`` the first type suffix
              (slct), ``F`` / ``W`` the first / last type or a wider register (cvt, ld, st data),
              ``p`` a predicate, ``u`` a 32-bit integer, ``*`` not checked; "" checks nothing

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
from sim.ptx.check import check_instruction, check_module
from sim.ptx.ir import Instruction, Kernel, Operand, Program
from sim.ptx.types import TYPES, is_packed, type_mods

PIPE_ARITH = "arith"  # fma for f16/bf16/f32 and packed halves, fp64 for f64, alu otherwise
PIPE_CVT = "convert"  # fp64 when a type is f64, alu otherwise


@dataclass(frozen=True)
class Op:
    """One opcode of the ISA table (fields: the module docstring)."""

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
    mods: frozenset[str] = frozenset()
    types: str = ""
    kinds: str = ""  # the type kinds (sim/ptx/types.py) its instruction type may have; "" = any

    @property
    def arity(self) -> tuple[int, int]:
        req = self.syntax.split("{")[0]
        n_req = len([x for x in req.split(",") if x.strip()])
        n_opt = self.syntax.count("{")
        return n_req, n_req + n_opt


def _m(*groups: str) -> frozenset[str]:
    return frozenset(" ".join(groups).split())


# modifier groups (PTX ISA 8.x, the instruction pages)
_RND = "rn rz rm rp"
_IRND = "rni rzi rmi rpi"
_CMP = "eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan"
_BOOL = "and or xor"
_SPACE = "global shared local const param shared::cluster"
_SCOPE = "cta cluster gpu sys"
_SEM = "weak relaxed acquire release acq_rel volatile mmio"
_CACHE = ("ca cg cs lu cv wb wt nc L2::64B L2::128B L2::256B L2::cache_hint L1::evict_normal "
          "L1::evict_unchanged L1::evict_first L1::evict_last L1::no_allocate L2::evict_normal "
          "L2::evict_first L2::evict_last")
_VEC = "v2 v4 v8"
_F = "ftz sat"
_REDOPS = "add min max inc dec and or xor noftz"  # cp.reduce.async.bulk's .redOp (and .add.noftz)


def _arith(syntax: str, doc: str = "", packed: bool = False, mods: str = "", types: str = "") -> Op:
    return Op(syntax, PIPE_ARITH, "arith", packed=packed, doc=doc, mods=_m(mods),
              types=types or " ".join("t" * (syntax.count(",") + 1)))


def _alu(syntax: str, doc: str = "", mods: str = "", types: str = "", kinds: str = "") -> Op:
    return Op(syntax, "alu", "alu", doc=doc, mods=_m(mods), types=types, kinds=kinds)


def _sfu(syntax: str, mods: str = "approx ftz") -> Op:
    return Op(syntax, "sfu", "sfu", mods=_m(mods), types="t t")


def _mem(syntax: str, mem: str, has_dst: bool = True, doc: str = "", mods: str = "", types: str = "") -> Op:
    return Op(syntax, "lsu", "lsu", has_dst, mem=mem, space="mods", nonuniform=has_dst, doc=doc,
              mods=_m(_SPACE, mods), types=types)


def _flow(flow: str) -> Op:
    return Op("L" if flow == "branch" else "", "branch", "branch", False, ordered=True, flow=flow,
              mods=_m("uni" if flow != "" else ""))


ISA: dict[str, Op] = {
    # integer and float arithmetic
    "add": _arith("d, a, b", "add (wraps for integers; .sat; .rn for floats)", packed=True,
                  mods=f"{_RND} {_F} cc"),
    "sub": _arith("d, a, b", packed=True, mods=f"{_RND} {_F} cc"),
    "mul": _arith("d, a, b", ".lo/.hi/.wide for integers", packed=True, mods=f"{_RND} {_F} lo hi wide",
                  types="T t t"),
    "mad": _arith("d, a, b, c", ".lo/.hi/.wide for integers; .rn for floats (fused)",
                  mods=f"{_RND} {_F} lo hi wide cc", types="T t t T"),
    "mul24": _alu("d, a, b", mods="lo hi", types="t t t", kinds="int uint bits"),
    "mad24": _alu("d, a, b, c", mods="lo hi sat", types="t t t t", kinds="int uint bits"),
    "fma": _arith("d, a, b, c", "fused multiply-add, one rounding", packed=True, mods=f"{_RND} {_F} relu oob"),
    "div": Op("d, a, b", "sfu", "arith", doc="integer division truncates toward zero; float .rn/.approx/.full",
              mods=_m(_RND, "ftz approx full"), types="t t t"),
    "rem": _alu("d, a, b", types="t t t", kinds="int uint bits"),
    "abs": _arith("d, a", packed=True, mods="ftz relu"),
    "neg": _arith("d, a", packed=True, mods="ftz relu"),
    "min": _arith("d, a, b", packed=True, mods="ftz relu NaN xorsign abs"),
    "max": _arith("d, a, b", packed=True, mods="ftz relu NaN xorsign abs"),
    "copysign": _arith("d, a, b"),
    "rcp": _sfu("d, a", f"approx ftz {_RND}"),
    "sqrt": _sfu("d, a", f"approx ftz {_RND}"),
    "rsqrt": _sfu("d, a"),
    "sin": _sfu("d, a"),
    "cos": _sfu("d, a"),
    "lg2": _sfu("d, a"),
    "ex2": _sfu("d, a"),
    "tanh": _sfu("d, a", "approx"),
    "testp": _alu("d, a", mods="finite infinite number notanumber normal subnormal", types="p t"),
    # logic and bits
    "and": _alu("d, a, b", types="t t t", kinds="int uint bits pred"),
    "or": _alu("d, a, b", types="t t t", kinds="int uint bits pred"),
    "xor": _alu("d, a, b", types="t t t", kinds="int uint bits pred"),
    "not": _alu("d, a", types="t t", kinds="int uint bits pred"),
    "cnot": _alu("d, a", types="t t"),
    "lop3": _alu("d, a, b, c, e", "lop3.b32 d, a, b, c, immLut", mods=_BOOL, types="t t t t u"),
    "shl": _alu("d, a, b", types="t t u", kinds="int uint bits"),
    "shr": _alu("d, a, b", ".s shifts in the sign, .u/.b zeros", types="t t u", kinds="int uint bits"),
    "shf": _alu("d, a, b, c", "funnel shift .l/.r .wrap/.clamp", mods="l r wrap clamp", types="t t t u"),
    "popc": _alu("d, a", types="u t", kinds="int uint bits"),
    "clz": _alu("d, a", types="u t", kinds="int uint bits"),
    "brev": _alu("d, a", types="t t", kinds="int uint bits"),
    "bfe": _alu("d, a, b, c", types="t t u u", kinds="int uint bits"),
    "bfi": _alu("d, a, b, c, e", types="t t t u u", kinds="int uint bits"),
    "prmt": _alu("d, a, b, c", mods="f4e b4e rc8 ecl ecr rc16", types="t t t t"),
    # comparison, selection, data movement, conversion
    "setp": Op("d, a, b{, c}", "alu", "compare", doc="d may be a pair p|q; optional boolean c with .and/.or/.xor",
               mods=_m(_CMP, _BOOL, "ftz"), types="p t t p"),
    "selp": _alu("d, a, b, c", types="t t t p"),
    "slct": _alu("d, a, b, c", mods="ftz", types="f f f t"),
    "mov": _alu("d, a", "also packs/unpacks vectors: mov.b32 %r, {%h1, %h2}", types="t t"),
    "cvt": Op("d, a{, b}", PIPE_CVT, "alu", packed=True,
              doc="rounding .rn/.rz/.rm/.rp, .rni/.rzi/.rmi/.rpi, .sat; f16 bf16 f32 f64 ints; "
                  "cvt.rn{.relu}.{f16x2,bf16x2}.f32 d, a, b packs a (high) and b (low)",
              mods=_m(_RND, _IRND, "rna rs ftz sat relu satfinite"), types="F W W"),
    "cvta": _alu("d, a", "generic <-> state space addresses", mods=f"to {_SPACE}", types="t *"),
    # memory
    "ld": _mem("d, [a]", "read", doc="ld{.space}{.cache}{.vN}.type", mods=f"{_SCOPE} {_SEM} {_CACHE} {_VEC}",
               types="W *"),
    "ldu": _mem("d, [a]", "read", mods=_VEC, types="W *"),
    "st": _mem("[a], b", "write", has_dst=False, mods=f"{_SCOPE} {_SEM} {_CACHE} {_VEC}", types="* W"),
    "atom": _mem("d, [a], b{, c}", "rmw", doc="add min max inc dec and or xor exch cas",
                 mods=f"{_SCOPE} {_SEM} {_BOOL} {_VEC} add min max inc dec exch cas noftz L2::cache_hint",
                 types="t * t t"),
    "red": _mem("[a], b", "rmw", has_dst=False,
                mods=f"{_SCOPE} {_SEM} {_BOOL} {_VEC} add min max inc dec noftz L2::cache_hint", types="* t"),
    "ldmatrix": Op("d, [a]", "lsu", "warp", mem="read", space="shared", mem_bytes=16, nonuniform=True,
                   doc="ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16",
                   mods=_m("sync aligned m8n8 m16n16 m8n16 x1 x2 x4 trans shared")),
    "stmatrix": Op("[a], b", "lsu", "warp", False, mem="write", space="shared", mem_bytes=16,
                   doc="stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16",
                   mods=_m("sync aligned m8n8 m16n8 x1 x2 x4 trans shared")),
    "cp": Op("{[d], [a], b, c}", "lsu", "async", False, mem="copy", space="mods",
             doc="cp.async.{ca,cg}.shared.global [d], [a], size{, src-size}; commit_group; wait_group N; "
                 "wait_all (roles: async_role); cp.async.bulk{.tensor.Nd}{.tile,.im2col}, cp.reduce.async.bulk"
                 "{.tensor.Nd} and their bulk groups (TMA, roles: bulk_role, bulk_reduce; "
                 "sim/functional/ops_tma.py, ops_bulk.py)",
             mods=_m(_SPACE, "async ca cg commit_group wait_group wait_all bulk mbarrier arrive noinc "
                     "mbarrier::complete_tx::bytes L2::64B L2::128B L2::256B L2::cache_hint",
                     "tensor 1d 2d 3d 4d 5d tile im2col shared::cta bulk_group read prefetch L2 multicast::cluster",
                     "reduce", _REDOPS)),
    "prefetch": Op("[a]", "lsu", "lsu", False, space="mods", mods=_m(_SPACE, "L1 L2 L2::evict_last "
                                                                     "L2::evict_normal tensormap")),
    "membar": Op("", "sync", "sync", False, order="fence", ordered=True, mods=_m("cta gl sys proxy alias")),
    "fence": Op("", "sync", "sync", False, order="fence", ordered=True,
                doc="fence{.sc,.acq_rel}{.cta,.gpu,.sys}; fence.proxy.async{.shared::cta}, "
                    "fence.proxy.tensormap::generic.{release,acquire}: no-ops functionally",
                mods=_m(_SCOPE, _SPACE, "sc acq_rel proxy async alias tensormap tensormap::generic generic release "
                        "acquire mbarrier_init op_restrict")),
    "mbarrier": Op("{d}{, a}{, b}{, c}", "sync", "sync", ordered=True,
                   doc="mbarrier.{init,arrive{.expect_tx},arrive_drop,expect_tx,complete_tx,test_wait{.parity},"
                       "try_wait{.parity},inval}{.sem.scope}.shared{::cta,::cluster}.b64 (sim/functional/ops_async.py)",
                   mods=_m("init arrive arrive_drop expect_tx complete_tx test_wait try_wait parity inval "
                           "release acquire relaxed cta cluster shared shared::cta shared::cluster")),
    "mapa": _alu("d, a, b", "mapa{.shared::cluster}.{u32,u64} d, a, rank: the shared::cluster address of a's "
                 "offset in the CTA of that rank (sim/cluster.py); a rank outside the cluster stops the run",
                 mods="shared::cluster", types="t t u"),
    "setmaxnreg": Op("a", "sync", "sync", False, ordered=True, types="u",
                     doc="setmaxnreg.{inc,dec}.sync.aligned.u32 N: accepted; the register file is not "
                         "reallocated (functional and timing no-op)",
                     mods=_m("inc dec sync aligned")),
    "griddepcontrol": Op("", "sync", "sync", False, ordered=True, mods=_m("wait launch_dependents"),
                         doc="griddepcontrol.{wait,launch_dependents}: no-ops for a single launch"),
    # control
    "bra": _flow("branch"),
    "ret": Op("", "branch", "branch", False, ordered=True, flow="exit", returns=True, mods=_m("uni")),
    "call": Op("a, b, c", "branch", "branch", False, ordered=True, flow="call", mods=_m("uni"),
               doc="call{.uni} (results), name, (arguments): a .func of the module is inlined by the "
                   "parser; of the externs only __assertfail is provided (stops the run with its message)"),
    "exit": _flow("exit"),
    "trap": _flow("exit"),
    "bar": Op("{a, b}", "sync", "sync", False, order="barrier", ordered=True,
              doc="bar.sync / bar.arrive / bar.warp.sync mask / bar.red",
              mods=_m(_BOOL, "sync arrive red warp aligned popc cta")),
    "barrier": Op("{a, b}", "sync", "sync", False, order="barrier", ordered=True,
                  doc="barrier.sync / barrier.arrive as bar; barrier.cluster.arrive{.release,.relaxed}{.aligned} / "
                      ".wait{.acquire}{.aligned}: the wait releases once every warp of the cluster arrived "
                      "(sim/cluster.py; id CLUSTER_BAR_ID)",
                  mods=_m(_BOOL, "sync arrive red warp aligned popc cta cluster wait relaxed acquire release")),
    "nanosleep": Op("a", "sync", "sync", False, ordered=True, types="u"),
    # warp-level
    "shfl": Op("d, a, b, c, e", "lsu", "warp", latency="shared", nonuniform=True, space="mods",
               doc="shfl.sync.{up,down,bfly,idx}.b32 d|p, a, b, c, membermask",
               mods=_m("sync up down bfly idx"), types="* t u u u"),
    "vote": Op("d, a, b", "alu", "warp", nonuniform=True, space="mods", doc="vote.sync.{all,any,uni,ballot}",
               mods=_m("sync all any uni ballot"), types="* p u"),
    "elect": Op("d, a", "alu", "warp", nonuniform=True, space="mods", mods=_m("sync"), types="* u",
                doc="elect.sync d|p, membermask: the lowest active lane of the mask is elected"),
    "activemask": Op("d", "alu", "warp", nonuniform=True, space="mods", types="t"),
    "redux": Op("d, a, b", "alu", "warp", nonuniform=True, space="mods", mods=_m(_BOOL, "sync add min max"),
                types="t t u"),
    "mma": Op("d, a, b, c", "tensor", "tensor", nonuniform=True, space="mods",
              doc="mma.sync.aligned.m16n8kK.row.col: f32 from f16/bf16 (k8, k16), tf32 (k4, k8), e4m3/e5m2 (k32); "
                  "s32 from s8/u8 (k16, k32), s4/u4 (k32, k64), .satfinite",
              mods=_m("sync aligned row col satfinite popc and xor m8n8k4 m16n8k4 m16n8k8 m16n8k16 "
                      "m16n8k32 m16n8k64 m8n8k16 m8n8k32 m8n8k128 m16n8k128 m16n8k256")),
    "wmma": Op("d, a{, b}{, c}", "tensor", "tensor", nonuniform=True, space="mods",
               doc="wmma.load.{a,b,c} / wmma.store.d .sync.aligned.{row,col}.{m16n16k16,m32n8k16,m8n32k16,m16n16k8}"
                   "{.global,.shared}.type and wmma.mma.sync.aligned.alayout.blayout.shape.types (load and store: "
                   "lsu, memory by role; sim/functional/ops_wmma.py)",
               mods=_m(f"load store mma a b c d sync aligned row col satfinite m16n16k16 m32n8k16 m8n32k16 "
                       f"m16n16k8 {_SPACE} shared::cta")),
    "wgmma": Op("{d}{, a}{, b}{, c}{, e}{, f}{, g}{, h}", "tensor", "tensor", nonuniform=True, group="wgmma",
                doc="wgmma.mma_async.sync.aligned.m64nNkK (issue), wgmma.fence / commit_group / wait_group N "
                    "(roles: wgmma_role); reads shared memory through matrix descriptors, not the LSU",
                mods=_m("mma_async sync aligned fence commit_group wait_group satfinite e4m3 e5m2",
                        *(f"m64n{n}k{k}" for n in range(8, 257, 8) for k in (8, 16, 32)))),
}

_SPACES = ("global", "shared", "local", "const", "param")
# a load, store or atomic may name the shared window of its own CTA or of the whole cluster (DSMEM)
_SUBSPACES = {"shared::cta": "shared", "shared::cluster": "shared::cluster"}
_DSMEM_OPS = ("read", "write", "rmw")
_ASYNC_ROLES = (("commit_group", "commit"), ("wait_group", "wait"), ("wait_all", "wait_all"))
_BULK_SHARED = ("shared::cluster", "shared::cta", "shared")
_REDOP_NAMES = frozenset(_REDOPS.split()) - {"noftz"}
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
    """"cta" (bar.sync / barrier.sync / bar.red: every thread waits; also a full-mask bar.warp.sync in a
    kernel declared ``.reqntid`` 32, whose one warp is the CTA), "arrive" (a CTA barrier this thread does
    not wait at), "warp" (bar.warp.sync), "" (not a barrier)."""
    return ins.info["bar"]


def is_cta_barrier(ins: Instruction) -> bool:
    return ins.info["bar"] == "cta"


def barrier_aligned(ins: Instruction) -> bool:
    """Every thread of a warp executes this barrier together: bar.* (= barrier.*.aligned) or .aligned."""
    return ins.opcode == "bar" or "aligned" in ins.mods


def async_role(ins: Instruction) -> str:
    """cp.async role: "copy" (issue), "commit" (commit_group), "wait" (wait_group N), "wait_all", ""."""
    return ins.info["async"]


def wgmma_role(ins: Instruction) -> str:
    """Warpgroup MMA role: "issue" (wgmma.mma_async: starts asynchronously, its accumulators are
    valid only after a wait covering its group), "fence" (wgmma.fence: orders register and shared
    accesses before the next issue), "commit" (commit_group: closes the open group), "wait"
    (wait_group N: blocks until at most N groups are pending), "" (not a wgmma)."""
    return ins.info["wgmma"]


def bulk_role(ins: Instruction) -> str:
    """Bulk (TMA) copy role of a ``cp.async.bulk`` form: "tensor_load" (global tensor box -> shared,
    completes bytes on an mbarrier), "tensor_store" (shared -> global tensor box, a bulk group),
    "load" / "store" (the 1-D forms), "shared_copy" (the 1-D shared::cta -> shared::cluster form: into a
    CTA of the cluster, completing on that CTA's mbarrier), "commit" / "wait" (bulk groups), "prefetch",
    "" (not bulk). cp.reduce.async.bulk has the same roles (its reduction: bulk_reduce)."""
    return ins.info["bulk"]


def bulk_reduce(ins: Instruction) -> str:
    """The reduction of a ``cp.reduce.async.bulk`` form ("add", "min", "max", "inc", "dec", "and", "or",
    "xor"), "" for a plain copy or any other instruction."""
    return ins.info["bulk_red"]


def bulk_im2col(ins: Instruction) -> bool:
    """A ``cp.async.bulk.tensor ... .im2col`` load (its tensor map is an im2col one; im2col offsets follow
    the mbarrier operand)."""
    return ins.info["bulk"] == "tensor_load" and "im2col" in ins.mods


def wmma_role(ins: Instruction) -> str:
    """"load" | "store" | "mma" for wmma.load / wmma.store / wmma.mma, else ""."""
    return ins.info["wmma"]


def mbarrier_role(ins: Instruction) -> str:
    """"wait" (mbarrier.test_wait / try_wait), "signal" (any other mbarrier operation: it may complete
    a phase), "" (not an mbarrier instruction)."""
    return ins.info["mbar"]


def mbarrier_op(ins: Instruction) -> str:
    """mbarrier operation (the verifier's view): "wait" (try_wait / test_wait), "expect_tx"
    (arrive.expect_tx or expect_tx),
    "complete_tx", "arrive" (other arrivals), "init", "other", "" (not an mbarrier instruction)."""
    if ins.opcode != "mbarrier":
        return ""
    mods = ins.mods
    if "try_wait" in mods or "test_wait" in mods:
        return "wait"
    for role in ("expect_tx", "complete_tx", "arrive", "init"):
        if role in mods:
            return role
    return "other"


def fence_proxy(ins: Instruction) -> str:
    """The proxy a ``fence.proxy.X`` orders against the generic proxy ("async", "alias", "tensormap"...),
    "" for any other instruction."""
    if ins.info["cls"] != "sync" or "proxy" not in ins.mods:
        return ""
    i = ins.mods.index("proxy")
    return ins.mods[i + 1].split("::")[0] if i + 1 < len(ins.mods) else ""


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


def _one_warp_kernel(k: Kernel) -> bool:
    """The kernel declares ``.reqntid`` of 32 threads in all."""
    dims = k.directives.get("reqntid") or []
    n = 1
    for d in dims:
        n *= d
    return bool(dims) and n == 32


def _full_mask(ins: Instruction) -> bool:
    o = ins.operands[0] if ins.operands else None
    return o is not None and o.kind == "imm" and (int(o.value) & 0xFFFFFFFF) == 0xFFFFFFFF


def one_warp_cta(k: Kernel) -> None:
    """For a caller that knows the CTA is one warp (the verifier with a launch of 32 threads): every
    full-mask bar.warp.sync is then the CTA barrier (the decoder does this itself under .reqntid 32)."""
    for ins in k.body:
        if ins.info.get("bar") == "warp" and _full_mask(ins):
            ins.info["bar"] = "cta"


def _barrier_role(op: Op, mods: tuple[str, ...]) -> str:
    if op.order != "barrier":
        return ""
    if "warp" in mods:
        return "warp"
    if "arrive" not in mods and ("sync" in mods or "red" in mods or "wait" in mods or not mods):
        return "cta"
    return "arrive"


def _async_role(op: Op, mods: tuple[str, ...]) -> str:
    if op.cls != "async":
        return ""
    return next((role for mod, role in _ASYNC_ROLES if mod in mods), "copy")


def _bulk_role(op: Op, mods: tuple[str, ...]) -> str:
    if op.cls != "async" or "bulk" not in mods:
        return ""
    for mod, role in (("prefetch", "prefetch"), ("commit_group", "commit"), ("wait_group", "wait")):
        if mod in mods:
            return role
    spaces = [m for m in mods if m == "global" or m in _BULK_SHARED]
    if "tensor" not in mods and spaces[1:2] in (["shared::cta"], ["shared"]) and spaces[0] != "global":
        return "shared_copy"
    kind = "store" if spaces and spaces[0] == "global" else "load"
    return f"tensor_{kind}" if "tensor" in mods else kind


def _regs(op: Operand, out: list[str]) -> None:
    if op.kind == "reg":
        out.append(op.name)
    elif op.kind in ("vec", "pair"):
        for x in op.items:
            _regs(x, out)
    elif op.kind == "addr":
        if op.base is not None and op.base.kind == "reg":
            out.append(op.base.name)
        for x in op.items:
            _regs(x, out)


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
    check_instruction(ins, op, k)


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
    bulk = _bulk_role(op, mods)
    role = "" if bulk else _async_role(op, mods)
    wg = next((r for mod, r in _WGMMA_ROLES if mod in mods), "") if op.group == "wgmma" else ""
    bar = _barrier_role(op, mods)
    if bar == "warp" and _one_warp_kernel(k) and _full_mask(ins):
        bar = "cta"  # the kernel's one warp is its whole CTA: a full-mask warp barrier is the CTA barrier
    space = next((m for m in mods if m in _SPACES), "generic") if op.space == "mods" else op.space
    if space == "generic" and op.mem in _DSMEM_OPS:  # ld/st/atom.shared::{cta,cluster} (sim/cluster.py)
        space = next((_SUBSPACES[m] for m in mods if m in _SUBSPACES), "generic")
    mem = op.mem if role in ("", "copy") and not bulk else "none"
    info = ins.info
    info.update(cls=op.cls, flow=op.flow, bar=bar, has_dst=op.has_dst, mem=mem, space=space,
                ordered=op.ordered or role in ("commit", "wait", "wait_all") or wg in ("fence", "commit", "wait")
                or bulk in ("commit", "wait"),
                nonuniform=op.nonuniform and not (mem == "read" and space in ("param", "const")))
    info["async"] = role
    info["wmma"] = next((r for r in ("load", "store", "mma") if r in mods), "") if op is ISA["wmma"] else ""
    if info["wmma"] in ("load", "store"):
        # a warp-wide fragment load or store: the LSU moves it, one element per slot (ops_wmma.py)
        info.update(cls="lsu", mem="read" if "load" in mods else "write", has_dst="load" in mods)
        ins.pipe = "lsu"
    info["bulk"] = bulk
    info["bulk_red"] = next((m for m in mods if m in _REDOP_NAMES), "") if bulk and "reduce" in mods else ""
    info["mbar"] = ("wait" if "try_wait" in mods or "test_wait" in mods else "signal") if op is ISA["mbarrier"] else ""
    info["wgmma"] = wg
    if op.flow == "branch":
        if not ops or ops[0].kind != "label":
            raise at_instruction(PtxError, f"bra needs a label target ({ins.text})", k.file, ins)
        info["target"] = k.labels[ops[0].name]


def decode_kernel(k: Kernel, prog: Program) -> None:
    for ins in k.body:
        decode_instruction(ins, k)


def _close_body(k: Kernel) -> None:
    """A body that can fall off its end (no unguarded ret / exit / bra last, or a label after the last
    instruction) ends in an implicit ``ret``, as ptxas treats it."""
    last = k.body[-1] if k.body else None
    op = ISA.get(last.opcode) if last is not None else None
    closed = last is not None and last.guard is None and op is not None and op.flow in ("exit", "branch")
    if closed and len(k.body) not in k.labels.values():
        return
    line = last.line if last is not None else k.line
    k.body.append(Instruction("ret", (), [], line, "ret; (implicit: the body ends here)", index=len(k.body)))


def decode_program(prog: Program, strict: bool = True) -> None:
    """Check the module directives, then decode every entry. An entry that fails keeps its first
    error in ``prog.errors`` (raised when that entry is asked for, listed by ``sim run --check-all``)
    and leaves ``prog.kernels``; with ``strict``, a module whose every entry fails raises the first."""
    check_module(prog)
    for name, k in list(prog.kernels.items()):
        _close_body(k)
        try:
            decode_kernel(k, prog)
        except PtxError as e:
            prog.errors[name] = e
            del prog.kernels[name]
    if strict and prog.errors and not prog.kernels:
        raise next(iter(prog.errors.values()))
