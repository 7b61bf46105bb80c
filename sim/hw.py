"""Hardware model: frozen dataclasses loaded from plain, versioned YAML (hwconfigs/*.yaml).

Every consumer (timing model, planner, reports) reads hardware facts from these classes only.
The loader (``load_hw``) validates the YAML against the schema implied by these dataclasses:
unknown keys, missing keys, wrong types and impossible values are errors that name
``file:line key.path`` and the value.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1

# Pipe classes an ISA-table entry can name; each HwConfig pipe serves one or more of them.
PIPE_CLASSES = ("alu", "fma", "fp64", "sfu", "tensor", "lsu", "branch", "sync")


@dataclass(frozen=True)
class Pipe:
    name: str
    classes: tuple[str, ...]  # pipe classes (PIPE_CLASSES) this pipe executes
    lanes: int  # lane-operations per cycle per core (a 32-lane FMA is 32, an m16n8k16 mma is 2048)
    latency: int  # cycles from issue to result
    interval: int  # initiation interval: cycles between issues into one pipe unit
    count: int = 1  # pipe units per core (e.g. one per scheduler)


@dataclass(frozen=True)
class Core:
    count: int  # cores / SMs
    schedulers: int  # warp schedulers per core
    issue_width: int  # instructions per scheduler per cycle
    policy: str  # "lrr" (loose round-robin) or "gto" (greedy-then-oldest)
    max_threads: int  # resident threads per core
    max_ctas: int  # resident CTAs per core
    max_warps: int  # resident warps per core
    registers: int  # 32-bit registers per core


@dataclass(frozen=True)
class RegisterFile:
    per_thread: int  # architectural 32-bit registers a thread may use
    banks: int
    read_ports: int  # read ports per bank per cycle
    latency: int  # operand read latency in cycles


@dataclass(frozen=True)
class SharedMemory:
    size: int  # bytes per core
    banks: int
    bank_width: int  # bytes
    ports: int  # accesses (passes) the array serves per cycle
    latency: int  # cycles, conflict-free access
    pass_cycles: int  # extra cycles per additional conflict pass


@dataclass(frozen=True)
class Cache:
    size: int  # bytes
    line: int  # bytes
    sector: int  # bytes fetched per miss unit
    assoc: int
    policy: str  # "lru"
    hit_latency: int  # cycles


@dataclass(frozen=True)
class GlobalMemory:
    bandwidth_gbps: float  # GB/s, all cores together
    banks: int
    burst: int  # bytes per burst
    latency: int  # cycles for a DRAM access beyond the last cache level


@dataclass(frozen=True)
class Branch:
    predictor: str  # "none", "not_taken", "backward_taken"
    frontend_depth: int  # cycles from fetch to issue
    flush_penalty: int  # cycles lost on a misprediction


@dataclass(frozen=True)
class Limits:
    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int  # bytes


@dataclass(frozen=True)
class HwConfig:
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
    path: str = ""  # file it was loaded from

    def pipe_for(self, pipe_class: str) -> Pipe:
        for p in self.pipes:
            if pipe_class in p.classes:
                return p
        raise KeyError(f"{self.path}: no pipe serves class {pipe_class!r}")

    @property
    def dram_bytes_per_cycle(self) -> float:
        """global.bandwidth_gbps / clock_mhz: bytes per core-clock cycle, whole device."""
        return self.dram.bandwidth_gbps * 1e9 / (self.clock_mhz * 1e6)
