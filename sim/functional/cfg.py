"""Control-flow graph of a kernel body and immediate post-dominators (SIMT reconvergence points)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sim import isa
from sim.ptx.ir import Kernel

EXIT = -1  # the block index of "leaves the kernel"


@dataclass
class Block:
    """A basic block: its instruction range, successors and predecessors."""

    index: int
    start: int
    end: int  # exclusive
    succ: list[tuple[int, str | None, bool]] = field(default_factory=list)  # (block, guard, negated)
    pred: list[int] = field(default_factory=list)


@dataclass
class Cfg:
    """A kernel's control-flow graph: its basic blocks."""

    blocks: list[Block]
    block_of: dict[int, int]  # instruction index -> block index

    def exit_succ(self) -> list[list[int]]:
        """Successor lists with the exit as block len(blocks) (what immediate_postdominators takes);
        a block that only leaves the kernel has the exit as its one successor."""
        nb = len(self.blocks)
        return [[(s if s != EXIT else nb) for s, _, _ in b.succ] or [nb] for b in self.blocks]


def build_cfg(k: Kernel) -> Cfg:
    """Basic blocks of a kernel body (leaders: the first instruction, branch targets, labels and the
    instruction after a branch or a terminator) and their guarded successor edges. An unguarded
    ret/exit/trap has no successor; a guarded one may leave (EXIT) or fall through."""
    body = k.body
    n = len(body)
    leaders = {0} if n else set()
    for i, ins in enumerate(body):
        if isa.is_branch(ins):
            leaders.add(ins.info["target"])
            if i + 1 < n:
                leaders.add(i + 1)
        elif isa.is_terminator(ins) and i + 1 < n:
            leaders.add(i + 1)
    leaders.update(k.labels.values())
    starts = sorted(x for x in leaders if x < n)
    blocks: list[Block] = []
    block_of: dict[int, int] = {}
    for bi, s in enumerate(starts):
        e = starts[bi + 1] if bi + 1 < len(starts) else n
        blocks.append(Block(bi, s, e))
        for j in range(s, e):
            block_of[j] = bi
    for b in blocks:
        last = body[b.end - 1]
        fall = block_of.get(b.end, EXIT)
        if isa.is_branch(last):
            tgt = block_of.get(last.info["target"], EXIT)
            if last.guard is None:
                b.succ.append((tgt, None, False))
            else:
                b.succ.append((tgt, last.guard, last.guard_neg))
                b.succ.append((fall, last.guard, not last.guard_neg))
        elif isa.is_terminator(last):
            if last.guard is not None:
                b.succ.append((EXIT, last.guard, last.guard_neg))
                b.succ.append((fall, last.guard, not last.guard_neg))
        elif fall != EXIT:
            b.succ.append((fall, None, False))
    for b in blocks:
        for t, _, _ in b.succ:
            if t != EXIT and b.index not in blocks[t].pred:
                blocks[t].pred.append(b.index)
    return Cfg(blocks, block_of)


def reconvergence_points(k: Kernel) -> dict[int, int]:
    """For each branch instruction index: the index where its divergent paths meet again
    (first instruction of the immediate post-dominator block), or -1 when they only meet at exit."""
    cfg = build_cfg(k)
    nb = len(cfg.blocks)
    ipdom = immediate_postdominators(cfg.exit_succ())
    result: dict[int, int] = {}
    for i, ins in enumerate(k.body):
        if isa.is_branch(ins):
            ip = ipdom[cfg.block_of[i]]
            result[i] = cfg.blocks[ip].start if ip != nb else -1
    return result


def immediate_postdominators(succ: Sequence[Iterable[int]]) -> list[int]:
    """Immediate post-dominator of every block of a CFG given as successor lists; index len(succ) is
    the exit (a successor of every block that leaves the kernel, and the answer where paths only meet
    at exit)."""
    nb = len(succ)
    EXIT = nb
    # post-dominator sets as bitmasks, iterated to a fixed point
    full = (1 << (nb + 1)) - 1
    pdom = [full] * nb + [1 << EXIT]
    changed = True
    while changed:
        changed = False
        for b in reversed(range(nb)):
            acc = full
            for s in succ[b]:
                acc &= pdom[s]
            new = acc | (1 << b)
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    result: list[int] = []
    for b in range(nb):
        strict = pdom[b] & ~(1 << b)
        # the immediate post-dominator: the strict post-dominator that all others post-dominate
        ipdom = EXIT
        cands = [c for c in range(nb + 1) if strict >> c & 1]
        for c in cands:
            if all((pdom[c] >> o) & 1 for o in cands):
                ipdom = c
                break
        result.append(ipdom)
    return result
