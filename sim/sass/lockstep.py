"""Lock-step SASS execution for the timing model (issue 11's speed goal): the warps of a batch of CTAs that
stand at the same instruction with the same thread groups run it once, as one wide warp of n x 32 lanes,
before the cycle loop starts; the cycle loop (sim/sass/timing.py) then replays each warp's records instead of
stepping the functional model warp by warp (`Replay`, a drop-in for sim.sass.exec.Machine there).

PTX mode does the same with sim/functional/lockstep.py; this module borrows its rules and its access log check
(sim/functional/conflicts.py) and its batch size:
- the reference is the order the cycle loop steps warps in. Lock-step runs them in another order, which gives
  the same registers and memory when no warp touches a word another warp of its CTA writes between two
  barriers, and no CTA touches a word another CTA writes. Every shared and global access is logged (the
  memories log their own loads and stores: LDGSTS's shared half, atomics' read-modify-writes included) and
  checked: a conflict is a `Refused` run, and simulate_sass then steps warp by warp as before. So results
  (outputs, cycles, stalls, traces) are bit-identical to stepping, racy kernels included (they pay the
  thrown-away run);
- a wide warp holds warps whose thread groups (pc, wait state) are the same warp by warp; registers are
  (rows, warps, 32) arrays, uniform registers (rows, warps, 1). Instructions whose builders compute lane by
  lane (`ELEMENTWISE`: integer and float arithmetic, compares, selects, moves) run once over all lanes;
  every other instruction (memory, control, uniform datapath, S2R, HMMA, shuffles) runs warp by warp on
  per-warp views of those arrays, with the same builders as stepping, so its records are the same;
- after a control instruction, or when a convergence barrier or a CTA barrier releases some warps of a wide
  warp and not others, the wide warp splits into warps of one signature each;
- kernels whose functional results depend on the timing are not run ahead (`refusal`): clock and global timer
  reads, mbarriers / TMA / clusters (their waits end by timed events), BAR.ARV and counted or
  register-named barriers; nor a warp whose thread groups wait at a CTA barrier and elsewhere at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.functional.conflicts import (
    EMPTY,
    GLOBAL_DOMAIN,
    SHARED_DOMAIN,
    Access,
    Intervals,
    conflict,
    meets,
    merged,
    touched,
    union,
)
from sim.functional.lockstep import BATCH_LANES, Refused, shared_conflict
from sim.functional.memory import FlatMemory, GlobalMemory
from sim.sass.exec import Machine, _decode, _Decoded
from sim.sass.exec_operands import Ctx
from sim.sass.exec_state import PT, Cta, Group, Launched, SassExecuted, Warp, lanes_any, merged_at_pc
from sim.sass.exec_wide import WIDE_MEM, WIDE_OPS
from sim.sass.listing import SassInstruction

#: opcodes whose builders (sim/sass/exec_int.py, exec_float.py) compute lane by lane with numpy broadcasting and
#: write registers and predicates only through the mask: they run unchanged on (warps, 32) lanes
ELEMENTWISE = frozenset({"IADD3", "VIADD", "IMAD", "LEA", "LOP3", "PLOP3", "SHF", "SEL", "FSEL", "ISETP", "MOV",
                         "IABS", "IMNMX", "VIMNMX", "PRMT", "SGXT", "NOP", "FFMA", "FADD", "FMUL", "FMNMX", "FSETP",
                         "HFMA2", "HADD2"})
#: special registers whose value depends on when an instruction issues
TIMED_SOURCES = ("SR_CLOCK", "SR_GLOBALTIMER")
#: opcodes whose functional effect or wait ends by timed events (mbarriers, TMA, clusters) or that arrive at a barrier
#: without waiting (no barrier epoch for all warps)
TIMED_OPS = ("SYNCS", "UTMA", "UBLK", "UCGABAR", "CCTL", "ERRBAR", "MEMBAR", "FENCE", "NANOSLEEP")
GMMA = frozenset({"WARPGROUP", "HGMMA", "QGMMA", "IGMMA"})  # warpgroup MMA: its groups complete when timed
BARRIER = frozenset({"BAR"})


def refusal(L: Launched) -> str | None:
    """Why the launch's SASS cannot be run ahead of its timing, or None when it can."""
    if L.cluster != (1, 1, 1) or L.tensormaps:
        return "clusters and tensor maps"
    for ins in L.code:
        op = ins.opcode
        if op.startswith(TIMED_OPS) or op in GMMA:
            return f"'{ins.text}' waits for or orders timed events"
        if any(o.text.startswith(TIMED_SOURCES) for o in ins.operands):
            return f"'{ins.text}' reads the clock"
        if op in BARRIER and ("ARV" in ins.modifiers or len(ins.operands) != 1
                                    or ins.operands[0].kind != "imm"):
            return f"'{ins.text}' (a barrier some threads only arrive at, or counted, or register-named)"
    return None


#: uniform-datapath opcodes (and R2UR) whose builders are lane-wise too, writing a uniform register through
#: exec_operands' writer, which takes each warp's first active lane on a wide warp
UNIFORM = frozenset({"UIADD3", "UMOV", "UIMAD", "ULEA", "ULOP3", "USHF", "UPRMT", "ULDC", "USGXT", "R2UR"})
CONSTANT_LOAD = frozenset({"ULDC"})  # lane-wise only in its 32/64-bit forms


def _elementwise(ins: SassInstruction) -> bool:
    """Whether the instruction runs once over a wide warp's lanes with its one-warp builder: an ELEMENTWISE opcode
    with no uniform destination, or a UNIFORM one writing a uniform register; neither with a uniform predicate
    operand or guard (their readers give Python booleans) nor a register-indexed constant (its reader builds 32
    lanes)."""
    ops, op = ins.operands, ins.opcode
    if ins.guard.startswith("UP") or not ops:
        return not ops and op in ELEMENTWISE  # (NOP)
    if op in UNIFORM:
        if ops[0].kind != "ureg" or (op in CONSTANT_LOAD and ins.modifiers and ins.modifiers != ("64",)):
            return False
    elif op not in ELEMENTWISE or ops[0].kind == "ureg":
        return False
    for o in ops:
        if o.kind == "upred":
            return False
        if o.kind == "const" and any(r not in ("RZ", "URZ") for r in o.regs):
            return False
    return True


class _Log:
    """The access log of a run ahead: shared accesses of the current batch (at batch offsets: CTAs never meet),
    global accesses of the whole launch; `owner` and `epoch` name the warp executing now (per-warp execution)."""

    def __init__(self, wpc: int):
        self.wpc = wpc
        self.owner = 0
        self.epoch = 0
        self.shared: dict[int, list[Access]] = {}  # barrier epoch -> the batch's shared accesses in it
        self.shared_wrote = False
        self.glob: list[Access] = []  # the current batch's global accesses
        self.glob_wrote = False
        self.reads: Intervals = (EMPTY, EMPTY)  # global words earlier batches read, wrote
        self.writes: Intervals = (EMPTY, EMPTY)

    def add(self, domain: int, addrs: np.ndarray, size: int, write: bool, owners: np.ndarray | None = None,
            epoch: int | None = None) -> None:
        a = np.array(addrs, copy=True)
        own = np.full(a.size, self.owner, dtype=np.int64) if owners is None else owners
        e = (domain, self.epoch if epoch is None else epoch, a, size, own, write)
        if domain == SHARED_DOMAIN:
            self.shared.setdefault(e[1], []).append(e)
            self.shared_wrote = self.shared_wrote or write
        else:
            self.glob.append(e)
            self.glob_wrote = self.glob_wrote or write

    def end_batch(self) -> None:
        """Check the batch's shared accesses epoch by epoch (CTAs' words never meet at batch offsets, so the
        accesses of one epoch number conflict only within a CTA: sim.functional.lockstep.shared_conflict); its
        global accesses between its warps and CTAs (conflicts.conflict), then as word intervals against every
        earlier batch's (a word one batch writes and another touches: the CTAs may run at the same time)."""
        if self.shared_wrote and any(shared_conflict(log) for log in self.shared.values()):
            raise Refused("two warps of a CTA access a shared word between two barriers, one writing it")
        self.shared, self.shared_wrote = {}, False
        if not self.glob:
            return
        if self.glob_wrote and conflict(self.glob, self.wpc):
            raise Refused("two warps or CTAs access a global word, one writing it")
        reads, writes = (_words(touched(self.glob, w, self.wpc)) for w in (False, True))
        if meets(writes, self.reads) or meets(writes, self.writes) or meets(reads, self.writes):
            raise Refused("two warps or CTAs access a global word, one writing it")
        self.reads, self.writes = union(self.reads, reads), union(self.writes, writes)
        self.glob, self.glob_wrote = [], False

    def finish(self) -> None:
        self.end_batch()


def _words(per_cta: dict[int, Intervals]) -> Intervals:
    """The union of CTAs' word intervals."""
    return merged(np.concatenate([EMPTY, *(iv[0] for iv in per_cta.values())]),
                  np.concatenate([EMPTY, *(iv[1] for iv in per_cta.values())]))


class _LoggedShared(FlatMemory):
    """A CTA's shared memory (its bytes a window of its batch's) that logs its loads and stores at batch offsets
    (class swapped in by RunAhead._batch)."""

    log: _Log
    base: int

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        self.log.add(SHARED_DOMAIN, np.asarray(addrs).astype(np.int64) + self.base, dt.itemsize * n, False)
        return super().load(addrs, dt, n)

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        self.log.add(SHARED_DOMAIN, np.asarray(addrs).astype(np.int64) + self.base, dt.itemsize * values.shape[1],
                     True)
        super().store(addrs, values, dt)


class _LoggedGlobal(GlobalMemory):
    """The launch's global memory, logging its loads and stores while a run ahead lasts."""

    log: _Log

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        self.log.add(GLOBAL_DOMAIN, addrs, dt.itemsize * n, False)
        return super().load(addrs, dt, n)

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        self.log.add(GLOBAL_DOMAIN, addrs, dt.itemsize * values.shape[1], True)
        super().store(addrs, values, dt)


class _Unlogged:
    """Global memory as the wide builders reach it (they log their accesses themselves, by lane)."""

    def __init__(self, g: GlobalMemory):
        self.g = g

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        return GlobalMemory.load(self.g, addrs, dt, n)

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        GlobalMemory.store(self.g, addrs, values, dt)


class _Batch:
    """What the wide builders (sim/sass/exec_wide.py) share: the batch's shared memory (each CTA's window at its
    base), a window's size, global memory, the log, each CTA's barrier epoch."""

    def __init__(self, shared: FlatMemory, size: int, gmem: _Unlogged, log: _Log, epochs: dict[int, int]):
        self.shared = shared
        self.size = size
        self.gmem = gmem
        self.log = log
        self.epochs = epochs


# what a record leaves behind for the replay: (live lanes, done, barrier id waited at or -1, its count, lanes
# arrived); None for instructions that change none of it (every one but the control instructions)
After = tuple[int, bool, int, int, int] | None


class _Wide:
    """Warps in lock-step: their registers as (rows, warps, 32) arrays (uniform ones (rows, warps, 1)), their
    common thread groups with (warps, 32) masks, each warp's record list. The member Warp objects keep views of
    their rows, so the per-warp builders run on them unchanged."""

    def __init__(self, warps: list[Warp], streams: list[list], groups: list[Group], batch: _Batch, wpc: int,
                 bases: dict[int, int]):
        self.warps = warps
        self.streams = streams
        self.groups = groups
        self.batch = batch
        self.wpc = wpc
        self.bases = bases
        self.L = warps[0].L
        self.R = np.stack([w.R for w in warps], axis=1)
        self.UR = np.stack([w.UR for w in warps], axis=1)[:, :, None]
        self.P = np.stack([w.P for w in warps], axis=1)
        self.UP = np.stack([w.UP for w in warps], axis=1)[:, :, None]
        self.B = np.stack([w.B for w in warps], axis=1)
        self.live = np.stack([w.live for w in warps])
        self.ctas = np.array([w.cta.index for w in warps])
        self.cta0 = warps[0].cta.index  # (the CTAs of a wide warp are in one barrier epoch: RunAhead._go splits)
        self.sbase = np.array([bases[w.cta.index] for w in warps], dtype=np.int64)[:, None]
        self.owner = np.array([w.cta.index * wpc + w.wid for w in warps], dtype=np.int64)[:, None]
        self.rec = None
        for k, w in enumerate(warps):
            self._point(k, w)

    def _point(self, k: int, w: Warp) -> None:
        w.R, w.UR, w.P, w.UP, w.B, w.live = self.R[:, k], self.UR[:, k, 0], self.P[:, k], self.UP[:, k, 0], \
            self.B[:, k], self.live[k]

    def part(self, sel: list[int]) -> _Wide:
        """The wide warp of members ``sel`` (their groups' masks cut to them; groups left with no lane dropped)."""
        gs = []
        for g in self.groups:
            m = g.mask[sel]
            if lanes_any(m):
                h = Group(g.pc, m)
                h.wait, h.want, h.bar, h.count = g.wait, g.want[sel], g.bar, g.count
                gs.append(h)
        return _Wide([self.warps[k] for k in sel], [self.streams[k] for k in sel], gs, self.batch, self.wpc,
                     self.bases)

    def split(self, by: np.ndarray) -> list[_Wide]:
        """Its members parted by the values of ``by`` (first-seen order)."""
        keys = list(dict.fromkeys(by.tolist()))
        return [self.part([k for k, v in enumerate(by.tolist()) if v == key]) for key in keys]


def _wide_want(g: Group, n: int) -> np.ndarray:
    return np.broadcast_to(g.want, (n, 32)) if g.want.ndim == 1 else g.want


class RunAhead:
    """Runs the CTAs of a launch in lock-step batches and keeps each warp's records (`streams`)."""

    def __init__(self, L: Launched, budget: int):
        self.L = L
        self.budget = budget
        self.count = 0
        self.decoded: list[_Decoded | None] = [None] * len(L.code)
        self.wide: list[Any] = [None] * len(L.code)  # pc -> fn(x, m) running it over a wide warp, or False
        self.wmem: list[Any] = [None] * len(L.code)  # pc -> its wide memory builder (sim/sass/exec_wide.py), or False
        self.shared_rec: list[tuple | None] = [None] * len(L.code)  # pc -> (record, None) of a lane-wise instruction
        self.streams: dict[int, list[list]] = {}  # CTA launch index -> each warp's [(record, After)]
        wpc = (L.block[0] * L.block[1] * L.block[2] + 31) // 32
        self.log = _Log(wpc)
        self.wpc = wpc
        self.epochs: dict[int, int] = {}

    def start(self, ctas: list[tuple[int, tuple[int, int, int]]]) -> None:
        """Run ``ctas`` (index, ctaid) ahead batch by batch, each when the timing places its first CTA (`streams_of`),
        so that only the records of CTAs about to be timed are kept; global memory logs its accesses until
        `close`."""
        self.todo = ctas
        self.next = 0
        self.per = max(1, BATCH_LANES // (32 * self.wpc))
        gmem = self.L.gmem
        self.gmem_class = gmem.__class__
        self.gmem = _Unlogged(gmem)
        gmem.__class__ = _LoggedGlobal
        gmem.log = self.log  # type: ignore[attr-defined]

    def streams_of(self, index: int) -> list[list]:
        """The records of CTA ``index``'s warps (its batch runs now if it has not)."""
        while index not in self.streams:
            if self.next >= len(self.todo):
                raise Refused(f"CTA {index} is not in the launch run ahead")
            batch = self.todo[self.next:self.next + self.per]
            self.next += self.per
            self._batch([Cta(self.L, n, ctaid) for n, ctaid in batch])
        return self.streams.pop(index)

    def finish(self) -> None:
        """After the timing: the batches no CTA of which was placed (none, normally), the last global check."""
        while self.next < len(self.todo):
            self.streams_of(self.todo[self.next][0])
        self.log.finish()
        self.close()

    def close(self) -> None:
        gmem: Any = self.L.gmem
        cls: Any = self.gmem_class
        if gmem.__class__ is _LoggedGlobal:
            gmem.__class__ = cls
            del gmem.log

    def _batch(self, ctas: list[Cta]) -> None:
        size = ctas[0].shared.size
        stride = -(-len(ctas[0].shared.data) // 128) * 128
        shared = FlatMemory(stride * len(ctas), "shared")
        bases: dict[int, int] = {}
        warps: list[Warp] = []
        for j, cta in enumerate(ctas):
            mem = cta.shared
            bases[cta.index] = j * stride
            mem.data = shared.data[j * stride: j * stride + len(mem.data)]
            mem.views = {}
            mem.__class__ = _LoggedShared
            mem.log, mem.base = self.log, j * stride  # type: ignore[attr-defined]
            self.streams[cta.index] = [[] for _ in cta.warps]
            self.epochs[cta.index] = 0
            warps += cta.warps
        batch = _Batch(shared, size, self.gmem, self.log, self.epochs)
        streams = [self.streams[w.cta.index][w.wid] for w in warps]
        wides = [_Wide(warps, streams, [Group(0, np.stack([w.live for w in warps]))], batch, self.wpc, bases)]
        while True:
            before = self.count
            i = 0
            while i < len(wides):
                parts = self._run(wides[i])
                if parts is None:
                    i += 1
                else:
                    wides[i:i + 1] = parts
            wides = [x for x in wides if x.groups]
            if not wides:
                self.log.end_batch()
                return
            released = self._release(wides)
            if released is not None:
                wides = released
            elif self.count == before:
                raise Refused("deadlock")

    def _run(self, x: _Wide) -> list[_Wide] | None:
        """Step x until it waits or ends; the parts it split into when it did."""
        while True:
            g, parts = self._runnable(x)
            if parts is not None:
                return parts
            if g is None:
                return None
            parts = self._step(x, g)
            if parts is not None:
                return parts
            if self.count > self.budget:
                raise Refused("over the warp-instruction budget")

    def _runnable(self, x: _Wide) -> tuple[Group | None, list[_Wide] | None]:
        """Machine.runnable over the members: a convergence barrier some members pass and others not splits x."""
        gs = x.groups
        if len(gs) == 1 and gs[0].wait == "":
            return gs[0], None
        best = None
        for g in gs:
            if g.wait == "sync":
                pend = (_wide_want(g, len(x.warps)) & x.live & ~g.mask).any(axis=1)
                if pend.all():
                    pass
                elif not pend.any():
                    g.wait = ""
                    g.pc += 1
                else:
                    return None, x.split(pend)
            if g.wait == "" and (best is None or g.pc < best.pc):
                best = g
        return best, None

    def _step(self, x: _Wide, g: Group) -> list[_Wide] | None:
        L = self.L
        i = g.pc
        if i >= len(L.code):
            raise Refused("ran past the end of the SASS")
        d = self.decoded[i]
        ins = L.code[i]
        if d is None:
            d = self.decoded[i] = _decode(L, ins)
        n = len(x.warps)
        self.count += n
        if d.ctl:
            return self._control(x, g, d, i, ins)
        f = self.wide[i]
        if f is None:
            f = self.wide[i] = self._wide(ins, d)
        if f is not False:
            m = g.mask if d.guard is None else g.mask & d.guard(x)  # type: ignore[arg-type]
            if d.guard is None or lanes_any(m):
                f(x, m)
            item = self.shared_rec[i]
            if item is None:
                item = self.shared_rec[i] = (SassExecuted(-1, -1, i, ins, np.zeros(32, bool)), None)
            for s in x.streams:
                s.append(item)
        elif self._wmem(i, ins, d):
            m = g.mask if d.guard is None else g.mask & d.guard(x)  # type: ignore[arg-type]
            recs = [SassExecuted(w.cta.index, w.wid, i, ins, m[k]) for k, w in enumerate(x.warps)]
            if d.guard is None or lanes_any(m):
                self.wmem[i](x, m, recs)
            for s, rec in zip(x.streams, recs):
                s.append((rec, None))
        else:
            log = self.log
            for k, w in enumerate(x.warps):
                mk = g.mask[k] if d.guard is None else g.mask[k] & d.guard(w)
                rec = w.rec = SassExecuted(w.cta.index, w.wid, i, ins, mk)
                if d.guard is None or lanes_any(mk):
                    log.owner, log.epoch = w.cta.index * self.wpc + w.wid, self.epochs[w.cta.index]
                    d.fn(w, mk)
                x.streams[k].append((rec, None))
        x.P[PT] = True
        g.pc = i + 1
        if len(x.groups) > 1:  # groups that meet at a pc merge (masks are unchanged: no member loses a group)
            x.groups = merged_at_pc(x.groups)
        return None

    def _wide(self, ins: SassInstruction, d: _Decoded) -> Any:
        """The function that runs ins over a wide warp (its one-warp builder when lane-wise), or False."""
        if _elementwise(ins):
            return d.fn
        build = WIDE_OPS.get(ins.opcode)
        if build is not None and not ins.guard.startswith("UP") and not any(o.kind == "upred" for o in ins.operands):
            return build(Ctx(self.L, ins))
        return False

    def _wmem(self, i: int, ins: SassInstruction, d: _Decoded) -> bool:
        """Whether the memory instruction at i has a wide builder (built the first time; its builder checks its
        modifiers as the one-warp builder did, which built without error)."""
        f = self.wmem[i]
        if f is None:
            f = False
            build = WIDE_MEM.get(ins.opcode)
            if build is not None and not ins.guard.startswith("UP") and \
                    not any(o.kind == "upred" for o in ins.operands):
                f = build(Ctx(self.L, ins))
            self.wmem[i] = f
        return f is not False

    def _control(self, x: _Wide, g: Group, d: _Decoded, i: int, ins: SassInstruction) -> list[_Wide] | None:
        """A control instruction, warp by warp with the stepping builders and Machine._merge; then x again when
        the members' groups still agree, else its parts."""
        if len(x.groups) == 1 and self._uniform_control(x, g, d, i, ins):
            return None
        gi = x.groups.index(g)
        n = len(x.warps)
        sigs = []
        for k, w in enumerate(x.warps):
            gs = []
            for h in x.groups:
                v = Group(h.pc, h.mask[k].copy())
                v.wait, v.want, v.bar, v.count = h.wait, _wide_want(h, n)[k], h.bar, h.count
                gs.append(v)
            w.groups = gs
            w.done = False
            gk = gs[gi]
            mk = gk.mask if d.guard is None else gk.mask & d.guard(w)
            rec = w.rec = SassExecuted(w.cta.index, w.wid, i, ins, mk)
            d.fn(w, gk, mk)
            w.P[PT] = True
            Machine._merge(w)
            x.live[k] = w.live
            live = int(np.count_nonzero(w.live))
            sig = tuple((h.pc, h.wait, h.bar, h.count) for h in w.groups)
            bars = [h for h in w.groups if h.wait == "bar"]
            if bars and len(w.groups) > 1:
                raise Refused("a warp waits at a CTA barrier with some of its threads only")
            after = (live, w.done, bars[0].bar if bars else -1, bars[0].count if bars else 0,
                     int(np.count_nonzero(bars[0].mask)) if bars else 0)
            x.streams[k].append((rec, after))
            sigs.append(sig)
        keys = list(dict.fromkeys(sigs))
        if len(keys) == 1:
            x.groups = self._joined(x.warps, list(range(n)))
            for k, w in enumerate(x.warps):
                x._point(k, w)
            return None
        parts = []
        for key in keys:
            sel = [k for k in range(n) if sigs[k] == key]
            if not key:  # these warps ended
                continue
            members = [x.warps[k] for k in sel]
            y = _Wide(members, [x.streams[k] for k in sel], self._joined(members, list(range(len(sel)))), x.batch,
                      x.wpc, x.bases)
            parts.append(y)
        return parts

    def _uniform_control(self, x: _Wide, g: Group, d: _Decoded, i: int, ins: SassInstruction) -> bool:
        """A BRA every lane of the group takes or none does, a BSSY, a BAR.SYNC with an immediate id, an EXIT of
        every lane of the group, on a wide warp of one group: what exec_ctl's builder and Machine._merge do to
        each warp, done once (the warps' groups stay alike). False (nothing done) for anything else."""
        op = ins.opcode
        if op not in ("BRA", "BSSY", "BAR", "EXIT"):
            return False
        m = g.mask if d.guard is None else g.mask & d.guard(x)  # type: ignore[arg-type]
        bar = -1
        if op == "BRA":
            if set(ins.modifiers) - {"U"} or any(o.kind != "label" for o in ins.operands):
                return False
            if np.array_equal(m, g.mask):
                g.pc = self.L.index[self.L.kernel.target(ins)]  # type: ignore[index]
            elif not lanes_any(m):
                g.pc = i + 1
            else:
                return False
        elif op == "BSSY":
            x.B[int(ins.operands[0].text[1:])] = g.mask
            g.pc = i + 1
        elif op == "BAR":
            if set(ins.modifiers) - {"SYNC", "DEFER_BLOCKING"}:
                return False
            bar = int(ins.operands[0].value or 0) & 0xFFFFFFFF
            g.bar, g.count, g.wait = bar, 0, "bar"
        else:  # EXIT
            if not np.array_equal(m, g.mask):
                return False
            x.live &= ~m
            x.groups = []
        live = np.count_nonzero(x.live, axis=1).tolist()
        arrived = np.count_nonzero(g.mask, axis=1).tolist() if bar >= 0 else [0] * len(live)
        item = self.shared_rec[i]
        if item is None:
            item = self.shared_rec[i] = (SassExecuted(-1, -1, i, ins, np.zeros(32, bool)), None)
        rec, done = item[0], op == "EXIT"
        for stream, lv, ar in zip(x.streams, live, arrived):
            stream.append((rec, (lv, done, bar, 0, ar)))
        x.P[PT] = True
        return True

    @staticmethod
    def _joined(warps: list[Warp], sel: list[int]) -> list[Group]:
        """The wide groups of warps whose per-warp groups agree."""
        out = []
        for j, h in enumerate(warps[0].groups):
            g = Group(h.pc, np.stack([warps[k].groups[j].mask for k in sel]))
            g.wait, g.bar, g.count = h.wait, h.bar, h.count
            g.want = np.stack([np.broadcast_to(warps[k].groups[j].want, (32,)) for k in sel])
            out.append(g)
        return out

    def _release(self, wides: list[_Wide]) -> list[_Wide] | None:
        """sim.sass.exec._release per CTA over the wide warps: the groups at a BAR.SYNC id move on once every live
        thread of their CTA arrived; a wide warp whose CTAs are not all released splits. None when none was."""
        arrived: dict[tuple[int, int], int] = {}
        live: dict[int, int] = {}
        for x in wides:
            per = np.count_nonzero(x.live, axis=1)
            for c, v in zip(x.ctas.tolist(), per.tolist()):
                live[c] = live.get(c, 0) + v
            for g in x.groups:
                if g.wait == "bar":
                    for c, v in zip(x.ctas.tolist(), np.count_nonzero(g.mask, axis=1).tolist()):
                        arrived[(c, g.bar)] = arrived.get((c, g.bar), 0) + v
        go = {key for key, v in arrived.items() if v >= live[key[0]]}
        if not go:
            return None
        for c in sorted({c for c, _ in go}):
            self.epochs[c] += 1
        out: list[_Wide] = []
        for x in wides:
            out += self._go(x, go)
        return out

    def _go(self, x: _Wide, go: set[tuple[int, int]]) -> list[_Wide]:
        """x with its groups at released barriers moved on; its parts when only some of its CTAs were released."""
        for g in x.groups:
            if g.wait == "bar":
                ok = np.array([(c, g.bar) in go for c in x.ctas.tolist()])
                if ok.all():
                    g.wait = ""
                    g.pc += 1
                elif ok.any():
                    return [y for part in x.split(ok) for y in self._go(part, go)]
        return [x]


class RCta:
    """A CTA as the replay times it: its index, its warps."""

    def __init__(self, index: int, ctaid: tuple[int, int, int], streams: list[list], nthreads: int):
        self.index = index
        self.ctaid = ctaid
        self.warps = [RWarp(self, k, s, min(32, nthreads - 32 * k)) for k, s in enumerate(streams)]


class _Head:
    __slots__ = ("pc", "wait")

    def __init__(self, pc: int):
        self.pc = pc
        self.wait = ""


class RWarp:
    """A warp as the replay times it: the thread group the timing looks at (``groups``: its next instruction, or
    "bar" while it waits at a CTA barrier; empty once it ended), its records."""

    __slots__ = ("cta", "wid", "stream", "pos", "groups", "done", "rec", "live", "bar", "count", "arrived")

    def __init__(self, cta: RCta, wid: int, stream: list, live: int):
        self.cta = cta
        self.wid = wid
        self.stream = stream
        self.pos = 0
        self.done = not stream
        self.groups = [_Head(stream[0][0].index)] if stream else []
        self.rec: Any = None
        self.live = live  # lanes not exited
        self.bar = self.count = self.arrived = 0


class _Ctl:
    __slots__ = ("ctl",)

    def __init__(self, ctl: bool):
        self.ctl = ctl


class Replay:
    """What SassTiming asks of sim.sass.exec.Machine, answered from the records of a run ahead."""

    def __init__(self, L: Launched, ahead: RunAhead):
        self.L = L
        self.ahead = ahead
        self.decoded = ahead.decoded  # (filled as the run ahead decodes; SassTiming reads .ctl)
        self.count = 0

    def cta(self, index: int, ctaid: tuple[int, int, int]) -> RCta:
        bx, by, bz = self.L.block
        return RCta(index, ctaid, self.ahead.streams_of(index), bx * by * bz)

    @staticmethod
    def runnable(w: Any) -> Any:
        gs = w.groups
        return gs[0] if gs and gs[0].wait == "" else None

    def step(self, w: Any, g: Any) -> None:
        rec, after = w.stream[w.pos]
        w.pos += 1
        w.rec = rec
        self.count += 1
        if after is not None:
            live, done, bar, count, arrived = after
            w.live = live
            if done:
                w.done = True
                w.groups = []
                return
            if bar >= 0:
                g.wait = "bar"
                w.bar, w.count, w.arrived = bar, count, arrived
        if w.pos < len(w.stream):
            g.pc = w.stream[w.pos][0].index

    @staticmethod
    def release(cta: Any) -> bool:
        """sim.sass.exec._release on the replayed warps."""
        waiting = [w for w in cta.warps if w.groups and w.groups[0].wait == "bar"]
        if not waiting:
            return False
        live = sum(w.live for w in cta.warps if not w.done)
        done = False
        for bid in sorted({w.bar for w in waiting}):
            here = [w for w in waiting if w.bar == bid]
            count = max(w.count for w in here)
            if sum(w.arrived for w in here) < (count if count else live):
                continue
            for w in here:
                w.groups[0].wait = ""
            done = True
        return done
