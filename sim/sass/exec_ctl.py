"""Control flow of the SASS functional model: branches, convergence barriers, calls, exit, CTA barrier.

Each builder returns ``fn(warp, group, mask)`` that moves the group (its pc, its lanes) itself; ``mask``
is the group's lanes that pass the guard. Volta-style convergence (docs/sass.md): BSSY Bn records the
group's lanes in Bn; BSYNC Bn (and WARPSYNC mask) holds the group until every live lane of the mask
waits at that pc; the scheduler (sim.sass.exec) runs the group with the lowest pc and merges groups
that meet at one pc.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.sass.exec_operands import Ctx
from sim.sass.exec_state import ALL, Group, Warp

CtlExec = Callable[[Warp, Group, np.ndarray], None]


def _target(cx: Ctx) -> int:
    pc = cx.L.kernel.target(cx.ins)
    if pc is None or pc not in cx.L.index:
        raise cx.err("branch target not found in the kernel")
    return cx.L.index[pc]


def _jump(w: Warp, g: Group, taken: np.ndarray, target: int) -> None:
    """Lanes ``taken`` of group g go to ``target``, the others to the next instruction."""
    if taken.all() or np.array_equal(taken, g.mask):
        g.pc = target
        return
    if not taken.any():
        g.pc += 1
        return
    w.groups.append(Group(target, taken.copy()))
    g.mask = g.mask & ~taken
    g.pc += 1


def b_bra(cx: Ctx) -> CtlExec:
    mods = cx.mods({"U", "DIV", "CONV", "ANY"})
    t = _target(cx)
    if "ANY" in mods:  # BRA.U.ANY (elect.sync loops around UTMALDG): the whole group goes when a lane's guard holds
        def any_(w: Warp, g: Group, m: np.ndarray) -> None:
            g.pc = t if m.any() else g.pc + 1
        return any_
    if "DIV" in mods:  # BRA.DIV mask, target: jump when not every live lane of mask is in this group
        ops = [o for o in cx.ins.operands if o.kind != "label"]
        rmask = cx.u32(ops[0]) if ops else (lambda w: np.uint32(0xFFFFFFFF))
        bits = np.uint32(1) << np.arange(32, dtype=np.uint32)

        def div(w: Warp, g: Group, m: np.ndarray) -> None:
            want = ((np.uint32(rmask(w)) & bits) != 0) & w.live
            g.pc = t if (want & ~g.mask).any() and m.any() else g.pc + 1
        return div
    ops = [o for o in cx.ins.operands if o.kind != "label"]
    if len(ops) == 1 and ops[0].kind in ("pred", "upred"):  # BRA Pp: taken where the guard and Pp hold
        rp = cx.pred(ops[0])
        return lambda w, g, m: _jump(w, g, m & rp(w), t)
    if ops:
        raise cx.err("BRA with a register operand is not modelled")
    return lambda w, g, m: _jump(w, g, m, t)


def b_exit(cx: Ctx) -> CtlExec:
    cx.mods(set())

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        w.live = w.live & ~m
        g.mask = g.mask & ~m
        g.pc += 1
    return run


def b_bssy(cx: Ctx) -> CtlExec:
    cx.mods(set())
    b = cx.ins.operands[0]
    if b.kind != "special" or not b.text.startswith("B"):
        raise cx.err("BSSY needs a convergence barrier B0..B15")
    i = int(b.text[1:])

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        w.B[i] = g.mask
        g.pc += 1
    return run


def _sync(w: Warp, g: Group, want: np.ndarray) -> None:
    if (want & w.live & ~g.mask).any():
        g.wait, g.want = "sync", want
    else:
        g.pc += 1


def b_bsync(cx: Ctx) -> CtlExec:
    cx.mods(set())
    b = cx.ins.operands[0]
    i = int(b.text[1:])
    return lambda w, g, m: _sync(w, g, w.B[i])


def b_warpsync(cx: Ctx) -> CtlExec:
    mods = cx.mods({"ALL", "EXCLUSIVE"})
    if "ALL" in mods or not cx.ins.operands:
        return lambda w, g, m: _sync(w, g, ALL)
    rm = cx.u32(cx.ins.operands[0])
    bits = np.uint32(1) << np.arange(32, dtype=np.uint32)

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        v = np.asarray(rm(w))
        if v.ndim:  # a per-lane mask register: the lanes agree on it
            v = v[int(np.argmax(m))]
        _sync(w, g, (v & bits) != 0)
    return run


def b_bar(cx: Ctx) -> CtlExec:
    """BAR.SYNC id{, count} (ids and counts immediate or, as named barriers are written, in registers:
    ``BAR.SYNC.DEFER_BLOCKING R16, 0x80``; a register is read from the group's first lane); BAR.ARV id,
    count arrives without waiting. Warps wait per barrier id (sim/sass/exec.py _release)."""
    mods = cx.mods({"SYNC", "DEFER_BLOCKING", "ARV"})
    if "SYNC" not in mods and "ARV" not in mods:
        raise cx.err("only BAR.SYNC and BAR.ARV are modelled")
    ops = cx.ins.operands
    if not ops or any(o.kind not in ("imm", "reg", "ureg") for o in ops[:2]):
        raise cx.err("BAR with this barrier id or count operand is not modelled")
    rid = cx.u32(ops[0])
    rcount = cx.u32(ops[1]) if len(ops) > 1 else (lambda w: np.uint32(0))
    arrive = "ARV" in mods

    def first(v: object, m: np.ndarray) -> int:
        a = np.asarray(v)
        return int(a) if a.ndim == 0 else int(a[int(np.argmax(m))])

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        w.bar_id, w.bar_count = first(rid(w), g.mask), first(rcount(w), g.mask)
        if arrive:
            w.cta.arrived[w.bar_id] = w.cta.arrived.get(w.bar_id, 0) + int(m.sum())
            g.pc += 1
            return
        g.bar = w.bar_id
        g.count = w.bar_count
        g.wait = "bar"
    return run


def b_call(cx: Ctx) -> CtlExec:
    cx.mods({"REL", "NOINC"})
    t = _target(cx)

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        if not np.array_equal(m, g.mask):
            raise cx.err("a CALL under a guard that splits the group is not modelled")
        g.pc = t
    return run


def b_ret(cx: Ctx) -> CtlExec:
    cx.mods({"REL", "NODEC"})
    reg = next((o for o in cx.ins.operands if o.kind == "reg"), None)
    lab = next((o for o in cx.ins.operands if o.kind == "label"), None)
    if reg is None or lab is None or lab.label not in cx.L.kernel.labels:
        raise cx.err("RET needs a return-address register and its function")
    base = cx.L.kernel.labels[lab.label]
    ra = cx.u32(reg)
    index = cx.L.index

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        if not np.array_equal(m, g.mask):
            raise cx.err("a RET under a guard that splits the group is not modelled")
        pcs = np.asarray(ra(w)).astype(np.int64) + base
        first = True
        for pc in np.unique(pcs[g.mask]):
            if int(pc) not in index:
                raise cx.err(f"return address 0x{int(pc):x} is not an instruction")
            lanes = g.mask & (pcs == pc)
            if first:
                g.pc, g.mask, first = index[int(pc)], lanes, False
            else:
                w.groups.append(Group(index[int(pc)], lanes))
    return run


def b_skip(cx: Ctx) -> CtlExec:
    """Instructions without a functional effect here (the copies LDGSTS starts land at once)."""
    cx.mods({"LE"})

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        g.pc += 1
    return run


SASS_CTL: dict[str, Callable[[Ctx], CtlExec]] = {
    "BRA": b_bra, "EXIT": b_exit, "BSSY": b_bssy, "BSYNC": b_bsync, "WARPSYNC": b_warpsync, "BAR": b_bar,
    "CALL": b_call, "RET": b_ret, "DEPBAR": b_skip, "LDGDEPBAR": b_skip,
}
