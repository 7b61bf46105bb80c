"""Thread block clusters (PTX ISA 8.x, sm_90): the launch's cluster shape, the cluster special
registers, distributed shared memory (DSMEM) addresses and the cluster barrier.

Shape. A kernel's ``.reqnctapercluster X, Y, Z`` fixes it; otherwise ``--cluster X,Y,Z`` (Launch.cluster)
gives it; a kernel with ``.explicitcluster`` must get one of the two; without either the launch is a
cluster of one CTA (``%is_explicit_cluster`` 0). The grid must divide by the shape, and a cluster holds
at most PORTABLE_MAX CTAs, NONPORTABLE_MAX with ``--cluster-nonportable`` (the CUDA attribute
cudaFuncAttributeNonPortableClusterSizeAllowed).

Ranks. A CTA's place in its cluster is ``%cluster_ctaid = %ctaid mod shape``, its rank
``x + y*X + z*X*Y`` (``%cluster_ctarank``), its cluster ``%clusterid = %ctaid / shape``. The launch runs
the CTAs of one cluster together (sim.functional.runner, sim.timing.cluster): ``cluster_order`` lists the
grid cluster by cluster, rank by rank.

DSMEM addresses. A ``.shared::cta`` address is a byte offset into the executing CTA's shared memory
(below DSMEM_STRIDE). ``mapa`` turns an offset into the ``.shared::cluster`` address of the same offset
in the CTA of rank r: ``(r + 1) * DSMEM_STRIDE + offset`` (generic: plus SHARED_WINDOW), so an address
below DSMEM_STRIDE keeps naming the executing CTA, as the PTX ISA's shared::cta window inside the
shared::cluster window does. ClusterShared serves loads, stores and atomics on such addresses from the
CTA each lane names.

Cluster barrier. ``barrier.cluster.arrive`` counts one arrival of the warp (``.aligned`` or not: the
functional model counts per warp), ``barrier.cluster.wait`` releases a warp once every warp of the
cluster that has not exited has arrived as often as it has. An exited warp counts as arrived (as
bar.sync counts only the CTA's live warps here). ``.release`` / ``.acquire`` / ``.relaxed`` need nothing
more: every store of this model is visible at once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import UsageError
from sim.functional.memory import Fault, FlatMemory

if TYPE_CHECKING:
    from sim.functional.warp import CTA, Warp
    from sim.ptx.ir import Kernel

# source: CUDA C++ Programming Guide, "Thread Block Clusters": "a maximum of 8 thread blocks in a cluster
# is supported as a portable cluster size"; H100 allows 16 with cudaFuncAttributeNonPortableClusterSizeAllowed
PORTABLE_MAX = 8
NONPORTABLE_MAX = 16
DSMEM_STRIDE = 1 << 24  # model choice: larger than any CTA's shared memory (228 KiB on sm_90)

Dim3 = tuple[int, int, int]


def _dims(vals: Sequence[int]) -> Dim3:
    v = [int(x) for x in vals] + [1] * (3 - len(vals))
    return (v[0], v[1], v[2])


def cluster_shape(k: Kernel, launch_cluster: Dim3 | None, grid: Dim3, nonportable: bool, file: str) -> Dim3:
    """The cluster shape of a launch of ``k``, checked; (1, 1, 1) for a launch without clusters."""
    req = k.directives.get("reqnctapercluster")
    fixed = _dims(req) if req else None
    shown = ",".join(map(str, launch_cluster)) if launch_cluster else ""
    if req and fixed is not None and launch_cluster is not None and tuple(launch_cluster) != fixed:
        raise UsageError(f"kernel {k.name} declares .reqnctapercluster {', '.join(map(str, req))}: drop --cluster "
                         f"{shown} or give --cluster {','.join(map(str, fixed))}", file, k.line)
    shape = fixed or (tuple(launch_cluster) if launch_cluster else None)
    if shape is None:
        if "explicitcluster" in k.directives:
            raise UsageError(f"kernel {k.name} declares .explicitcluster: launch it with --cluster X,Y,Z", file,
                             k.line)
        return (1, 1, 1)
    sx, sy, sz = shape
    if min(shape) < 1:
        raise UsageError(f"cluster shape {sx},{sy},{sz}: every dimension must be >= 1", file)
    size = sx * sy * sz
    limit = NONPORTABLE_MAX if nonportable else PORTABLE_MAX
    if size > limit:
        fix = "give at most 16 CTAs" if nonportable else \
            "give at most 8 CTAs, or up to 16 with --cluster-nonportable"
        raise UsageError(f"a cluster of {size} CTAs ({sx},{sy},{sz}) is larger than {limit}: {fix}", file)
    bad = [i for i in range(3) if grid[i] % shape[i]]
    if bad:
        g = ",".join(map(str, grid))
        raise UsageError(f"grid {g} does not divide into clusters of {sx},{sy},{sz} (dimension {'xyz'[bad[0]]}): "
                         "give a grid that is a multiple of the cluster shape", file)
    maxrank = k.directives.get("maxclusterrank")
    if maxrank and size > int(maxrank[0]):
        raise UsageError(f"kernel {k.name} declares .maxclusterrank {maxrank[0]}: a cluster of {size} CTAs is "
                         f"larger; give at most {maxrank[0]}", file, k.line)
    return (sx, sy, sz)


def is_explicit(k: Kernel, launch_cluster: Dim3 | None) -> bool:
    return bool(launch_cluster) or bool(k.directives.get("reqnctapercluster"))


def cluster_order(grid: Dim3, shape: Dim3) -> list[Dim3]:
    """Every ctaid of the grid, cluster by cluster (x fastest), rank by rank inside each."""
    gx, gy, gz = grid
    sx, sy, sz = shape
    out: list[Dim3] = []
    for cz in range(gz // sz):
        for cy in range(gy // sy):
            for cx in range(gx // sx):
                for rz in range(sz):
                    for ry in range(sy):
                        for rx in range(sx):
                            out.append((cx * sx + rx, cy * sy + ry, cz * sz + rz))
    return out


def rank_of(ctaid: Dim3, shape: Dim3) -> int:
    sx, sy, sz = shape
    return ctaid[0] % sx + (ctaid[1] % sy) * sx + (ctaid[2] % sz) * sx * sy


@functools.lru_cache(maxsize=64)  # every warp of a CTA asks; CTAs are made a few at a time
def cluster_sregs(ctaid: Dim3, grid: Dim3, shape: Dim3, explicit: bool) -> dict[str, Any]:
    """The cluster special registers of the CTA ``ctaid`` (a shared dict: copy it, do not change it)."""
    u32 = np.uint32
    out: dict[str, Any] = {"%cluster_ctarank": u32(rank_of(ctaid, shape)),
                           "%cluster_nctarank": u32(shape[0] * shape[1] * shape[2]),
                           "%is_explicit_cluster": u32(int(explicit))}
    for i, a in enumerate("xyz"):
        out[f"%cluster_ctaid.{a}"] = u32(ctaid[i] % shape[i])
        out[f"%cluster_nctaid.{a}"] = u32(shape[i])
        out[f"%clusterid.{a}"] = u32(ctaid[i] // shape[i])
        out[f"%nclusterid.{a}"] = u32(grid[i] // shape[i])
    return out


class ClusterHooks:
    """What the timing model is told of cross-CTA events (sim.timing.cluster); the functional runner
    rechecks every waiting warp each round instead and leaves ``Cluster.hooks`` None."""

    def barrier_arrived(self, w: Warp) -> None:  # a barrier.cluster.arrive issued, or a warp exited
        raise NotImplementedError

    def mbarrier_signalled(self, cta: CTA, w: Warp) -> None:  # a remote mbarrier arrive
        raise NotImplementedError

    def ct_of(self, cta: CTA) -> Any:  # the timing model's state of one of the cluster's CTAs
        raise NotImplementedError


class Cluster:
    """The CTAs of one cluster, by rank, and the cluster barrier's arrival counts (per warp)."""

    def __init__(self, ctas: list[CTA]):
        self.ctas = ctas
        self.arrived: dict[int, int] = {}  # id(warp) -> barrier.cluster.arrive count
        self.hooks: ClusterHooks | None = None
        for r, c in enumerate(ctas):
            c.cluster = self
            c.rank = r
            c.dsmem = ClusterShared(self, c)

    def arrive(self, w: Warp) -> int:
        n = self.arrived.get(id(w), 0) + 1
        self.arrived[id(w)] = n
        if self.hooks is not None:
            self.hooks.barrier_arrived(w)
        return n

    def ready(self, w: Warp) -> bool:
        """Whether the cluster barrier releases ``w``: every live warp arrived as often as ``w`` has."""
        need = self.arrived.get(id(w), 0)
        arrived = self.arrived
        return all(x.done or arrived.get(id(x), 0) >= need for c in self.ctas for x in c.warps)

    def target(self, addr: int) -> tuple[CTA, int]:
        """(CTA, offset) a shared::cluster byte offset (mapa's encoding) names."""
        r = addr // DSMEM_STRIDE - 1
        if r < 0:
            raise KeyError(addr)
        return self.ctas[r], addr % DSMEM_STRIDE


def link(ctas: list[CTA]) -> Cluster:
    return Cluster(ctas)


class ClusterShared:
    """Shared memory as one CTA of a cluster sees it through shared::cluster addresses: offsets below
    DSMEM_STRIDE are its own, ``(r + 1) * DSMEM_STRIDE + off`` is offset ``off`` of rank r."""

    def __init__(self, cluster: Cluster, own: CTA):
        self.cluster = cluster
        self.own = own
        self.name = "shared::cluster"

    def _split(self, addrs: np.ndarray) -> list[tuple[np.ndarray, FlatMemory, np.ndarray]]:
        a = addrs.astype(np.int64)
        rank = a // DSMEM_STRIDE - 1
        n = len(self.cluster.ctas)
        bad = rank >= n
        if bad.any():
            j = int(np.argmax(bad))
            raise Fault(j, int(a[j]), f"distributed shared memory address names CTA rank {int(rank[j])} of a "
                        f"cluster of {n}")
        out = []
        for r in np.unique(rank):
            sel = rank == r
            mem = self.own.shared if r < 0 else self.cluster.ctas[int(r)].shared
            out.append((sel, mem, a[sel] % DSMEM_STRIDE))
        return out

    @staticmethod
    def _remap(f: Fault, sel: np.ndarray) -> Fault:
        f.lane = int(np.flatnonzero(sel)[f.lane]) if f.lane < int(sel.sum()) else 0
        return f

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        out = np.zeros((len(addrs), n), dtype=dt)
        for sel, mem, off in self._split(addrs):
            try:
                out[sel] = mem.load(off, dt, n)
            except Fault as f:
                raise self._remap(f, sel) from None
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        for sel, mem, off in self._split(addrs):
            try:
                mem.store(off, values[sel], dt)
            except Fault as f:
                raise self._remap(f, sel) from None


def mapa(addr: np.ndarray, rank: np.ndarray, base: int) -> np.ndarray:
    """mapa's result: the shared::cluster address of the same offset in CTA ``rank`` (``base``: 0 for
    .shared::cluster operands, SHARED_WINDOW for generic ones)."""
    a = addr.astype(np.uint64) - np.uint64(base)
    off = a % np.uint64(DSMEM_STRIDE)
    return np.uint64(base) + (rank.astype(np.uint64) + np.uint64(1)) * np.uint64(DSMEM_STRIDE) + off


__all__ = ["Cluster", "ClusterHooks", "ClusterShared", "DSMEM_STRIDE", "NONPORTABLE_MAX", "PORTABLE_MAX",
           "cluster_order", "cluster_shape", "cluster_sregs", "is_explicit", "link", "mapa", "rank_of"]
