"""The wgmma discipline and the async-proxy rule, decided by Z3 over the executor's records (see docs/verify.md).

``wgmma``:

* accumulator registers are not read or written, A-fragment registers not written, by any other
  instruction between a wgmma's issue and the ``wgmma.wait_group`` that retires its group;
* the shared bytes a wgmma reads through its descriptors are not written (st.shared, atomics,
  cp.async) while it is in flight: by the issuing thread before its wait, by another thread in the
  same barrier interval or after a barrier that the wait did not precede;
* a ``wgmma.fence`` lies on every path from an access of a wgmma's registers (and from the kernel
  entry) to that wgmma.

``async_proxy`` (the PTX ISA's proxy rule, its own property since it is the one real compilers differ on):

* a ``fence.proxy.async`` separates each generic-proxy write of shared bytes (a store once done, a
  cp.async once its group is waited for) from an async-proxy read of them: a wgmma operand, the source
  of a bulk (TMA) store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import z3
from z3.z3util import get_vars

from sim import isa
from sim.ptx.ir import Instruction
from validation.formal import barriers
from validation.formal.program import (
    BDONE,
    BGC,
    GC,
    MWA,
    MWE,
    MWP,
    NO_BARRIER,
    PF,
    PFG,
    TXA,
    TXB,
    TXL,
    TXN,
    WDONE,
    WGC,
    WVIS,
)
from validation.formal.state import Access, RegTouch, WgmmaRec

if TYPE_CHECKING:
    from validation.formal.properties import PropResult, Verifier


def overlap(a, aw, b, bw) -> z3.BoolRef:
    """Byte ranges [a, a+aw) and [b, b+bw) of 32-bit addresses intersect (compared in 64 bits)."""
    a, b = z3.ZeroExt(32, a), z3.ZeroExt(32, b)
    return z3.And(z3.ULT(a, b + z3.ZeroExt(32, bw)), z3.ULT(b, a + z3.ZeroExt(32, aw)))


def reach(body: list[Instruction], src: int, stop: Callable[[Instruction], bool]) -> set[int]:
    """Instructions reachable from just after ``src`` along paths that pass no ``stop`` instruction
    (a stop instruction itself is reached, not passed)."""
    seen: set[int] = set()
    q = deque([src + 1])
    while q:
        i = q.popleft()
        if i in seen or i >= len(body):
            continue
        seen.add(i)
        ins = body[i]
        if stop(ins):
            continue
        if isa.is_branch(ins):
            q.append(ins.info["target"])
            if ins.guard is not None:
                q.append(i + 1)
        elif not isa.is_terminator(ins) or ins.guard is not None:
            q.append(i + 1)
    return seen


def _in_flight(at: dict, w: dict, open_group: bool, committed: str = WGC, done: str = WDONE) -> z3.BoolRef:
    """A point with counters ``at`` lies after an async operation issued with counters ``w`` and before
    the wait that retires its group (``open_group``: the point can follow the issue with no commit
    between); groups counted in ``committed``, retired in ``done`` (wgmma by default)."""
    after = z3.UGT(at[committed], w[committed])
    if open_group:
        after = z3.Or(after, at[committed] == w[committed])
    return z3.And(after, z3.ULE(at[done], w[committed]))


def wgmma_discipline(v: Verifier, r: PropResult) -> None:
    ex = v.ex
    for line, text in ex.unsupported:
        if "wgmma" in text:
            r.unknown(line, f"instruction not modelled by the verifier: {text}")
    if not ex.wgmmas:
        r.detail = "no wgmma"
        return
    body = v.ctx.k.body
    no_commit: dict[int, set[int]] = {}

    def open_after(w: WgmmaRec, idx: int) -> bool:
        if w.index not in no_commit:
            no_commit[w.index] = reach(body, w.index, lambda i: isa.wgmma_role(i) == "commit")
        return idx in no_commit[w.index]

    writes = _writes(v)
    for check in (_shared_in_flight, _registers_in_flight, _wgmma_fence):
        check(v, r, open_after, writes)
        if r.status == "violated":
            return


def _registers_in_flight(v: Verifier, r: PropResult, open_after, writes: list) -> None:
    it = v.other_iteration
    for w in v.ex.wgmmas:
        cands = []
        for x in v.ex.reg_touches:
            regs = ((x.reads | x.writes) & w.acc) | (x.writes & w.a_regs)
            if not regs:
                continue
            reg = sorted(regs)[0]
            cands.append((x, reg, z3.And(w.pc, x.pc, _in_flight(x.sync, w.sync, open_after(w, x.index)))))
            if v.ex.iter_created:
                wi = {k: it(e) for k, e in w.sync.items()}
                cands.append((x, reg, z3.And(it(w.pc), x.pc, _in_flight(x.sync, wi, False))))
        hit = v.first_violation(r, w.line, cands) if cands else None
        if hit:
            m, (x, reg, _) = hit
            wit = v.witness(m, register=reg, access=x.text, wgmma_line=w.line, group=w.sync[WGC],
                            groups_retired=x.sync[WDONE])
            r.violated(x.line, wit, f"'{x.text}' (line {x.line}) touches {reg} of the wgmma at line {w.line} "
                                    f"(group {wit['group']}) before a wgmma.wait_group retires it")
            return


def _writes(v: Verifier) -> list[tuple[Access, Access]]:
    """Generic-proxy shared writes, each with its copy in the other thread T2 (renamed once)."""
    out = []
    for a in v.ex.accesses:
        if a.space == "shared" and a.kind in ("write", "atomic", "async"):
            a2 = Access(a.index, a.line, a.text, a.space, a.kind, v.t2(a.addr), v.t2(a.width), v.t2(a.pc), a.tags,
                        {k: v.t2(e) for k, e in a.sync.items()}, a.block)
            out.append((a, a2))
    return out


def _shared_in_flight(v: Verifier, r: PropResult, open_after, writes: list) -> None:
    for w in v.ex.wgmmas:
        same, cross = [], []
        for f in w.footprints:
            for x, x2 in writes:
                if f.tags and x.tags and not (f.tags & x.tags):
                    continue
                same.append((x, f, x.addr, z3.And(f.pc, x.pc, overlap(f.addr, f.width, x.addr, x.width),
                                                  _in_flight(x.sync, w.sync, open_after(w, x.index)))))
                s2 = x2.sync
                later = z3.And(barriers.before(v, w.sync, s2), z3.ULE(s2[WVIS], w.sync[WGC]))
                cross.append((x, f, x2.addr, z3.And(f.pc, x2.pc, overlap(f.addr, f.width, x2.addr, x2.width),
                                                    z3.Or(barriers.concurrent(v, w.sync, s2), later),
                                                    barriers.no_wrap(w.sync, s2))))
        for two, cands in ((False, same), (True, cross)):
            hyps = [v.distinct_threads(), *barriers.facts(v)] if two else []
            hit = v.first_violation(r, w.line, cands, *hyps) if cands else None
            if hit:
                m, (x, f, addr, _) = hit
                wit = v.witness(m, two=two, address=addr, access=x.text, wgmma_line=w.line,
                                footprint_start=f.addr, footprint_end=f.addr + f.width, group=w.sync[WGC])
                who = f"thread {wit['other_thread']}" if two else "the issuing thread"
                r.violated(x.line, wit, f"'{x.text}' (line {x.line}, {who}) writes shared address "
                                        f"{wit['address']} that the wgmma at line {w.line} (thread "
                                        f"{wit['thread']}) reads while it is in flight (group {wit['group']})")
                return


def _wgmma_fence(v: Verifier, r: PropResult, open_after, writes: list) -> None:
    body = v.ctx.k.body
    by_index = {w.index: w for w in v.ex.wgmmas}

    def fence(i: Instruction) -> bool:
        return isa.wgmma_role(i) == "fence"

    starts: list[tuple[RegTouch | None, int, frozenset]] = [(x, x.index, x.reads | x.writes) for x in v.ex.reg_touches]
    starts.append((None, -1, frozenset().union(*[w.acc | w.a_regs for w in v.ex.wgmmas])))
    for x, src, regs in starts:
        for i in sorted(reach(body, src, fence)):
            w = by_index.get(i)
            if w is None or not regs & (w.acc | w.a_regs):
                continue
            hit = v.first_violation(r, w.line, [(w.pc,)], *([x.pc] if x else []))
            if hit:
                m, _ = hit
                reg = sorted(regs & (w.acc | w.a_regs))[0]
                what = f"'{x.text}' (line {x.line})" if x else "the kernel entry"
                wit = v.witness(m, register=reg, access=x.text if x else "entry", wgmma_line=w.line)
                r.violated(x.line if x else w.line, wit, f"no wgmma.fence between {what}, which accesses {reg}, "
                                                         f"and the wgmma at line {w.line} that uses it")
                return


# source: PTX ISA (9.x), "cp.async": "cp.async is treated as a weak memory operation performed in the generic proxy
# in the Memory Consistency Model"; "wgmma.fence": "An async proxy fence must be used to establish an ordering
# between prior writes to shared memory matrices and subsequent reads of the same matrices in a wgmma.mma_async
# instruction"; "Async Proxy" (wgmma, cp.async.bulk): "Accessing the same memory location across multiple proxies
# needs a cross-proxy fence. For the async proxy, fence.proxy.async should be used to synchronize memory between
# generic proxy and the async proxy."
CP_ASYNC_PROXY = ("cp.async writes through the generic proxy (PTX ISA, cp.async: \"treated as a weak memory operation "
                  "performed in the generic proxy\"), so the ISA asks for the fence here too; Triton <= 3.6 and "
                  "CUTLASS's sm90 cp.async + GMMA mainloops omit it and Hopper has run such kernels correctly, "
                  "Triton 3.7 inserts it (docs/verify.md, async_proxy)")


def async_proxy_discipline(v: Verifier, r: PropResult) -> None:
    """Every generic-proxy write (st/atom.shared, cp.async) of shared bytes that the async proxy later reads (a
    wgmma's descriptor footprint, a bulk store's source) in a later barrier interval is ordered by a
    fence.proxy.async between them (the writer's after its store or its cp.async wait, or the reader's after
    the barrier)."""
    ex = v.ex
    for line, text in ex.unsupported:
        if "wgmma" in text or "bulk" in text:
            r.unknown(line, f"instruction not modelled by the verifier: {text}")
    if not ex.wgmmas and not ex.bulk_stores:
        r.detail = "no async-proxy read of shared memory (wgmma, bulk store)"
        return
    if ex.bulk_stores:
        named = barriers.analyse(v)
        if named.unknown:
            r.unknown(named.unknown[0][0], f"named barriers not modelled: {named.unknown[0][1]}")
            return
    writes = _writes(v)
    for w in ex.wgmmas:
        if _unfenced(v, r, writes, w.footprints, w.sync, w.line, f"the wgmma at line {w.line}", "wgmma_line"):
            return
    for s in ex.bulk_stores:
        if _unfenced(v, r, writes, [s], s.sync, s.line, f"the bulk store at line {s.line}", "store_line"):
            return
    if r.status == "proved":
        kinds = sorted({"cp.async" if x.kind == "async" else "st/atom.shared" for x, _ in writes})
        r.detail = (f"{len(ex.wgmmas)} wgmma and {len(ex.bulk_stores)} bulk store reader(s); generic writes "
                    f"checked: {', '.join(kinds) or 'none'}")


def _unfenced(v: Verifier, r: PropResult, writes: list, reads: list[Access], sync: dict, line: int,
              reader: str, key: str) -> bool:
    """A generic-proxy write (any thread, an earlier barrier interval) of bytes that an async-proxy reader
    (counters ``sync``) reads through ``reads``, with no fence.proxy.async between: reported, True."""
    in_range = z3.And([z3.ULT(t, n) for t, n in zip(v.tid2, v.ctx.ntid)])
    cands = []
    for f in reads:
        for x, x2 in writes:
            if f.tags and x.tags and not (f.tags & x.tags):
                continue
            s2 = x2.sync
            fenced = z3.UGT(sync[PFG], s2[GC]) if x.kind == "async" else z3.UGT(sync[PF], s2[PF])
            cands.append((x, x2.addr, z3.And(f.pc, x2.pc, overlap(f.addr, f.width, x2.addr, x2.width),
                                             barriers.before(v, s2, sync), z3.Not(fenced),
                                             barriers.no_wrap(s2, sync))))
    hit = v.first_violation(r, line, cands, in_range, *barriers.facts(v)) if cands else None
    if not hit:
        return False
    m, (x, addr, _) = hit
    cp = x.kind == "async"
    wit = v.witness(m, two=True, address=addr, access=x.text, writer="cp.async" if cp else "st/atom.shared",
                    **{key: line})
    done = " once its cp.async group completes" if cp else ""
    r.violated(x.line, wit, f"no fence.proxy.async between the generic write '{x.text}' (line {x.line}, "
                            f"thread {wit['other_thread']}){done} and {reader} (thread {wit['thread']}) "
                            f"that reads shared address {wit['address']} through the async proxy"
                            + (f"; {CP_ASYNC_PROXY}" if cp else ""))
    return True


def bulk_store_discipline(v: Verifier, r: PropResult) -> None:
    """A cp.async.bulk store reads its shared source until a cp.async.bulk.wait_group(.read) of the issuing
    thread covers its group: no write of those bytes by that thread before (also from a later loop
    iteration). (Another thread's write in the same barrier interval is a shared_race; one in a later
    interval is not checked against the issuing thread's wait; the proxy fence before the store is
    async_proxy's.)"""
    stores = v.ex.bulk_stores
    if not stores:
        return
    body = v.ctx.k.body
    writes = _writes(v)
    it = v.other_iteration
    for s in stores:
        open_after = reach(body, s.index, lambda i: isa.bulk_role(i) == "commit")
        si = {k: it(e) for k, e in s.sync.items()}
        cands = []
        for x, _ in writes:
            if s.tags and x.tags and not (s.tags & x.tags):
                continue
            cands.append((x, z3.And(s.pc, x.pc, overlap(s.addr, s.width, x.addr, x.width),
                                    _in_flight(x.sync, s.sync, x.index in open_after, BGC, BDONE))))
            if v.ex.iter_created:
                cands.append((x, z3.And(it(s.pc), x.pc, overlap(it(s.addr), it(s.width), x.addr, x.width),
                                        _in_flight(x.sync, si, False, BGC, BDONE))))
        hit = v.first_violation(r, s.line, cands) if cands else None
        if hit:
            m, (x, _) = hit
            wit = v.witness(m, address=x.addr, access=x.text, store_line=s.line, group=s.sync[BGC],
                            groups_read=x.sync[BDONE])
            r.violated(x.line, wit, f"'{x.text}' (line {x.line}) writes shared address {wit['address']} that the "
                                    f"bulk store at line {s.line} (group {wit['group']}) may still be reading: "
                                    "no cp.async.bulk.wait_group(.read) covering that group in between")
            return


def mbarrier_discipline(v: Verifier, r: PropResult) -> None:
    """expect_tx bytes equal what the copies signalling that barrier bring (per phase, per producer
    thread); a reader of bulk-copied bytes last waited on the copy's barrier; a producer refilling
    bytes it filled before last waited on a release (another) barrier."""
    ex = v.ex
    for line, text in ex.unsupported:
        if "mbarrier" in text or "bulk" in text:
            r.unknown(line, f"instruction not modelled by the verifier: {text}")
    if any("multicast" in text for _, text in ex.unsupported):
        return  # the barriers also count the cluster's other CTAs' bytes: no balance to check on one CTA's copies
    if not ex.mbar_events or all(e.kind == "exit" for e in ex.mbar_events):
        r.detail = "no mbarrier transactions"
        return
    if (ex.remote or any(e.cta is not None for e in ex.mbar_events)) and not cluster_symmetry(v, r):
        return
    checks = [_tx_balance, _consumer_waits, _producer_waits, _waits_complete]
    if ex.untracked_copies:  # a copy whose bytes are unknown (an unknown tensor map): no balance to check (its
        checks.remove(_tx_balance)  # unknown reason is above); the other rules do not count bytes
    for check in checks:
        check(v, r)
        if r.status == "violated":
            return


def cluster_symmetry(v: Verifier, r: PropResult) -> bool:
    """Copies and arrivals on another CTA's mbarrier or shared memory (a mapa address: cp.async.bulk
    .shared::cluster.shared::cta, mbarrier.arrive.shared::cluster) are checked as if they landed in the issuing
    CTA (their offset, the rank byte apart: cluster_split), which is what the cluster's CTAs do among them
    when (1) each such event names a CTA of the cluster (rank < the cluster size; else violated), and for any
    two CTAs of one cluster, the same thread (same %tid, parameters and loop iteration; %ctaid, loaded data and
    every other symbol its own): (2) executes the event in both or in neither, with the same offset and bytes,
    and (3) names different CTAs (the rank map is a permutation: every CTA receives exactly one CTA's copy).
    Then the thread that expects bytes on (or waits on) barrier X of its CTA receives what the same thread of
    the sending CTA sends, which is what it sends itself: the per-thread rules of the mbarrier property hold
    for the cluster. Otherwise the property is unknown, with the reason (False)."""
    ctx = v.ctx
    if ctx.cluster is None:
        line, text, *_ = v.ex.remote[0]
        r.unknown(line, f"'{text}' names another CTA's shared memory, but the cluster shape is unknown (give "
                        ".reqnctapercluster or the header's \"cluster\")")
        return False
    shape = [z3.BitVecVal(c, 32) for c in ctx.cluster]
    n = ctx.cluster[0] * ctx.cluster[1] * ctx.cluster[2]
    rank = _rank(ctx.ctaid, shape)
    shared = {str(t) for t in ctx.tid} | {str(p) for p in ctx.param_syms.values()} | \
        {str(x) for x in (*ctx.ntid, *ctx.nctaid) if not z3.is_bv_value(x)}
    zero = z3.BitVecVal(0, 32)
    for e in v.ex.mbar_events:  # a copy completes on an mbarrier of the CTA it writes to (PTX ISA, cp.async.bulk)
        if e.kind != "copy" or e.dst is None or (e.cta is None and e.dst.cta is None):
            continue
        dcta = e.dst.cta if e.dst.cta is not None else zero
        bcta = e.cta if e.cta is not None else zero
        r.checks += 1
        res, m = v.check(e.pc, z3.If(dcta == 0, rank, dcta - 1) != z3.If(bcta == 0, rank, bcta - 1))
        if res == z3.sat and m is not None:
            wit = v.witness(m, destination_rank=z3.If(dcta == 0, rank, dcta - 1),
                            barrier_rank=z3.If(bcta == 0, rank, bcta - 1), access=e.text)
            r.violated(e.line, wit, f"the bulk copy '{e.text}' writes the shared memory of CTA rank "
                                    f"{wit['destination_rank']} but completes on an mbarrier of CTA rank "
                                    f"{wit['barrier_rank']}: the receiver's wait does not cover its bytes")
            return False
    for line, text, pc, hi, deps in v.ex.remote:
        target = z3.If(hi == 0, rank, hi - 1)  # rank byte 0: the issuing CTA itself
        r.checks += 1
        res, m = v.check(pc, z3.Not(z3.ULT(target, n)))
        if res == z3.sat and m is not None:
            wit = v.witness(m, rank=target, cluster_size=n, access=text)
            r.violated(line, wit, f"'{text}' names CTA rank {wit['rank']} of a cluster of {n} CTAs")
            return False
        # the other CTA: every symbol but the thread's (tid, parameters, loop iterations) renamed
        names = {x for e in (pc, target, *deps) for x in get_vars(e)}
        sub = [(x, z3.Const(f"{x}'", x.sort())) for x in sorted(names, key=str)
               if str(x) not in shared and not str(x).startswith("k@")]
        sub += [(c, z3.BitVec(f"{c}'", 32)) for c in ctx.ctaid if all(not c.eq(a) for a, _ in sub)]
        two = [z3.substitute(e, *sub) if sub else e for e in (pc, target, *deps)]
        # a division's quotient and remainder are defined by their tie (a path condition): the other CTA's too
        ties = [z3.substitute(tie, *sub) for a, q, rr, tie in v.ex.divisions.values()
                if any(q.eq(x) or rr.eq(x) for x in names)]
        c2 = [b for a, b in sub if any(a.eq(c) for c in ctx.ctaid)]
        same_cluster = z3.And([z3.UDiv(a, c) == z3.UDiv(b, c) for a, b, c in zip(ctx.ctaid, c2, shape)]
                              + [z3.ULT(b, mm) for b, mm in zip(c2, ctx.nctaid)]
                              + [z3.Or([a != b for a, b in zip(ctx.ctaid, c2)])])
        queries = [("executes it in one CTA and not in another", [pc, z3.Not(two[0])]),
                   ("gives it another offset or byte count in another CTA",
                    [pc, two[0], z3.Or([a != b for a, b in zip(deps, two[2:])] or [z3.BoolVal(False)])]),
                   ("sends it to the same CTA from two CTAs", [pc, two[0], target == two[1]])]
        for why, hyps in queries:
            r.checks += 1
            res, _ = v.check(same_cluster, *ties, *hyps)
            if res != z3.unsat:
                why = why if res == z3.sat else f"the solver gave up on whether the thread {why}"
                r.unknown(line, f"'{text}' names another CTA's shared memory and the same thread {why}: which "
                                "copies and arrivals reach a CTA's mbarrier is not modelled there")
                return False
    return True


def _rank(ctaid: list, shape: list) -> z3.BitVecRef:
    x, y, zz = (z3.URem(ctaid[i], shape[i]) for i in range(3))
    return x + shape[0] * (y + shape[1] * zz)


def _tx_balance(v: Verifier, r: PropResult) -> None:
    for e in v.ex.mbar_events:
        s = e.sync
        if e.kind in ("expect", "exit"):
            bad = z3.And(e.pc, s[TXL] != 0, s[TXB] != 0)
        elif e.kind == "copy" and e.bar is not None:
            bad = z3.And(e.pc, z3.Or(s[TXL] == 0, e.bar != s[TXA]))
        else:
            continue
        hit = v.first_violation(r, e.line, [(bad,)])
        if hit:
            m, _ = hit
            if e.kind == "copy":
                wit = v.witness(m, barrier=e.bar, announced_barrier=s[TXA], expect_line=s[TXL], access=e.text)
                r.violated(e.line, wit, f"the bulk copy '{e.text}' signals mbarrier {wit['barrier']}, but this "
                                        "thread's last arrive.expect_tx (line "
                                        f"{wit['expect_line']}) announced mbarrier {wit['announced_barrier']}")
            else:
                left = m.eval(s[TXB], model_completion=True).as_long()
                signed = left - (1 << 32) if left >> 31 else left
                wit = v.witness(m, expect_line=s[TXL], bytes_missing=signed, access=e.text)
                what = "the thread exits" if e.kind == "exit" else f"the next expect_tx '{e.text}'"
                which = f"line {wit['expect_line']}" if wit["expect_line"] else "an earlier loop iteration"
                r.violated(e.line, wit, f"the bytes announced by the expect_tx of {which} and those the bulk copies "
                                        f"signalling its barrier brought before {what} differ (announced - brought "
                                        f"= {signed} on this path)")
            return


def _bar(a: int) -> str:
    return "no mbarrier (none yet)" if a == NO_BARRIER else f"mbarrier {a}"


def _copies(v: Verifier) -> list:
    return [e for e in v.ex.mbar_events if e.kind == "copy" and e.dst is not None and e.bar is not None]


def _consumer_waits(v: Verifier, r: PropResult) -> None:
    in_range = z3.And([z3.ULT(t, n) for t, n in zip(v.tid2, v.ctx.ntid)])
    copies = _copies(v)
    for rd in v.ex.accesses:
        if rd.space != "shared" or rd.kind != "read":
            continue
        cands = []
        for c in copies:
            d = c.dst
            assert d is not None and c.bar is not None
            if d.tags and rd.tags and not (d.tags & rd.tags):
                continue
            waited = rd.sync[MWA] == v.t2(c.bar)
            early = z3.And(waited, rd.sync[MWE] == 1)
            cands.append((c, z3.And(rd.pc, v.t2(c.pc), overlap(rd.addr, rd.width, v.t2(d.addr), v.t2(d.width)),
                                    z3.Or(z3.Not(waited), early))))
        hit = v.first_violation(r, rd.line, cands, in_range) if cands else None
        if hit:
            m, (c, _) = hit
            wit = v.witness(m, two=True, address=rd.addr, access=rd.text, copy_line=c.line, barrier=v.t2(c.bar),
                            waited_barrier=rd.sync[MWA], waited_parity=rd.sync[MWP])
            said = (f"'{rd.text}' (thread {wit['thread']}) reads shared address {wit['address']} that the bulk copy "
                    f"at line {c.line} (thread {wit['other_thread']}) writes, ")
            if wit["waited_barrier"] == wit["barrier"]:
                r.violated(rd.line, wit, said + f"after a wait on its mbarrier {wit['barrier']} with parity 1 before "
                                                "any other wait on it: that waits for the phase before phase 0, "
                                                "which returns at once, not for the copy (wrong parity)")
            else:
                r.violated(rd.line, wit, said + f"without having waited on that copy's mbarrier {wit['barrier']} "
                                                f"(its last successful wait was on {_bar(wit['waited_barrier'])})")
            return


def _producer_waits(v: Verifier, r: PropResult) -> None:
    it = v.other_iteration
    copies = _copies(v)
    for c in copies:
        d = c.dst
        assert d is not None and c.bar is not None
        cands = []
        for c1 in copies:
            d1 = c1.dst
            assert d1 is not None
            for ren in ((lambda e: e), it) if v.ex.iter_created else ((lambda e: e),):
                s1 = {k: ren(e) for k, e in c1.sync.items()}
                released = z3.And(c.sync[MWA] != NO_BARRIER, c.sync[MWA] != c.bar)
                cands.append((c1, z3.And(c.pc, ren(c1.pc), overlap(d.addr, d.width, ren(d1.addr), ren(d1.width)),
                                         z3.UGT(c.sync[TXN], s1[TXN]), z3.Not(released))))
        hit = v.first_violation(r, c.line, cands)
        if hit:
            m, (c1, _) = hit
            wit = v.witness(m, address=d.addr, access=c.text, earlier_copy_line=c1.line, barrier=c.bar)
            r.violated(c.line, wit, f"the bulk copy '{c.text}' overwrites shared address {wit['address']}, filled "
                                    f"earlier by the copy at line {c1.line}, without a wait on a release (empty) "
                                    "mbarrier in between: consumers may still read it")
            return


def _waits_complete(v: Verifier, r: PropResult) -> None:
    """Liveness: a wait for an even phase parity (phase 0, 2, ...) of an mbarrier completes only once
    threads arrive on it. A barrier no thread ever arrives on stays in phase 0, so such a wait blocks for
    ever (a deadlock: e.g. consumers that never release the empty barrier their producer waits on; a wait
    for parity 1 returns at once there). Arrivals are counted as possible, not numbered: too few of them
    is not reported. The barriers arrived on are enumerated once (each arrival's possible addresses, over
    every launch: more than the arrivals of any one launch, so a reported wait truly has none)."""
    arrivals = [e for e in v.ex.mbar_events if e.kind == "arrive" and e.bar is not None]
    waits = [w for w in v.ex.mbar_events if w.kind == "wait" and w.bar is not None and w.parity is not None]
    if not waits:
        return
    targets = _arrival_addresses(v, arrivals)
    in_range = z3.And([z3.ULT(t, n) for t, n in zip(v.tid2, v.ctx.ntid)])
    for w in waits:
        assert w.parity is not None  # kept by the filter above
        need = z3.And(w.pc, (w.parity & 1) == 0)
        if targets is not None:
            arrive = z3.Or([w.bar == a for a in sorted(targets)]) if targets else z3.BoolVal(False)
            hyps = [need]
        else:  # too many addresses to list: one query over a second thread's arrivals
            arrive = z3.Or([z3.And(v.t2(a.pc), v.t2(a.bar) == w.bar) for a in arrivals])
            hyps = [in_range, need]
        r.checks += 1
        res, _ = v.check(*hyps, arrive)
        if res != z3.unsat:
            if res == z3.unknown:
                r.unknown(w.line, "solver gave up (timeout)")
            continue
        hit = v.first_violation(r, w.line, [(need,)])
        if hit:
            m, _ = hit
            if v.ex.mbar_other:
                line, text = v.ex.mbar_other[0]
                r.unknown(w.line, f"the wait at line {w.line} may never complete: no modelled arrival on its mbarrier, "
                                  f"but '{text}' (line {line}) is not modelled")
                continue
            wit = v.witness(m, barrier=w.bar, waited_parity=w.parity & 1, access=w.text, arrivals=0)
            r.violated(w.line, wit, f"deadlock: '{w.text}' (thread {wit['thread']}) waits for the completion of "
                                    f"an even phase of mbarrier {wit['barrier']}, on which no thread ever arrives "
                                    "(mbarrier.arrive / arrive.expect_tx): it stays in phase 0 and the wait never "
                                    "returns (a consumer that never releases its stage?)")
            return


def _arrival_addresses(v: Verifier, arrivals: list, cap: int = 64) -> set[int] | None:
    """Every shared address some arrival can name (in any launch), or None past ``cap`` addresses or when
    the solver gives up."""
    out: set[int] = set()
    s = v.solver  # a plain query: any model will do (no first-iteration restriction as in v.check)
    for a in arrivals:
        assert a.bar is not None
        s.push()
        s.set("timeout", v.query_timeout_ms)
        s.add(a.pc)
        try:
            while True:
                res = s.check(*[a.bar != x for x in sorted(out)])
                if res == z3.unsat:
                    break
                if res != z3.sat or len(out) >= cap:
                    return None
                out.add(s.model().eval(a.bar, model_completion=True).as_long())
        finally:
            s.pop()
    return out
