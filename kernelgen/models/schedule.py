"""ALU scheduling model: work per pipe in lane-operations, the minimum cycles per CTA (a hard lower
bound), occupancy, waves over the cores, predicted cycles and utilization.

A 32-lane FMA is 32 lane-operations (32 MACs); an m16n8k16 mma is 16*8*16 = 2048.
- pipe cycles per CTA = work[pipe] / ([pipes[p].lanes] * [pipes[p].count])
- CTAs per core = min([core.max_ctas], [core.max_threads] / threads, [core.max_warps] / warps,
  [core.registers] / (registers * threads), [shared.size] / smem)
- occupancy = resident threads / [core.max_threads]; waves = ceil(CTAs / (CTAs per core * [core.count]))
- shared-memory passes cost passes / [shared.ports] cycles on the LSU side
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling, operand_tiles
from sim.hw import HwConfig, Pipe


@dataclass(frozen=True)
class Schedule:
    work: dict[str, int]  # pipe name -> lane-operations per CTA
    min_cycles_per_cta: int
    bound_pipe: str
    ctas_per_core: int
    ctas_limited_by: str
    occupancy: float
    waves: int
    ctas: int


def work_per_cta(spec: GemmSpec, t: Tiling, ktiles: int) -> dict[str, int]:
    """Lane-operations per class ("fma", "tensor", "alu", "lsu") for one CTA."""
    a, b = operand_tiles(spec, t)
    T = t.threads
    copies = (a.chunks + b.chunks) // T * T  # copy instructions x lanes per K tile
    out = t.bm * t.bn
    w: dict[str, int] = {"alu": 0, "lsu": 0, "fma": 0, "tensor": 0}
    w["alu"] += ktiles * (copies * 9 + T * 8) + out * 8 + T * 40
    w["lsu"] += ktiles * copies * 2 + out * (2 if spec.has_c else 1)
    if t.variant == "simt":
        w["fma"] += ktiles * t.bk * t.bm * t.bn
        vec = lambda n: -(-n // 4)  # noqa: E731
        w["lsu"] += ktiles * t.bk * T * (vec(t.tm) + vec(t.tn))
    else:
        warps = T // 32
        w["tensor"] += ktiles * (t.bk // 16) * t.mi * t.ni * warps * 2048
        w["lsu"] += ktiles * (t.bk // 16) * (t.mi + (t.ni + 1) // 2) * T
    w["fma"] += out * (3 + 2 * spec.has_c + (8 if spec.activation == "gelu" else 0))
    return w


_PIPES: dict[int, tuple[HwConfig, dict[str, Pipe]]] = {}


def _pipes(hw: HwConfig) -> dict[str, Pipe]:
    """class or pipe name -> Pipe (classes without a pipe of their own go to the "alu" pipe)."""
    hit = _PIPES.get(id(hw))
    if hit and hit[0] is hw:
        return hit[1]
    m: dict[str, Pipe] = {p.name: p for p in hw.pipes}
    for cls in ("alu", "fma", "tensor", "lsu", "sfu", "sync", "branch"):
        try:
            m[cls] = hw.pipe_for(cls)
        except KeyError:
            m[cls] = hw.pipe_for("alu")
    _PIPES[id(hw)] = (hw, m)
    return m


def schedule(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], regs: int,
             smem: int) -> Schedule:
    M, N, K = shape
    ktiles = -(-K // t.bk)
    classes = work_per_cta(spec, t, ktiles)
    work: dict[str, int] = {}
    cyc: dict[str, float] = {}
    pipes = _pipes(hw)
    for cls, ops in classes.items():
        if ops:
            p = pipes[cls]
            work[p.name] = work.get(p.name, 0) + ops
    for name, ops in work.items():
        p = pipes[name]
        cyc[name] = ops / (p.lanes * p.count)  # [pipes[].lanes], [pipes[].count]
    bound = max(cyc, key=cyc.get)
    T = t.threads
    warps = -(-T // hw.warp_size)
    lim = {
        "core.max_ctas": hw.core.max_ctas,
        "core.max_threads": hw.core.max_threads // T,
        "core.max_warps": hw.core.max_warps // warps,
        "core.registers": hw.core.registers // max(1, regs * T),
        "shared.size": hw.shared.size // max(1, smem),
    }
    by = min(lim, key=lim.get)
    per_core = lim[by]
    ctas = -(-M // t.bm) * -(-N // t.bn)
    waves = -(-ctas // max(1, per_core * hw.core.count)) if per_core else 0
    occ = per_core * T / hw.core.max_threads
    return Schedule(work, int(cyc[bound]), bound, per_core, by, occ, waves, ctas)
