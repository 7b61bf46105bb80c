"""Parse ``nvdisasm -c -hex -gp`` output into per-kernel lists of SassInstruction.

The listing looks like::

    //--------------------- .text.sgemm_tiled         --------------------------
    sgemm_tiled:
        //## File ".nv_debug_ptx_txt", line 57
            /*00b0*/              @!P0 BRA `(.L_x_0) ;                 /* 0x00000004005c8947 */
                                                                       /* 0x000fea0003800000 */
    .L_x_0:

The first hex word is the low 64 bits of the encoding, the second the high 64 bits (which carry the
control code, see sim.sass.control). A ``//## File`` comment gives the PTX line of the instructions
that follow it, up to the next such comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from sim.sass.control import Control, decode
from sim.sass.tools import DEFAULT_ARCH, SassError, compile_ptx

_SECTION = re.compile(r"^//-+ \.text\.(\S+)\s+-+")
_SYMBOLS = re.compile(r"^//-+ SYMBOLS\b")
_LINE_INFO = re.compile(r'^\s*//## File "[^"]*", line (\d+)')
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;\s*/\*\s*(0x[0-9a-fA-F]+)\s*\*/\s*$")
_HI = re.compile(r"^\s*/\*\s*(0x[0-9a-fA-F]+)\s*\*/\s*$")
_LABEL = re.compile(r"^([.$\w][\w.$]*):\s*$")
_GUARD = re.compile(r"^@(!?)(U?P[0-6T])\s+")

_REG_KINDS = (
    (re.compile(r"^(R\d+|RZ)$"), "reg"),
    (re.compile(r"^(UR\d+|URZ)$"), "ureg"),
    (re.compile(r"^(P[0-6]|PT)$"), "pred"),
    (re.compile(r"^(UP[0-6]|UPT)$"), "upred"),
    (re.compile(r"^(SR_\w+|SRZ|SB\d+|B\d+)$"), "special"),
)
_HEX = re.compile(r"^[-+]?0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(\d+(\.\d*)?([eE][-+]?\d+)?|INF|QNAN|NAN)$")
_CONST = re.compile(r"^c\[(0x[0-9a-fA-F]+)\]\[(.+)\]$")
_MEM = re.compile(r"^(?:desc\[(\w+)\])?\[(.+)\]$")
_BRANCH = re.compile(r"^`\((.+)\)$")


@dataclass(frozen=True)
class Operand:
    """One operand as printed. ``kind``: reg (R), ureg (UR), pred (P), upred (UP), special (SR_*, SB*, B*),
    imm (hex integer), float (decimal literal), const (c[bank][addr]), mem ([addr] or desc[UR][addr]),
    label (`(target)), other (not recognised)."""

    kind: str
    text: str
    regs: tuple[str, ...] = ()  # the register itself, or those in a const/mem address (suffixes dropped)
    value: int | float | None = None  # an immediate's value; a const/mem address's constant offset
    bank: int | None = None  # constant bank
    desc: str = ""  # memory descriptor register (desc[UR8][...])
    label: str = ""
    prefix: str = ""  # "-", "!" or "~" in front of the operand
    absolute: bool = False  # |x|
    suffixes: tuple[str, ...] = ()  # .reuse, .64, .H1, ... without the dot

    @property
    def reuse(self) -> bool:
        return "reuse" in self.suffixes


@dataclass(frozen=True)
class SassInstruction:
    kernel: str
    function: str  # the symbol whose code this is: the kernel, or a subroutine in its section
    pc: int  # byte offset in the kernel's section
    guard: str  # "" (always), "P0", "UPT", ...
    guard_negated: bool
    opcode: str  # LDS
    modifiers: tuple[str, ...]  # ("128",) for LDS.128
    operands: tuple[Operand, ...]
    lo: int  # low 64 bits of the encoding
    hi: int  # high 64 bits (control code in bits 41..61)
    ptx_line: int | None  # line of the PTX text this instruction came from (nvdisasm -gp)
    text: str  # as nvdisasm printed it, without the offset and the ';'

    @property
    def name(self) -> str:
        """Opcode with its modifiers: ``LDSM.16.M88.4``."""
        return ".".join((self.opcode, *self.modifiers))

    @cached_property
    def control(self) -> Control:
        """The decoded control code (decoded once per instruction: the timing loop reads it every cycle)."""
        return decode(self.hi)

    @property
    def encoding(self) -> int:
        return self.lo | self.hi << 64


@dataclass(frozen=True)
class SassKernel:
    name: str
    instructions: tuple[SassInstruction, ...]
    labels: dict[str, int] = field(default_factory=dict)  # label or function symbol -> pc

    def index(self, pc: int) -> int:
        """Position in ``instructions`` of the instruction at byte offset ``pc``."""
        for i, ins in enumerate(self.instructions):
            if ins.pc == pc:
                return i
        raise KeyError(f"no instruction at 0x{pc:04x} in {self.name}")

    def target(self, ins: SassInstruction) -> int | None:
        """The pc a branch/call operand of ``ins`` names, None when it names none in this kernel."""
        for op in ins.operands:
            if op.kind == "label" and op.label in self.labels:
                return self.labels[op.label]
        return None


def _split(text: str) -> list[str]:
    """Operand tokens: split at commas and blanks outside brackets."""
    out, cur, depth = [], "", 0
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def _address(expr: str) -> tuple[tuple[str, ...], int, tuple[str, ...]] | None:
    """``R4.64+UR6+-0x10`` -> (("R4", "UR6"), -16, ("64",)); None when a term is not a register or hex."""
    regs: list[str] = []
    sufs: list[str] = []
    offset = 0
    for term in filter(None, expr.split("+")):
        if _HEX.match(term):
            offset += int(term, 16)
            continue
        name, *rest = term.split(".")
        if not any(rx.match(name) for rx, _ in _REG_KINDS):
            return None
        regs.append(name)
        sufs += rest
    return tuple(regs), offset, tuple(sufs)


def parse_operand(tok: str) -> Operand:
    text = tok
    if m := _BRANCH.match(tok):
        return Operand("label", text, label=m.group(1))
    if _HEX.match(tok):
        return Operand("imm", text, value=int(tok, 16))
    if _FLOAT.match(tok):
        return Operand("float", text, value=float(tok.replace("QNAN", "NAN")))
    prefix = ""
    if tok[:1] in "-!~" and len(tok) > 1:
        prefix, tok = tok[0], tok[1:]
    absolute = len(tok) > 2 and tok[0] == "|" and "|" in tok[2:]
    if absolute:  # |R7| or |R7|.reuse: the suffixes after the bars belong to the register
        close = tok.index("|", 1)
        tok = tok[1:close] + tok[close + 1:]
    if m := _CONST.match(tok):
        addr = _address(m.group(2))
        if addr is not None:
            return Operand("const", text, regs=addr[0], value=addr[1], bank=int(m.group(1), 16), prefix=prefix,
                           absolute=absolute)
    if m := _MEM.match(tok):
        addr = _address(m.group(2))
        if addr is not None:
            return Operand("mem", text, regs=addr[0], value=addr[1], desc=m.group(1) or "", prefix=prefix,
                           suffixes=addr[2])
    name, *sufs = tok.split(".")
    for rx, kind in _REG_KINDS:
        if rx.match(name):
            return Operand(kind, text, regs=(name,), prefix=prefix, absolute=absolute, suffixes=tuple(sufs))
    return Operand("other", text)


def parse_instruction(kernel: str, function: str, pc: int, text: str, lo: int, hi: int,
                      ptx_line: int | None) -> SassInstruction:
    guard, negated, rest = "", False, text
    if m := _GUARD.match(text):
        negated, guard, rest = m.group(1) == "!", m.group(2), text[m.end():]
    head, _, tail = rest.partition(" ")
    opcode, *mods = head.split(".")
    ops = tuple(parse_operand(t) for t in _split(tail.strip()))
    return SassInstruction(kernel, function, pc, guard, negated, opcode, tuple(mods), ops, lo, hi, ptx_line, text)


def parse_listing(text: str, file: str = "<nvdisasm>") -> dict[str, SassKernel]:
    """Kernels (one per .text section) of an ``nvdisasm -c -hex [-gp]`` listing, in listing order."""
    kernels: dict[str, SassKernel] = {}
    lines = text.splitlines()
    section: str | None = None
    function = ""
    ptx_line: int | None = None
    instrs: list[SassInstruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []  # labels waiting for the next instruction's pc

    def close() -> None:
        if section is not None:
            end = instrs[-1].pc + 16 if instrs else 0
            labels.update({name: end for name in pending})
            kernels[section] = SassKernel(section, tuple(instrs), dict(labels))

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if (m := _SECTION.match(line)) or _SYMBOLS.match(line):
            close()
            section = m.group(1) if m else None
            function, ptx_line, instrs, labels, pending = section or "", None, [], {}, []
        elif m := _LINE_INFO.match(line):
            ptx_line = int(m.group(1))
        elif section is not None and (m := _INSTR.match(line)):
            h = _HI.match(lines[i]) if i < len(lines) else None
            if h is None:
                raise SassError("an instruction line is not followed by its high encoding word "
                                "(run nvdisasm with -hex)", file, i)
            i += 1
            pc = int(m.group(1), 16)
            labels.update({name: pc for name in pending})
            pending = []
            instrs.append(parse_instruction(section, function, pc, m.group(2), int(m.group(3), 16),
                                            int(h.group(1), 16), ptx_line))
        elif section is not None and (m := _LABEL.match(line.strip())):
            name = m.group(1)
            if name != f".text.{section}":
                pending.append(name)
                if not name.startswith(".L"):
                    function = name
        elif section is not None and "/*" in line and re.match(r"^\s*/\*[0-9a-fA-F]+\*/", line):
            raise SassError(f"cannot read this instruction line: {line.strip()}", file, i)
    close()
    return kernels


def disassemble(ptx_text: str, arch: str = DEFAULT_ARCH, file: str = "<ptx>") -> dict[str, SassKernel]:
    """PTX text -> the SASS ptxas writes for ``arch``, per kernel, each instruction with its control code
    and PTX line."""
    return parse_listing(compile_ptx(ptx_text, arch, file).disassembly, file)
