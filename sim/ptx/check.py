"""Front-end validation as ptxas does it, after parsing and before anything runs.

Module level (:func:`check_module`): ``.address_size`` is 32 or 64, ``.target`` names a known
architecture and options. Instruction level (:func:`check_instruction`, called once per
instruction by ``sim.isa.decode_instruction``): only the modifiers the ISA table allows for the
opcode, each operand's register class against the role the table gives it (``Op.types``),
integer literals within their instruction type, no float literal where an integer is expected,
address offsets within 64 bits. Each error is one line naming file:line, what is wrong and the fix.

Where this is stricter than ptxas 13.0 (which truncates an integer literal wider than its
instruction type without a word, and accepts a few 65-bit values), the docstring of the rule says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from sim.errors import PtxError
from sim.ptx.ir import Instruction, Kernel, Operand, Program
from sim.ptx.types import TYPES, type_mods

# assumption: virtual registers one kernel declares (ptxas allocates at most 255 physical ones per
# thread; nvcc and Triton kernels declare a few thousand); bounds parse time and memory
REG_DECL_MAX = 1 << 16
MAX_U64 = (1 << 64) - 1
MIN_S64 = -(1 << 63)

# source: PTX ISA 8.x section 11.2 (.target): sm_XX{a,f} and compute_XX, plus the options
_SM = ("10 11 12 13 20 30 32 35 37 50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 103 110 "
       "120 121").split()
_TARGETS = frozenset(f"{p}_{n}{s}" for p in ("sm", "compute") for n in _SM for s in ("", "a", "f")) | {
    "texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"}


Err = Callable[[str], PtxError]


class _Op(Protocol):
    """The fields of a ``sim.isa.Op`` this module reads (no import: sim.isa imports this module)."""

    @property
    def mods(self) -> frozenset[str]: ...
    @property
    def types(self) -> str: ...
    @property
    def has_dst(self) -> bool: ...
    @property
    def kinds(self) -> str: ...


def _line_of(text: str, directive: str) -> int:
    m = re.search(rf"^[ \t]*{re.escape(directive)}\b", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def check_module(prog: Program) -> None:
    """The module directives ptxas checks before any entry: address size and target."""
    if prog.address_size not in (32, 64):
        raise PtxError(f".address_size {prog.address_size} is not allowed: write .address_size 64 "
                       "(PTX allows only 32 or 64)", prog.file, _line_of(prog.text, ".address_size"))
    for t in filter(None, (x.strip() for x in prog.target.split(","))):
        if t not in _TARGETS:
            raise PtxError(f"unknown .target {short(t)!r}: write e.g. .target sm_90a (the simulator models "
                           "sm_80 and later)", prog.file, _line_of(prog.text, ".target"))


def short(text: str, limit: int = 60) -> str:
    """A token cut to a readable length for an error line."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def check_instruction(ins: Instruction, op: _Op, k: Kernel) -> None:
    def err(msg: str) -> PtxError:
        return PtxError(f"{msg} in '{short(ins.text, 120)}'", k.file, ins.line)

    for m in ins.mods:
        if m not in op.mods and m not in TYPES:
            allowed = " ".join(sorted("." + x for x in op.mods)) or "none besides the type"
            raise err(f"illegal modifier .{short(m)} for '{ins.opcode}' (allowed: {allowed})")
    # (wgmma.wait_group N: a group-control form of an opcode whose issue form writes registers)
    if op.has_dst and ins.operands and ins.operands[0].kind in ("imm", "fimm") and "wait_group" not in ins.mods:
        raise err("the destination must be a register, not a literal")
    tys = type_mods(ins.mods)
    if op.kinds and tys and TYPES[tys[0]].kind not in op.kinds.split():
        names = {"int": ".sN", "uint": ".uN", "bits": ".bN", "pred": ".pred", "float": ".fN"}
        takes = "/".join(names.get(x, x) for x in op.kinds.split())
        raise err(f"'{ins.opcode}' does not take .{tys[0]}: its type is one of {takes}")
    roles = op.types.split()
    for i, o in enumerate(ins.operands):
        _check_values(o, err)
        if i < len(roles) and roles[i] != "*":
            _check_role(o, _role_type(roles[i], tys, ins.mods), roles[i], k, err)


def _check_values(o: Operand, err: Err) -> None:
    """Every literal and address offset fits 64 bits (ptxas: 'Constant overflow')."""
    if o.kind == "imm" and not MIN_S64 <= o.value <= MAX_U64:
        raise err(f"integer literal {short(str(o.value))} does not fit 64 bits")
    if o.kind == "addr" and not MIN_S64 <= o.value <= MAX_U64:
        raise err(f"address offset {short(str(o.value))} does not fit 64 bits")
    for x in o.items:
        _check_values(x, err)


def _role_type(role: str, tys: list[str], mods: tuple[str, ...]) -> tuple[str, int] | None:
    """(type name, bits) an operand of this role holds; None where the instruction names no type."""
    if role == "p":
        return "pred", 1
    if role == "u":
        return "u32", 32
    if not tys:
        return None
    t = tys[0] if role in ("f", "F") else tys[-1]
    bits = TYPES[t].bits
    if role == "T" and "wide" in mods:
        bits *= 2
    return t, bits


def _check_role(o: Operand, rt: tuple[str, int] | None, role: str, k: Kernel, err: Err) -> None:
    if rt is None:
        return
    t, bits = rt
    kind = TYPES[t].kind
    wider = role in ("W", "F")  # ld / st / cvt data: a wider register is allowed (PTX "relaxed type-checking")
    if o.kind == "vec" and wider:
        for x in o.items:
            _check_role(x, rt, role, k, err)
    elif o.kind == "pair":
        for x in o.items:
            _check_role(x, rt, role, k, err)
    elif o.kind == "reg":
        _check_reg(o.name, k.regs[o.name], t, bits, kind, wider, err)
    elif o.kind == "imm" and kind not in ("pred", "float"):
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
        if not lo <= o.value <= hi:
            # stricter than ptxas, which truncates such a literal silently
            raise err(f"integer literal {short(str(o.value))} does not fit .{t} (range {lo}..{hi})")
    elif o.kind == "imm" and kind == "float":
        raise err(f"integer literal {short(str(o.value))} for a .{t} operand: write a float literal "
                  "(1.0 or 0f3F800000)")
    elif o.kind == "fimm" and kind in ("int", "uint", "pred"):
        raise err(f"float literal {o.value!r} for a .{t} operand: write an integer")


def _check_reg(name: str, rtype: str, t: str, bits: int, kind: str, wider: bool, err: Err) -> None:
    r = TYPES[rtype]
    if (r.kind == "pred") != (kind == "pred"):
        want = "a .pred register" if kind == "pred" else f"a {bits}-bit register"
        raise err(f"{name} is .{rtype}, the operand needs {want}")
    if kind == "pred":
        return
    if r.bits != bits and not (wider and r.bits > bits):
        raise err(f"{name} is .{rtype} ({r.bits} bits), the operand of .{t} needs {bits} bits")
    if wider or r.kind == "bits" or kind in ("bits", "packed"):
        return
    if (r.kind == "float") != (kind == "float"):
        raise err(f"{name} is .{rtype}, the operand needs .{t} (or a .b{bits} register)")


def check_reg_count(text: str, file: str, line: int, left: int) -> int:
    """The N of ``.reg .b32 %r<N>``: a positive decimal integer, at most ``left`` more registers."""
    if not text.isdigit() or not 0 < int(text) <= max(left, 0):
        raise PtxError(f"register count <{short(text)}> must be 1..{max(left, 0):,} (the kernel may declare "
                       "65,536 registers in all); declare fewer", file, line)
    return int(text)
