"""Thread block clusters in SASS (sm_90a): what ptxas 13 writes for %cluster_* registers, shared::cluster
addresses (mapa), barrier.cluster and generic accesses to another CTA's shared memory, read from the
nvdisasm listings of tests/fixtures/cluster/*.ptx (bulk_peer, tma_multicast, dsmem_ring, cluster_rounds):

    S2UR UR6, SR_CgaCtaId                   %cluster_ctarank (the CTA's rank in its cluster)
    ULEA UR17, UR6, UR14, 0x18              a shared address: offset | rank << 24 (every LDS/STS/SYNCS/UTMA*)
    UPRMT UR4, UR7, 0x654, UR4              mapa: the rank byte (bits 24..31) replaced by the target rank
    ULDC UR16, c[0x0][0x188]                %cluster_nctarank
    LDC c[0x0][0x140]                       %is_explicit_cluster: barrier.cluster is UCGABAR_ARV / _WAIT where it
                                            is 1, BAR.SYNC 0x0 (a cluster of one CTA) where it is 0
    LDC c[0x0][0x144/0x148/0x14c]           %cluster_nctaid.x/y/z
    ULDC c[0x0][0x150/0x154/0x158]          1 / %cluster_nctaid.x/y/z as f32: %clusterid = F2I.TRUNC(ctaid * it),
                                            %cluster_ctaid = ctaid - clusterid * nctaid
    LDC c[0x0][0x15c/0x160/0x164]           %nclusterid.x/y/z
    S2R R17, SR_SWINHI                      the high word of a generic shared address (ld/st/atom on a
                                            mapa'd generic address: LD.E / ST.E / ATOM.E [R12.64])
    MEMBAR.ALL.GPU; ERRBAR; CGAERRBAR;      barrier.cluster.arrive{.release}
    UCGABAR_ARV
    UCGABAR_WAIT; CCTL.IVALL                barrier.cluster.wait{.acquire}

Model. A shared window address is ``offset | rank << 24`` (OFFSET_BITS below); LDS / STS / ATOMS / LDSM /
LDGSTS reach the executing CTA's memory, whose rank byte they carry (or 0); SYNCS, UBLKCP and UTMALDG
.MULTICAST reach the CTA the rank byte names (sim/sass/exec_tma.py). A generic address whose high word is
SR_SWINHI is the shared window address in its low word (so ``{mapa, SR_SWINHI}`` reaches another CTA),
any other generic address is global. The CTAs of a cluster run together (sim/sass/exec.py run_ctas);
UCGABAR_ARV counts one arrival of the warp, UCGABAR_WAIT holds the warp until every warp of the cluster
that has not exited has arrived as often (as PTX mode's barrier.cluster, sim/cluster.py). The f32
reciprocal at c[0x0][0x150..] is 1/n rounded up, so that ctaid * it truncates to ctaid / n (exact for
powers of two; what the driver writes there for other n is not documented: model choice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.cluster import rank_of
from sim.functional.memory import SHARED_WINDOW, Fault, FlatMemory
from sim.sass.exec_operands import Ctx
from sim.sass.exec_state import Cta, Group, Warp

OFFSET_BITS = 0xFFFFFF  # a shared window address: the offset below bit 24, the CTA's rank above
SWIN_HI = SHARED_WINDOW >> 32  # SR_SWINHI
# constant bank 0 (source: the dsmem_ring listing, see the docstring): (offset, what)
EXPLICIT_BANK = 0x140  # %is_explicit_cluster (cluster_latency's listing: LDC R4, c[0x0][0x140]; ISETP.EQ P2, R4, 1)
NCTAID_BANK = 0x144  # %cluster_nctaid.x/y/z
RECIP_BANK = 0x150  # f32 1 / %cluster_nctaid.x/y/z
NCLUSTER_BANK = 0x15C  # %nclusterid.x/y/z
NCTARANK_BANK = 0x188  # %cluster_nctarank

CtlExec = Callable[[Warp, Group, np.ndarray], None]


def cluster_bank(cb: FlatMemory, grid: tuple[int, int, int], shape: tuple[int, int, int], explicit: bool) -> None:
    """Write the cluster words of constant bank 0 (for every launch: a launch without clusters is one of
    (1, 1, 1), whose words ptxas reads too when a kernel names %cluster_*)."""
    u32 = np.uint32
    words = {NCTAID_BANK: np.array(shape, dtype=u32),
             NCLUSTER_BANK: np.array([g // s for g, s in zip(grid, shape)], dtype=u32),
             NCTARANK_BANK: np.array([shape[0] * shape[1] * shape[2]], dtype=u32),
             EXPLICIT_BANK: np.array([int(explicit)], dtype=u32)}
    rec = np.array([1.0 / s for s in shape], dtype=np.float32)
    rec = np.where(rec.astype(np.float64) * np.array(shape) < 1.0, np.nextafter(rec, np.float32(2)), rec)
    words[RECIP_BANK] = rec.astype(np.float32).view(u32)
    for off, v in words.items():
        cb.data[off: off + 4 * v.size] = v.view(np.uint8)


def link(ctas: list[Cta], shape: tuple[int, int, int]) -> None:
    """The CTAs of one cluster (rank order, as sim.cluster.cluster_order lists them) know each other."""
    for c in ctas:
        c.rank = rank_of(c.ctaid, shape)
        c.peers = ctas
    assert all(c.rank == i for i, c in enumerate(ctas))


def own_offsets(w: Warp, addrs: np.ndarray) -> np.ndarray:
    """Shared window addresses of an LDS / STS / ATOMS / LDSM / LDGSTS as offsets in the executing CTA's
    memory: the rank byte must be 0 or the CTA's own rank."""
    a = np.asarray(addrs)
    if not a.size or len(w.cta.peers) == 1:  # no cluster: the window's offsets as they are (a rank byte faults)
        return a
    hi = a.astype(np.int64) >> 24
    if int(hi.max()) == 0:
        return a
    bad = (hi != 0) & (hi != w.cta.rank)
    if bad.any():
        j = int(np.argmax(bad))
        raise Fault(j, int(a[j]), f"a shared::cta access to the window of CTA rank {int(hi[j])} (this CTA is rank "
                    f"{w.cta.rank}): another CTA's shared memory is reached through a generic address (LD/ST.E)")
    return (a.astype(np.int64) & OFFSET_BITS).astype(a.dtype)


def target(w: Warp, addr: int) -> tuple[Cta, int]:
    """The CTA and offset a shared window address names (its rank byte; 0 and the own rank are the own CTA)."""
    rank = (int(addr) >> 24) & 0xFF
    try:
        cta = w.cta.peer(rank)
    except KeyError:
        raise Fault(0, int(addr), f"shared::cluster address names CTA rank {rank} of a cluster of "
                    f"{len(w.cta.peers)}") from None
    return cta, int(addr) & OFFSET_BITS


def _split(addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lanes whose generic address is in the shared window, every address's low word)."""
    a = np.asarray(addrs).astype(np.uint64)
    return (a >> np.uint64(32)) == np.uint64(SWIN_HI), (a & np.uint64(0xFFFFFFFF)).astype(np.int64)


class GenericView:
    """Memory as an LD / ST / ATOM (generic addresses) of a warp sees it: the shared window (SR_SWINHI in the
    high word; the low word's rank byte names the cluster CTA) or global memory."""

    def __init__(self, w: Warp):
        self.w = w

    def _parts(self, addrs: np.ndarray) -> list[tuple[np.ndarray, Any, np.ndarray]]:
        shared, low = _split(addrs)
        out: list[tuple[np.ndarray, Any, np.ndarray]] = []
        if (~shared).any():
            out.append((~shared, self.w.L.gmem, np.asarray(addrs).astype(np.uint64)[~shared]))
        if shared.any():
            ranks = (low >> 24) & 0xFF
            for r in np.unique(ranks[shared]):
                sel = shared & (ranks == r)
                j = int(np.argmax(sel))
                cta, _ = target(self.w, int(low[j]))
                out.append((sel, cta.shared, low[sel] & OFFSET_BITS))
        return out

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        out = np.zeros((len(addrs), n), dtype=dt)
        for sel, mem, a in self._parts(addrs):
            try:
                out[sel] = mem.load(a, dt, n)
            except Fault as f:
                raise Fault(int(np.flatnonzero(sel)[f.lane]), f.addr, f.message) from None
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        for sel, mem, a in self._parts(addrs):
            try:
                mem.store(a, values[sel], dt)
            except Fault as f:
                raise Fault(int(np.flatnonzero(sel)[f.lane]), f.addr, f.message) from None


def generic_record(w: Warp, act: np.ndarray) -> tuple[str, np.ndarray]:
    """The space and addresses the timing model charges a generic access by: global, shared (the own CTA's
    window) or shared::cluster (another CTA's: the shared access plus the SM-to-SM trip)."""
    shared, low = _split(act)
    if not shared.any() or not shared.all():  # global (a mix of windows is timed as global)
        return "global", np.asarray(act).astype(np.uint64)
    ranks = (low >> 24) & 0xFF
    remote = (ranks != w.cta.rank) & (ranks != 0)
    return ("shared::cluster" if remote.any() else "shared"), (low & OFFSET_BITS).astype(np.uint64)


# -- the cluster barrier -----------------------------------------------------------------------------
def b_cgabar_arv(cx: Ctx) -> Callable[[Warp, np.ndarray], None]:
    """UCGABAR_ARV: one arrival of the warp at the cluster barrier (barrier.cluster.arrive)."""
    cx.mods(set())

    def run(w: Warp, m: np.ndarray) -> None:
        w.cga += 1
    return run


def b_cgabar_wait(cx: Ctx) -> CtlExec:
    """UCGABAR_WAIT: the group waits until every warp of the cluster that has not exited arrived as often as
    its warp (released by cga_release)."""
    cx.mods(set())

    def run(w: Warp, g: Group, m: np.ndarray) -> None:
        g.count = w.cga
        g.wait = "cga"
    return run


def cga_release(ctas: list[Cta]) -> list[Warp]:
    """Release the groups waiting at UCGABAR_WAIT whose cluster arrived; returns their warps."""
    warps = [w for c in ctas for w in c.warps]
    waiting = [(w, g) for w in warps for g in w.groups if g.wait == "cga"]
    if not waiting:
        return []
    least = min((w.cga for w in warps if not w.done), default=0)
    out = []
    for w, g in waiting:
        if least >= g.count:
            g.wait = ""
            g.pc += 1
            out.append(w)
    return out


def b_nop(cx: Ctx) -> Callable[[Warp, np.ndarray], None]:
    """ERRBAR / CGAERRBAR (error barriers before a cluster arrive: nothing to wait for here)."""
    cx.mods(set())
    return lambda w, m: None


SASS_CLUSTER_OPS: dict[str, Callable[[Ctx], Any]] = {"UCGABAR_ARV": b_cgabar_arv, "ERRBAR": b_nop,
                                                     "CGAERRBAR": b_nop}
SASS_CLUSTER_CTL: dict[str, Callable[[Ctx], CtlExec]] = {"UCGABAR_WAIT": b_cgabar_wait}

__all__ = ["OFFSET_BITS", "SASS_CLUSTER_CTL", "SASS_CLUSTER_OPS", "cga_release", "cluster_bank", "link",
           "own_offsets", "GenericView", "generic_record", "target"]
