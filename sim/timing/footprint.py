"""The device-memory sectors each CTA of a launch touches, for warming the L2 of a sampled run
(docs/sampling.md).

A few CTAs run functionally on a scratch copy of the launch (their outputs are discarded; together in one
lock-step batch where the kernel allows) and their global accesses are recorded as L2 sectors
(HwConfig.l2.sector bytes). The footprint of CTA
(x, y, z) is modelled as affine in the block index, buffer by buffer: the sectors block (0,0,0) touches in one
buffer, moved by a fixed number of sectors per step of each block dimension (a GEMM's A row panel
moves with y, its B column panel with x, its D tile with both). The model is checked against a
probe of the last CTA (at most TOLERANCE of their sectors may differ: a bounds guard
that touches a buffer's first sector from every CTA is kept as a sector all CTAs touch); where it does
not hold, every CTA is probed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.cluster import link as link_cluster
from sim.functional.lockstep import Batch, Refused, _effects, refusal, run_batch
from sim.functional.record import Executed
from sim.functional.runner import make_cta, prepare, run_cta_functional
from sim.functional.warp import CTA
from sim.launch import Launch
from sim.ptx.ir import Program
from sim.timing.memory import generic_space

Ctaid = tuple[int, int, int]


class _Sink:
    """Stands in for a warp's record list in a probing batch: keeps only the sectors."""

    def __init__(self, fp: Footprints, found: list[np.ndarray]):
        self.fp, self.found = fp, found

    def append(self, rec: Executed) -> None:
        self.fp._observe(rec, self.found)


class _Sinks(dict):
    """ctaid -> one sink per warp (Batch.trace's shape)."""

    def __init__(self, sinks: dict[Ctaid, _Sink]):
        super().__init__()
        self.sinks = sinks

    def __missing__(self, ctaid: Ctaid) -> _WarpSinks:
        return _WarpSinks(self.sinks[ctaid])


class _WarpSinks:
    def __init__(self, sink: _Sink):
        self.sink = sink

    def __getitem__(self, w: int) -> _Sink:
        return self.sink
TOLERANCE = 0.01  # sectors the affine model may get wrong in a checked CTA, as a fraction of its footprint


class Footprints:
    """footprint(ctaid) -> sorted unique sector numbers; `method` says how they were found."""

    def __init__(self, prog: Program, launch: Launch, sector: int, budget: int):
        self.prog, self.launch = prog, launch
        self.P = prepare(prog, launch)
        self.sector = sector
        self.budget = budget
        self.probed: dict[Ctaid, np.ndarray] = {}
        self.bases = sorted(self.P.buffers.values())
        self.model = self._fit(launch.grid)
        self.method = "affine in the block index (checked on the last CTA)" if self.model else "every CTA probed"

    def __call__(self, ctaid: Ctaid) -> np.ndarray:
        return self.model(ctaid) if self.model is not None else self.probe(ctaid)

    def probe(self, ctaid: Ctaid) -> np.ndarray:
        hit = self.probed.get(ctaid)
        if hit is not None:
            return hit
        found: list[np.ndarray] = []
        run_cta_functional(self.P, make_cta(self.P, ctaid), [self.budget, self.budget],
                           lambda rec: self._observe(rec, found))
        self.probed[ctaid] = out = self._sectors(found)
        return out

    def probe_together(self, ctaids: list[Ctaid]) -> None:
        """Probe the CTAs in one lock-step batch (sim/functional/lockstep.py: its records are the ones
        Warp.step gives); where they do not run in lock-step, one by one as `probe`."""
        todo = [c for c in dict.fromkeys(ctaids) if c not in self.probed]
        if len(todo) < 2 or refusal(self.P.L.kernel, self.P):
            return
        found: dict[Ctaid, list[np.ndarray]] = {c: [] for c in todo}
        sinks = {c: _Sink(self, found[c]) for c in todo}
        ctas = [CTA(c, self.P.L.block, self.P.shared_size, self.P.layout.local_size) for c in todo]
        for c in ctas:
            link_cluster([c])
        B = Batch(self.P, ctas, _effects(self.P.L.kernel), trace=_Sinks(sinks))
        try:
            with np.errstate(all="ignore"):
                run_batch(B, [self.budget])
        except Refused:
            self.P = prepare(self.prog, self.launch)  # the scratch copy as it was: probe one by one
            return
        for ctaid in todo:
            self.probed[ctaid] = self._sectors(found[ctaid])

    def _observe(self, rec: Executed, found: list[np.ndarray]) -> None:
        if rec.addrs is None or rec.space not in ("global", "generic") or not rec.addrs.size:
            return
        space, addrs = generic_space(rec.addrs) if rec.space == "generic" else ("global", rec.addrs)
        if space != "global":
            return
        a = addrs.astype(np.int64)
        found.append(a // self.sector)
        found.append((a + max(1, rec.size) - 1) // self.sector)

    @staticmethod
    def _sectors(found: list[np.ndarray]) -> np.ndarray:
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def _buffer_of(self, sectors: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.array(self.bases, dtype=np.int64) // self.sector, sectors, side="right")

    def _fit(self, grid: tuple[int, int, int]) -> Callable[[Ctaid], np.ndarray] | None:
        """The affine model, or None where the probes contradict it by more than TOLERANCE."""
        gx, gy, gz = grid
        last = (gx - 1, gy - 1, gz - 1)
        self.probe_together([(0, 0, 0)] + [(int(d == 0), int(d == 1), int(d == 2)) for d in range(3)
                                          if grid[d] >= 2] + [last])
        base = self.probe((0, 0, 0))
        buf = self._buffer_of(base)
        shift = np.zeros((3, base.size), dtype=np.int64)  # sectors per step of dimension d, per sector
        strays: list[np.ndarray] = []
        for d in range(3):
            if grid[d] < 2:
                continue
            step = [0, 0, 0]
            step[d] = 1
            other = self.probe((step[0], step[1], step[2]))
            other_buf = self._buffer_of(other)
            for b in np.unique(buf).tolist():
                mine, theirs = base[buf == b], other[other_buf == b]
                if theirs.size:  # aligned on the last sector (a guard may touch a buffer's first one)
                    shift[d, buf == b] = int(theirs[-1] - mine[-1])
            strays.append(np.setdiff1d(other, base + shift[d]))
        fixed = np.unique(np.concatenate(strays)) if strays else np.zeros(0, dtype=np.int64)

        def model(ctaid: Ctaid) -> np.ndarray:
            v = base.copy()
            for d in range(3):
                if ctaid[d]:
                    v += ctaid[d] * shift[d]
            if v.size and bool(np.all(v[1:] > v[:-1])):  # sorted and unique: insert what fixed adds
                j = np.minimum(np.searchsorted(v, fixed), v.size - 1)
                new = fixed[v[j] != fixed]
                return np.insert(v, np.searchsorted(v, new), new) if new.size else v  # = union1d(v, fixed)
            return np.union1d(v, fixed)

        seen = self.probe(last)
        return model if np.setxor1d(model(last), seen).size <= TOLERANCE * seen.size else None
