"""Semantics of memory, control, barrier, warp-level and tensor-core instructions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.functional.operands import DecodeCtx
from sim.functional.ops_tma import b_bulk
from sim.functional.types import NP, UINT, bits_to, f32_to_bf16, is_float
from sim.isa import bulk_role
from sim.ptx.ir import Instruction, Operand

if TYPE_CHECKING:
    from sim.functional.warp import Warp

    # an instruction's functional closure: (warp, active lanes, every lane active) -> control code
    Exec = Callable[[Warp, np.ndarray, bool], int | None]

# control codes of Executed.ctl: ARRIVE is a barrier that does not wait (bar.arrive)
BRANCH, EXIT, BARRIER, ARRIVE = 1, 2, 3, 4
CLUSTER_BAR_ID = 16  # barrier.cluster.wait's barrier: outside bar.sync's ids 0..15
LANES = np.arange(32)


def _vec(ins: Instruction) -> int:
    for m in ins.mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1])
    return 1


def _dst_list(op: Operand) -> list[Operand]:
    return list(op.items) if op.kind == "vec" else [op]


def _access(ins: Instruction, cx: DecodeCtx, a: Operand,
            ) -> tuple[str, int, np.dtype, Callable[[Any], np.ndarray], str]:
    """(type, vector width, numpy dtype, address closure, state space) of a ld/st/atom operand:
    the instruction's space, or the space of a [symbol] base when the instruction names none."""
    t = cx.type1(ins)
    fa, symspace = cx.addr(a, ins)
    space = ins.info.get("space", "generic")
    if space == "generic" and symspace is not None:
        space = symspace
    return t, _vec(ins), NP[t], fa, space


def b_ld(ins: Instruction, cx: DecodeCtx) -> Exec:
    d, a = ins.operands[:2]
    t, n, dt, fa, space = _access(ins, cx, a)
    writers = [cx.wr(x, t, ins) for x in _dst_list(d)]
    if len(writers) != n:
        raise cx.err(ins, f"{n}-element vector load needs {n} destinations")

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        vals = w.mem_load(space, fa(w), m, dt, n, ins)
        for i, wr in enumerate(writers):
            wr(w, vals[:, i], m, full)
    return run


def b_st(ins: Instruction, cx: DecodeCtx) -> Exec:
    a, s = ins.operands[:2]
    t, n, dt, fa, space = _access(ins, cx, a)
    readers = [cx.rd(x, t, ins) for x in _dst_list(s)]
    if len(readers) != n:
        raise cx.err(ins, f"{n}-element vector store needs {n} sources")

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        vals = np.empty((w.lanes[0], n), dtype=dt)
        for i, rd in enumerate(readers):
            vals[:, i] = rd(w)
        w.mem_store(space, fa(w), m, vals, dt, ins)
    return run


_ATOM = {
    "add": lambda o, b, c: o + b, "min": lambda o, b, c: np.minimum(o, b),
    "max": lambda o, b, c: np.maximum(o, b), "and": lambda o, b, c: o & b, "or": lambda o, b, c: o | b,
    "xor": lambda o, b, c: o ^ b, "exch": lambda o, b, c: b,
    "inc": lambda o, b, c: np.where(o >= b, 0, o + 1).astype(o.dtype),
    "dec": lambda o, b, c: np.where((o == 0) | (o > b), b, o - 1).astype(o.dtype),
    "cas": lambda o, b, c: np.where(o == b, c, o).astype(o.dtype),  # type: ignore[attr-defined]
}


def b_atom(ins: Instruction, cx: DecodeCtx) -> Exec:
    opname = next((x for x in ins.mods if x in _ATOM), None)
    if opname is None:
        raise cx.err(ins, "unsupported atomic operation")
    fn = _ATOM[opname]
    has_dst = ins.info["has_dst"]
    ops = ins.operands
    d = ops[0] if has_dst else None
    a = ops[1] if has_dst else ops[0]
    rest = ops[2:] if has_dst else ops[1:]
    t, _, dt, fa, space = _access(ins, cx, a)
    rb = cx.rd(rest[0], t, ins)
    rc = cx.rd(rest[1], t, ins) if len(rest) > 1 else None
    wd = cx.wr(d, t, ins) if d is not None else None

    def run_group(w: Warp, m: np.ndarray, addrs: np.ndarray, bv: np.ndarray, cv: np.ndarray) -> np.ndarray:
        """The lanes of a lock-step group (sim/functional/lockstep.py) in rounds: round r updates the
        r-th lane (in lane order) of each address at once, as the lane-by-lane loop would."""
        lanes = np.flatnonzero(m)
        act = addrs[lanes]
        order = np.argsort(act, kind="stable")
        srt = act[order]
        first = np.concatenate(([True], srt[1:] != srt[:-1]))
        pos = np.arange(len(srt))
        rank = np.empty(len(srt), dtype=np.int64)
        rank[order] = pos - np.maximum.accumulate(np.where(first, pos, 0))
        if len(rank) and int(rank.max()) >= 32:  # many warps on one address: the group's run is refused
            raise ValueError("atomics of more than 32 lanes on one address in one instruction")
        old_all = np.zeros(w.lanes, dtype=dt)
        for r in range(int(rank.max()) + 1):
            sel = np.zeros(w.lanes, dtype=bool)
            sel[lanes[rank == r]] = True
            old = w.mem_load(space, addrs, sel, dt, 1, ins)[:, 0]
            vals = np.zeros((w.lanes[0], 1), dtype=dt)
            vals[sel, 0] = np.asarray(fn(old[sel], bv[sel], cv[sel]), dtype=dt)
            w.mem_store(space, addrs, sel, vals, dt, ins, record=False)
            old_all[sel] = old[sel]
        return old_all

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        addrs = fa(w)
        bv = np.broadcast_to(np.asarray(rb(w), dtype=dt), w.lanes)
        cv = np.broadcast_to(np.asarray(rc(w), dtype=dt), w.lanes) if rc is not None else bv
        if w.lanes[0] != 32:
            old_all = run_group(w, m, addrs, bv, cv)
            rec = w.rec
            rec.space, rec.addrs, rec.size, rec.direction = space, addrs[m], dt.itemsize, "atomic"
            w.amask = m  # type: ignore[attr-defined]  # sim.functional.lockstep.Group
            if wd is not None:
                wd(w, old_all, m, full)
            return
        old_all = np.zeros(w.lanes, dtype=dt)
        for lane in np.flatnonzero(m):  # one lane at a time: atomics serialize
            lm = LANES == lane
            old = w.mem_load(space, addrs, lm, dt, 1, ins)[lane, 0]
            new = np.asarray(fn(np.array([old], dtype=dt), bv[lane:lane + 1], cv[lane:lane + 1]), dtype=dt)
            vals = np.zeros((w.lanes[0], 1), dtype=dt)
            vals[lane, 0] = new[0]
            w.mem_store(space, addrs, lm, vals, dt, ins, record=False)
            old_all[lane] = old
        rec = w.rec
        rec.space, rec.addrs, rec.size, rec.direction = space, addrs[m], dt.itemsize, "atomic"
        if wd is not None:
            wd(w, old_all, m, full)
    return run


def b_prefetch(ins: Instruction, cx: DecodeCtx) -> Exec:
    return lambda w, m, full: None


def b_nop(ins: Instruction, cx: DecodeCtx) -> Exec:
    return lambda w, m, full: None


def b_bra(ins: Instruction, cx: DecodeCtx) -> Exec:
    return lambda w, m, full: BRANCH


def b_exit(ins: Instruction, cx: DecodeCtx) -> Exec:
    return lambda w, m, full: EXIT


def b_trap(ins: Instruction, cx: DecodeCtx) -> Exec:
    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        from sim.errors import ExecutionError, at_instruction

        raise at_instruction(ExecutionError, f"trap executed ({ins.text})", cx.k.file, ins)
    return run


def b_call(ins: Instruction, cx: DecodeCtx) -> Exec:
    """A call the parser left in place: one to ``__assertfail(message, file, line, function,
    char_size)``, which stops the run naming the message, the thread and the PTX line."""
    args = ins.operands[2].items
    if ins.operands[1].name != "__assertfail" or len(args) != 5:
        raise cx.err(ins, "only calls to __assertfail(message, file, line, function, char_size) reach "
                          "execution; define the called function with .func in the module")
    where = [cx.sym_value(a.name, ins) for a in args[:4]]
    u64, u32 = np.dtype(np.uint64), np.dtype(np.uint32)
    types: tuple[np.dtype, ...] = (u64, u64, u32, u64)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        from sim.errors import ExecutionError, at_instruction

        lane = int(np.flatnonzero(m)[0])
        one = np.zeros(32, dtype=bool)
        one[lane] = True
        vals = []
        for (space, off), dt in zip(where, types):
            vals.append(int(w.mem_load(space, np.full(32, off, dtype=np.uint64), one, dt, 1, ins)[lane, 0]))
        msg, src, line, func = _c_string(w, vals[0]), _c_string(w, vals[1]), vals[2], _c_string(w, vals[3])
        raise at_instruction(ExecutionError, f"assertion failed: '{msg}' ({src}:{line} in {func}) in thread "
                             f"{w.thread_index(lane)} of block {w.cta.ctaid}", cx.k.file, ins)
    return run


def _c_string(w: Warp, addr: int, limit: int = 200) -> str:
    """The NUL-terminated string at a global (generic) address; '?' where it cannot be read."""
    from sim.functional.memory import Fault

    out = bytearray()
    try:
        for i in range(limit):
            b = int(w.L.gmem.load(np.array([addr + i], dtype=np.uint64), np.dtype(np.uint8))[0, 0])
            if b == 0:
                break
            out.append(b)
    except Fault:
        return out.decode("utf-8", "replace") or "?"
    return out.decode("utf-8", "replace")


def b_bar(ins: Instruction, cx: DecodeCtx) -> Exec:
    mods = set(ins.mods)
    if "warp" in mods:  # bar.warp.sync: the warp runs in lockstep here
        return lambda w, m, full: None
    if "red" in mods:
        raise cx.err(ins, "bar.red is not supported")
    ops = ins.operands
    if "cluster" in mods:  # barrier.cluster.arrive / .wait across the cluster's CTAs (sim/cluster.py)
        if ops:
            raise cx.err(ins, f"barrier.cluster takes no operands ({ins.text})")
        if "arrive" in mods:
            def arrive_cluster(w: Warp, m: np.ndarray, full: bool) -> int:
                if w.cta.cluster is not None:
                    w.cta.cluster.arrive(w)
                return ARRIVE
            return arrive_cluster

        def wait_cluster(w: Warp, m: np.ndarray, full: bool) -> int:
            w.bar_id = CLUSTER_BAR_ID  # released by Cluster.ready (sim.functional.runner.barrier_ready)
            w.bar_count = 0
            return BARRIER
        return wait_cluster
    rid = cx.rd(ops[0], "u32", ins) if ops else (lambda w: 0)
    rcount = cx.rd(ops[1], "u32", ins) if len(ops) > 1 else None
    ctl = ARRIVE if "arrive" in mods else BARRIER

    def run(w: Warp, m: np.ndarray, full: bool) -> int:
        w.bar_id = int(np.asarray(rid(w)).flat[0])
        w.bar_count = int(np.asarray(rcount(w)).flat[0]) if rcount is not None else 0
        return ctl
    return run


# -- async copies -------------------------------------------------------------------------------
def b_cp(ins: Instruction, cx: DecodeCtx) -> Exec:
    mods = ins.mods
    if bulk_role(ins):
        return b_bulk(ins, cx)
    if "async" not in mods:
        raise cx.err(ins, f"'{ins.full}' is not supported (cp.async and cp.async.bulk only)")
    if "commit_group" in mods:
        return lambda w, m, full: w.async_commit()
    if "wait_group" in mods:
        rn = cx.rd(ins.operands[0], "u32", ins)
        return lambda w, m, full: w.async_wait(int(np.asarray(rn(w)).flat[0]))
    if "wait_all" in mods:
        return lambda w, m, full: w.async_wait(0, include_open=True)
    if "mbarrier" in mods:
        raise cx.err(ins, "cp.async.mbarrier is not supported")
    ops = ins.operands
    fd, _ = cx.addr(ops[0], ins)
    fs, _ = cx.addr(ops[1], ins)
    if ops[2].kind != "imm":
        raise cx.err(ins, "cp.async cp-size must be an immediate 4, 8 or 16")
    size = int(ops[2].value)
    rsrc = cx.rd(ops[3], "u32", ins) if len(ops) > 3 else None  # src-size: the bytes read, rest zero-filled

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        srcsize = np.broadcast_to(np.asarray(rsrc(w)).astype(np.int64), w.lanes) if rsrc is not None else \
            np.full(w.lanes, size, dtype=np.int64)
        w.async_copy(fd(w), fs(w), m, size, srcsize, ins)
    return run


# -- warp-level ---------------------------------------------------------------------------------
def shfl_source(mode: str, b: Any, c: Any, lanes: np.ndarray = LANES) -> tuple[np.ndarray, np.ndarray]:
    """shfl.sync's source lane of every lane and whether it is inside the clamp (mode up / down / bfly
    / idx; b the lane operand, c = clamp | segment mask << 8), as the PTX ISA defines it; lanes outside
    read their own value. The PTX and SASS models both call this. `lanes`: each lane's index in its
    warp (a lock-step group's lanes are several warps')."""
    bval = np.broadcast_to(np.asarray(b).astype(np.int64) & 0x1F, lanes.shape)
    cv = np.broadcast_to(np.asarray(c).astype(np.int64), lanes.shape)
    cval, seg = cv & 0x1F, (cv >> 8) & 0x1F
    maxl = (lanes & seg) | (cval & ~seg)
    if mode == "up":
        j = lanes - bval
        ok = j >= maxl
    elif mode == "down":
        j = lanes + bval
        ok = j <= maxl
    elif mode == "bfly":
        j = lanes ^ bval
        ok = j <= maxl
    else:
        j = (lanes & seg) | (bval & ~seg)
        ok = j <= maxl
    return np.where(ok, j, lanes), ok


def b_shfl(ins: Instruction, cx: DecodeCtx) -> Exec:
    mode = next(x for x in ("up", "down", "bfly", "idx") if x in ins.mods)
    d, a, b, c = ins.operands[:4]
    ra, rb, rc = cx.rd(a, "b32", ins), cx.rd(b, "u32", ins), cx.rd(c, "u32", ins)
    if d.kind == "pair":
        wd, wp = cx.wr(d.items[0], "b32", ins), cx.wr(d.items[1], "pred", ins)
    else:
        wd, wp = cx.wr(d, "b32", ins), None

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        src = np.broadcast_to(np.asarray(ra(w)), w.lanes)
        j, pval = shfl_source(mode, rb(w), rc(w), w.laneid)
        wd(w, src[j + w.lane_base], m, full)
        if wp is not None:
            wp(w, pval, m, full)
    return run


def b_vote(ins: Instruction, cx: DecodeCtx) -> Exec:
    mode = next(x for x in ("all", "any", "uni", "ballot") if x in ins.mods)
    d, a = ins.operands[:2]
    ra = cx.rd(a, "pred", ins)
    if mode == "ballot":
        wd = cx.wr(d, "b32", ins)

        def ballot(w: Warp, m: np.ndarray, full: bool) -> None:
            p = np.broadcast_to(ra(w), (32,)) & m
            wd(w, np.uint32(int(np.sum(p.astype(np.uint64) << LANES.astype(np.uint64)))), m, full)
        return ballot
    wd = cx.wr(d, "pred", ins)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        p = np.broadcast_to(ra(w), (32,))[m]
        r = bool(p.all()) if mode == "all" else bool(p.any()) if mode == "any" else bool(p.all() or not p.any())
        wd(w, np.bool_(r), m, full)
    return run


def b_activemask(ins: Instruction, cx: DecodeCtx) -> Exec:
    wd = cx.wr(ins.operands[0], "b32", ins)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        if w.lanes[0] == 32:
            wd(w, np.uint32(int(np.sum(m.astype(np.uint64) << LANES.astype(np.uint64)))), m, full)
            return
        bits = (m.reshape(-1, 32).astype(np.uint64) << LANES.astype(np.uint64)).sum(axis=1)
        wd(w, np.repeat(bits.astype(np.uint32), 32), m, full)  # each warp's own mask
    return run


def b_redux(ins: Instruction, cx: DecodeCtx) -> Exec:
    t = cx.type1(ins)
    op = next(x for x in ("add", "min", "max", "and", "or", "xor") if x in ins.mods)
    d, a = ins.operands[:2]
    ra, wd = cx.rd(a, t, ins), cx.wr(d, t, ins)
    fns: dict[str, Callable[[np.ndarray], Any]] = {
        "add": np.sum, "min": np.min, "max": np.max, "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce,
        "xor": np.bitwise_xor.reduce}
    fn = fns[op]
    return lambda w, m, full: wd(w, NP[t].type(fn(np.broadcast_to(ra(w), (32,))[m])), m, full)


# -- ldmatrix and stmatrix ---------------------------------------------------------------------------
_T = LANES % 4
_G = LANES // 4


def _matrices(ins: Instruction, cx: DecodeCtx, regs_operand: int) -> tuple[Any, list[Operand], Any, tuple]:
    """What ldmatrix and stmatrix share: the lanes' row addresses, the fragment registers (one per
    8x8 matrix), the lanes that name a row (8 per matrix) and where register j of lane (g, t) holds
    its two elements: (g, 2t) and (g, 2t+1), or (2t, g) and (2t+1, g) with .trans."""
    nmat = next(int(x[1]) for x in ins.mods if x in ("x1", "x2", "x4"))
    regs = _dst_list(ins.operands[regs_operand])
    if len(regs) != nmat:
        raise cx.err(ins, f"{ins.opcode} .x{nmat} needs {nmat} registers")
    fa, _ = cx.addr(ins.operands[1 - regs_operand], ins)
    need = np.zeros(32, dtype=bool)
    need[: 8 * nmat] = True
    coords = (2 * _T, _G, 2 * _T + 1, _G) if "trans" in ins.mods else (_G, 2 * _T, _G, 2 * _T + 1)
    return fa, regs, need, coords


def b_ldmatrix(ins: Instruction, cx: DecodeCtx) -> Exec:
    fa, dsts, need, (r0, c0, r1, c1) = _matrices(ins, cx, 0)
    ws = [cx.wr(x, "b32", ins) for x in dsts]
    u16 = np.dtype(np.uint16)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        nw = w.lanes[0] // 32
        if nw > 1:  # a lock-step group: each warp's rows
            rows = w.mem_load("shared", fa(w), np.tile(need, nw), u16, 8, ins).reshape(nw, 32, 8)
            for j, wr in enumerate(ws):
                mat = rows[:, 8 * j: 8 * j + 8]
                lo = mat[:, r0, c0].astype(np.uint32)
                hi = mat[:, r1, c1].astype(np.uint32)
                wr(w, (lo | (hi << np.uint32(16))).ravel(), m, full)
            return
        rows = w.mem_load("shared", fa(w), need, u16, 8, ins)  # (32, 8): row of lane i's address
        for j, wr in enumerate(ws):
            mat = rows[8 * j: 8 * j + 8]
            lo = mat[r0, c0].astype(np.uint32)
            hi = mat[r1, c1].astype(np.uint32)
            wr(w, lo | (hi << np.uint32(16)), m, full)
    return run


def b_stmatrix(ins: Instruction, cx: DecodeCtx) -> Exec:
    """The inverse of ldmatrix: lanes 8j..8j+7 name the rows of matrix j (see _matrices)."""
    fa, srcs, need, (r0, c0, r1, c1) = _matrices(ins, cx, 1)
    rs = [cx.rd(x, "b32", ins) for x in srcs]
    u16 = np.dtype(np.uint16)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        rows = np.zeros((32, 8), dtype=u16)
        for j, rd in enumerate(rs):
            v = np.broadcast_to(np.asarray(rd(w)), (32,)).astype(np.uint32)
            mat = rows[8 * j: 8 * j + 8]
            mat[r0, c0] = (v & np.uint32(0xFFFF)).astype(u16)
            mat[r1, c1] = (v >> np.uint32(16)).astype(u16)
        w.mem_store("shared", fa(w), need, rows, u16, ins)
    return run


SEMANTICS_MEM = {
    "ld": b_ld,
    "ldu": b_ld,
    "st": b_st,
    "atom": b_atom,
    "red": b_atom,
    "ldmatrix": b_ldmatrix,
    "stmatrix": b_stmatrix,
    "cp": b_cp,
    "prefetch": b_prefetch,
    "membar": b_nop,
    "fence": b_nop,
    "bra": b_bra,
    "ret": b_exit,
    "call": b_call,
    "exit": b_exit,
    "trap": b_trap,
    "bar": b_bar,
    "barrier": b_bar,
    "nanosleep": b_nop,
    "shfl": b_shfl,
    "vote": b_vote,
    "activemask": b_activemask,
    "redux": b_redux,
}

__all__ = ["SEMANTICS_MEM", "BRANCH", "EXIT", "BARRIER", "ARRIVE", "bits_to", "f32_to_bf16", "is_float", "UINT"]
