"""The five safety properties, decided by Z3 over the records of the symbolic executor.

Two-thread reduction (GPUVerify): the executor runs one symbolic thread T1; a second thread T2 of
the *same CTA* is T1 with every thread-local symbol renamed (%tid, loaded values, havoc'ed loop
registers, iteration counters), sharing %ctaid, the parameters and the uniform loop functions.
A race, a divergent barrier or an early read of an async copy is a satisfying assignment of
T1 and T2 with t1 != t2; unsat means it cannot happen for any pair of threads, any block, any
parameter values in their ranges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from sim import isa
from validation.formal import barriers
from validation.formal.asyncprops import (
    async_proxy_discipline,
    bulk_store_discipline,
    mbarrier_discipline,
    overlap,
    reach,
    wgmma_discipline,
)
from validation.formal.context import Context
from validation.formal.intproof import nonlinear, prove_with_integers
from validation.formal.program import BC, COUNTERS, DONE, GC, NID, VIS
from validation.formal.state import TYPE_INFO, Access
from validation.formal.symexec import Executor
from validation.formal.z3util import Substitution

NAMES = ("bounds", "barrier_divergence", "shared_race", "async_copy", "termination", "wgmma", "async_proxy",
         "mbarrier")


def _after_commit(sync: dict, copy: Access) -> z3.BoolRef:
    """A point with counters `sync` comes after `copy` was committed (a later group, or a later barrier
    interval of the same group)."""
    g = copy.sync[GC]
    return z3.Or(z3.UGT(sync[GC], g), z3.And(sync[GC] == g, z3.UGT(sync[BC], copy.sync[BC])))


@dataclass
class PropResult:
    name: str
    status: str = "proved"  # proved | violated | unknown
    witness: dict | None = None
    line: int | None = None
    detail: str = ""
    checks: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "status": self.status, "witness": self.witness, "line": self.line,
             "detail": self.detail, "checks": self.checks, "seconds": round(self.seconds, 3)}
        if self.notes:
            d["notes"] = self.notes
        return d

    def unknown(self, line: int | None, reason: str) -> None:
        if self.status == "proved":
            self.status, self.line, self.detail = "unknown", line, reason
        elif self.status == "unknown":
            self.notes.append(f"line {line}: {reason}" if line else reason)

    def violated(self, line: int, witness: dict, detail: str) -> None:
        if self.status != "violated":
            self.status, self.line, self.witness, self.detail = "violated", line, witness, detail


def _signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) & 1 else v


class Verifier:
    def __init__(self, ctx: Context, timeout_s: float = 60.0, query_timeout_ms: int = 4000):
        self.ctx = ctx
        self.deadline = time.monotonic() + timeout_s
        self.query_timeout_ms = query_timeout_ms
        self.ex = Executor(ctx)
        self.ex.tid = ctx.tid
        self.solver = z3.Solver()
        self.solver.add(ctx.assumptions)
        self._ren: Substitution | None = None
        self._iter: Substitution | None = None
        self._first: list | None = None
        self.coarse_hits = 0  # violations seen only past the first iteration of a loop around a loop
        self.weakened = 0  # models found while a summary query had given up (answered unknown)
        self.last_weakened = False  # the last check's model was one of them
        self.tid2 = [z3.BitVec(f"tid.{c}'", 32) for c in "xyz"]
        self._named: barriers.NamedAnalysis | None = None  # barriers.analyse's, once
        self._named_facts: list[z3.BoolRef] | None = None
        self._div_names: frozenset | None = None  # quotient / remainder symbols of divisions_first
        self._div_ties: list[z3.BoolRef] = []
        self._iter_names: frozenset = frozenset()
        self._free_cache: dict = {}

    # ------------------------------------------------------------------ helpers
    def check(self, *cs) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
        self.last_weakened = False
        left = self.deadline - time.monotonic()
        if left <= 0:
            return z3.unknown, None
        s = self.solver
        s.push()
        s.set("timeout", int(max(1, min(self.query_timeout_ms, left * 1000))))
        s.add(*cs)
        r = s.check()
        m = s.model() if r == z3.sat else None
        self.last_weakened = r == z3.sat and bool(self.ex.gave_up)
        if r == z3.sat and self.ex.gave_up:
            # the summaries are weaker than they should be (a timed-out query dropped a loop form or invariant;
            # whether it times out depends on the machine's load): a model here is not a witness
            r, m = z3.unknown, None
            self.weakened += 1
        if r == z3.sat and self.first_pass():
            s.add(self.first_pass())  # a witness only where the outer loops' summaries are exact
            r = s.check()
            m = s.model() if r == z3.sat else None
            if r == z3.unsat:
                r = z3.unknown
                self.coarse_hits += 1
        s.pop()
        return r, m

    def gave_up_why(self, why: str) -> str:
        """Why a query answered unknown: a weakened summary, the run's time limit (a query's own limit is what
        is left of --timeout, so near the end every query gives up), else ``why``."""
        if self.last_weakened:
            return self.weakened_why()
        if time.monotonic() >= self.deadline - 0.05:
            return "verifier time limit reached (--timeout)"
        return why

    def weakened_why(self) -> str:
        g = self.ex.gave_up
        more = f" and {len(g) - 1} more" if len(g) > 1 else ""
        return (f"a counterexample exists only under a weakened loop summary: the solver gave up on {g[0]}{more} "
                f"while summarising the loops (a wall-clock limit: try again on a less loaded machine)")

    def first_violation(self, r: PropResult, line: int | None, cands: list, *hyps,
                        why: str = "solver gave up (timeout)") -> tuple | None:
        """The query-and-witness step of every check: can one of ``cands`` (tuples whose last item is a
        violation condition) hold under ``hyps``? (model, the first candidate the model makes true), or
        None; a solver that gives up makes ``r`` unknown at ``line`` (``why``)."""
        r.checks += 1
        cands = self.divisions_first(cands, hyps)
        if not cands:
            return None
        res, m = self.check(*hyps, z3.Or([c[-1] for c in cands]))
        if res == z3.sat and m is not None:
            return m, next(c for c in cands if z3.is_true(m.eval(c[-1], model_completion=True)))
        if res == z3.unknown:
            r.unknown(line, self.gave_up_why(why))
        return None

    def divisions_first(self, cands: list, hyps: tuple) -> list:
        """Candidates over a division's quotient or remainder (instructions.DivisionMixin: a tile copy's row
        and column from tid) are asked of integer arithmetic first (intproof: linear there), with both
        threads' division ties as hypotheses: the bit-vector solver, multiplying them by row pitches and
        pairing every copy of two threads, timed out (unknown). Returns the candidates left for the
        bit-vector query: none when integers prove that no candidate holds; else, when those free of loop
        iteration symbols (a pipeline prologue's copies; a K loop's stage index `(init + k) mod 3` defeats
        the translation) are proved together, the others."""
        ex = self.ex
        if not ex.divisions:
            return cands
        if self._div_names is None:
            names = frozenset(n for _, q, r, _ in ex.divisions.values() for n in (str(q), str(r)))
            self._div_names = names | {n + "'" for n in names}
            ties = [t for *_, t in ex.divisions.values()]
            self._div_ties = ties + [self.t2(t) for t in ties]
            self._iter_names = frozenset(c.decl().name() for c in ex.iter_created)
            self._iter_names |= {n + q for n in self._iter_names for q in ("'", '"')}
        free = [ex.free_consts(c[-1], self._free_cache) for c in cands]
        if not any(f & self._div_names for f in free):
            return cands
        hyp = z3.And(*hyps, *self._div_ties)
        if self.int_proof(hyp, z3.Not(z3.Or([c[-1] for c in cands]))):
            return []
        group = [i for i, f in enumerate(free) if f & self._div_names and not f & self._iter_names]
        if not group or len(group) == len(cands):
            return cands
        if self.int_proof(hyp, z3.Not(z3.Or([cands[i][-1] for i in group]))):
            keep = set(range(len(cands))) - set(group)
            return [c for i, c in enumerate(cands) if i in keep]
        return cands

    def first_pass(self) -> list:
        """k = 0 (and its renamings for a second thread / another iteration) for every loop that
        contains a loop other than an mbarrier spin: such an outer loop's summary runs its inner loops
        without their invariants, so its later iterations over-approximate (a persistent kernel's tile
        loop around its K loop). A violation seen only there is answered unknown."""
        if self._first is None:
            ex, S = self.ex, self.ex.S
            spin = {lp.header for lp in ex.loops if lp.load_lines and set(lp.load_lines) <= ex.mbar_wait_lines
                    and lp.status != "proved"}
            outer = {h for h, lp in S.loops.items()
                     if any(h2 != h and h2 in lp.body and h2 not in spin for h2 in S.loops)}
            ks = [lp.k for lp in ex.loops if lp.header in outer]
            self._first = [c for k in ks for c in (k == 0, self.t2(k) == 0, self.other_iteration(k) == 0)]
        return self._first

    def renaming(self) -> Substitution:
        if self._ren is None:
            pairs = list(zip(self.ctx.tid, self.tid2))
            for c in self.ex.created:
                name = c.decl().name() + "'"
                pairs.append((c, z3.Bool(name) if z3.is_bool(c) else z3.BitVec(name, c.size())))
            self._ren = Substitution(pairs)
        return self._ren

    def t2(self, e):
        return self.renaming()(e)

    def other_iteration(self, e):
        """The same thread in another iteration of its loops: the loop summaries' constants renamed."""
        if self._iter is None:
            seen: dict[str, z3.ExprRef] = {}
            for c in self.ex.iter_created:
                seen.setdefault(c.decl().name(), c)
            self._iter = Substitution([(c, z3.Bool(n + '"') if z3.is_bool(c) else z3.BitVec(n + '"', c.size()))
                                       for n, c in seen.items()])
        return self._iter(e)

    def distinct_threads(self):
        c = [z3.ULT(t, n) for t, n in zip(self.tid2, self.ctx.ntid)]
        return z3.And(c + [z3.Or([a != b for a, b in zip(self.ctx.tid, self.tid2)])])

    def witness(self, m: z3.ModelRef, two: bool = False, **extra) -> dict:
        ctx = self.ctx

        def ev(e):
            return m.eval(e, model_completion=True).as_long()

        w: dict[str, Any] = {"thread": [ev(t) for t in ctx.tid], "block": [ev(c) for c in ctx.ctaid]}
        if two:
            w["other_thread"] = [ev(t) for t in self.tid2]
        if ctx.block is None:
            w["block_dim"] = [ev(x) for x in ctx.ntid]
        if ctx.grid is None:
            w["grid_dim"] = [ev(x) for x in ctx.nctaid]
        params = {}
        for name, sym in ctx.param_syms.items():
            p = ctx.k.params[ctx.param_index[name]]
            v = ev(sym)
            if p.type.startswith("s"):
                v = _signed(v, sym.size())
            if "param:" + name in ctx.buffers or TYPE_INFO.get(p.type, (0, "f"))[1] == "f":
                continue
            params[ctx.param_label(name)] = v
        w["params"] = params
        for key, val in extra.items():
            if isinstance(val, z3.ExprRef):
                val = ev(val)
            w[key] = val
        return w

    # ------------------------------------------------------------------ properties
    def run(self) -> list[PropResult]:
        return [r for kind, r in self.steps() if kind == "result"]

    def steps(self):
        """("phase", what runs next) and ("result", PropResult) messages, in order (see guard.py)."""
        yield "phase", "symbolic execution"
        t0 = time.monotonic()
        self.ex.run()
        self.exec_seconds = time.monotonic() - t0
        for name in NAMES:
            yield "phase", name
            r = PropResult(name)
            t = time.monotonic()
            hits = self.coarse_hits
            getattr(self, name)(r)
            if self.coarse_hits > hits and r.status == "unknown":
                r.notes.insert(0, r.detail)
                r.detail = ("a counterexample exists only past the first iteration of a loop around another "
                            "loop (e.g. a persistent tile loop around its K loop), whose summary loses the inner "
                            "loop's invariants: not decided there")
            if time.monotonic() > self.deadline and r.status == "proved":
                r.status, r.detail = "unknown", "verifier time limit reached (--timeout)"
            r.seconds = time.monotonic() - t
            yield "result", r

    def _unsupported(self, r: PropResult, what: tuple[str, ...]) -> None:
        for line, text in self.ex.unsupported:
            if any(w in text for w in what):
                r.unknown(line, f"instruction not modelled by the verifier: {text}")

    # bounds -----------------------------------------------------------
    def in_buffer(self, a: Access):
        ctx = self.ctx
        conds, missing = [], []
        for tag in sorted(a.tags):
            if a.space == "global" and tag in ctx.buffers:
                base, ext, label = ctx.buffers[tag]
                if ext is None:
                    missing.append(label)
                    continue
                off = a.addr - base
                conds.append((z3.And(z3.ULE(a.width, ext), z3.ULE(off, ext - a.width)), off, label, ext))
            elif a.space == "shared" and tag in ctx.shared:
                base, size = ctx.shared[tag]
                if size is None:
                    missing.append(f"dynamic shared {tag[7:]} (size unknown: give the kernel metadata "
                                   "'dynamic_shared')")
                    continue
                b = z3.BitVecVal(base, 32)
                s = z3.BitVecVal(size, 32)
                off = a.addr - b
                conds.append((z3.And(z3.ULE(a.width, s), z3.ULE(off, s - a.width)), off, tag[7:], s))
        return conds, missing

    def bounds(self, r: PropResult) -> None:
        """_bounds, where a counterexample whose address depends on loaded data (an index or pointer read from
        memory, or a loop register that follows such reads: a pointer chase) is no witness: the data decide it.
        Where every store into the shared buffers the kernel reads fits a bound, a second run assumes each
        shared load returns a value some store wrote there (ExecutorBase.load_facts): proved under that stated
        assumption; otherwise unknown naming the load lines."""
        dep = self._bounds(r)
        if r.status == "violated" or not dep:
            return
        line, lines = dep[0]
        why = (f"'{line[1]}' (line {line[0]}): the address depends on data loaded at line(s) {lines} (an index or "
               "pointer read from memory: a pointer chase), whose values the verifier does not track")
        facts = shared_value_facts(self.ex, self.ctx)
        if facts:
            v2 = Verifier(self.ctx, timeout_s=max(0.0, self.deadline - time.monotonic()),
                          query_timeout_ms=self.query_timeout_ms)
            v2.ex.load_facts = facts
            v2.ex.run()
            r2 = PropResult("bounds")
            dep2 = v2._bounds(r2)
            r2.checks += r.checks
            said = ", ".join(f"{t[7:]}: <= {top}, a multiple of {al}" for t, (_, top, al) in sorted(facts.items()))
            assumption = (f"assuming a load from shared memory returns a value some store of the kernel wrote there "
                          f"(no read of uninitialised shared memory; every store fits: {said})")
            if r2.status == "violated" or (r2.status == "proved" and not dep2):
                if r2.status == "proved":
                    r2.detail = assumption
                r.__dict__.update(r2.__dict__)
                return
            why += f"; {assumption}, the address is still not proved in bounds"
        r.unknown(line[0], why)

    def _data_lines(self, a: Access) -> list[int]:
        """Lines of the loads access a's address depends on (directly, or through a loop register whose next
        value is loaded data)."""
        ex = self.ex
        names = ex.free_consts(a.addr, self._free_cache)
        out = {ex.loadsyms[n] for n in names if n in ex.loadsyms}
        for n in names & ex.data_havocs.keys():
            out |= ex.data_havocs[n]
        return sorted(out)

    def _bounds(self, r: PropResult) -> list[tuple[tuple[int, str], list[int]]]:
        """Every access in its buffer; returns the ((line, text), load lines) of the accesses with a
        counterexample whose address depends on loaded data (left to bounds)."""
        nl_cache: dict = {}
        dep: list[tuple[tuple[int, str], list[int]]] = []
        self._unsupported(r, ("stmatrix", "bulk", "mbarrier", "ld", "st", "atom", "red"))
        for a in self.ex.accesses:
            if a.space == "unknown" or not a.tags:
                r.unknown(a.line, f"cannot tell which buffer '{a.text}' addresses (pointer not derived "
                                  "from a kernel parameter or variable, e.g. loaded from memory)")
                continue
            conds, missing = self.in_buffer(a)
            if missing:
                r.unknown(a.line, f"no extent for {', '.join(missing)}: give --extent pN=BYTES-EXPR")
                continue
            if not conds:  # e.g. another CTA's shared memory through a mapa (shared::cluster) address
                r.unknown(a.line, f"cannot place '{a.text}' in any buffer the verifier knows")
                continue
            r.checks += 1
            goal = z3.Or([c for c, *_ in conds])
            if a.cta is not None and self.ctx.cluster is None:
                r.unknown(a.line, f"'{a.text}' accesses another CTA's shared memory (mapa) and the cluster shape is "
                                  "unknown: give --cluster X,Y,Z (or .reqnctapercluster, the header's \"cluster\")")
                continue
            if a.cta is not None and self.ctx.cluster is not None:  # a mapa address: a CTA of the cluster too
                goal = z3.And(goal, z3.ULE(a.cta, self.ctx.cluster[0] * self.ctx.cluster[1] * self.ctx.cluster[2]))
            if nonlinear(a.addr, nl_cache) and self.int_proof(a.pc, goal):
                continue  # products of two variables: integers first, the bit-vector solver rarely copes
            res, m = self.check(a.pc, z3.Not(goal))
            if res == z3.sat and m is not None and self._data_lines(a):
                dep.append(((a.line, a.text), self._data_lines(a)))
                continue
            if res == z3.sat and m is not None:
                _, off, label, ext = conds[0]
                w = off.size()
                wit = self.witness(m, buffer=label, offset=_signed(m.eval(off, model_completion=True).as_long(), w),
                                   width=a.width, buffer_bytes=ext, access=a.text)
                r.violated(a.line, wit, f"{a.kind} of {wit['width']} bytes at offset {wit['offset']} of "
                                        f"{label} ({wit['buffer_bytes']} bytes): '{a.text}'")
                return dep
            if res == z3.unknown and not nonlinear(a.addr, nl_cache) and not self.int_proof(a.pc, goal):
                r.unknown(a.line, self.gave_up_why(f"solver gave up on '{a.text}' (timeout)"))
        for line, text, pc, c0, es in self.ex.tma_coords:  # a tile copy's rows start 16-byte aligned
            r.checks += 1
            res, m = self.check(pc, (c0 * es) & 15 != 0)
            if res == z3.sat and m is not None:
                wit = self.witness(m, coordinate=_signed(m.eval(c0, model_completion=True).as_long(), 32),
                                   element_bytes=es, access=text)
                r.violated(line, wit, f"the tensor copy '{text}' starts its box at innermost coordinate "
                                      f"{wit['coordinate']} x {es} bytes, not a multiple of 16 (the GPU stops "
                                      "with an illegal instruction): align that coordinate")
                return dep
            if res == z3.unknown:
                r.unknown(line, self.gave_up_why(f"solver gave up on the coordinate of '{text}' (timeout)"))
        return dep

    def int_proof(self, pc, goal) -> bool:
        """Second try for a bounds query the bit-vector solver gave up on (nonlinear arithmetic):
        integer arithmetic with no-wrap side conditions, see :mod:`validation.formal.intproof`."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        return prove_with_integers(self.ctx.assumptions, pc, goal, int(min(self.query_timeout_ms, left * 1000)),
                                   self.deadline)

    # barrier divergence ----------------------------------------------
    def barrier_divergence(self, r: PropResult) -> None:
        S = self.ctx.S
        self._unsupported(r, ("only CTA barriers",))
        barriers.divergence(self, r)  # named barriers: participants, counts, warp-uniform branches
        if r.status == "violated":
            return
        bar_blocks = {b for b in range(S.nb) if any(S.is_full_barrier(S.k.body[i])
                                                   for i in range(S.blocks[b].start, S.blocks[b].end))}
        if not bar_blocks:
            r.detail = r.detail or ("no barriers" if not self.ex.named else "")
            return
        cache: dict = {}
        for br in self.ex.branches:
            region = S.divergence_region(br.block)
            if not region & bar_blocks:
                continue
            r.checks += 1
            ks_eq = [k == self.t2(k) for k in br.ks]
            res, m = self.check(br.pc, self.t2(br.pc), self.distinct_threads(), *ks_eq,
                                br.cond != self.t2(br.cond))
            if res == z3.sat:
                barline = min(S.k.body[S.blocks[b].start].line for b in region & bar_blocks)
                loads = {self.ex.loadsyms[n] for n in self.ex.free_consts(br.cond, cache) if n in self.ex.loadsyms}
                ins = S.k.body[br.index]
                if loads:
                    r.unknown(br.line, f"branch '{ins.text}' guarding the barrier near line {barline} depends on "
                                       f"data loaded at line(s) {sorted(loads)}; cannot show it is uniform")
                    continue
                wit = self.witness(m, two=True, taken=z3.If(br.cond, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)),
                                   other_taken=z3.If(self.t2(br.cond), z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)),
                                   barrier_line=barline)
                r.violated(br.line, wit, f"branch '{ins.text}' is taken by thread {wit['thread']} "
                                         f"and not by thread {wit['other_thread']} (or vice versa) of the same "
                                         f"block; a bar.sync (line {barline}) lies under it")
                return
            if res == z3.unknown:
                r.unknown(br.line, "solver gave up (timeout)")

    # races --------------------------------------------------------------
    def shared_race(self, r: PropResult) -> None:
        self._unsupported(r, ("only CTA barriers", "stmatrix", "bulk"))
        named = barriers.analyse(self)
        if named.unknown:
            line, reason = named.unknown[0]
            r.unknown(line, f"named barriers not modelled: {reason}")
            return
        acc = [a for a in self.ex.accesses if a.space in ("shared", "unknown") and a.kind != "bulk"]
        for a in acc:
            if a.space == "unknown":
                r.unknown(a.line, f"cannot tell whether '{a.text}' addresses shared memory")
            elif a.cta is not None:  # ld/st/atom.shared::cluster on a mapa address
                r.unknown(a.line, f"'{a.text}' accesses another CTA's shared memory (mapa): races with that CTA's "
                                  "threads are not checked (the two-thread model pairs threads of one CTA)")
        acc = [a for a in acc if a.space == "shared"]
        renamed: dict[int, tuple] = {}

        def ren(i, a):
            if i not in renamed:
                renamed[i] = (self.t2(a.pc), self.t2(a.addr), self.t2(a.width),
                              {k: self.t2(a.sync[k]) for k in (NID, *COUNTERS) if k in a.sync})
            return renamed[i]

        for i, a in enumerate(acc):
            partners = []
            for j in range(i, len(acc)):
                b = acc[j]
                if a.kind == "read" and b.kind == "read":
                    continue
                if a.kind == "atomic" and b.kind == "atomic":
                    continue
                if a.tags and b.tags and not (a.tags & b.tags):
                    continue
                pc2, addr2, w2, s2 = ren(j, b)
                cond = z3.And(pc2, barriers.concurrent(self, a.sync, s2), overlap(a.addr, a.width, addr2, w2),
                              barriers.no_wrap(a.sync, s2))
                if a.collective and b.collective:  # one warp's wmma accesses: executed together, in order
                    cond = z3.And(cond, z3.Not(barriers.same_warp(self)))
                partners.append((b, addr2, cond))
            if not partners:
                continue
            hit = self.first_violation(r, a.line, partners, self.distinct_threads(), a.pc, *barriers.facts(self),
                                       why=f"solver gave up on the accesses of line {a.line} (timeout)")
            if hit:
                m, (b, addr2, _) = hit
                wit = self.witness(m, two=True, address=a.addr, other_address=addr2,
                                   access=a.text, other_access=b.text, other_line=b.line,
                                   barrier_interval=a.sync[BC])
                r.violated(a.line, wit, f"'{a.text}' (line {a.line}, thread {wit['thread']}) and "
                                        f"'{b.text}' (line {b.line}, thread {wit['other_thread']}) touch "
                                        f"shared address {wit['address']} in the same barrier interval")
                return

    # async copies -----------------------------------------------------
    def _after_without_sync(self, src: int, dst: int) -> bool:
        """Can instruction dst follow instruction src with no commit, wait or barrier in between?"""
        S = self.ctx.S
        return dst in reach(self.ctx.k.body, src, lambda i: S.is_full_barrier(i) or
                            isa.async_role(i) in ("commit", "wait", "wait_all"))

    def async_copy(self, r: PropResult) -> None:
        self._unsupported(r, ("cp.async", "only CTA barriers"))
        named = barriers.analyse(self)
        if named.unknown and self.ex.bulk_stores:
            r.unknown(named.unknown[0][0], f"named barriers not modelled: {named.unknown[0][1]}")
        else:
            bulk_store_discipline(self, r)
        copies = [a for a in self.ex.accesses if a.kind == "async"]
        if copies and self.ex.named:
            r.unknown(self.ex.named[0].line, "cp.async groups across named barriers (a thread count) are not "
                                             "modelled: a group waited for before one is not known to be visible "
                                             "to the threads of that barrier")
            return
        if not copies or r.status == "violated":
            r.detail = r.detail or ("no cp.async" if not self.ex.bulk_stores else "")
            return
        reads = [a for a in self.ex.accesses if a.space == "shared" and a.kind in ("read", "atomic")]
        for rd in reads:
            same, cross, later = [], [], []
            it = self.other_iteration
            itpc, itaddr, itw = it(rd.pc), it(rd.addr), it(rd.width)
            si = {k: it(v) for k, v in rd.sync.items()}
            rd2pc, rd2addr, rd2w = self.t2(rd.pc), self.t2(rd.addr), self.t2(rd.width)
            s2 = {k: self.t2(v) for k, v in rd.sync.items()}
            for c in copies:
                if c.tags and rd.tags and not (c.tags & rd.tags):
                    continue
                g = c.sync[GC]
                # the same thread: needs its own wait_group covering the copy's group
                before = _after_commit(rd.sync, c)
                if self._after_without_sync(c.index, rd.index):
                    before = z3.Or(before, z3.And(rd.sync[GC] == g, rd.sync[BC] == c.sync[BC]))
                same.append((c, z3.And(c.pc, overlap(c.addr, c.width, rd.addr, rd.width), before,
                                       z3.Not(z3.UGT(rd.sync[DONE], g)))))
                # the same thread in another iteration of the loops (the copy of an earlier trip)
                later.append((c, z3.And(c.pc, itpc, overlap(c.addr, c.width, itaddr, itw), _after_commit(si, c),
                                        z3.Not(z3.UGT(si[DONE], g)))))
                # another thread: needs the wait and a barrier after it
                cross.append((c, z3.And(c.pc, overlap(c.addr, c.width, rd2addr, rd2w), _after_commit(s2, c),
                                        z3.Not(z3.UGT(s2[VIS], g)))))
            if not same:
                continue
            hit = self.first_violation(r, rd.line, same, rd.pc)
            if hit:
                m, (c, _) = hit
                wit = self.witness(m, address=rd.addr, copy_line=c.line, group=c.sync[GC],
                                   groups_complete=rd.sync[DONE], access=rd.text)
                r.violated(rd.line, wit, f"'{rd.text}' reads shared address {wit['address']} written by "
                                         f"cp.async at line {c.line} (group {wit['group']}) before a "
                                         f"cp.async.wait_group covers that group")
                return
            hit = self.first_violation(r, rd.line, later) if self.ex.iter_created else None
            if hit:
                m, (c, _) = hit
                wit = self.witness(m, address=itaddr, copy_line=c.line, group=c.sync[GC],
                                   groups_complete=si[DONE], access=rd.text)
                r.violated(rd.line, wit, f"'{rd.text}' reads shared address {wit['address']} written by the "
                                         f"same thread's cp.async at line {c.line} (group {wit['group']}) in an "
                                         "earlier loop iteration, before a cp.async.wait_group covers that group")
                return
            hit = self.first_violation(r, rd.line, cross, self.distinct_threads(), rd2pc)
            if hit:
                m, (c, _) = hit
                wit = self.witness(m, two=True, address=rd2addr, copy_line=c.line, group=c.sync[GC],
                                   groups_visible=s2[VIS], access=rd.text)
                r.violated(rd.line, wit, f"thread {wit['other_thread']} reads '{rd.text}' at shared address "
                                         f"{wit['address']}, written by thread {wit['thread']}'s cp.async at "
                                         f"line {c.line} (group {wit['group']}), before a wait_group covering "
                                         "that group followed by a barrier")
                return

    # wgmma (validation/formal/asyncprops.py) ----------------------------
    def wgmma(self, r: PropResult) -> None:
        wgmma_discipline(self, r)

    def async_proxy(self, r: PropResult) -> None:
        async_proxy_discipline(self, r)

    def mbarrier(self, r: PropResult) -> None:
        mbarrier_discipline(self, r)

    # termination ------------------------------------------------------
    def termination(self, r: PropResult) -> None:
        if not self.ex.loops:
            r.detail = "no loops"
        proofs = []
        for lp in self.ex.loops:
            r.checks += 1
            if lp.status == "proved":
                proofs.append(f"loop at line {lp.line}: {lp.text}")
            elif lp.status == "violated":
                res, m = self.check(lp.violation)
                if res == z3.sat:
                    r.violated(lp.line, self.witness(m), f"the loop at line {lp.line} may never exit: {lp.text}")
                    return
                r.unknown(lp.line, f"loop at line {lp.line}: {lp.text} (but no reachable witness found)")
            elif lp.load_lines and set(lp.load_lines) <= self.ex.mbar_wait_lines:
                proofs.append(f"loop at line {lp.line}: spins on the mbarrier wait at line(s) {lp.load_lines} "
                              "(ends when the awaited phase completes; see the mbarrier property)")
            else:
                r.unknown(lp.line, f"loop at line {lp.line}: {lp.text}")
        if proofs and r.status == "proved":
            r.detail = "; ".join(proofs)


def shared_value_facts(ex, ctx) -> dict[str, tuple[int, int, int]]:
    """Per shared buffer the kernel stores into with st.shared only (one value width): the smallest bound in
    (size - bytes, size - 1, 2^j - 1) and the largest alignment (16, 8, 4, 2, 1) every stored value satisfies,
    each proved per store under its path condition (Verifier.bounds' stated assumption)."""
    writes: dict[str, list] = {}
    for a in ex.accesses:
        if a.space == "shared" and a.kind in ("write", "atomic", "async"):
            for t in a.tags:
                writes.setdefault(t, []).append(a)
    stored = {id(a): vals for a, vals in ex.stored}
    out: dict[str, tuple[int, int, int]] = {}
    for tag, ws in writes.items():
        if tag not in ctx.shared or ctx.shared[tag][1] is None or any(id(a) not in stored for a in ws):
            continue
        widths = {b for a in ws for _, b in stored[id(a)]}
        if len(widths) != 1:
            continue
        bits = widths.pop()
        size = ctx.shared[tag][1]
        tops = sorted({c for c in (size - bits // 8, size - 1) if c >= 0} | {2 ** j - 1 for j in range(1, bits + 1)})
        top, align = 0, 16
        ok = True
        for a in ws:
            for v, _ in stored[id(a)]:
                def holds(c, v=v, a=a):
                    s = ex.summary_solver()
                    s.add(a.pc, z3.Not(c))
                    return s.check() == z3.unsat
                t = next((c for c in tops if c >= top and holds(z3.ULE(v, c))), None)
                if t is None:
                    ok = False
                    break
                top = t
                while align > 1 and not holds(v & (align - 1) == 0):
                    align //= 2
            if not ok:
                break
        if ok:
            out[tag] = (bits, top, align)
    return out

