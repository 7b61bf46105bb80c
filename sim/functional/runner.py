"""Functional execution of a launch: decode once, then run CTAs warp by warp between barriers."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim.cluster import cluster_order, cluster_shape, is_explicit
from sim.cluster import link as link_cluster
from sim.errors import ExecutionError, PtxError, UsageError, WorkbenchWarning, at_instruction
from sim.functional.cfg import reconvergence_points
from sim.functional.memory import FlatMemory, GlobalMemory
from sim.functional.operands import DecodeCtx, Layout, make_layout
from sim.functional.ops_alu import SEMANTICS_ALU
from sim.functional.ops_async import SEMANTICS_ASYNC, YIELD
from sim.functional.ops_mem import BARRIER, CLUSTER_BAR_ID, SEMANTICS_MEM
from sim.functional.ops_mma import SEMANTICS_MMA
from sim.functional.ops_wgmma import SEMANTICS_WGMMA
from sim.functional.ops_wmma import SEMANTICS_WMMA
from sim.functional.record import Executed
from sim.functional.warp import CTA, Launched, Warp
from sim.isa import ISA, is_branch
from sim.launch import Arg, Launch, tensormap_target
from sim.ptx.ir import Kernel, Operand, Program
from sim.tensormap import HANDLE_SIZE, TensorMap, encode_handle

if TYPE_CHECKING:
    from sim.progress import Progress

SEMANTICS = {**SEMANTICS_ALU, **SEMANTICS_MEM, **SEMANTICS_MMA, **SEMANTICS_WMMA, **SEMANTICS_WGMMA, **SEMANTICS_ASYNC}
_missing = set(ISA) ^ set(SEMANTICS)
if _missing:  # the ISA table and the semantics must name the same opcodes
    raise RuntimeError(f"ISA table and semantics disagree on: {sorted(_missing)}")

# About 15 s of the timing model and 5 s functional-only on the reference machine (benchmarks/sim_speed.md:
# 23,000 and 74,000 warp instructions/s); kernels that need more take --max-instructions N.
DEFAULT_MAX_INSTRUCTIONS = 20_000_000  # library callers (tests, benchmarks)
CLI_MAX_INSTRUCTIONS = 350_000  # python -m sim run: ends in seconds, not minutes


def check_budget_covers(launch: Launch, limit: int, file: str) -> None:
    """Every warp runs at least one instruction: a launch of more warps than the budget cannot finish
    within it, and is refused before its blocks are listed."""
    gx, gy, gz = launch.grid
    ctas = gx * gy * gz
    warps = ctas * -(-(launch.block[0] * launch.block[1] * launch.block[2]) // 32)
    if warps > limit:
        raise UsageError(f"the launch has {warps:,} warps in {ctas:,} blocks, each runs at least one instruction: "
                         f"more than the budget of {limit:,} warp instructions; give a smaller --grid or raise "
                         "--max-instructions", file)


#: Warp instructions sampled after the budget is passed, to find the loop the launch spends them in.
HOT_SAMPLE = 512


def budget_error(k: Kernel, pcs: Sequence[int], limit: int) -> ExecutionError:
    """The one message of both modes when a launch passes its warp-instruction budget. ``pcs`` are the
    instructions executed just after the budget ran out (a sample of what the launch is doing); the
    message names the loop holding most of them (for each sampled pc, the innermost loop: the shortest
    backward branch spanning it) and the share of the sample it took."""
    body = k.body
    branches = [(ins.index - ins.info["target"], ins.info["target"], ins.index) for ins in body
                if is_branch(ins) and ins.info["target"] <= ins.index]
    heads: Counter[int] = Counter()
    for pc in pcs:
        spans = [b for b in branches if b[1] <= pc <= b[2]]
        if spans:
            heads[min(spans)[1]] += 1
    where = f"more than {limit:,} warp instructions"
    if not heads:
        last = pcs[-1] if pcs else 0
        return ExecutionError(f"{where} (no loop around the last instruction: the launch is just large); "
                              "raise the limit with --max-instructions N", k.file, body[min(last, len(body) - 1)].line)
    head, hits = heads.most_common(1)[0]
    share = f"{100 * hits / len(pcs):.0f}% of the last {len(pcs)} warp instructions ran in the loop starting at"
    return ExecutionError(f"{where}: {share} '{body[head].text}' (an endless loop?); "
                          "fix its exit condition or raise the limit with --max-instructions N", k.file,
                          body[head].line)


def decode(k: Kernel, prog: Program) -> Layout:
    """Attach a functional closure to every instruction (once per kernel)."""
    if k.directives.get("_decoded"):
        return k.directives["_layout"]
    layout = make_layout(k, prog)
    cx = DecodeCtx(k, prog, layout)
    for ins in k.body:
        ins.exec = SEMANTICS[ins.opcode](ins, cx)
    k.directives["_decoded"] = True
    k.directives["_layout"] = layout
    k.directives["_rpcs"] = reconvergence_points(k)
    return layout


@dataclass
class Prepared:
    """A launch ready to run: memories allocated, arguments bound."""

    L: Launched
    layout: Layout
    buffers: dict[int, int]  # arg index -> global address
    regtypes: dict[str, str]
    shared_size: int
    ctas: list[tuple[int, int, int]] = field(default_factory=list)


def prepare(prog: Program, launch: Launch) -> Prepared:
    k = prog.kernel(launch.kernel)
    layout = decode(k, prog)
    passed = [i for i, a in enumerate(launch.args) if not a.hidden]
    if len(passed) != len(k.params):
        names = ", ".join(f"{p.name} (.{p.type})" for p in k.params)
        raise UsageError(f"kernel {k.name} takes {len(k.params)} arguments ({names}), "
                         f"{len(passed)} given: pass one --arg per parameter", prog.file)
    nthreads = launch.block[0] * launch.block[1] * launch.block[2]
    if nthreads <= 0 or nthreads > 1024 or min(launch.block) < 1 or min(launch.grid) < 1:
        raise UsageError(f"bad launch shape grid={launch.grid} block={launch.block}: "
                         "blocks need 1..1024 threads, every dimension >= 1", prog.file)
    check_block_directives(k, launch.block, prog.file)
    gmem = GlobalMemory()
    globals_: dict[str, int] = {}
    inits = module_inits(prog, k, launch)
    for v in prog.variables.values():
        if v.space == "global":
            globals_[v.name] = gmem.alloc(max(v.size, 1), v.name, inits.get(v.name))
    const = FlatMemory(max(layout.const_size, 16), "const")
    for v in prog.variables.values():
        data = inits.get(v.name)
        if v.space == "const" and data:
            off = layout.const[v.name]
            const.data[off: off + len(data)] = np.frombuffer(data, dtype=np.uint8)
    params = FlatMemory(max(layout.param_size, 16), "param")
    buffers: dict[int, int] = {}
    for i, p in zip(passed, k.params):
        raw = _param_bytes(p.type, p.size, launch.args[i], i, gmem, buffers, prog.file)
        params.data[p.offset: p.offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    for i, a in enumerate(launch.args):
        if a.hidden:
            buffers[i] = gmem.alloc(a.nbytes(), a.name or f"arg{i}", np.ascontiguousarray(a.array))
    shared_size = layout.dynamic_base + launch.dynamic_shared if launch.dynamic_shared else layout.shared_static
    rpcs = k.directives["_rpcs"]
    L = Launched(k, gmem, const, params, globals_, launch.grid, launch.block, rpcs, prog.file)
    L.tensormaps = bind_tensormaps(launch, k, passed, buffers, params, prog.file)
    L.cluster = cluster_shape(k, launch.cluster, launch.grid, launch.cluster_nonportable, prog.file)
    L.explicit_cluster = is_explicit(k, launch.cluster)
    ctas = cluster_order(launch.grid, L.cluster)  # cluster by cluster; the grid order without clusters
    return Prepared(L, layout, buffers, dict(k.regs), max(shared_size, 16), ctas)


def module_inits(prog: Program, k: Kernel, launch: Launch) -> dict[str, bytes]:
    """The first bytes of each module variable: its initialiser, or what ``--symbol`` gives. A
    ``.const`` variable that ``k`` reads but neither has is zero, as in CUDA, with a warning."""
    inits = {name: v.init for name, v in prog.variables.items() if v.init}
    for name, data in launch.symbols.items():
        v = prog.variables.get(name)
        if v is None or v.space not in ("global", "const"):
            have = ", ".join(n for n, x in prog.variables.items() if x.space in ("global", "const")) or "none"
            raise UsageError(f"--symbol {name}: not a module .global/.const variable (have: {have})", prog.file)
        inits[name] = data
    for v in prog.variables.values():
        if v.space == "const" and v.name not in inits:
            ins = next((x for x in k.body if v.name in _names(x.operands)), None)
            if ins is not None:
                warnings.warn(WorkbenchWarning(
                    f"__constant__ '{v.name}' is read but was never filled: it reads as zeros; "
                    f"fill it with --symbol {v.name}=@FILE.npy", prog.file, ins.line), stacklevel=2)
    return inits


def _names(ops: Sequence[Operand]) -> set[str]:
    out: set[str] = set()
    for op in ops:
        if op.kind == "sym":
            out.add(op.name)
        elif op.kind == "addr" and op.base is not None:
            out |= _names([op.base])
        elif op.kind in ("vec", "pair"):
            out |= _names(op.items)
    return out


def check_block_directives(k: Kernel, block: tuple[int, int, int], file: str) -> None:
    """A block must match the entry's ``.reqntid`` exactly and fit its ``.maxntid``."""
    req = k.directives.get("reqntid")
    if req:
        want = tuple(req) + (1,) * (3 - len(req))
        if tuple(block) != want:
            raise UsageError(f"kernel {k.name} declares .reqntid {', '.join(map(str, req))}: launch it with "
                             f"--block {','.join(map(str, want))}, not {','.join(map(str, block))}", file, k.line)
    most = k.directives.get("maxntid")
    if most:
        limit = 1
        for v in most:
            limit *= v
        if block[0] * block[1] * block[2] > limit:
            raise UsageError(f"kernel {k.name} declares .maxntid {', '.join(map(str, most))} ({limit} threads): "
                             f"block {','.join(map(str, block))} has more; launch at most {limit}", file, k.line)


def bind_tensormaps(launch: Launch, k: Kernel, passed: list[int], buffers: dict[int, int], params: FlatMemory,
                    file: str) -> list[TensorMap]:
    """Each tensor-map argument bound to its buffer's address; its parameter holds the map's handle."""
    maps: list[TensorMap] = []
    for i, p in zip(passed, k.params):
        spec = launch.args[i].tmap
        if spec is None:
            continue
        try:
            target = tensormap_target(launch.args, spec)
        except ValueError as e:
            raise UsageError(f"argument {i} ({p.name}): {e}", file) from None
        params.data[p.offset: p.offset + HANDLE_SIZE] = np.frombuffer(encode_handle(len(maps)), dtype=np.uint8)
        maps.append(TensorMap(spec, buffers[target]))
    return maps


def _param_bytes(ptype: str, size: int, a: Arg, i: int, gmem: GlobalMemory, buffers: dict[int, int],
                 file: str) -> bytes:
    from sim.functional.types import NP

    if a.tmap is not None:
        if size != HANDLE_SIZE:
            raise UsageError(f"argument {i}: a tensor map needs a '.param .align 64 .b8 NAME[128]' parameter, "
                             f"this one is .{ptype}[{size}]", file)
        return bytes(HANDLE_SIZE)  # the handle is written once every buffer has its address
    if a.kind == "buffer":
        if size != 8:
            raise UsageError(f"argument {i}: a buffer needs a 64-bit pointer parameter, this one is .{ptype}", file)
        arr = np.ascontiguousarray(a.array)
        base = gmem.alloc(arr.nbytes, a.name or f"arg{i}", arr)
        buffers[i] = base
        return np.uint64(base).tobytes()
    if ptype not in NP or NP[ptype].itemsize != size:
        raise UsageError(f"argument {i}: parameter type .{ptype}[{size}] is not a scalar", file)
    v = a.value
    dt = NP[ptype]
    if dt.kind == "f":
        return dt.type(v).tobytes()
    return np.array(int(v) & ((1 << (8 * size)) - 1), dtype=np.uint64).astype(dt).tobytes()  # type: ignore[arg-type]


def make_cta(P: Prepared, ctaid: tuple[int, int, int]) -> CTA:
    cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
    nwarps = (cta.nthreads + 31) // 32
    cta.warps = [Warp(P.L, cta, w, P.regtypes) for w in range(nwarps)]
    if P.L.cluster == (1, 1, 1):  # a cluster of one; larger ones are linked once all their CTAs exist
        link_cluster([cta])
    return cta


def make_cluster(P: Prepared, ctaids: Sequence[tuple[int, int, int]]) -> list[CTA]:
    """The CTAs of one cluster (ctaids in rank order, as P.ctas lists them), linked (sim/cluster.py)."""
    ctas = [make_cta(P, c) for c in ctaids]
    if len(ctas) > 1:
        link_cluster(ctas)
    return ctas


def barrier_ready(cta: CTA, waiting: list[Warp]) -> list[Warp]:
    """Warps released by the barriers now satisfied (bar.sync id[, count]); count in threads."""
    released: list[Warp] = []
    live = sum(1 for w in cta.warps if not w.done)
    by_id: dict[int, list[Warp]] = {}
    for w in waiting:
        by_id.setdefault(w.bar_id, []).append(w)
    for bid, ws in by_id.items():
        if bid == CLUSTER_BAR_ID:  # barrier.cluster.wait: each warp once the cluster has arrived
            released.extend(w for w in ws if cta.cluster is None or cta.cluster.ready(w))
            continue
        need = max((w.bar_count for w in ws), default=0)
        need_warps = (need + 31) // 32 if need else live
        if len(ws) >= need_warps:
            released.extend(ws)
    return released


def _sample_pcs(w: Warp) -> list[int]:
    """The pcs of up to HOT_SAMPLE more instructions of warp `w` (the launch is being abandoned)."""
    pcs = [w.pc]
    while not w.done and len(pcs) < HOT_SAMPLE:
        ctl = w.step().ctl
        if ctl in (BARRIER, YIELD) or w.done:
            break
        pcs.append(w.pc)
    return pcs


def run_cta_functional(P: Prepared, cta: CTA | list[CTA], budget: list[int],
                       observe: Callable[[Executed], None] | None = None) -> int:
    """Run one CTA, or the CTAs of one cluster together, to completion; returns warp instructions
    executed. observe: called with every instruction's record (sim.timing.sampling's footprints)."""
    count = 0
    group = cta if isinstance(cta, list) else [cta]
    warps = [w for c in group for w in c.warps]
    waiting: list[Warp] = []
    while True:
        progressed = False
        yielded: list[Warp] = []
        epoch = sum(c.mbar_epoch for c in group)
        for w in warps:
            if w.done or w in waiting:
                continue
            step = w.step if observe is None else _observed(w.step, observe)
            limit = budget[0]
            while not w.done:
                ctl = step().ctl
                count += 1
                if count > limit:
                    raise budget_error(P.L.kernel, _sample_pcs(w), budget[1])
                if ctl == BARRIER:
                    waiting.append(w)
                    break
                if ctl == YIELD:
                    yielded.append(w)
                    break
            progressed = progressed or not yielded or yielded[-1] is not w
        if waiting:
            rel = barrier_ready(group[0], waiting) if len(group) == 1 else \
                [w for c in group for w in barrier_ready(c, [x for x in waiting if x.cta is c])]
            if rel:
                waiting = [w for w in waiting if w not in rel]
                continue
        if (waiting or yielded) and not progressed and sum(c.mbar_epoch for c in group) == epoch:
            if yielded and yielded[0].waiting_on is not None:
                ins, where = yielded[0].waiting_on, yielded[0].cta.ctaid
                raise at_instruction(ExecutionError, f"deadlock: block {where} waits at '{ins.text}' for an "
                                     "mbarrier phase that no warp completes", P.L.file, ins)
            w = waiting[0]
            ins = P.L.body[w.pc - 1]
            raise at_instruction(ExecutionError, f"deadlock: block {w.cta.ctaid} waits at '{ins.text}' but the "
                                 "other warps exited or wait elsewhere", P.L.file, ins)
        if all(w.done for w in warps):
            return count


def _observed(step: Callable[[], Executed], observe: Callable[[Executed], None]) -> Callable[[], Executed]:
    def run() -> Executed:
        rec = step()
        observe(rec)
        return rec
    return run


@dataclass
class FunctionalResult:
    """What a functional-only run returns: the buffers after it, its counts and how it ran."""

    outputs: dict[int, np.ndarray]  # arg index -> final buffer contents (dtype of the input array)
    warp_instructions: int
    ctas: int
    # how it ran (sim/functional/lockstep.py): "lockstep" (batches of CTAs), "lockstep per CTA" or
    # "sequential" (warp by warp); `refused` says why the faster ways were not taken
    mode: str = "sequential"
    refused: list[str] = field(default_factory=list)


def cluster_size(P: Prepared) -> int:
    sx, sy, sz = P.L.cluster
    return sx * sy * sz


def read_outputs(P: Prepared, launch: Launch) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for i, base in P.buffers.items():
        a = launch.args[i]
        raw = P.L.gmem.read_back(base)
        out[i] = raw.view(a.array.dtype).reshape(a.array.shape).copy()  # type: ignore[union-attr]
    return out


def run_functional(prog: Program, launch: Launch, max_instructions: int = DEFAULT_MAX_INSTRUCTIONS,
                   progress: Progress | None = None, lockstep: bool = True) -> FunctionalResult:
    """Run a launch functionally. The results are those of the sequential order (CTA after CTA, warp
    after warp to each barrier); with `lockstep` the warps run in lock-step batches where that gives
    the same results, checked as they run (sim/functional/lockstep.py), else in that order."""
    check_budget_covers(launch, max_instructions, prog.file)
    refused: list[str] = []
    if lockstep:
        from sim.functional.lockstep import Refused, batch_ctas, run_lockstep

        for mode in ("lockstep", "lockstep per CTA"):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                if refused:
                    warnings.simplefilter("ignore")  # the first attempt gave prepare's warnings
                P = prepare(prog, launch)
                try:
                    total = run_lockstep(P, batch_ctas(P) if mode == "lockstep" else 1,
                                         [max_instructions, max_instructions], progress)
                except Refused as e:
                    refused.append(f"{mode}: {e}")
                    if e.per_cta and batch_ctas(P) > 1 and len(P.ctas) > 1:
                        continue  # a conflict between CTAs: one CTA at a time may pass
                    break
            return FunctionalResult(read_outputs(P, launch), total, len(P.ctas), mode, refused)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        if refused:
            warnings.simplefilter("ignore")
        P = prepare(prog, launch)
        budget = [max_instructions, max_instructions]
        total = 0
        n = cluster_size(P)
        for i in range(0, len(P.ctas), n):  # a cluster's CTAs run together
            group = make_cluster(P, P.ctas[i: i + n])
            total += run_cta_functional(P, group if n > 1 else group[0], budget)
            budget[0] = max_instructions - total
            if progress is not None:
                progress.update(i + n, total, None)
        return FunctionalResult(read_outputs(P, launch), total, len(P.ctas), "sequential", refused)


__all__ = ["run_functional", "prepare", "decode", "PtxError", "FunctionalResult"]
