"""Register live ranges over a kernel's PTX (the register-allocation layer's "lifetime graph", seed 000
§2.2): backward liveness over the control-flow graph (sim.functional.cfg), counted in 32-bit registers
by declared type (64-bit = 2, 128-bit = 4, predicates apart). A guarded write does not end a range (the
old value lives on in the threads whose guard is false). The peak is where most values are live at once:
the pressure ptxas has to fit in registers before it can reuse any."""

from __future__ import annotations

from dataclasses import dataclass

from sim.functional.cfg import EXIT, build_cfg
from sim.ptx.ir import Kernel

WIDTH = {"b64": 2, "u64": 2, "s64": 2, "f64": 2, "b128": 4}


@dataclass(frozen=True)
class Liveness:
    peak: int  # 32-bit registers live at the busiest point
    peak_index: int  # the instruction before which they are live
    peak_line: int
    peak_loop: str | None  # label of the innermost loop holding the peak (None: straight-line code)
    predicates_peak: int
    live: list[int]  # 32-bit registers live before each instruction


def _width(k: Kernel, reg: str) -> int:
    ty = k.regs.get(reg, "b32")
    return 0 if ty == "pred" else WIDTH.get(ty, 1)


def _step_back(live: set[str], ins) -> None:
    """Live before ``ins`` from live after it (a guarded write keeps the old value alive)."""
    if not ins.guard:
        live.difference_update(ins.dst_regs)
    live.update(ins.src_regs)
    if ins.guard:
        live.add(ins.guard)


def liveness(k: Kernel) -> Liveness:
    cfg = build_cfg(k)
    body = k.body
    live_in: list[set[str]] = [set() for _ in cfg.blocks]

    def live_out(b) -> set[str]:
        return set().union(*(live_in[s] for s, _, _ in b.succ if s != EXIT)) if b.succ else set()

    changed = True
    while changed:
        changed = False
        for b in reversed(cfg.blocks):
            live = live_out(b)
            for i in range(b.end - 1, b.start - 1, -1):
                _step_back(live, body[i])
            if live != live_in[b.index]:
                live_in[b.index] = live
                changed = True
    per: list[int] = [0] * len(body)
    preds: list[int] = [0] * len(body)
    for b in cfg.blocks:
        live = live_out(b)
        # the live set's widths kept as it changes (_step_back one register at a time), not summed anew
        width = sum(_width(k, r) for r in live)
        npred = sum(1 for r in live if k.regs.get(r) == "pred")
        for i in range(b.end - 1, b.start - 1, -1):
            ins = body[i]
            if not ins.guard:
                for r in ins.dst_regs:
                    if r in live:
                        live.discard(r)
                        width -= _width(k, r)
                        npred -= k.regs.get(r) == "pred"
            for r in (*ins.src_regs, ins.guard) if ins.guard else ins.src_regs:
                if r not in live:
                    live.add(r)
                    width += _width(k, r)
                    npred += k.regs.get(r) == "pred"
            per[i] = width
            preds[i] = npred
    if not body:
        return Liveness(0, 0, k.line, None, 0, [])
    top = max(range(len(body)), key=lambda i: per[i])
    return Liveness(per[top], top, body[top].line, _loop_of(k, cfg, top), max(preds), per)


def _loop_of(k: Kernel, cfg, index: int) -> str | None:
    """The label heading the innermost loop (a back edge's target block .. its source block) that holds
    instruction ``index``."""
    best: tuple[int, int] | None = None
    for b in cfg.blocks:
        for s, _, _ in b.succ:
            if s != EXIT and s <= b.index:
                lo, hi = cfg.blocks[s].start, b.end
                if lo <= index < hi and (best is None or hi - lo < best[1] - best[0]):
                    best = (lo, hi)
    if best is None:
        return None
    names = [name for name, i in k.labels.items() if i == best[0]]
    return min(names) if names else f"instruction {best[0]}"
