"""Control-flow graph of a kernel body and immediate post-dominators (SIMT reconvergence points)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sim.ptx.ir import Kernel


def reconvergence_points(k: Kernel) -> dict[int, int]:
    """For each branch instruction index: the index where its divergent paths meet again
    (first instruction of the immediate post-dominator block), or -1 when they only meet at exit."""
    body = k.body
    n = len(body)
    if n == 0:
        return {}
    leaders = {0}
    for i, ins in enumerate(body):
        if ins.opcode == "bra":
            leaders.add(ins.info["target"])
            if i + 1 < n:
                leaders.add(i + 1)
        elif ins.opcode in ("ret", "exit", "trap") and i + 1 < n:
            leaders.add(i + 1)
    leaders.update(t for t in k.labels.values() if t < n)
    starts = sorted(leaders)
    block_of = {}
    for bi, s in enumerate(starts):
        e = starts[bi + 1] if bi + 1 < len(starts) else n
        for j in range(s, e):
            block_of[j] = bi
    nb = len(starts)
    EXIT = nb
    succ: list[set[int]] = [set() for _ in range(nb)]
    for bi in range(nb):
        e = (starts[bi + 1] if bi + 1 < nb else n) - 1
        last = body[e]
        fall = block_of.get(e + 1, EXIT)
        if last.opcode == "bra":
            tgt = last.info["target"]
            succ[bi].add(block_of.get(tgt, EXIT))
            if last.guard is not None:
                succ[bi].add(fall)
        elif last.opcode in ("ret", "exit", "trap"):
            succ[bi].add(EXIT)
            if last.guard is not None:
                succ[bi].add(fall)
        else:
            succ[bi].add(fall)
    ipdom = immediate_postdominators(succ)
    result: dict[int, int] = {}
    for i, ins in enumerate(body):
        if ins.opcode != "bra":
            continue
        ip = ipdom[block_of[i]]
        result[i] = starts[ip] if ip != EXIT else -1
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
