"""Operand readers and writers of the SASS functional model, compiled once per instruction.

A reader is ``fn(warp) -> value``: a (32,) array per lane, or a numpy scalar for uniform sources
(UR, immediates, constants with a constant address); numpy broadcasting mixes both. A writer is
``fn(warp, value, mask)``. Integer readers apply the operand's ``-`` (two's complement) and ``~``
(bitwise not); float readers apply ``|x|`` then ``-``; predicate readers apply ``!``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.sass.exec_state import PT, RZ, URZ, Launched, Warp
from sim.sass.listing import Operand, SassInstruction

Reader = Callable[[Warp], Any]
Writer = Callable[[Warp, Any, np.ndarray], None]
U32 = np.uint32
U64 = np.uint64
_REUSE_ONLY = {"reuse"}


def reg_index(name: str) -> int:
    """R7 -> 7, RZ -> 255, UR4 -> 4, URZ -> 63, P3 -> 3, PT -> 7."""
    if name in ("RZ",):
        return RZ
    if name == "URZ":
        return URZ
    if name in ("PT", "UPT"):
        return PT
    return int(name.lstrip("URP"))


class Ctx:
    """Compiles the operands of one instruction; errors name the instruction."""

    def __init__(self, L: Launched, ins: SassInstruction):
        self.L = L
        self.ins = ins

    def err(self, what: str) -> Exception:
        return self.L.err(self.ins, what)

    def mods(self, allowed: set[str]) -> set[str]:
        """The instruction's modifiers; one not in ``allowed`` is an error."""
        extra = [m for m in self.ins.modifiers if m not in allowed]
        if extra:
            raise self.err(f"modifier .{extra[0]} of {self.ins.opcode} is not modelled")
        return set(self.ins.modifiers)

    def _suffixes(self, op: Operand, allowed: set[str] = _REUSE_ONLY) -> set[str]:
        bad = [s for s in op.suffixes if s not in allowed]
        if bad:
            raise self.err(f"operand suffix .{bad[0]} of '{op.text}' is not modelled")
        return set(op.suffixes)

    # -- 32-bit sources -------------------------------------------------------------------------------
    def raw(self, op: Operand, allowed: set[str] = _REUSE_ONLY) -> Reader:
        """The operand's 32 bits, prefix ignored."""
        if op.kind == "reg":
            self._suffixes(op, allowed)
            i = reg_index(op.regs[0])
            return lambda w: w.R[i]
        if op.kind == "ureg":
            self._suffixes(op, allowed)
            i = reg_index(op.regs[0])
            return lambda w: w.UR[i]
        if op.kind == "imm":
            v = U32(int(op.value or 0) & 0xFFFFFFFF)
            return lambda w: v
        if op.kind == "float":
            f = np.float32(op.value).view(U32)
            return lambda w: f
        if op.kind == "const":
            return self.const(op, 4)
        raise self.err(f"operand '{op.text}' ({op.kind}) cannot be read as 32 bits")

    def const(self, op: Operand, size: int) -> Reader:
        if op.bank != 0:
            raise self.err(f"constant bank {op.bank} is not modelled (only c[0x0], the parameter bank)")
        off = int(op.value or 0)
        dt = np.dtype(U32) if size == 4 else np.dtype(U64)
        cb = self.L.cbank
        regs = [r for r in op.regs if r not in ("RZ", "URZ")]
        if not regs:
            v = cb.load(np.array([off]), dt)[0, 0]
            return lambda w: v
        readers = [self.raw(Operand("reg" if r.startswith("R") else "ureg", r, regs=(r,))) for r in regs]

        def rd(w: Warp) -> Any:
            a = np.full(32, off, dtype=np.int64)
            for r in readers:
                a = a + np.asarray(r(w), dtype=np.int64)
            return cb.load(a, dt)[:, 0]
        return rd

    def u32(self, op: Operand, allowed: set[str] = _REUSE_ONLY) -> Reader:
        r = self.raw(op, allowed)
        if op.absolute:
            r0 = r
            r = lambda w: np.abs(np.asarray(r0(w)).view(np.int32)).view(U32)  # noqa: E731
        if op.prefix == "-":
            return lambda w: (U32(0) - r(w)).astype(U32)
        if op.prefix == "~":
            return lambda w: ~r(w)
        if op.prefix:
            raise self.err(f"prefix {op.prefix} on an integer operand")
        return r

    def f32(self, op: Operand, allowed: set[str] = _REUSE_ONLY) -> Reader:
        r = self.raw(op, allowed)
        mask = U32(0x7FFFFFFF)
        sign = U32(0x80000000)
        if op.absolute and op.prefix == "-":
            return lambda w: (r(w) | sign).view(np.float32)
        if op.absolute:
            return lambda w: (r(w) & mask).view(np.float32)
        if op.prefix == "-":
            return lambda w: (r(w) ^ sign).view(np.float32)
        if op.prefix:
            raise self.err(f"prefix {op.prefix} on a float operand")
        return lambda w: np.asarray(r(w)).view(np.float32)

    # -- 64-bit sources (register pairs) --------------------------------------------------------------
    def u64(self, op: Operand) -> Reader:
        if op.kind in ("reg", "ureg"):
            self._suffixes(op, {"reuse", "64"})
            i = reg_index(op.regs[0])
            zero = i in (RZ, URZ)
            if op.kind == "reg":
                r: Reader = (lambda w: np.zeros(32, U64)) if zero else \
                    (lambda w: w.R[i].astype(U64) | (w.R[i + 1].astype(U64) << U64(32)))
            else:
                r = (lambda w: U64(0)) if zero else (lambda w: U64(w.UR[i]) | (U64(w.UR[i + 1]) << U64(32)))
        elif op.kind == "imm":
            v = U64(int(op.value or 0) & 0xFFFFFFFFFFFFFFFF)
            r = lambda w: v  # noqa: E731
        elif op.kind == "float":  # a double immediate (DFMA R10, -R26, R6, 1)
            fv = np.float64(op.value).view(U64)
            r = lambda w: fv  # noqa: E731
        elif op.kind == "const":
            r = self.const(op, 8)
        else:
            raise self.err(f"operand '{op.text}' cannot be read as 64 bits")
        if op.prefix == "-":
            return lambda w: (U64(0) - r(w)).astype(U64)
        if op.prefix == "~":
            return lambda w: ~r(w)
        return r

    def pred(self, op: Operand) -> Reader:
        if op.kind not in ("pred", "upred"):
            raise self.err(f"operand '{op.text}' is not a predicate")
        i = reg_index(op.regs[0])
        neg = op.prefix == "!"
        if op.kind == "pred":
            return (lambda w: ~w.P[i]) if neg else (lambda w: w.P[i])
        return (lambda w: not w.UP[i]) if neg else (lambda w: w.UP[i])

    # -- destinations ---------------------------------------------------------------------------------
    def w32(self, op: Operand, allowed: set[str] = _REUSE_ONLY) -> Writer:
        self._suffixes(op, allowed)
        if op.kind == "reg":
            i = reg_index(op.regs[0])
            if i == RZ:
                return lambda w, v, m: None

            def wr(w: Warp, v: Any, m: np.ndarray) -> None:
                np.copyto(w.R[i], v, casting="unsafe", where=m)
            return wr
        if op.kind == "ureg":
            i = reg_index(op.regs[0])
            if i == URZ:
                return lambda w, v, m: None

            def wu(w: Warp, v: Any, m: np.ndarray) -> None:
                if w.UR.ndim == 3:  # a lock-step wide warp (sim/sass/lockstep.py): each warp's value, where it ran
                    ran = np.any(m, axis=1).reshape(-1, 1)
                    w.UR[i] = np.where(ran, _uniform_wide(v, m), w.UR[i])
                    return
                w.UR[i] = U32(_uniform(v, m))
            return wu
        raise self.err(f"destination '{op.text}' is not a register")

    def w64(self, op: Operand) -> Writer:
        lo = self.w32(op, {"reuse", "64"})
        hi = self.w32(_next_reg(op), {"reuse", "64"}) if op.regs[0] not in ("RZ", "URZ") else lo

        def wr(w: Warp, v: Any, m: np.ndarray) -> None:
            v = np.asarray(v).astype(U64)
            lo(w, (v & U64(0xFFFFFFFF)).astype(U32), m)
            hi(w, (v >> U64(32)).astype(U32), m)
        return wr

    def wn(self, op: Operand, n: int) -> list[Writer]:
        """Writers of n consecutive 32-bit registers starting at ``op`` (LDS.128, LDSM.x4, HMMA)."""
        out = [self.w32(op, {"reuse", "64", "128"})]
        cur = op
        for _ in range(n - 1):
            cur = _next_reg(cur) if cur.regs[0] not in ("RZ", "URZ") else cur
            out.append(self.w32(cur, {"reuse", "64", "128"}))
        return out

    def rn(self, op: Operand, n: int) -> list[Reader]:
        """Readers of n consecutive 32-bit registers starting at ``op``."""
        out = [self.raw(op, {"reuse", "64", "128"})]
        cur = op
        for _ in range(n - 1):
            cur = _next_reg(cur) if cur.regs[0] not in ("RZ", "URZ") else cur
            out.append(self.raw(cur, {"reuse", "64", "128"}))
        return out

    def wpred(self, op: Operand) -> Writer:
        if op.kind not in ("pred", "upred"):
            raise self.err(f"destination '{op.text}' is not a predicate")
        i = reg_index(op.regs[0])
        if i == PT:
            return lambda w, v, m: None
        if op.kind == "pred":
            def wp(w: Warp, v: Any, m: np.ndarray) -> None:
                np.copyto(w.P[i], v, where=m)
            return wp

        def wup(w: Warp, v: Any, m: np.ndarray) -> None:
            w.UP[i] = bool(_uniform(v, m))
        return wup


def _uniform(v: Any, m: np.ndarray) -> Any:
    """A uniform result: a scalar, or the value of the first active lane of a per-lane array."""
    a = np.asarray(v)
    if a.ndim == 0:
        return a[()]
    return a[int(np.argmax(m))] if m.any() else a[0]


def _uniform_wide(v: Any, m: np.ndarray) -> Any:
    """_uniform for each warp of a wide warp: v a scalar, per-warp (warps, 1) or per-lane (warps, 32) values, m the
    (warps, 32) mask; (warps, 1) uint32 (the first active lane's value, lane 0's where none is active)."""
    a = np.asarray(v)
    if a.ndim == 0:
        return np.full((m.shape[0], 1), a).astype(U32)
    if a.shape[-1] == 1:
        return np.broadcast_to(a, (m.shape[0], 1)).astype(U32)
    a = np.broadcast_to(a, m.shape)
    return a[np.arange(m.shape[0]), np.argmax(m, axis=1)][:, None].astype(U32)


def _next_reg(op: Operand) -> Operand:
    name = op.regs[0]
    prefix = "UR" if name.startswith("UR") else "R"
    nxt = f"{prefix}{int(name[len(prefix):]) + 1}"
    return Operand(op.kind, nxt, regs=(nxt,))
