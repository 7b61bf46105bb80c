"""Parsed PTX: Program / Kernel / Instruction, with the source line kept on every instruction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Operand:
    """One instruction operand.

    kind: "reg" (a declared register), "sreg" (special register such as %tid.x), "imm" (integer),
    "fimm" (float, value already decoded), "vec" (``{a, b}``; items), "addr" (``[base+offset]``;
    base is a reg/sym operand or None for an absolute address; items: a tensor operand's coordinates,
    ``[tmap, {x, y}]``), "sym" (a variable or parameter
    name), "label", "sink" (``_``), "pair" (``%p1|%p2``; items).
    """

    kind: str
    name: str = ""
    value: Any = None
    items: tuple[Operand, ...] = ()
    base: Operand | None = None
    neg: bool = False  # '!%p' as a source predicate

    def __str__(self) -> str:
        if self.kind in ("reg", "sreg", "sym", "label"):
            return ("!" if self.neg else "") + self.name
        if self.kind in ("imm", "fimm"):
            return str(self.value)
        if self.kind == "vec":
            return "{" + ", ".join(map(str, self.items)) + "}"
        if self.kind == "pair":
            return "|".join(map(str, self.items))
        if self.kind == "addr":
            b = str(self.base) if self.base is not None else ""
            c = ", {" + ", ".join(map(str, self.items)) + "}" if self.items else ""
            return f"[{b}+{self.value}{c}]" if self.value else f"[{b}{c}]"
        return "_"


@dataclass
class Instruction:
    """One PTX instruction: opcode, modifiers, type suffixes, operands, guard, source line."""

    opcode: str  # base opcode, e.g. "ld"
    mods: tuple[str, ...]  # the dot-separated modifiers, e.g. ("global", "nc", "v4", "f32")
    operands: list[Operand]
    line: int
    text: str  # the statement as written
    guard: str | None = None  # predicate register name
    guard_neg: bool = False
    index: int = 0  # position in the kernel body
    src: tuple[str, int] | None = None  # the (file, line) of the source program from `.loc`/`.file`
    # Filled by the ISA table / decoder:
    pipe: str = ""  # pipe class (sim.hw.PIPE_CLASSES)
    dst_regs: tuple[str, ...] = ()
    src_regs: tuple[str, ...] = ()
    exec: Any = None  # functional closure fn(warp, mask)
    info: dict = field(default_factory=dict)  # decoder facts (space, width, is_branch, ...)

    @property
    def full(self) -> str:
        return ".".join((self.opcode,) + self.mods)

    def where(self, file: str) -> str:
        return f"{file}:{self.line}"


@dataclass
class Param:
    """One kernel parameter (.param): name, type, bytes, alignment."""

    name: str
    type: str  # e.g. "u64", "u32", "f32", "b8" (with array for structs)
    size: int  # bytes
    align: int
    offset: int = 0  # byte offset in the parameter buffer


@dataclass
class Variable:
    """A .shared / .global / .const / .local variable."""

    name: str
    space: str
    type: str
    elem_size: int
    count: int  # elements (0 for an unsized `extern` array)
    align: int
    init: bytes | None = None
    line: int = 0
    extern: bool = False

    @property
    def size(self) -> int:
        return self.elem_size * self.count


@dataclass
class Kernel:
    """One .entry (or inlined .func): its parameters, registers, variables and instruction body."""

    name: str
    params: list[Param]
    regs: dict[str, str]  # register name -> declared type ("b32", "f32", "pred", ...)
    variables: dict[str, Variable]  # .shared / .local declared inside the body
    body: list[Instruction]
    labels: dict[str, int]  # label -> instruction index
    file: str
    line: int
    directives: dict[str, Any] = field(default_factory=dict)  # .maxntid, .reqntid, ...
    returns: list[Param] = field(default_factory=list)  # a .func's return parameters

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass
class Program:
    """A parsed PTX module: its kernels, module variables, functions and text."""

    file: str
    version: str
    target: str
    address_size: int
    kernels: dict[str, Kernel]
    variables: dict[str, Variable]  # module-scope .global / .const / .shared
    text: str = ""
    functions: dict[str, Kernel] = field(default_factory=dict)  # .func definitions (inlined at calls)
    externs: set[str] = field(default_factory=set)  # functions declared without a body
    errors: dict[str, Exception] = field(default_factory=dict)  # entry -> its first decode error
    entries: list[str] = field(default_factory=list)  # every entry name, in file order

    def kernel(self, name: str | None = None) -> Kernel:
        from sim.errors import UsageError

        entries = self.entries or list(self.kernels)
        if name is None:
            if len(entries) != 1:
                names = ", ".join(entries) or "none"
                raise UsageError(f"{len(entries)} kernels ({names}): choose one with --kernel NAME", self.file)
            name = entries[0]
        if name in self.errors:
            raise self.errors[name]
        if name not in self.kernels:
            raise UsageError(f"no kernel named {name!r} (have: {', '.join(entries)})", self.file)
        return self.kernels[name]
