"""A small PTX text builder: virtual registers by type, comments, labels, the entry skeleton.

The emitters only use a conventional instruction subset (see docs/kernelgen.md) so that the
workbench's PTX simulator can run every kernel they write.

The builder also sums every instruction it is handed by region and first token (times executed
per pass over its region), and keeps the region's sums just before the first of a few MARKS:
``kernelgen.counting`` classifies them by pipe, which is how the planner counts the instructions of
a kernel without hand-kept formulas. In counting mode (``counting=True``) a ``part`` seen before is
replayed from its record instead of being written again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

R = TypeVar("R")

PTX_VERSION = "8.7"
PTX_TARGET = "sm_90a"

# register class -> (PTX type in .reg, name prefix)
REG_CLASSES = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%h"),
    "u32": (".b32", "%r"),
    "f32": (".f32", "%f"),
    "u64": (".b64", "%rd"),
}


def f32_hex(x: float) -> str:
    """PTX exact float literal: 0fXXXXXXXX."""
    return f"0f{struct.unpack('<I', struct.pack('<f', float(x)))[0]:08X}"


# the first tokens whose first occurrence in a region is marked (the region's totals just before it)
MARKS = {"pre": ("cp.async.commit_group",), "iter": ("bar.", "ldmatrix", "wgmma.fence")}


_MARK_OF: dict[str, dict[str, str | None]] = {region: {} for region in ("pre", "iter", "post")}


def _mark(region: str, token: str) -> str | None:
    """The MARKS entry ``token`` (an instruction's first token) starts with in ``region``, or None."""
    tab = _MARK_OF.setdefault(region, {})
    try:
        return tab[token]
    except KeyError:
        m = tab[token] = next((m for m in MARKS.get(region, ()) if token.startswith(m)), None)
        return m


# part key -> (its instructions, the same summed by token, registers added, labels added, return value,
# region -> the MARKS entries its tokens start in that region)
_PARTS: dict[Hashable, tuple[list[tuple[str, int]], dict[str, int], dict[str, int], int, Any,
                             dict[str, frozenset[str]]]] = {}


class PtxBuilder:
    def __init__(self, counting: bool = False) -> None:
        self.lines: list[str] = []
        self.counts = {k: 0 for k in REG_CLASSES}
        self.label_n = 0
        self.counting = counting
        self.times = 1  # how many times an instruction written now runs per pass over its region
        self.totals: dict[str, dict[str, int]] = {"pre": {}, "iter": {}, "post": {}}  # region -> token -> times
        self.marks: dict[str, dict[str, int]] = {}  # MARKS entry -> its region's totals just before it
        self.recording: list[list[tuple[str, int]]] = []  # the instructions of the parts being recorded
        # counting: sums and registers around a stretch
        self.spans: dict[str, tuple[dict[str, int], ...]] = {}
        self.region = "pre"  # "pre" | "iter" (one K-loop iteration) | "post"

    @property
    def region(self) -> str:
        return self._region

    @region.setter
    def region(self, name: str) -> None:
        self._region = name
        self._tot = self.totals[name]  # the region's sums and its first-token -> mark table, looked up once
        self._marks_of = _MARK_OF.setdefault(name, {})

    def _count(self, token: str, times: int) -> None:
        tot = self._tot
        try:
            m = self._marks_of[token]
        except KeyError:
            m = _mark(self._region, token)
        if m is not None and m not in self.marks:
            self.marks[m] = dict(tot)
        tot[token] = tot.get(token, 0) + times
        for rec in self.recording:
            rec.append((token, times))

    def reg(self, cls: str) -> str:
        n = self.counts[cls]
        self.counts[cls] = n + 1
        return f"{REG_CLASSES[cls][1]}{n}"

    def regs(self, cls: str, n: int) -> list[str]:
        first = self.counts[cls]
        self.counts[cls] = first + n
        prefix = REG_CLASSES[cls][1]
        return [f"{prefix}{k}" for k in range(first, first + n)]

    def label(self, stem: str) -> str:
        self.label_n += 1
        return f"$L_{stem}_{self.label_n}"

    def i(self, text: str) -> None:
        """One instruction (``;`` appended)."""
        if not self.counting:
            self.lines.append(f"\t{text};")
        token = text.split(" ", 1)[0]
        if token[0] == "@":
            token = text.split(" ", 2)[1]
        # _count, inlined (the planner's counting passes call this some 160,000 times)
        tot, times = self._tot, self.times
        try:
            m = self._marks_of[token]
        except KeyError:
            m = _mark(self._region, token)
        if m is not None and m not in self.marks:
            self.marks[m] = dict(tot)
        tot[token] = tot.get(token, 0) + times
        for rec in self.recording:
            rec.append((token, times))

    def part(self, key: Hashable, write: Callable[[], R]) -> R:
        """Run ``write`` (it writes instructions into this builder). In counting mode the first run
        under ``key`` is recorded and later ones replay that record: ``key`` must name everything
        the instruction sequence and the registers ``write`` declares depend on."""
        if not self.counting:
            return write()
        hit = _PARTS.get(key)
        if hit is None:
            ops: list[tuple[str, int]] = []
            regs0, labels0 = dict(self.counts), self.label_n
            self.recording.append(ops)
            try:
                out = write()
            finally:
                self.recording.pop()
            summed: dict[str, int] = {}
            for tok, times in ops:
                summed[tok] = summed.get(tok, 0) + times
            _PARTS[key] = (ops, summed, {k: v - regs0[k] for k, v in self.counts.items()}, self.label_n - labels0,
                           out, {})
            return out
        ops, summed, regs, labels, out, marks_in = hit
        marks = marks_in.get(self._region)
        if marks is None:
            marks = marks_in[self._region] = frozenset(m for tok in summed if (m := _mark(self._region, tok)))
        if any(m not in self.marks for m in marks):
            for tok, times in ops:  # a first occurrence inside: in order
                self._count(tok, times)
        else:
            tot = self._tot
            for tok, times in summed.items():
                tot[tok] = tot.get(tok, 0) + times
            for rec in self.recording:  # a part replayed inside another's first run
                rec.extend(ops)
        for k, v in regs.items():
            self.counts[k] += v
        self.label_n += labels
        return out

    def repeat(self, key: Hashable, n: int, write: Callable[[int], object]) -> None:
        """``part(key, lambda: write(i))`` for i in range(n): n runs of one instruction sequence (the same
        registers and first tokens each time, their texts may differ). In counting mode the first is run or
        replayed and the other n - 1 are added at once (unless a mark's first occurrence falls in them)."""
        if not self.counting or n <= 1:
            for i in range(n):
                self.part(key, lambda: write(i))  # noqa: B023 (part calls it at once)
            return
        self.part(key, lambda: write(0))
        ops, summed, regs, labels, _, marks_in = _PARTS[key]
        marks = marks_in.get(self._region)
        if marks is None:
            marks = marks_in[self._region] = frozenset(m for tok in summed if (m := _mark(self._region, tok)))
        if any(m not in self.marks for m in marks):  # cannot happen after the first run: it saw them all
            for i in range(1, n):
                self.part(key, lambda: write(i))  # noqa: B023
            return
        more = n - 1
        tot = self._tot
        for tok, times in summed.items():
            tot[tok] = tot.get(tok, 0) + times * more
        for rec in self.recording:
            rec.extend(ops * more)
        for k, v in regs.items():
            self.counts[k] += v * more
        self.label_n += labels * more

    def comment(self, text: str) -> None:
        if self.counting:
            return
        self.lines.append("")
        for ln in text.splitlines():
            self.lines.append(f"\t// {ln}")

    def put_label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def reg_decls(self) -> list[str]:
        out = []
        for cls, n in self.counts.items():
            if n:
                ty, pre = REG_CLASSES[cls]
                out.append(f"\t.reg {ty} \t{pre}<{n}>;")
        return out


def render_kernel(header_json: str, name: str, params: list[tuple[str, str]],
                  shared: list[tuple[str, int]], b: PtxBuilder, title: str) -> str:
    out = [f"// @workbench {header_json}", f"// {title}", "// Generated by kernelgen.", "",
           f".version {PTX_VERSION}", f".target {PTX_TARGET}", ".address_size 64", ""]
    for sname, nbytes in shared:
        out.append(f".shared .align 16 .b8 {sname}[{nbytes}];")
    out.append("")
    out.append(f".visible .entry {name}(")
    out.append(",\n".join(f"\t.param {ty} {pname}" for pname, ty in params))
    out.append(")")
    out.append("{")
    out.extend(b.reg_decls())
    out.extend(b.lines)
    out.append("}")
    return "\n".join(out) + "\n"
