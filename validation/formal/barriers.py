"""Named barriers: ``bar.sync id, count`` / ``barrier.sync.aligned id, count``, ``bar.arrive id, count``,
``bar.red ... id, count``, whose thread count is below the CTA's (a TMA-store epilogue's per-warpgroup
barrier, a producer that arrives while its consumers wait).

A thread counts its named arrivals in ``%%bn`` and its waits in ``%%bns`` (``%%bn`` at the last one;
validation/formal/program.py); its id is a thread-local symbol ``%%nid`` (in every access's counters)
tied to each named barrier's id operand wherever that barrier lies on the thread's path
(``pc -> id == %%nid``, :func:`facts`: a conjunct of every query that orders two threads by named
barriers; it excludes no execution, since a thread's named barriers agree on the id, and leaves ``%%nid``
free where none does, which can only add races). Two threads' counts name the same barrier instance
when

* every thread uses one named id in its life (the id of two of its named barriers, in any two iterations
  of their loops, is one value: otherwise named barriers are not modelled and the properties that need
  them answer ``unknown``), and
* at most ``count`` threads ever arrive on id X (counted by warp, as the hardware counts a warp's
  arrival: the warps of the CTA that can reach a barrier with that id). More is a violation (the first
  ``count`` arrivals complete an instance, so which threads meet is up to timing); fewer is a deadlock
  (the barrier never completes: nothing after it runs, so the ordering claims hold vacuously).

Then instance j of id X is the j-th arrival of every thread of X, and an event of thread A (counters s1)
happens before an event of thread B (counters s2) when a barrier of the whole CTA lies between them
(``s1[%%bc] < s2[%%bc]``) or both have the same named id X and B waited at an instance after A's event
(``s1[%%bn] < s2[%%bns]``). No chain through a third thread is followed (it could only add order: a
false alarm, never a missed race)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import z3

from validation.formal.program import BC, BN, BNS, COUNTERS, NID, NO_WRAP, barrier_operands

if TYPE_CHECKING:
    from validation.formal.properties import PropResult, Verifier

MAX_ID = 16  # PTX: barriers 0..15 per CTA
WARP = 32  # threads per warp; source: PTX ISA 8.x, "bar.sync: b must be a multiple of the warp size"


@dataclass
class NamedAnalysis:
    """What the named barriers of a kernel allow: ``ok`` the ids whose instances two threads' counts name;
    ``unknown`` reasons the model does not apply (then no named barrier orders anything); ``violations``
    (line, witness, detail) for barrier_divergence."""

    ok: set[int] = field(default_factory=set)
    unknown: list[tuple[int, str]] = field(default_factory=list)
    violations: list[tuple[int, dict, str]] = field(default_factory=list)
    ids: dict[int, dict] = field(default_factory=dict)  # id -> {"count", "warps", "threads"}


def _sat(v: Verifier, *cs) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    s = v.solver
    s.push()
    s.set("timeout", v.query_timeout_ms)
    s.add(*cs)
    r = s.check()
    m = s.model() if r == z3.sat else None
    s.pop()
    return r, m


def linear_tid(v: Verifier, tid) -> z3.BitVecRef:
    n = v.ctx.ntid
    return tid[0] + n[0] * (tid[1] + n[1] * tid[2])


def analyse(v: Verifier) -> NamedAnalysis:
    """The named-barrier facts of ``v``'s kernel (computed once)."""
    cached = v._named
    if cached is not None:
        return cached
    out = NamedAnalysis()
    v._named = out
    evs = v.ex.named
    if not evs:
        return out
    block = v.ctx.block
    if block is None:
        out.unknown.append((evs[0].line, f"'{evs[0].text}': a named barrier (thread count) needs the launch's "
                                         "block size (--block) to count the threads that arrive on it"))
        return out
    nthreads = block[0] * block[1] * block[2]
    cache: dict = {}
    for e in evs:
        loads = {v.ex.loadsyms[n] for n in v.ex.free_consts(e.bid, cache) if n in v.ex.loadsyms}
        if loads:
            out.unknown.append((e.line, f"'{e.text}': the barrier id depends on data loaded at line(s) "
                                        f"{sorted(loads)}"))
            return out
    # one named id per thread (two named barriers of a thread, in any iterations of their loops, agree)
    it = v.other_iteration
    for i, e1 in enumerate(evs):
        for e2 in evs[i:]:
            r, _ = _sat(v, e1.pc, it(e2.pc), e1.bid != it(e2.bid))
            if r != z3.unsat:
                out.unknown.append((e1.line, f"a thread may use two named barrier ids ('{e1.text}' line {e1.line}, "
                                             f"'{e2.text}' line {e2.line}): not modelled"))
                return out
    # the ids in use
    full_ids = _full_ids(v)
    ids: list[int] = []
    while len(ids) <= MAX_ID:
        r, m = _sat(v, z3.Or([z3.And(e.pc, z3.And([e.bid != x for x in ids])) for e in evs]))
        if r == z3.unknown:
            out.unknown.append((evs[0].line, "solver gave up enumerating the named barrier ids"))
            return out
        if r == z3.unsat or m is None:
            break
        val = next((m.eval(e.bid, model_completion=True).as_long() for e in evs
                    if z3.is_true(m.eval(z3.And(e.pc, z3.And([e.bid != x for x in ids])), model_completion=True))),
                   None)
        if val is None:
            break
        if val >= MAX_ID:
            e = next(e for e in evs if z3.is_true(m.eval(z3.And(e.pc, e.bid == val), model_completion=True)))
            out.violations.append((e.line, v.witness(m, barrier_id=val, access=e.text),
                                   f"'{e.text}' uses barrier id {val}: a CTA has barriers 0..{MAX_ID - 1}"))
            return out
        ids.append(val)
    for x in sorted(ids):
        if x in full_ids:
            out.unknown.append((evs[0].line, f"barrier {x} is used both with and without a thread count: not "
                                             "modelled"))
            continue
        _one_id(v, out, x, nthreads)
    return out


def _full_ids(v: Verifier) -> set[int]:
    """Ids of the whole-CTA barriers (a register id: every id)."""
    out: set[int] = set()
    S = v.ctx.S
    for ins in S.k.body:
        if S.is_full_barrier(ins):
            idop, _ = barrier_operands(ins)
            if idop is None:
                out.add(0)
            elif idop.kind == "imm":
                out.add(int(idop.value))
            else:
                out |= set(range(MAX_ID))
    return out


def _one_id(v: Verifier, out: NamedAnalysis, x: int, nthreads: int) -> None:
    """Count, participants and verdict of barrier id x."""
    evs = [e for e in v.ex.named if _sat(v, e.pc, e.bid == x)[0] != z3.unsat]
    counts: set[int] = set()
    for e in evs:
        if e.count is None:
            out.unknown.append((e.line, f"'{e.text}' has no thread count"))
            return
        r, m = _sat(v, e.pc, e.bid == x)
        if m is None:
            continue
        c = m.eval(e.count, model_completion=True).as_long()
        if _sat(v, e.pc, e.bid == x, e.count != c)[0] != z3.unsat:
            out.unknown.append((e.line, f"'{e.text}': the thread count of barrier {x} is not one constant"))
            return
        counts.add(c)
    if len(counts) != 1:
        out.unknown.append((evs[0].line, f"barrier {x} is used with thread counts {sorted(counts)}"))
        return
    n = counts.pop()
    e0 = evs[0]
    if n == 0 or n % WARP:
        r, m = _sat(v, e0.pc, e0.bid == x)
        if m is not None:
            out.violations.append((e0.line, v.witness(m, barrier_id=x, count=n, access=e0.text),
                                   f"'{e0.text}': the thread count {n} of barrier {x} is not a positive multiple "
                                   f"of the warp size ({WARP})"))
        return
    reach = z3.Or([z3.And(e.pc, e.bid == x) for e in evs])
    lin = linear_tid(v, v.ctx.tid)
    warps, model = [], None
    for w in range((nthreads + WARP - 1) // WARP):
        r, m = _sat(v, reach, z3.UGE(lin, w * WARP), z3.ULT(lin, (w + 1) * WARP))
        if r == z3.unknown:
            out.unknown.append((e0.line, f"solver gave up on which warps arrive on barrier {x}"))
            return
        if r == z3.sat:
            warps.append(w)
            model = model or m
    arriving = sum(min(WARP, nthreads - w * WARP) for w in warps)
    out.ids[x] = {"count": n, "warps": warps, "threads": arriving}
    if arriving > n and model is not None:
        out.violations.append((e0.line, v.witness(model, barrier_id=x, count=n, arriving_threads=arriving,
                                                  warps=warps, access=e0.text),
                               f"barrier {x} ('{e0.text}', line {e0.line}) completes at {n} threads, but the "
                               f"{len(warps)} warps {warps} ({arriving} threads) arrive on it: which of them "
                               "meet at an instance depends on timing"))
        return
    if 0 < arriving < n and model is not None:
        out.violations.append((e0.line, v.witness(model, barrier_id=x, count=n, arriving_threads=arriving,
                                                  warps=warps, access=e0.text),
                               f"deadlock: barrier {x} ('{e0.text}', line {e0.line}) waits for {n} threads, but "
                               f"at most {arriving} (warps {warps}) ever arrive on it"))
    out.ok.add(x)  # a deadlocked barrier orders vacuously: nothing after it runs


def no_wrap(*syncs: dict) -> z3.BoolRef:
    """The event counters of these snapshots stay below 2^31 (program.COUNTERS: a thread would have to run
    2^31 barriers, fences, commits, ... first). A conjunct of a violation that compares two threads' counts
    (or one thread's in two iterations): a loop whose trip count is not bounded (a persistent tile loop)
    leaves its closed forms free to wrap, and counts that wrapped order events that never happen."""
    return z3.And([z3.ULT(s[c], NO_WRAP) for s in syncs for c in COUNTERS if c in s and not z3.is_bv_value(s[c])])


def same_warp(v: Verifier) -> z3.BoolRef:
    """The two threads of a two-thread query lie in one warp."""
    return z3.UDiv(linear_tid(v, v.ctx.tid), WARP) == z3.UDiv(linear_tid(v, v.tid2), WARP)


def before(v: Verifier, s1: dict, s2: dict) -> z3.BoolRef:
    """An event of one thread (counters s1) happens before an event of another (s2): a whole-CTA barrier
    between them, or a named barrier of both that the second waited at after the first's event."""
    full = z3.ULT(s1[BC], s2[BC])
    ok = analyse(v).ok
    if not ok:
        return full
    same = z3.And(s1[NID] == s2[NID], z3.Or([s1[NID] == x for x in sorted(ok)]))
    return z3.Or(full, z3.And(same, z3.ULT(s1[BN], s2[BNS])))


def facts(v: Verifier) -> list[z3.BoolRef]:
    """The two threads' %%nid are the ids of their named barriers (hypotheses of a two-thread query)."""
    nid = v.ex.nid
    if nid is None or not analyse(v).ok:
        return []
    if v._named_facts is None:
        one = [z3.Implies(e.pc, e.bid == nid) for e in v.ex.named]
        v._named_facts = one + [v.t2(c) for c in one]
    return v._named_facts


def concurrent(v: Verifier, s1: dict, s2: dict) -> z3.BoolRef:
    """Neither event is ordered before the other by a barrier (the same barrier interval)."""
    if not analyse(v).ok:
        return s1[BC] == s2[BC]
    return z3.And(s1[BC] == s2[BC], z3.Not(before(v, s1, s2)), z3.Not(before(v, s2, s1)))


def divergence(v: Verifier, r: PropResult) -> None:
    """barrier_divergence's part for named barriers: the analysis's verdicts, and every branch that can
    skip an aligned named barrier is taken alike by the threads of each warp (bar.sync is
    barrier.sync.aligned: a warp executes it together)."""
    na = analyse(v)
    for line, reason in na.unknown:
        r.unknown(line, reason)
    for line, wit, detail in na.violations:
        r.violated(line, wit, detail)
        return
    S = v.ctx.S
    named_blocks = {S.block_of[e.index] for e in v.ex.named if e.aligned}
    if not named_blocks:
        return
    warp = same_warp(v)
    cache: dict = {}
    for br in v.ex.branches:
        region = S.divergence_region(br.block)
        if not region & named_blocks:
            continue
        r.checks += 1
        ks_eq = [k == v.t2(k) for k in br.ks]
        res, m = v.check(br.pc, v.t2(br.pc), v.distinct_threads(), warp, *ks_eq, br.cond != v.t2(br.cond))
        ins = S.k.body[br.index]
        barline = min(S.k.body[S.blocks[b].start].line for b in region & named_blocks)
        if res == z3.sat and m is not None:
            loads = {v.ex.loadsyms[n] for n in v.ex.free_consts(br.cond, cache) if n in v.ex.loadsyms}
            if loads:
                r.unknown(br.line, f"branch '{ins.text}' guarding the named barrier near line {barline} depends "
                                   f"on data loaded at line(s) {sorted(loads)}; cannot show it is warp-uniform")
                continue
            wit = v.witness(m, two=True, barrier_line=barline)
            r.violated(br.line, wit, f"branch '{ins.text}' splits the warp of threads {wit['thread']} and "
                                     f"{wit['other_thread']}; an aligned named barrier (line {barline}) lies under "
                                     "it, which every thread of a warp must execute together")
            return
        if res == z3.unknown:
            r.unknown(br.line, "solver gave up (timeout)")
