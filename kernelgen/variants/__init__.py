"""Kernel variants as plug-ins. A variant is one module: it enumerates its tilings, emits their PTX,
counts the instructions of what it emits (``kernelgen.counting``) and states the per-variant facts
the four models read. The planner, the CLI, the reports and validation ask this registry; none of
them switches on a variant's name. A new variant is one module plus one line in ``MODULES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kernelgen.counting import Counts
from kernelgen.models.sync import SyncPlan
from kernelgen.spec import GemmSpec
from kernelgen.tiling import OperandTile, Site, Tiling
from sim.hw import HwConfig

if TYPE_CHECKING:
    from kernelgen.models.schedule import CycleModel

MODULES = {"simt": "kernelgen.variants.simt", "mma": "kernelgen.variants.mma", "wgmma": "kernelgen.variants.wgmma",
           "wgmma_tma": "kernelgen.variants.wgmma_tma", "wgmma_fp8": "kernelgen.variants.wgmma_fp8"}


class Variant(Protocol):
    name: str
    cell_threads: int  # threads per cell of the tiling's grid (a thread, or a warp)
    shared_f32: bool  # operands converted to f32 and stored [k][m|n] in shared memory
    compute_class: str  # the pipe class that does the multiply-adds
    tile_label: str  # what (tm, tn) is, in plan.json
    async_copies: bool  # global -> shared by a cp.async pipeline (else copies then barrier)
    calibrate_by_grid: bool  # register calibration keyed by the grid's shape too
    opt_in: bool  # planned only when named (--variant), never in the default search

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        """Why this variant cannot serve spec on hw, or None."""

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        """Structurally valid tilings (powers of two, whole copies per thread)."""

    def unroll_k(self, t: Tiling) -> int:
        """The value the spec's UNROLL_K range is checked against."""

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str: ...

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        """Instruction counts of what emit writes (profile off), from the emitter itself."""

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        """(accumulators, fragments, addressing) registers live across the K loop."""

    def compute_sites(self, spec: GemmSpec, t: Tiling) -> list[Site]:
        """Warp 0's compute-side shared loads of one K tile."""

    def compute_banks(self, spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
        """(score, passes, accesses) of those loads per K tile."""

    def shared_traffic(self, t: Tiling, ktiles: int, ein: int) -> tuple[int, int]:
        """(bytes read from shared, fragment bytes moved shared -> registers) per CTA."""

    def compute_work(self, spec: GemmSpec, t: Tiling, ktiles: int) -> dict[str, int]:
        """Lane-operations per class of the compute loop of one CTA."""

    def copy_stores_shared(self, tile: OperandTile) -> bool:
        """Do the copies of tile store to shared with st.shared (not cp.async)?"""

    def compute_load_sites(self, c: Counts) -> int:
        """Shared-load instructions the model takes per K tile (from the loop body's LSU count)."""

    def rf_extra(self, spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts) -> dict[str, float]:
        """Mean register-bank extra cycles of the inner-loop compute instructions, by class."""

    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        """The variant's own cycle model of the launch, or None for the shared one (models/schedule.py)."""

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        """Barriers and async-copy waits per K tile, the latency they leave exposed, a deadlock check."""


F = TypeVar("F", bound=Callable[..., Any])


def shared_model(fn: F) -> F:
    """Marks a variant's ``cycle_model`` that returns None (the shared model of models/schedule.py), so
    the planner may bound the variant's cycles before timing it (schedule.counted_bound, analytic_bound).
    A subclass that overrides ``cycle_model`` without the mark is timed, never bounded."""
    fn.shared_model = True  # type: ignore[attr-defined]
    return fn


@cache
def get(name: str) -> Variant:
    if name not in MODULES:
        raise KeyError(f"variant(={name}) must be one of {', '.join(MODULES)}")
    v: Variant = importlib.import_module(MODULES[name]).VARIANT
    return v


def names() -> list[str]:
    return list(MODULES)
