"""The one ISA table: opcode -> operand syntax, pipe class, latency class, semantics key.

Parser (operand counts), functional model (semantics builders keyed by the same opcodes), timing
model (pipe class), verifier and docs all read this table; nothing else switches on opcode strings
to decide what kind of instruction it is.

Syntax strings name the operands: ``d`` a destination, ``a b c`` sources, ``[a]`` a memory
address, ``L`` a label, ``{, x}`` an optional trailing operand. ``pipe`` is a pipe class of
``sim.hw.PIPE_CLASSES``; "arith" means fma for f16/f32 types, fp64 for f64 and alu otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import PtxError
from sim.ptx.ir import Instruction, Kernel, Operand, Program


@dataclass(frozen=True)
class Op:
    syntax: str
    pipe: str
    has_dst: bool = True  # first operand is written
    kind: str = "compute"  # compute | memory | branch | barrier | async | warp | special
    doc: str = ""

    @property
    def arity(self) -> tuple[int, int]:
        req = self.syntax.split("{")[0]
        n_req = len([x for x in req.split(",") if x.strip()])
        n_opt = self.syntax.count("{")
        return n_req, n_req + n_opt


ISA: dict[str, Op] = {
    # integer and float arithmetic
    "add": Op("d, a, b", "arith", doc="add (wraps for integers; .sat; .rn for floats)"),
    "sub": Op("d, a, b", "arith"),
    "mul": Op("d, a, b", "arith", doc=".lo/.hi/.wide for integers"),
    "mad": Op("d, a, b, c", "arith", doc=".lo/.hi/.wide for integers; .rn for floats (fused)"),
    "mul24": Op("d, a, b", "alu"),
    "mad24": Op("d, a, b, c", "alu"),
    "fma": Op("d, a, b, c", "arith", doc="fused multiply-add, one rounding"),
    "div": Op("d, a, b", "sfu", doc="integer division truncates toward zero; float .rn/.approx/.full"),
    "rem": Op("d, a, b", "alu"),
    "abs": Op("d, a", "arith"),
    "neg": Op("d, a", "arith"),
    "min": Op("d, a, b", "arith"),
    "max": Op("d, a, b", "arith"),
    "copysign": Op("d, a, b", "arith"),
    "rcp": Op("d, a", "sfu"),
    "sqrt": Op("d, a", "sfu"),
    "rsqrt": Op("d, a", "sfu"),
    "sin": Op("d, a", "sfu"),
    "cos": Op("d, a", "sfu"),
    "lg2": Op("d, a", "sfu"),
    "ex2": Op("d, a", "sfu"),
    "tanh": Op("d, a", "sfu"),
    "testp": Op("d, a", "alu"),
    # logic and bits
    "and": Op("d, a, b", "alu"),
    "or": Op("d, a, b", "alu"),
    "xor": Op("d, a, b", "alu"),
    "not": Op("d, a", "alu"),
    "cnot": Op("d, a", "alu"),
    "lop3": Op("d, a, b, c, e", "alu", doc="lop3.b32 d, a, b, c, immLut"),
    "shl": Op("d, a, b", "alu"),
    "shr": Op("d, a, b", "alu", doc=".s shifts in the sign, .u/.b zeros"),
    "shf": Op("d, a, b, c", "alu", doc="funnel shift .l/.r .wrap/.clamp"),
    "popc": Op("d, a", "alu"),
    "clz": Op("d, a", "alu"),
    "brev": Op("d, a", "alu"),
    "bfe": Op("d, a, b, c", "alu"),
    "bfi": Op("d, a, b, c, e", "alu"),
    "prmt": Op("d, a, b, c", "alu"),
    # comparison, selection, data movement, conversion
    "setp": Op("d, a, b{, c}", "alu", doc="d may be a pair p|q; optional boolean c with .and/.or/.xor"),
    "selp": Op("d, a, b, c", "alu"),
    "slct": Op("d, a, b, c", "alu"),
    "mov": Op("d, a", "alu", doc="also packs/unpacks vectors: mov.b32 %r, {%h1, %h2}"),
    "cvt": Op("d, a", "alu", doc="rounding .rn/.rz/.rm/.rp, .rni/.rzi/.rmi/.rpi, .sat; f16 bf16 f32 f64 ints"),
    "cvta": Op("d, a", "alu", doc="generic <-> state space addresses"),
    # memory
    "ld": Op("d, [a]", "lsu", kind="memory", doc="ld{.space}{.cache}{.vN}.type"),
    "ldu": Op("d, [a]", "lsu", kind="memory"),
    "st": Op("[a], b", "lsu", has_dst=False, kind="memory"),
    "atom": Op("d, [a], b{, c}", "lsu", kind="memory", doc="add min max inc dec and or xor exch cas"),
    "red": Op("[a], b", "lsu", has_dst=False, kind="memory"),
    "ldmatrix": Op("d, [a]", "lsu", kind="warp", doc="ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16"),
    "cp": Op("{[d], [a], b, c}", "lsu", has_dst=False, kind="async",
             doc="cp.async.{ca,cg}.shared.global [d], [a], size{, src-size}; commit_group; wait_group N; wait_all"),
    "prefetch": Op("[a]", "lsu", has_dst=False, kind="memory"),
    "membar": Op("", "sync", has_dst=False, kind="barrier"),
    "fence": Op("", "sync", has_dst=False, kind="barrier"),
    # control
    "bra": Op("L", "branch", has_dst=False, kind="branch"),
    "ret": Op("", "branch", has_dst=False, kind="branch"),
    "exit": Op("", "branch", has_dst=False, kind="branch"),
    "trap": Op("", "branch", has_dst=False, kind="branch"),
    "bar": Op("{a, b}", "sync", has_dst=False, kind="barrier",
              doc="bar.sync / bar.arrive / bar.warp.sync mask / bar.red"),
    "barrier": Op("{a, b}", "sync", has_dst=False, kind="barrier"),
    "nanosleep": Op("a", "sync", has_dst=False),
    # warp-level
    "shfl": Op("d, a, b, c, e", "lsu", kind="warp", doc="shfl.sync.{up,down,bfly,idx}.b32 d|p, a, b, c, membermask"),
    "vote": Op("d, a, b", "alu", kind="warp", doc="vote.sync.{all,any,uni,ballot}"),
    "activemask": Op("d", "alu", kind="warp"),
    "redux": Op("d, a, b", "alu", kind="warp"),
    "mma": Op("d, a, b, c", "tensor", kind="warp",
              doc="mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (and m16n8k8)"),
}

# Ops that write no register even though they have operands (derived from the table).
_NO_DST = {name for name, op in ISA.items() if not op.has_dst}


def pipe_of(ins: Instruction) -> str:
    op = ISA[ins.opcode]
    if op.pipe != "arith":
        if ins.opcode == "cvt" and any(m == "f64" for m in ins.mods):
            return "fp64"
        return op.pipe
    types = [m for m in ins.mods if m in _TYPE_MODS]
    t = types[-1] if types else ""
    if t == "f64":
        return "fp64"
    if t.startswith(("f", "bf")):
        return "fma"
    return "alu"


_TYPE_MODS = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
              "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "pred", "b128"}


def _regs(op: Operand, out: list[str]) -> None:
    if op.kind == "reg":
        out.append(op.name)
    elif op.kind in ("vec", "pair"):
        for x in op.items:
            _regs(x, out)
    elif op.kind == "addr" and op.base is not None and op.base.kind == "reg":
        out.append(op.base.name)


def decode_instruction(ins: Instruction, k: Kernel) -> None:
    op = ISA.get(ins.opcode)
    if op is None:
        raise PtxError(f"unsupported instruction '{ins.full}' ({ins.text}): the simulator does not "
                       "implement it; see docs/ptx-subset.md for the supported subset", k.file, ins.line)
    lo, hi = op.arity
    n = len(ins.operands)
    if ins.opcode not in ("cp", "bar", "barrier", "membar", "fence") and not lo <= n <= hi:
        raise PtxError(f"'{ins.full}' takes {lo}..{hi} operands, found {n} ({ins.text})", k.file, ins.line)
    if ins.guard is not None and ins.guard not in k.regs:
        raise PtxError(f"guard register {ins.guard} is not declared: add it to a .reg .pred directive",
                       k.file, ins.line)
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
    ins.info["kind"] = op.kind
    if op.kind in ("memory", "warp", "async"):
        ins.info["space"] = next((m for m in ins.mods if m in _SPACES), "generic")
    if ins.opcode == "bra":
        if not ops or ops[0].kind != "label":
            raise PtxError(f"bra needs a label target ({ins.text})", k.file, ins.line)
        ins.info["target"] = k.labels[ops[0].name]


_SPACES = ("global", "shared", "local", "const", "param")


def decode_kernel(k: Kernel, prog: Program) -> None:
    for ins in k.body:
        decode_instruction(ins, k)
