"""A TMA stand-in for simulating kernelgen's wgmma_tma kernels before the simulator executes
cp.async.bulk.tensor (tma-sim branch): each 2-D tensor map parameter becomes a pointer to the buffer it
maps, and each ``cp.async.bulk.tensor.2d ... [dst], [map, {x, y}], [bar]`` a loop of one thread that
writes the box the way the contract describes it (rows of box[0] elements, dense, 128-byte swizzle:
16-byte chunk c of row r at chunk c ^ (r % 8); elements outside dims zero) and then
``mbarrier.complete_tx`` of the box bytes. Everything else (the mbarrier ring, setmaxnreg, the wgmma
descriptors, the persistent tile walk, the epilogue) runs as emitted.

Limits: box[0] * element size must be 128 bytes and the innermost dim a multiple of 8 elements (what
wgmma_tma emits), so a 16-byte chunk is wholly inside or outside the tensor."""

from __future__ import annotations

import re
from typing import Any

_TMA_RE = re.compile(r"^\s*cp\.async\.bulk\.tensor\.2d\.\S+\s+\[(%\w+)(?:\+(\d+))?\],\s*\[(%\w+),\s*\{(%\w+),\s*"
                     r"(%\w+)\}\],\s*\[(%\w+)\];\s*$")
REGS = "\t.reg .b32 %te<8>;\n\t.reg .b64 %tg<3>;\n\t.reg .pred %tq<3>;\n"


def _box_loop(n: int, dst: str, off: int, gptr: str, x: str, y: str, bar: str, m: dict[str, Any]) -> str:
    d0, d1 = m["dims"]
    (stride,) = m["strides"]
    b0, b1 = m["box"]
    es = 128 // b0
    assert b0 * es == 128 and m["swizzle"] == 128, m
    r, c, gx, gy, sw, sa = (f"%te{i}" for i in range(6))
    lr, lc, skip = f"$TMA_r_{n}", f"$TMA_c_{n}", f"$TMA_z_{n}"
    lines = [f"mov.u32 {r}, 0;", f"{lr}:", f"mov.u32 {c}, 0;", f"{lc}:",
             f"mad.lo.u32 {gx}, {c}, {16 // es}, {x};", f"add.u32 {gy}, {y}, {r};",
             f"setp.lt.u32 %tq0, {gx}, {d0};", f"setp.lt.u32 %tq1, {gy}, {d1};", "and.pred %tq0, %tq0, %tq1;",
             "mov.b64 %tg0, 0;", "mov.b64 %tg1, 0;", f"@!%tq0 bra {skip};",
             f"mul.wide.u32 %tg2, {gy}, {stride};", f"mad.wide.u32 %tg2, {gx}, {es}, %tg2;",
             f"add.u64 %tg2, %tg2, {gptr};", "ld.global.v2.b64 {%tg0, %tg1}, [%tg2];", f"{skip}:",
             f"and.b32 {sw}, {r}, 7;", f"xor.b32 {sw}, {sw}, {c};", f"shl.b32 {sw}, {sw}, 4;",
             f"mad.lo.u32 {sa}, {r}, 128, {dst};", f"add.u32 {sa}, {sa}, {sw};",
             f"st.shared.v2.b64 [{sa}+{off}], {{%tg0, %tg1}};",
             f"add.u32 {c}, {c}, 1;", f"setp.lt.u32 %tq2, {c}, 8;", f"@%tq2 bra {lc};",
             f"add.u32 {r}, {r}, 1;", f"setp.lt.u32 %tq2, {r}, {b1};", f"@%tq2 bra {lr};",
             f"mbarrier.complete_tx.shared::cta.b64 [{bar}], {b0 * b1 * es};"]
    return "\n".join("\t" + ln if not ln.endswith(":") else ln for ln in lines)


def emulate_tma(ptx: str, meta: dict) -> tuple[str, dict]:
    """(PTX, header) with the maps replaced as the module docstring says; the header's hidden buffers
    become the map parameters' buffers (same position as the maps in the PTX parameter list)."""
    maps = {p["name"]: p for p in meta["params"] if p.get("kind") == "tensormap"}
    bufs = {p["role"]: p for p in meta["params"] if p.get("kind") == "buffer"}
    regs: dict[str, dict[str, Any]] = {}
    out, n = [], 0
    for line in ptx.splitlines():
        mv = re.match(r"^\s*mov\.b64 (%\w+), (\w+);$", line)
        if mv and mv.group(2) in maps:
            regs[mv.group(1)] = maps[mv.group(2)]
            out.append(f"\tld.param.u64 {mv.group(1)}, [{mv.group(2)}];")
            continue
        if re.match(r"^\s*cvta\.param\.u64 (%\w+), \1;$", line):
            out.append(line.replace("cvta.param.u64", "cvta.to.global.u64"))
            continue
        t = _TMA_RE.match(line)
        if t:
            dst, off, gptr, x, y, bar = t.groups()
            out.append(_box_loop(n, dst, int(off or 0), gptr, x, y, bar, regs[gptr]))
            n += 1
            continue
        pm = re.match(r"^\s*\.param \.align 64 \.b8 (\w+)\[128\](,?)$", line)
        if pm and pm.group(1) in maps:
            out.append(f"\t.param .u64 {pm.group(1)}{pm.group(2)}")
            continue
        out.append(line)
        if line == "{" and REGS not in out:
            out.append(REGS)
    params = []
    for p in meta["params"]:
        if p.get("kind") == "tensormap":
            params.append({**{k: v for k, v in bufs[p["of"]].items() if k != "hidden"}, "name": p["name"]})
        elif not p.get("hidden"):
            params.append(p)
    return "\n".join(out) + "\n", {**meta, "params": params}
