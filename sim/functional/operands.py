"""Decode-time operand access: closures that read and write warp registers with PTX type rules."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.errors import PtxError, at_instruction
from sim.functional.types import NP, UINT, bits_to, is_float, storage, to_storage
from sim.ptx.ir import Instruction, Kernel, Operand, Program
from sim.ptx.types import type_mods

ndarray = np.ndarray
WARP_LANES = (32,)  # a warp's lanes (sim/functional/warp.py: Warp.lanes; a lock-step group has more)
Reader = Callable[[Any], Any]
Writer = Callable[[Any, Any, np.ndarray, bool], None]


@dataclass
class Layout:
    """Where the kernel's named variables live: shared offsets, global/const addresses, params."""

    shared: dict[str, int]
    shared_static: int  # bytes of static shared memory
    dynamic_base: int  # offset of the extern (dynamic) shared array
    globals_: dict[str, int]  # module .global variable -> generic address (filled at launch)
    const: dict[str, int]
    const_size: int
    local: dict[str, int]
    local_size: int
    params: dict[str, int]  # param name -> offset in the parameter buffer
    param_size: int


def make_layout(k: Kernel, prog: Program) -> Layout:
    shared: dict[str, int] = {}
    off = 0
    externs = []
    allvars = list(prog.variables.values()) + list(k.variables.values())
    for v in allvars:
        if v.space != "shared":
            continue
        if v.extern or v.count == 0:
            externs.append(v)
            continue
        off = (off + v.align - 1) // v.align * v.align
        shared[v.name] = off
        off += v.size
    static = off
    align = max([16] + [v.align for v in externs])  # the extern arrays' declared alignment (.align 1024)
    dyn = (off + align - 1) // align * align
    for v in externs:
        shared[v.name] = dyn
    const: dict[str, int] = {}
    coff = 0
    for v in allvars:
        if v.space == "const":
            coff = (coff + v.align - 1) // v.align * v.align
            const[v.name] = coff
            coff += v.size
    local: dict[str, int] = {}
    loff = 0
    for v in k.variables.values():
        if v.space == "local":
            loff = (loff + v.align - 1) // v.align * v.align
            local[v.name] = loff
            loff += v.size
    params = {p.name: p.offset for p in k.params}
    psize = max((p.offset + p.size for p in k.params), default=0)
    return Layout(shared, static, dyn, {}, const, coff, local, loff, params, psize)


class DecodeCtx:
    def __init__(self, k: Kernel, prog: Program, layout: Layout):
        self.k = k
        self.prog = prog
        self.layout = layout
        self.store = {name: storage(t) for name, t in k.regs.items()}

    def err(self, ins: Instruction, msg: str) -> PtxError:
        return at_instruction(PtxError, f"{msg} ({ins.text})", self.k.file, ins)

    # -- types -----------------------------------------------------------------------------------
    def types(self, ins: Instruction) -> list[str]:
        ts = type_mods(ins.mods)
        for t in ts:
            if t not in NP:
                raise self.err(ins, f"type .{t} is not supported by the simulator (docs/ptx-subset.md)")
        return ts

    def type1(self, ins: Instruction) -> str:
        ts = self.types(ins)
        if not ts:
            raise self.err(ins, f"'{ins.full}' has no type suffix")
        return ts[-1]

    # -- operands --------------------------------------------------------------------------------
    def sym_value(self, name: str, ins: Instruction) -> tuple[str, int]:
        lay = self.layout
        if name in lay.shared:
            return "shared", lay.shared[name]
        if name in lay.local:
            return "local", lay.local[name]
        if name in lay.const:
            return "const", lay.const[name]
        if name in lay.params:
            return "param", lay.params[name]
        if name in self.prog.variables and self.prog.variables[name].space == "global":
            return "global", -1  # address known at launch
        raise self.err(ins, f"'{name}' is not a variable")

    def rd(self, op: Operand, t: str, ins: Instruction) -> Reader:
        dt = NP[t]
        if op.kind == "reg":
            name = op.name
            if self.store[name] == dt:
                if op.neg:
                    return lambda w: ~w.r[name]
                return lambda w: w.r[name]
            if op.neg:
                return lambda w: ~bits_to(w.r[name], t)
            return lambda w: bits_to(w.r[name], t)
        if op.kind == "imm":
            v = _imm(op.value, t)
            return lambda w: v
        if op.kind == "fimm":
            v = _fimm(op.value, t)
            return lambda w: v
        if op.kind == "sreg":
            name = op.name
            if name.startswith("%clock") or name == "%globaltimer":  # the timer: the simulator's clock as well
                return lambda w: bits_to(w.clock(name), t)
            return lambda w: bits_to(w.sregs[name], t)
        if op.kind == "sym":
            space, off = self.sym_value(op.name, ins)
            name = op.name
            if space == "global":
                return lambda w: np.array(w.globals_[name], dtype=np.uint64).astype(dt)
            return lambda w: np.array(off, dtype=np.uint64).astype(dt)
        raise self.err(ins, f"operand {op} cannot be read as .{t}")

    def wr(self, op: Operand, t: str, ins: Instruction) -> Writer:
        if op.kind == "sink":
            return lambda w, v, m, full: None
        if op.kind != "reg":
            raise self.err(ins, f"operand {op} is not a register destination")
        name = op.name
        st = self.store[name]

        def write(w: Any, v: Any, m: np.ndarray, full: bool) -> None:
            if v.__class__ is not ndarray or v.dtype != st or v.shape != w.lanes:  # else already its storage
                v = to_storage(np.asarray(v), t, st)
                if v.shape != w.lanes:
                    v = np.full(w.lanes, v, dtype=st)
            w.r[name] = v if full else np.where(m, v, w.r[name])

        return write

    def addr(self, op: Operand, ins: Instruction) -> tuple[Callable[[Any], np.ndarray], str | None]:
        """Closure giving the 32 lanes' addresses as uint64, and the space a symbol base implies."""
        if op.kind != "addr":
            raise self.err(ins, f"expected a [address] operand, found {op}")
        off = np.uint64(op.value & 0xFFFF_FFFF_FFFF_FFFF)
        b = op.base
        if b is None:
            c = np.full(32, off, dtype=np.uint64)
            return (lambda w: c if w.lanes is WARP_LANES else np.full(w.lanes, off, dtype=np.uint64)), None
        if b.kind == "reg":
            name = b.name
            st = self.store[name]
            if st.itemsize == 8:
                return (lambda w: w.r[name].view(np.uint64) + off), None
            if st.itemsize == 4:
                return (lambda w: w.r[name].view(np.uint32).astype(np.uint64) + off), None
            raise self.err(ins, f"address register {name} must be 32 or 64 bits")
        if b.kind == "sym":
            space, base = self.sym_value(b.name, ins)
            name = b.name
            if space == "global":
                return (lambda w: np.full(w.lanes, np.uint64(w.globals_[name]) + off, dtype=np.uint64)), "global"
            c = np.full(32, np.uint64(base) + off, dtype=np.uint64)
            return (lambda w: c if w.lanes is WARP_LANES else np.full(w.lanes, c[0])), space
        raise self.err(ins, f"bad address base {b}")


def _imm(value: int, t: str) -> Any:
    dt = NP[t]
    if t == "pred":
        return np.bool_(value != 0)
    if is_float(t) and t != "bf16":
        return dt.type(value)
    size = dt.itemsize
    return np.array(int(value) & ((1 << (8 * size)) - 1), dtype=UINT[size]).view(dt)[()]


def _fimm(value: float, t: str) -> Any:
    dt = NP[t]
    if t in ("f32", "f64", "f16"):
        return dt.type(value)
    if t == "bf16":
        from sim.functional.types import f32_to_bf16

        return f32_to_bf16(np.array([value], np.float32))[0]
    size = dt.itemsize
    if size == 4:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
    elif size == 8:
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    else:
        bits = int(np.float16(value).view(np.uint16))
    return np.array(bits, dtype=UINT[size]).view(dt)[()]
