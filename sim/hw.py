"""Hardware model: frozen dataclasses loaded from plain, versioned YAML (hwconfigs/*.yaml).

Every consumer (timing model, planner, reports) reads hardware facts from these classes only.
The loader (``load_hw``) validates the YAML against the schema implied by these dataclasses:
unknown keys, missing keys, wrong types and impossible values are errors that name
``file:line key.path`` and the value.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from sim.errors import HwConfigError
from sim.usercache import user_cache

if TYPE_CHECKING:
    import yaml

SCHEMA_VERSION = 1

# Pipe classes an ISA-table entry can name; each HwConfig pipe serves one or more of them.
PIPE_CLASSES = ("alu", "fma", "fp64", "sfu", "tensor", "lsu", "branch", "sync")


@dataclass(frozen=True)
class Pipe:
    """One execution pipe of a core: the pipe classes it serves, its width, latency and interval."""

    name: str
    classes: tuple[str, ...]  # pipe classes (PIPE_CLASSES) this pipe executes
    # lane-operations one pipe unit completes per cycle (a warp FMA is 32 lane-operations,
    # an m16n8k16 mma is 2048 MACs); a core has `count` units, so count * lanes per core
    lanes: int
    latency: int  # cycles from issue to result
    interval: int  # initiation interval: cycles between issues into one pipe unit
    count: int = 1  # pipe units per core (e.g. one per scheduler); optional in YAML
    # MACs per cycle per unit of an integer (s8/u8/s4/u4) mma.sync; None: at `lanes` like f16. Optional
    int8_lanes: int | None = None
    # ALU-pipe warp instructions per mma.m16n8k64.s4 where the tensor unit has no s4 form and ptxas emulates it
    # (two s8 m16n8k32 on sign-extended nibbles after unpacking them); None: s4 is native. Optional
    s4_unpack_alu: int | None = None
    # of `lanes`, those of the FMA-heavy half (NVIDIA GA10x/GH100: the FP32 pipe is an FMA-heavy and an FMA-lite
    # half); SASS timing issues integer multiply-adds (IMAD, IMUL, IDP) to the heavy half only and FP32 ops to
    # either; None: one unit of `lanes`. Optional
    heavy_lanes: int | None = None

    def tensor_ops(self, macs: int, atype: str) -> int:
        """Lane-operations at `lanes` per cycle that an mma of `macs` MACs with A type `atype` costs:
        the integer types run at `int8_lanes` when the hwconfig gives it."""
        if self.int8_lanes and atype in ("s8", "u8", "s4", "u4"):
            return -(-macs * self.lanes // self.int8_lanes)
        return macs


@dataclass(frozen=True)
class Core:
    """The cores (SMs): how many, their schedulers, issue width and residency limits."""

    count: int  # cores / SMs
    schedulers: int  # warp schedulers per core
    issue_width: int  # instructions per scheduler per cycle
    policy: str  # "lrr" (loose round-robin) or "gto" (greedy-then-oldest)
    max_threads: int  # resident threads per core
    max_ctas: int  # resident CTAs per core
    max_warps: int  # resident warps per core
    registers: int  # 32-bit registers per core
    # fetched, not yet issued instructions a warp may issue out of order when independent: stands
    # for the static scheduling ptxas does when it turns PTX into SASS (1 = strict in-order issue)
    lookahead: int = 8
    # bytes per cycle one core receives from the L2 (its port on the network-on-chip); None: not limited
    fill_bytes_per_cycle: float | None = None
    # bytes per cycle of global stores one core drains towards the L2; None: not limited
    store_bytes_per_cycle: float | None = None
    # distinct l2.line-byte lines of global stores one core drains per cycle (a warp store to 32 lines costs
    # 32 of them whatever its bytes); None: not limited. Read by SASS timing, with store_bytes_per_cycle
    store_lines_per_cycle: float | None = None
    # bytes per cycle one core drains of global stores that write whole l2.line-byte lines (a warp store's
    # lanes covering every byte of a line); None: such lines drain as partial ones. Read by SASS timing only
    full_line_store_bytes_per_cycle: float | None = None
    # bytes of global stores a core accepts ahead of its drain: a warp's store issue (and its exit) waits
    # for the drain only beyond them; None: none (every store waits for its drain). Read by the planner
    store_buffer_bytes: float | None = None
    # distinct addresses of global atomics / reductions one core sends towards the L2 per cycle (each is
    # its own read-modify-write there; one warp instruction takes as many cycles as it has); None: not limited
    atomic_addresses_per_cycle: float | None = None
    # cycles between the first issue of successive schedulers (sub-partitions) of a core at the start of a
    # launch whose code no SM has run yet (SASS mode); None: all start at once
    cold_code_stagger: int | None = None
    # cycles from the last arrival of a cluster's warps at barrier.cluster.arrive to the release of their
    # barrier.cluster.wait (an SM-to-SM round); None: the sync pipe's latency, as a CTA barrier
    cluster_barrier_latency: int | None = None
    # SASS mode: cycles from an S2R (a special register: thread/CTA ids, lane id, ...) to its result, which its
    # consumers wait for through its write barrier; None: the ALU pipe's latency
    s2r_latency: int | None = None
    # SASS mode: cycles the SM's barrier unit takes per warp arriving at a BAR (arrivals of all its schedulers
    # one after another), and from the last arrival to the release of the waiting warps; None: BAR takes no
    # unit and the release is the sync pipe's latency (as PTX mode times bar.sync)
    barrier_arrive_cycles: int | None = None
    barrier_release_latency: int | None = None


@dataclass(frozen=True)
class RegisterFile:
    """A core's register file: registers per thread, banks, read ports, latency."""

    per_thread: int  # architectural 32-bit registers a thread may use
    banks: int
    read_ports: int  # read ports per bank per cycle
    latency: int  # operand read latency in cycles

    def conflict_cycles(self, regs: Iterable[int]) -> int:
        """Extra operand-read cycles of one instruction reading the (distinct) registers numbered
        `regs`: max over banks of ceil(reads / read_ports) - 1, bank = register number % banks. The
        one rule sim.timing (RegBanks) and the planner (kernelgen) charge."""
        per: dict[int, int] = {}
        for r in regs:
            per[r % self.banks] = per.get(r % self.banks, 0) + 1
        return max(0, max(-(-n // self.read_ports) for n in per.values()) - 1) if per else 0


@dataclass(frozen=True)
class SharedMemory:
    """A core's shared memory: size, banks, bank width, ports, latency."""

    size: int  # bytes per core
    banks: int
    bank_width: int  # bytes
    ports: int  # accesses (passes) the array serves per cycle
    latency: int  # cycles, conflict-free access
    pass_cycles: int  # extra cycles per additional conflict pass
    remote_extra: int = 0  # cycles a load from another CTA's shared memory (DSMEM) adds to `latency`


@dataclass(frozen=True)
class Cache:
    """A cache level (L1 per core, L2 shared): size, lines, sectors, associativity, latencies."""

    size: int  # bytes
    line: int  # bytes
    sector: int  # bytes fetched per miss unit
    assoc: int
    policy: str  # "lru"
    hit_latency: int  # cycles
    # GB/s this level delivers to the cores, all cores together (read data); None: not limited. The
    # timing model reads it for the L2 (the L1's per-core path is the lsu pipe)
    bandwidth_gbps: float | None = None
    # GB/s of stores this level absorbs from all cores together; None: not limited
    write_bandwidth_gbps: float | None = None
    # the same for stores of whole lines (core.full_line_store_bytes_per_cycle), all cores together; None:
    # not limited beyond the per-core rate. Read by SASS timing only
    full_line_write_bandwidth_gbps: float | None = None
    # bytes one miss fetches (an aligned block of whole sectors); None: only the missing sectors
    fill: int | None = None
    # a cache split into two partitions: the address bits whose parity picks a line's home partition;
    # a core is attached to one (core index parity). Empty: not partitioned
    partition_bits: tuple[int, ...] = ()
    # extra cycles when a core reads a line whose home is the other partition and of which its own
    # partition holds no copy yet (the read leaves one there)
    far_latency: int = 0
    # GB/s the crossbar between the two partitions carries, all cores together: the bytes of reads that pay
    # far_latency go through it (sim/timing/crossbar.py); None: not limited
    far_bandwidth_gbps: float | None = None
    # the fraction of a footprint (bytes read once per launch, each line by one core) that this level still holds
    # when the same launch runs again right after: measured points (footprint bytes ascending, fraction), linear
    # between them, flat beyond; empty: not measured (nothing held)
    held_footprints: tuple[int, ...] = ()
    held_fractions: tuple[float, ...] = ()


@dataclass(frozen=True)
class GlobalMemory:
    """Device memory (DRAM): bandwidth, latency, banks and channels."""

    bandwidth_gbps: float  # GB/s, all cores together
    banks: int
    burst: int  # bytes per burst
    latency: int  # cycles for a DRAM access beyond the last cache level
    # what cp.async (LDGSTS) streams reach from DRAM with every core loading (GB/s, whole device; None:
    # bandwidth_gbps): the planner's DRAM share per core, the rate a K tile's misses wait behind those in flight
    stream_bandwidth_gbps: float | None = None
    # independent channels of the whole device that every core's misses share (sim/timing/dram.py); None: each
    # core gets `banks` private banks at its share of the bandwidth (sim/timing/units.py Dram)
    channels: int | None = None
    channel_banks: int | None = None  # banks per channel (None: no bank level)
    row_cycle: int | None = None  # cycles an access holds its bank (a row opened and closed), with channel_banks


@dataclass(frozen=True)
class Branch:
    """Branch handling: the predictor and the front-end's refill cost."""

    predictor: str  # "none", "not_taken", "backward_taken"
    frontend_depth: int  # cycles from fetch to issue
    flush_penalty: int  # cycles lost on a misprediction


@dataclass(frozen=True)
class Wgmma:
    """Warpgroup MMA (wgmma.mma_async): each warp's 16-row share runs on its scheduler's tensor pipe
    unit, queued behind the unit's earlier wgmma work, while the warp issues on."""

    f16_macs: int  # dense MACs per cycle per tensor pipe unit, f16 and bf16 inputs
    tf32_macs: int
    fp8_macs: int  # e4m3 / e5m2
    int8_macs: int  # s8 / u8
    issue: int  # cycles one wgmma holds the unit's issue port
    latency: int  # cycles from the end of its MACs to its accumulators (and its group) being complete
    # measured issue-bound spacing of back-to-back wgmmas (cycles): one warpgroup alone (`issue_lone`), and per wgmma
    # of the SM when two warpgroups issue at once (`issue_shared`); a lone warpgroup's wgmmas are further spaced by
    # `lone_gap` beyond their MACs (hidden when two warpgroups alternate). None: not measured (0). The wgmma_tma
    # model's consumer K step and tensor term read them; SASS-mode timing holds a GMMA's scheduler for
    # `issue_shared` cycles (sim/sass/timing.py _gmma_issue); PTX-mode timing reads none
    issue_lone: float | None = None
    issue_shared: float | None = None
    lone_gap: float | None = None
    # accepted wgmmas (of the SM, either warpgroup) that may wait for the tensor pipe to start them; one more is
    # refused until one starts, so a group's issue (and the wait_group and release after it) returns only once the
    # pipe has started all but `queue` of it. None: not limited
    queue: int | None = None

    def macs(self, atype: str) -> int:
        """MACs per cycle for the A/B element type of a wgmma."""
        if atype in ("f16", "bf16"):
            return self.f16_macs
        if atype == "tf32":
            return self.tf32_macs
        if atype in ("e4m3", "e5m2"):
            return self.fp8_macs
        return self.int8_macs


@dataclass(frozen=True)
class Tma:
    """One SM's tensor memory accelerator (cp.async.bulk{.tensor}): it accepts a copy every `issue`
    cycles, keeps at most `inflight_bytes` in flight, moves `bytes_per_cycle` and signals the copy's
    mbarrier `latency` cycles after its last bytes came through the L2/DRAM path; the issuing warp waits
    while `queue` copies already wait to be accepted (sim/timing/tma.py)."""

    issue: int  # cycles the unit takes to accept one copy (descriptor read, address generation start)
    bytes_per_cycle: float  # bytes one SM's TMA unit moves per cycle
    inflight_bytes: int  # bytes of copies in flight per SM; a copy that would exceed it waits
    latency: int  # cycles from the last bytes' arrival to the shared write and mbarrier complete_tx
    # copies the unit holds waiting to be accepted; an issuing warp whose copy finds no free slot stops until
    # one frees. 0: the warp is held until the unit has accepted its own copy (`issue` cycles)
    queue: int = 0
    # PTX mode only: cycles the issuing warp spends per copy in the instruction sequence ptxas expands a
    # cp.async.bulk into (ELECT / UTMALDG / BRA.U.ANY and its uniform-register setup); SASS mode runs that sequence
    warp_issue: int = 0
    # bytes per second the whole device's TMA stores (cp.async.bulk{.tensor} shared -> global) drain at with
    # every SM storing (GB/s); None: not measured (the planner then takes l2.write_bandwidth_gbps)
    store_bandwidth_gbps: float | None = None
    store_bytes_per_cycle: float | None = None  # one SM's TMA stores alone (B/cycle); None: bytes_per_cycle
    # TMA loads from DRAM with every SM loading: the device's rate (GB/s; None: dram.bandwidth_gbps) and one
    # box's round trip, expect_tx to phase completion, under that load (cycles; None: dram.latency)
    dram_bandwidth_gbps: float | None = None
    dram_round_trip: int | None = None
    # a DRAM box's round trip (cycles, like every latency here) against the bytes in flight device-wide (measured
    # points, bytes ascending; linear between them, the last segment's slope beyond) and the device rate TMA loads
    # from DRAM saturate at (GB/s): with both given the wgmma_tma model takes them instead of dram_round_trip and
    # dram_bandwidth_gbps
    dram_trip_inflight: tuple[int, ...] = ()
    dram_trip_cycles: tuple[int, ...] = ()
    # cycles from a stage's issue to its landing when its boxes are served by the L2 with every core loading (a
    # stage of two boxes) and no landed stage waits for its consumer; None: [l2.hit_latency] + latency + its transfer
    l2_round_trip: int | None = None
    # bytes per second the whole device fills with zeros for the rows of TMA boxes outside the tensor (GB/s): with
    # every SM loading such boxes, their stages land no faster; None: the fill costs nothing beyond the in-bounds trip
    oob_fill_gbps: float | None = None
    dram_peak_gbps: float | None = None
    # cycles from a consumer's release (mbarrier arrive on empty[s]) to the producer's next TMA issue into s (its
    # try_wait wake and loop); None: 0
    release_wake: int | None = None
    # cycles a producer thread spends per ring stage besides the boxes' issues (its try_wait on the stage's empty
    # barrier, arrive.expect_tx on the full one, the loop); None: 0
    stage_overhead: int | None = None
    # TMA loads served by the L2 with many SMs loading, by how many SMs read each line at once: lines one SM reads
    # at the device's l2_read_gbps and lines two read at l2_pair_gbps (GB/s, whole device, measured at
    # l2_read_cores SMs loading: points ascending, linear between them, the last segment's slope beyond, the first
    # point's value below), lines read by l2_multi_readers or more at l2_multi_bytes_per_cycle into each SM (SM
    # cycles, at the same SM counts); a stage's operands take their times one after the other. Read by the wgmma_tma
    # model only, for its one-wave kernels (the simulator, the cp.async model and several waves keep
    # l2.bandwidth_gbps). Empty / None: l2.bandwidth_gbps for every line
    l2_read_cores: tuple[int, ...] = ()
    l2_read_gbps: tuple[float, ...] = ()
    l2_pair_gbps: tuple[float, ...] = ()
    l2_multi_readers: int | None = None
    l2_multi_bytes_per_cycle: tuple[float, ...] = ()


@dataclass(frozen=True)
class Constant:
    """The core's indexed constant cache (what LDC and PTX's ld.param / ld.const read; immediate c[bank][offset]
    operands take a cache of their own, the imm_* fields below), empty at every launch: the first read of a line by a
    core costs `miss_latency` (kernel parameters, bank 0) or `user_miss_latency` (other banks: __constant__
    data), a read of a line in flight waits for that fill, later reads hit (sim/timing/constant.py)."""

    line: int  # bytes one miss fills (aligned)
    miss_latency: int  # cycles from the first read of a parameter line (bank 0) to its data
    user_miss_latency: int  # the same for the other banks (__constant__ data, not placed near the SM at launch)
    ldc_latency: int  # cycles from an LDC to its result on a hit (SASS mode)
    param_base: int  # byte offset of the first kernel parameter in constant bank 0
    # SASS mode: the immediate-constant cache (IMC) that c[bank][offset] operands (ULDC, ALU operands) read: a warp
    # whose instruction names a line not there stalls at it (Nsight Compute's imc_miss) until the line's fill,
    # `imm_miss_latency` after the first such read of the launch; `imm_line` bytes per line; bank-0 offsets in
    # `imm_ready` are there when the launch starts. None: immediate operands never wait. Optional
    imm_line: int | None = None
    imm_miss_latency: int | None = None
    imm_ready: tuple[int, ...] = ()


@dataclass(frozen=True)
class Limits:
    """Launch limits per block: threads, registers per thread, shared bytes."""

    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int  # bytes


@dataclass(frozen=True)
class HwConfig:
    """One hardware configuration (hwconfigs/*.yaml) as load_hw validates it."""

    version: int
    name: str
    clock_mhz: float
    warp_size: int
    core: Core
    pipes: tuple[Pipe, ...]
    registers: RegisterFile
    shared: SharedMemory
    l1: Cache | None
    l2: Cache
    dram: GlobalMemory
    branch: Branch
    limits: Limits
    arch: str | None = None  # a real NVIDIA architecture (sm_90a): ptxas can assemble for it; None for a model
    wgmma: Wgmma | None = None  # warpgroup MMA; None: the hardware has none (a wgmma kernel stops)
    tma: Tma | None = None  # TMA unit per core; None: the hardware has none (a timed TMA kernel stops)
    constant: Constant | None = None  # constant caches cold at each launch; None: every constant read hits
    path: str = ""  # file it was loaded from
    # the SM clock the planner counts its cycles at (kernelgen/models/schedule.py planner_hw): measured under load,
    # where the hardware holds a clock below clock_mhz (the simulator keeps clock_mhz); None: clock_mhz
    planner_clock_mhz: float | None = None

    def pipe_for(self, pipe_class: str) -> Pipe:
        for p in self.pipes:
            if pipe_class in p.classes:
                return p
        raise KeyError(f"{self.path}: no pipe serves class {pipe_class!r}")

    def resident_limits(self, threads: int, regs: int, smem: int) -> dict[str, int]:
        """CTAs of `threads` threads (warp-rounded), `regs` registers each and `smem` shared bytes that
        one core holds, per limit, keyed by the field that sets it: the one occupancy rule that the
        simulator (sim.timing) and the planner (kernelgen) both apply; residency is the smallest."""
        t = -(-threads // self.warp_size) * self.warp_size
        return {
            "core.max_ctas": self.core.max_ctas,
            "core.max_threads": self.core.max_threads // t,
            "core.max_warps": self.core.max_warps // (t // self.warp_size),
            "core.registers": self.core.registers // max(1, regs * t),
            "shared.size": self.shared.size // max(1, smem),
        }

    def cores_used(self, ctas: int) -> int:
        """Cores a launch of `ctas` CTAs runs on: the GPU spreads a grid breadth-first over its SMs,
        one CTA per SM up to core.count (measured on the H200: docs/placement.md)."""
        return max(1, min(self.core.count, ctas))

    @property
    def dram_bytes_per_cycle(self) -> float:
        """global.bandwidth_gbps / clock_mhz: bytes per core-clock cycle, whole device."""
        return self.dram.bandwidth_gbps * 1e9 / (self.clock_mhz * 1e6)

    @property
    def l2_bytes_per_cycle(self) -> float | None:
        """l2.bandwidth_gbps / clock_mhz: read bytes per core-clock cycle, whole device (None: not limited)."""
        bw = self.l2.bandwidth_gbps
        return None if bw is None else bw * 1e9 / (self.clock_mhz * 1e6)


# ---------------------------------------------------------------------------------------------
# Loader: schema derived from the dataclasses above, values checked, errors as file:line key.path
# ---------------------------------------------------------------------------------------------

# Fields the loader fills in itself; never written in YAML.
_INTERNAL_FIELDS = {("HwConfig", "path")}

# Allowed values of the string fields that are enumerations.
_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("Core", "policy"): ("lrr", "gto"),
    ("Cache", "policy"): ("lru",),
    ("Branch", "predictor"): ("none", "not_taken", "backward_taken"),
}

# Integer fields that may be 0 (latencies and penalties); every other integer must be >= 1.
_NON_NEGATIVE: dict[str, set[str]] = {
    "RegisterFile": {"latency"},
    "SharedMemory": {"latency", "pass_cycles"},
    "Wgmma": {"latency"},
    "Tma": {"latency", "queue", "warp_issue"},
    "Cache": {"hit_latency", "far_latency"},
    "GlobalMemory": {"latency"},
    "Branch": {"frontend_depth", "flush_penalty"},
}

# Integer fields that must be a power of two (bank counts and widths, line and sector sizes).
_POWER_OF_TWO: dict[str, set[str]] = {
    "HwConfig": {"warp_size"},
    "RegisterFile": {"banks"},
    "SharedMemory": {"banks", "bank_width"},
    "Cache": {"line", "sector", "fill"},
    "GlobalMemory": {"banks", "burst"},
    "Constant": {"line"},
}


# Upper bounds: far above any real part, low enough that the simulator's per-unit structures
# (schedulers, banks, cache sets, cores) stay allocatable; a larger value is a typo or an attack.
_MAX: dict[tuple[str, str], int] = {
    ("HwConfig", "warp_size"): 1024,
    ("Core", "count"): 65_536, ("Core", "schedulers"): 64, ("Core", "issue_width"): 16,
    ("Core", "max_threads"): 1 << 16, ("Core", "max_ctas"): 1024, ("Core", "max_warps"): 4096,
    ("Core", "registers"): 1 << 24, ("Core", "lookahead"): 256,
    ("Pipe", "count"): 256, ("Pipe", "lanes"): 1 << 20,
    ("RegisterFile", "per_thread"): 1 << 16, ("RegisterFile", "banks"): 1024, ("RegisterFile", "read_ports"): 64,
    ("SharedMemory", "size"): 1 << 30, ("SharedMemory", "banks"): 1024, ("SharedMemory", "bank_width"): 1024,
    ("SharedMemory", "ports"): 64,
    ("Cache", "size"): 1 << 34, ("Cache", "line"): 1 << 16, ("Cache", "sector"): 1 << 16, ("Cache", "assoc"): 1024,
    ("GlobalMemory", "banks"): 1 << 16, ("GlobalMemory", "burst"): 1 << 16, ("GlobalMemory", "channels"): 1 << 16,
    ("GlobalMemory", "channel_banks"): 1 << 10,
    ("Limits", "threads_per_block"): 1 << 16, ("Limits", "regs_per_thread"): 1 << 16,
    ("Limits", "smem_per_block"): 1 << 30,
}
_MAX_ANY = 1 << 40  # any other integer (latencies, intervals)
_MAX_NODES = 10_000  # YAML nodes after alias expansion: a hardware file has a few hundred
# Plain scalars that YAML 1.1 (PyYAML) reads as something a reader would not expect (patterns compiled on the
# first YAML composed, by re's cache: 2-5 ms of every start otherwise, where load_hw's cache needs none)
_SURPRISES = (
    (r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?", "a base-60 number (YAML 1.1 reads 1:30 as 90)"),
    (r"[-+]?0[0-9_]+", "an octal number (YAML 1.1 reads 010 as 8)"),
    (r"[-+]?[0-9][0-9]*(_[0-9]+)+(\.[0-9]*)?", "a number with underscores"),
    (r"(?i)(y|n|yes|no|on|off)", "a boolean in YAML 1.1 only"),
)


class HwConfigKeyError(HwConfigError):
    """A HwConfigError whose one line reads ``FILE:LINE key.path: what is wrong (got VALUE); what to do``."""

    def __init__(self, file: str, line: int, key_path: str, message: str):
        self.key_path = key_path
        super().__init__(message, file, line)

    def one_line(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else f"{self.file}"
        return f"{where} {self.key_path}: {self.message}".replace("\n", " ")


@dataclass
class _Node:
    """A YAML value (dict of _Node, list of _Node, or scalar) with the 1-based line it starts on."""

    value: Any
    line: int
    key_line: int  # line of the key that introduced it (the item line for list items)


class _Raw(str):
    """Text shown as is after "got" (not quoted)."""


def _fmt(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, _Node):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value)
    return str(value)


# PyYAML is imported on first use (12-14 ms of a cold start; a config from the cache, load_hw, needs none):
# _yaml() defines the loaders below, module attributes as before (`sim.hw._FastLoader`, `_HwLoader`).
#   _HwLoader: SafeLoader that composes nodes, so every key and value keeps its start line.
#   _FastLoader: libyaml's parser (PyYAML built with it: yaml.__with_libyaml__) composes the same nodes, lines
#   and tags 20x faster (h200.yaml: 2 ms against 45 ms); plain scalars have style "" there, None in pure
#   Python. Where it is missing, or where it rejects a text, the pure-Python loader runs, so that every error
#   reads as it always did (tests/test_hw_fast_yaml.py). None: not there (or set so by a test).
def _yaml() -> tuple[Any, type | None, type]:
    """(the yaml module, _FastLoader, _HwLoader), the loaders defined on the first call (a value already set,
    e.g. _FastLoader = None by a test, is kept)."""
    import yaml

    g = globals()
    if "_HwLoader" not in g:
        class _HwLoader(yaml.SafeLoader):
            """SafeLoader that composes nodes, so every key and value keeps its start line."""

        g["_HwLoader"] = _HwLoader
    if "_FastLoader" not in g:
        g["_FastLoader"] = getattr(yaml, "CSafeLoader", None) if getattr(yaml, "__with_libyaml__", False) else None
    return yaml, g["_FastLoader"], g["_HwLoader"]


def __getattr__(name: str) -> Any:
    if name in ("_HwLoader", "_FastLoader"):
        _yaml()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def safe_load(text: str) -> Any:
    """yaml.safe_load(text), parsed by libyaml where it is there; its errors are the pure-Python loader's."""
    yaml, fast, _ = _yaml()
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)  # noqa: S506 (a safe loader)
        except yaml.YAMLError:
            pass  # the pure-Python loader raises its own error (or accepts what libyaml does not)
    return yaml.safe_load(text)


class _Ctx:
    def __init__(self, file: str):
        self.file = file
        self.nodes = 0  # YAML nodes visited, aliases expanded
        self.open: set[int] = set()  # collections on the path being converted (a recursive alias)

    def fail(self, line: int, path: str, what: str, got: Any, todo: str) -> HwConfigKeyError:
        return HwConfigKeyError(self.file, line, path or "<top>", f"{what} (got {_fmt(got)}); {todo}")


def _compose(text: str, ctx: _Ctx) -> _Node:
    yaml, fast_loader, _ = _yaml()
    if fast_loader is not None:
        fast = fast_loader(text)
        try:
            root = fast.get_single_node()
            if root is not None:
                return _to_node(root, fast, ctx, "", root.start_mark.line + 1)
        except yaml.YAMLError:
            pass  # malformed YAML (or a text libyaml alone rejects): the pure-Python loader names the error
        finally:
            fast.dispose()
    return _compose_python(text, ctx)


def _compose_python(text: str, ctx: _Ctx) -> _Node:
    yaml, _, py_loader = _yaml()
    loader = py_loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise ctx.fail(1, "<top>", "the file is empty", _Raw("nothing"),
                           "write the mapping (docs/hwconfig.md)")
        return _to_node(root, loader, ctx, "", root.start_mark.line + 1)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        problem = (e.problem or str(e)).replace("\n", " ")
        lines = text.splitlines()
        got = repr(lines[line - 1].strip()) if 0 < line <= len(lines) else "the end of the file"
        raise HwConfigKeyError(
            ctx.file, line, "<yaml>", f"malformed YAML: {problem} (got {got}); fix the YAML syntax"
        ) from None
    except yaml.YAMLError as e:
        raise HwConfigKeyError(
            ctx.file, 1, "<yaml>", f"malformed YAML: {e} (got the file); fix the YAML syntax"
        ) from None
    finally:
        loader.dispose()


def _to_node(node: yaml.Node, loader: Any, ctx: _Ctx, path: str, key_line: int) -> _Node:
    import yaml
    line = node.start_mark.line + 1
    ctx.nodes += 1
    if ctx.nodes > _MAX_NODES:
        raise ctx.fail(line, path, f"more than {_MAX_NODES:,} YAML values (alias expansion?)", _Raw("an alias"),
                       "write the file without anchors and aliases")
    if id(node) in ctx.open:
        raise ctx.fail(line, path, "an alias refers to a mapping that contains it", _Raw("a recursive alias"),
                       "remove the recursive anchor")
    if isinstance(node, yaml.ScalarNode) and not node.style and node.tag != "tag:yaml.org,2002:str":
        for rx, what in _SURPRISES:
            if re.fullmatch(rx, node.value):
                raise ctx.fail(line, path, f"ambiguous scalar: {what}", node.value,
                               "write a plain decimal number, or quote it if it is a string")
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        ctx.open.add(id(node))
        try:
            return _to_collection(node, loader, ctx, path, key_line, line)
        finally:
            ctx.open.discard(id(node))
    return _Node(loader.construct_object(node, deep=True), line, key_line)


def _to_collection(node: yaml.Node, loader: Any, ctx: _Ctx, path: str, key_line: int, line: int) -> _Node:
    import yaml
    if isinstance(node, yaml.MappingNode):
        out: dict[str, _Node] = {}
        for k, v in node.value:
            kline = k.start_mark.line + 1
            if not isinstance(k, yaml.ScalarNode) or k.tag != "tag:yaml.org,2002:str":
                got = k.value if isinstance(k, yaml.ScalarNode) else "a collection"
                raise ctx.fail(kline, path, "keys must be plain names", got, "use a lower_case name as key")
            sub = f"{path}.{k.value}" if path else k.value
            if k.value in out:
                raise ctx.fail(
                    kline, sub, f"duplicate key (first at line {out[k.value].key_line})", k.value,
                    "keep one of them",
                )
            out[k.value] = _to_node(v, loader, ctx, sub, kline)
        return _Node(out, line, key_line)
    if isinstance(node, yaml.SequenceNode):
        items = [
            _to_node(v, loader, ctx, f"{path}[{i}]", v.start_mark.line + 1) for i, v in enumerate(node.value)
        ]
        return _Node(items, line, key_line)
    raise AssertionError(node)


def _plain(node: _Node) -> Any:
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


def strict_yaml(text: str, file: str) -> Any:
    """Plain data from YAML text, with the hardware loader's rules: duplicate keys, recursive or
    expanding aliases and YAML 1.1 surprises (1:30, 010, yes/no) are one-line errors naming file:line."""
    return _plain(_compose(text, _Ctx(file)))


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _schema_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [
        (f, hints[f.name]) for f in dataclasses.fields(cls) if (cls.__name__, f.name) not in _INTERNAL_FIELDS
    ]


def _type_name(tp: Any) -> str:
    if _is_dataclass_type(tp):
        return f"mapping ({tp.__name__})"
    origin = typing.get_origin(tp)
    if origin is tuple:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in typing.get_args(tp))
    return {int: "integer", float: "number", str: "string"}.get(tp, str(tp))


def _convert(tp: Any, node: _Node, path: str, ctx: _Ctx) -> Any:
    """Turn a _Node into a value of type tp, or raise naming path and the node's line."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if node.value is None and len(args) < len(typing.get_args(tp)):
            return None
        return _convert(args[0], node, path, ctx)
    if _is_dataclass_type(tp):
        return _build(tp, node, path, ctx)
    if origin is tuple:
        if not isinstance(node.value, list):
            raise ctx.fail(node.line, path, f"must be a {_type_name(tp)}", node, "write a YAML list")
        elem = typing.get_args(tp)[0]
        return tuple(_convert(elem, item, f"{path}[{i}]", ctx) for i, item in enumerate(node.value))
    v = node.value
    ok = (
        (tp is int and isinstance(v, int) and not isinstance(v, bool))
        or (tp is float and isinstance(v, int | float) and not isinstance(v, bool))
        or (tp is str and isinstance(v, str))
    )
    if not ok:
        hint = {int: "write a plain integer (no units, no quotes)",
                float: "write a plain number (no units; YAML needs 1.0e9, not 1e9)",
                str: "write a string"}.get(tp, "fix the type")
        raise ctx.fail(node.line, path, f"must be {_type_name(tp)}", node, hint)
    return float(v) if tp is float else v


def _build(cls: type, node: _Node, path: str, ctx: _Ctx) -> Any:
    if not isinstance(node.value, dict):
        raise ctx.fail(node.line, path, f"must be a {_type_name(cls)}", node, "write a mapping of key: value")
    fields = _schema_fields(cls)
    names = [f.name for f, _ in fields]
    for key, sub in node.value.items():
        if key not in names:
            import difflib  # only for an unknown key's hint (1-2 ms of every start otherwise)

            close = difflib.get_close_matches(key, names, n=1)
            todo = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(names)}"
            raise ctx.fail(sub.key_line, f"{path}.{key}" if path else key, "unknown key", key, todo)
    values: dict[str, Any] = {}
    for f, tp in fields:
        sub_path = f"{path}.{f.name}" if path else f.name
        if f.name not in node.value:
            if f.default is not dataclasses.MISSING:
                continue
            raise ctx.fail(node.key_line, sub_path, "missing key", _Raw("nothing"),
                           f"add '{f.name}:' ({_type_name(tp)}) under {path or 'the top level'}")
        sub = node.value[f.name]
        values[f.name] = _convert(tp, sub, sub_path, ctx)
        _check_value(cls.__name__, f.name, values[f.name], sub, sub_path, ctx)
    obj = cls(**values)
    _check_object(obj, node, path, ctx)
    return obj


def _check_value(cls_name: str, name: str, v: Any, node: _Node, path: str, ctx: _Ctx) -> None:
    """Field-level checks: ranges, powers of two, enumerations, the schema version."""
    if cls_name == "HwConfig" and name == "arch" and not re.fullmatch(r"sm_\d{2,3}[af]?", v):
        raise ctx.fail(node.line, path, "must name an NVIDIA architecture as ptxas spells it", v,
                       "write e.g. arch: sm_90a, or leave the key out for hardware ptxas does not target")
    if cls_name == "HwConfig" and name == "version" and v != SCHEMA_VERSION:
        raise ctx.fail(node.line, path, f"unsupported schema version (this loader reads {SCHEMA_VERSION})",
                       v, f"set version: {SCHEMA_VERSION} and update the file to docs/hwconfig.md")
    choices = _CHOICES.get((cls_name, name))
    if choices and v not in choices:
        raise ctx.fail(node.line, path, f"must be one of {', '.join(choices)}", v, "pick one of those")
    if isinstance(v, str) and not choices and not v.strip():
        raise ctx.fail(node.line, path, "must not be empty", v, "write a name")
    if isinstance(v, float) and not math.isfinite(v):
        raise ctx.fail(node.line, path, "must be a finite number", v, "write a plain positive number")
    if isinstance(v, float) and v <= 0:
        raise ctx.fail(node.line, path, "must be > 0", v, "write a positive number")
    if isinstance(v, int | float) and not isinstance(v, bool) and name != "version":
        top = _MAX.get((cls_name, name), _MAX_ANY)
        if v > top:
            raise ctx.fail(node.line, path, f"must be <= {top:,}", v, "write a realistic value")
    if isinstance(v, int) and not isinstance(v, bool) and name != "version":
        if name in _NON_NEGATIVE.get(cls_name, set()) or (cls_name == "Pipe" and name == "latency"):
            low = 1 if cls_name == "Pipe" else 0
        else:
            low = 1
        if v < low:
            what = "must be >= 0" if low == 0 else "must be >= 1"
            raise ctx.fail(node.line, path, what, v, f"write an integer >= {low}")
        if name in _POWER_OF_TWO.get(cls_name, set()) and v & (v - 1):
            lo = 1 << (v.bit_length() - 1)
            raise ctx.fail(node.line, path, "must be a power of two", v, f"use {lo} or {lo * 2}")
    if cls_name == "Pipe" and name == "classes":
        if not v:
            raise ctx.fail(node.line, path, "must name at least one pipe class", node,
                           f"list some of {', '.join(PIPE_CLASSES)}")
        seen: set[str] = set()
        for i, c in enumerate(v):
            item = node.value[i]
            if c not in PIPE_CLASSES:
                raise ctx.fail(item.line, f"{path}[{i}]", "unknown pipe class", c,
                               f"use one of {', '.join(PIPE_CLASSES)}")
            if c in seen:
                raise ctx.fail(item.line, f"{path}[{i}]", "pipe class listed twice", c, "list it once")
            seen.add(c)
    if cls_name == "Cache" and name == "partition_bits":
        for i, b in enumerate(v):
            if not 0 <= b < 64 or b in v[:i]:
                raise ctx.fail(node.value[i].line, f"{path}[{i}]", "must be a distinct address bit 0..63", b,
                               "list each bit once")
    if cls_name == "HwConfig" and name == "pipes" and not v:
        raise ctx.fail(node.line, path, "must list at least one pipe", node, "add pipes (docs/hwconfig.md)")


def _check_object(obj: Any, node: _Node, path: str, ctx: _Ctx) -> None:
    """Checks across the fields of one mapping (and, for HwConfig, across mappings)."""

    def at(key: str) -> tuple[int, str]:
        n: _Node = node
        for part in key.split("."):
            n = n.value[part]
        return n.line, f"{path}.{key}" if path else key

    if isinstance(obj, Cache):
        if obj.line % obj.sector:
            line, p = at("sector")
            raise ctx.fail(line, p, f"must divide line ({obj.line})", obj.sector, "use a smaller sector")
        if obj.fill is not None and not obj.sector <= obj.fill <= obj.line:
            line, p = at("fill")
            raise ctx.fail(line, p, f"must be between sector ({obj.sector}) and line ({obj.line})", obj.fill,
                           "use a power of two in that range")
        if obj.size % (obj.line * obj.assoc):
            line, p = at("size")
            raise ctx.fail(line, p, f"must be a multiple of line * assoc ({obj.line} * {obj.assoc})",
                           obj.size, "change size, line or assoc so that the sets come out whole")
    if isinstance(obj, Tma):
        for key in ("l2_read_gbps", "l2_pair_gbps", "l2_multi_bytes_per_cycle"):
            got = getattr(obj, key)
            if got and len(got) != len(obj.l2_read_cores):
                line, p = at(key)
                raise ctx.fail(line, p, f"needs one rate per l2_read_cores entry ({len(obj.l2_read_cores)})",
                               list(got), "give as many rates as l2_read_cores has SM counts")
    if isinstance(obj, Pipe) and obj.heavy_lanes is not None and obj.heavy_lanes >= obj.lanes:
        line, p = at("heavy_lanes")
        raise ctx.fail(line, p, f"must be less than lanes ({obj.lanes})", obj.heavy_lanes,
                       "give the FMA-heavy half's lanes, or leave the key out for one unit")
    if isinstance(obj, HwConfig):
        if obj.planner_clock_mhz is not None and obj.planner_clock_mhz > obj.clock_mhz:
            line, p = at("planner_clock_mhz")
            raise ctx.fail(line, p, f"must be <= clock_mhz ({obj.clock_mhz:g})", obj.planner_clock_mhz,
                           "write the SM clock measured under load, at most the maximum clock")
        owner: dict[str, int] = {}
        names: dict[str, int] = {}
        for i, pipe in enumerate(obj.pipes):
            item = node.value["pipes"].value[i]
            if pipe.name in names:
                raise ctx.fail(item.value["name"].line, f"pipes[{i}].name",
                               f"duplicate pipe name (also pipes[{names[pipe.name]}])", pipe.name,
                               "rename one")
            names[pipe.name] = i
            for j, c in enumerate(pipe.classes):
                if c in owner:
                    raise ctx.fail(item.value["classes"].value[j].line, f"pipes[{i}].classes[{j}]",
                                   f"pipe class already served by pipes[{owner[c]}]", c,
                                   "let exactly one pipe serve each class")
                owner[c] = i
        missing = [c for c in PIPE_CLASSES if c not in owner]
        if missing:
            n = node.value["pipes"]
            raise ctx.fail(n.key_line, "pipes", "no pipe serves class(es) " + ", ".join(missing),
                           _Raw(", ".join(missing)), "add them to some pipe's classes")
        checks = [
            ("limits.threads_per_block", obj.limits.threads_per_block, obj.core.max_threads,
             "core.max_threads"),
            ("limits.regs_per_thread", obj.limits.regs_per_thread, obj.registers.per_thread,
             "registers.per_thread"),
            ("limits.smem_per_block", obj.limits.smem_per_block, obj.shared.size, "shared.size"),
            ("core.max_threads", obj.core.max_threads, obj.core.max_warps * obj.warp_size,
             "core.max_warps * warp_size"),
        ]
        for key, v, bound, bound_name in checks:
            if v > bound:
                line, p = at(key)
                raise ctx.fail(line, p, f"exceeds {bound_name} ({bound})", v,
                               f"lower it or raise {bound_name}")


def bundled_configs() -> list[str]:
    """File names of the configs shipped in the hwconfigs package."""
    root = resources.files("hwconfigs")
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".yaml"))


def resolve_hw_path(name: str | os.PathLike[str]) -> pathlib.Path:
    """An existing file path wins; otherwise a bare name ("h200", "npu7nm.yaml") of a bundled config."""
    path = pathlib.Path(name)
    if path.is_file():
        return path
    text = str(name)
    if path.name == text and text:  # bare name, no directory part
        stem = text[:-5] if text.endswith(".yaml") else text[:-4] if text.endswith(".yml") else text
        res = resources.files("hwconfigs") / f"{stem}.yaml"
        if res.is_file():
            with resources.as_file(res) as real:  # a plain file for a normal install
                return pathlib.Path(real)
    raise HwConfigError(
        f"no such file and no bundled config of that name (got {text!r}); "
        f"give a path to a YAML file or one of: {', '.join(bundled_configs())}",
        file=text,
    )


def hw_from_text(text: str, file: str) -> HwConfig:
    """Validate YAML text as a hardware config (errors name ``file``); no file is read."""
    ctx = _Ctx(file)
    return dataclasses.replace(_build(HwConfig, _compose(text, ctx), "", ctx), path=file)


def load_hw(path_or_name: str | os.PathLike[str]) -> HwConfig:
    """Load and validate a hardware config; raises HwConfigError naming file:line key.path."""
    path = resolve_hw_path(path_or_name)
    ctx = _Ctx(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HwConfigError(
            f"cannot read the file ({e}); check the path and permissions", file=str(path)
        ) from None
    key = _cache_key(text)
    cfg = _cached(key)
    if cfg is None:
        from sim.hw_seed import is_seed_text

        seed = is_seed_text(text)
        if seed:  # the seed's hardware.yaml schema (docs/seed-hardware.md)
            from sim.hw_seed import convert_text

            text = convert_text(text, str(path))
        root = _compose(text, ctx)
        cfg = _build(HwConfig, root, "", ctx)
        if not seed:  # (a seed file's numbers also come from its base config: not kept)
            _keep(key, cfg)
    return dataclasses.replace(cfg, path=str(path))


# load_hw keeps every config it validated (pickled, without its path) under HW_CACHE, keyed by the sha256 of the
# file's text, of this module's and sim/hw_seed.py's sources and of the interpreter's version: the same text
# under the same loader gives the same HwConfig, so a later load of it skips PyYAML and the checks (a cold
# `python -m sim run --hw h200` spent 20-25 ms there). Anything else (an unreadable or damaged entry, a text
# that fails) takes the full path, whose errors are the only ones a user sees; a seed-schema file is not kept
# (its missing numbers come from another file); the newest CACHE_KEEP entries are kept. WORKBENCH_HW_CACHE=0
# turns the cache off.
CACHE_KEEP = 64


def cache_dir() -> pathlib.Path:
    return user_cache("hw")


def _cache_key(text: str) -> str | None:
    if os.environ.get("WORKBENCH_HW_CACHE", "1") == "0":
        return None
    import hashlib
    import sys

    h = hashlib.sha256(sys.version.encode() + b"\0" + text.encode())
    try:
        for src in (__file__, pathlib.Path(__file__).with_name("hw_seed.py")):
            h.update(b"\0" + pathlib.Path(src).read_bytes())
    except OSError:
        return None
    return h.hexdigest()[:32]


def _cached(key: str | None) -> HwConfig | None:
    if key is None:
        return None
    import pickle

    try:
        cfg = pickle.loads((cache_dir() / f"{key}.pickle").read_bytes())
    except Exception:  # noqa: BLE001 (missing, unreadable, damaged or from other classes: load it again)
        return None
    return cfg if type(cfg) is HwConfig else None


def _keep(key: str | None, cfg: HwConfig) -> None:
    if key is None:
        return
    import pickle

    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"{key}.{os.getpid()}.tmp"
        tmp.write_bytes(pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, d / f"{key}.pickle")
        entries = sorted(d.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-CACHE_KEEP]:
            old.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 (a read-only home or anything else: every load validates the text, as before)
        pass


def schema(cls: type = HwConfig, prefix: str = "") -> list[tuple[str, str, bool]]:
    """The YAML schema derived from the dataclasses: (key.path, type, required) for every key."""
    rows: list[tuple[str, str, bool]] = []
    for f, tp in _schema_fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        rows.append((key, _type_name(tp), f.default is dataclasses.MISSING))
        inner = tp
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            inner = next(a for a in typing.get_args(tp) if a is not type(None))
        if typing.get_origin(inner) is tuple:
            inner, key = typing.get_args(inner)[0], key + "[]"
        if _is_dataclass_type(inner):
            rows.extend(schema(inner, key))
    return rows
