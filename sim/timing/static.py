"""Per-instruction static timing facts, computed once per kernel from the ISA decode and HwConfig."""

from __future__ import annotations

from typing import Final

from sim import isa
from sim.errors import ExecutionError
from sim.hw import HwConfig
from sim.ptx.types import type_mods
from sim.timing.units import RegBanks

_CACHE_OPS = ("ca", "cg", "cs", "cv", "lu", "wb", "wt")
# St.cpk: cp.async role (isa.async_role), wgmma role (isa.wgmma_role) or bulk group role, as a small int
# for the hot path (Final: constants in the compiled core, sim/timing/native.py)
CP_NONE: Final = 0
CP_COPY: Final = 1
CP_COMMIT: Final = 2
CP_WAIT: Final = 3
CP_WAIT_ALL: Final = 4
WG_ISSUE: Final = 5
WG_COMMIT: Final = 6
WG_WAIT: Final = 7
BULK_COMMIT: Final = 8  # cp.async.bulk.commit_group / wait_group N (isa.bulk_role)
BULK_WAIT: Final = 9
_CP_KIND = {"": CP_NONE, "copy": CP_COPY, "commit": CP_COMMIT, "wait": CP_WAIT, "wait_all": CP_WAIT_ALL}
_WG_KIND = {"issue": WG_ISSUE, "commit": WG_COMMIT, "wait": WG_WAIT, "fence": CP_NONE}


class St:
    """Static facts of one instruction: which pipe (HwConfig.pipes name), lane-operations,
    latency, register sets, and the flags the scheduler needs."""

    __slots__ = ("ins", "index", "line", "text", "pipe", "ops", "lat", "srcs", "dsts", "rsrcs", "mem", "store",
                 "atomic", "ordered", "branch", "bar", "clock", "cp", "cache_op", "rf_extra", "tensor",
                 # derived once for the hot path (see warp.py):
                 "occ", "lat_total", "is_bra", "cpk", "src_ids", "dst_ids", "conflicts", "wg_exec", "wg_n",
                 "mbar_signal", "tma", "fetch_stop", "plain", "cstore")

    def __init__(self, ins, hw: HwConfig, rf: RegBanks, file: str = ""):
        self.ins = ins
        self.index: int = ins.index  # (typed: native ints in the compiled core, where `ins` is untyped)
        self.line: int = ins.line
        self.text: str = ins.text
        pipe = hw.pipe_for(ins.pipe)
        self.pipe = pipe.name
        wg = isa.wgmma_role(ins)
        self.tensor = isa.op_class(ins) == "tensor" and wg in ("", "issue")  # wgmma fence/commit/wait: control
        self.ops = hw.warp_size  # lane-operations: a warp instruction is warp_size lane-ops
        if self.tensor:  # an mMnNkK mma is M*N*K MACs
            shape = next((m for m in ins.mods if m.startswith("m") and "n" in m and "k" in m), "m16n8k16")
            m, rest = shape[1:].split("n")
            n, k = rest.split("k")
            self.ops = int(m) * int(n) * int(k)
            ts = type_mods(ins.mods)
            if not wg and len(ts) > 1:  # mma.sync: integer A/B at pipes[].int8_lanes
                self.ops = pipe.tensor_ops(self.ops, ts[1])
        self.lat = pipe.latency
        if isa.latency_class(ins) == "shared":  # crosses the shared-memory crossbar
            self.lat = hw.shared.latency
        self.srcs = frozenset(ins.src_regs)
        self.dsts = frozenset(ins.dst_regs)
        # operand order (not set order, which varies with PYTHONHASHSEED): the stall reason of a tie
        # between two source registers ready in the same cycle is the first one's
        self.rsrcs = tuple(dict.fromkeys(ins.src_regs))
        self.clock = any(o.kind == "sreg" and (o.name.startswith("%clock") or o.name == "%globaltimer")
                         for o in ins.operands)
        self.cp = isa.async_role(ins) or None
        mem = isa.mem_dir(ins)
        self.mem = mem != "none"
        self.store = mem in ("write", "rmw")
        self.atomic = mem == "rmw"
        bulk = isa.bulk_role(ins)
        self.tma = bulk in ("tensor_load", "tensor_store", "load", "store", "shared_copy")  # holds fetch (warp.py)
        if self.tma:
            if hw.tma is None:
                raise ExecutionError(f"'{ins.full}' needs a TMA unit, and hwconfig {hw.name} has no 'tma:' section "
                                     "(docs/hwconfig.md); time it on a config that has one", file, ins.line)
            self.mem = self.store = True  # ordered against the warp's other memory accesses
        self.mbar_signal = isa.mbarrier_role(ins) == "signal"
        self.is_bra = isa.is_branch(ins)
        self.branch = self.is_bra or isa.is_terminator(ins)
        self.bar = isa.barrier_role(ins) in ("cta", "arrive")
        self.ordered = isa.is_ordered(ins) or self.clock
        self.cache_op = next((m for m in ins.mods if m in _CACHE_OPS), "")
        self.rf_extra = rf.extra_cycles(tuple(r for r in ins.src_regs if not r.startswith("%p")))
        # PipeUnit.occupancy(ops) + register-bank extra cycles; latency to the result incl. the extra
        self.occ = max(pipe.interval, -(-self.ops // pipe.lanes)) + self.rf_extra
        self.lat_total = self.lat + self.rf_extra
        self.cpk = _WG_KIND[wg] if wg else _CP_KIND[isa.async_role(ins)]
        self.wg_exec = 0  # wgmma issue: cycles of its warp's MACs on the unit (wgmma.*_macs)
        self.wg_n = 0  # wait_group N (wgmma, or cp.async.bulk)
        if wg == "issue":
            self._wgmma_issue(ins, hw, file)
        elif wg:  # fence / commit_group / wait_group: one issue cycle on the unit, no result
            self.lat_total = 1 + self.rf_extra
            self.wg_n = int(ins.operands[0].value) if wg == "wait" else 0
        if bulk in ("commit", "wait"):
            self.cpk = BULK_COMMIT if bulk == "commit" else BULK_WAIT
            if bulk == "wait" and (not ins.operands or ins.operands[0].kind != "imm"):
                raise ExecutionError(f"'{ins.full}' needs an immediate group count N ({ins.text})", file, ins.line)
            self.wg_n = int(ins.operands[0].value) if bulk == "wait" else 0
        # the hot path's summaries (sim/timing/warp.py): fetch stops after it (a branch, a CTA barrier, a bulk
        # copy); its issue touches nothing but its unit and the scoreboard
        self.fetch_stop = self.is_bra or self.bar or self.tma
        self.plain = not (self.mem or self.cpk or self.tma or self.mbar_signal or self.is_bra or self.bar)
        self.src_ids: tuple[int, ...] = ()  # register numbers (statics() assigns them), in rsrcs order
        self.dst_ids: tuple[int, ...] = ()
        self.conflicts: dict[int, bool] = {}  # older static index -> must this wait for it (memo)
        self.cstore = False  # a clock-fed store of a replayed launch (set by sim/timing/warp.py for ClockWarp)

    def _wgmma_issue(self, ins, hw: HwConfig, file: str) -> None:
        """This warp's share of an m64nNkK wgmma, 16 x N x K MACs at wgmma.<type>_macs per cycle after
        wgmma.issue cycles at the unit; the accumulators complete wgmma.latency cycles after the MACs."""
        if hw.wgmma is None:
            raise ExecutionError(f"'{ins.full}' needs a warpgroup tensor unit, and hwconfig {hw.name} has no "
                                 "'wgmma:' section (docs/hwconfig.md); time it on a config that has one",
                                 file, ins.line)
        self.wg_exec = -(-(self.ops // 4) // hw.wgmma.macs(type_mods(ins.mods)[1]))
        self.occ = hw.wgmma.issue + self.rf_extra
        self.lat_total = self.occ + self.wg_exec + hw.wgmma.latency  # unqueued; WarpT queues it

    def blocked_by(self, o: St) -> bool:
        """May this instruction not issue before the older, unissued `o` (RAW/WAW/WAR on registers
        and predicates, memory order when either is a store, anything ordered)?"""
        hit = self.conflicts.get(o.index)
        if hit is None:
            hit = self.conflicts[o.index] = bool(
                self.ordered or o.ordered
                or (o.dsts and (not o.dsts.isdisjoint(self.srcs) or not o.dsts.isdisjoint(self.dsts)))
                or (self.dsts and not self.dsts.isdisjoint(o.srcs))
                or (o.mem and self.mem and (o.store or self.store)))
        return hit


def statics(body: list, hw: HwConfig, file: str = "") -> list[St]:
    """St of every instruction; registers and predicates numbered 0.. (St.src_ids / dst_ids) so the
    scoreboard is a list indexed by register number. `file` names the PTX in errors."""
    rf = RegBanks(hw.registers)
    out = [St(ins, hw, rf, file) for ins in body]
    ids: dict[str, int] = {}
    for st in out:
        st.src_ids = tuple(ids.setdefault(r, len(ids)) for r in st.rsrcs)
        st.dst_ids = tuple(ids.setdefault(r, len(ids)) for r in st.dsts)
    return out


def register_count(sts: list[St]) -> int:
    """How many distinct registers/predicates the St list numbers."""
    return 1 + max((i for st in sts for i in st.src_ids + st.dst_ids), default=0)


def regs_per_thread(kernel, hw: HwConfig) -> int:
    """Declared PTX registers (64-bit count twice, predicates not at all), capped at limits.regs_per_thread."""
    n = 0
    for t in kernel.regs.values():
        if t == "pred":
            continue
        n += 2 if t.endswith("64") else 1
    return max(1, min(n, hw.limits.regs_per_thread))
