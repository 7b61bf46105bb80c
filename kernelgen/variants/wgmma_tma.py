"""Hopper warp-specialised persistent GEMM: TMA (cp.async.bulk.tensor.2d, 128-byte swizzle) into a ring of
``stages`` shared stages guarded by full/empty mbarriers, wgmma.mma_async m64nNk16 from shared-memory
descriptors, one wgmma group kept in flight.

CTA: warpgroup 0 is the producer (setmaxnreg.dec to 40 with two consumers; its thread 0 issues every
TMA load, the other 127 threads exit), warpgroups 1..C the consumers (C = TILE_M / tm; setmaxnreg.inc
to 232 with C = 2, the CUTLASS 168/40/232 split of 384 threads' 64 Ki registers). Consumer c owns rows
c*tm .. c*tm + tm - 1 of the tile and all TILE_N columns, as wgmma.py's warpgroups do.

Persistent: grid = min(tiles, PERSISTENT_CTAS); CTA i walks tiles i, i + nctaid.x, ... in grouped order
(GROUP_M tile rows side by side, column by column, so the B tiles of a group stay in the L2). Producer
and consumers walk the same sequence and share one running (stage, phase) across tiles.

Shared layout (wgmma.py's descriptors, unchanged): a K-major tile (A row-major, B column-major) is one
TMA box [64, mn] = mn rows of 128 bytes; an MN-major tile (A column-major, B row-major) is mn / 64 boxes
[64, 64] = 64 k-rows of 128 bytes each, 8192 bytes apart (LBO). TMA's 128-byte swizzle (chunk ^= row % 8
within the 1024-byte aligned atom, docs/tensormap-contract) is the layout the descriptors' swizzle mode
reads. Out-of-range boxes are zero-filled by TMA, so M, N, K are arbitrary; the row strides must be
multiples of 16 bytes (unavailable() routes other shapes to mma).

Ring: full[s] (count 1: the producer's arrive.expect_tx of the stage's box bytes, then the TMA
complete_tx), empty[s] (count 128 C: every consumer thread arrives once the wgmmas that read stage s have
completed, i.e. after the wait_group 1 of the next K tile, or the wait_group 0 that ends a tile).
Tensor maps (docs/kernel-metadata.md, "tensormap" params): A and B reach the kernel only through them
(hidden buffers).

Epilogue (tma_store(spec): beta = 0 and a row-major f32/f16/bf16 D with 16-byte row strides): each consumer
warpgroup's tm x TILE_N result is TILE_N * es / 128 column slabs of tm rows x 128 bytes (a TMA box [128 / es,
tm] of the D tensor map, 128-byte swizzle). The consumer writes a slab's values (alpha, scale, bias,
activation, cast applied) into a staging buffer with st.shared (f32 pairs as v2.f32, 16-bit pairs packed by
cvt.rn.{bf16,f16}x2.f32: conflict-free), fence.proxy.async.shared::cta, bar.sync 1 + consumer, 128, and its
thread 0 issues cp.async.bulk.tensor.2d.global.shared::cta.bulk_group + commit_group (the TMA unit clips rows
past M and columns past N); the warpgroup then goes on to the next tile while the stores drain. Shared
holds `buffers` slabs per consumer (store_slabs: all of them when they fit beside the ring, else as many as
fit, at least one); before a buffer is rewritten its thread 0 waits with cp.async.bulk.wait_group.read
(0 once per tile when every slab has a buffer, else buffers - 1 per slab on a rolling buffer). beta != 0 (C is
read) and a column-major D keep the registers -> global epilogue of wgmma.py (emit_acc_epilogue).
Shared layout: A stages, B stages, staging (consumer-major), full[S], empty[S].

Clusters (Tiling.cluster_m / cluster_n = 2; opt-in, docs/wgmma-tma.md section 6): the two CTAs of a cluster take
neighbouring tiles of one cluster tile and share an operand (B along M, A along N); each loads part %cluster_ctarank
of every box of it and multicasts it (ctaMask 0b11); empty[s] counts one arrival per consumer warp of the cluster
(lane r of each warp arrives on rank r's barrier through mapa); a cluster barrier follows the mbarrier init and the
producer waits for every stage's last release before it exits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, tally
from kernelgen.emit_common import (
    PROFILE_SLOTS,
    Param,
    ceil_div,
    emit_activation,
    emit_profile_start,
    header_json,
    kernel_params,
    load_params,
    metadata,
)
from kernelgen.models.schedule import CycleModel
from kernelgen.models.sync import SyncPlan
from kernelgen.models.tma_cycles import tma_cycle_model
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import OperandTile, Tiling, log2, operand_tiles
from kernelgen.variants.wgmma import (
    ATOM,
    BLOCK,
    ROW,
    WGMMA_FORMS,
    Wgmma,
    desc_high,
    emit_acc_epilogue,
    emit_descriptors,
    emit_wgmma_tile,
    kmajor,
)
from sim.hw import HwConfig

PERSISTENT_CTAS = 132  # H200 SMs ([core.count] of hwconfigs/h200.yaml); the launch may override the grid
GROUP_M = 8  # tile rows per group of the persistent tile order
SHARED_LIMIT = 227 * 1024  # sm_90 dynamic shared memory per CTA (opt-in maximum)
CLUSTERS = ((2, 1), (1, 2))  # (cluster_m, cluster_n) searched besides no cluster
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg with two consumer warpgroups (384 threads x 168)
PROFILE_BARRIER = 3  # named barrier of the consumers at the end of a --profile kernel (1 + c: the TMA-store epilogue)


def persistent_grid(t: Tiling, mn: tuple[int, int]) -> int:
    """CTAs of the persistent launch: one per tile (cluster tile with a cluster, times its CTAs) up to
    PERSISTENT_CTAS, in whole clusters."""
    M, N = mn
    cluster_tiles = ceil_div(M, t.bm * t.cluster_m) * ceil_div(N, t.bn * t.cluster_n)
    return min(cluster_tiles, PERSISTENT_CTAS // t.cluster) * t.cluster


def profile_tiles(t: Tiling, mn: tuple[int, int]) -> list[int]:
    """Tiles each persistent CTA walks (its --profile record's tile count): CTA i takes tiles i, i + grid, ...
    (cluster tiles, by cluster, with a cluster)."""
    M, N = mn
    tiles = ceil_div(M, t.bm * t.cluster_m) * ceil_div(N, t.bn * t.cluster_n)
    walkers = persistent_grid(t, mn) // t.cluster
    return [ceil_div(tiles - i // t.cluster, walkers) for i in range(persistent_grid(t, mn))]


def box(tile: OperandTile, mn: int) -> tuple[list[int], int]:
    """(TMA box innermost first, boxes per stage): K-major [128 bytes of K, mn] once, MN-major [64, 64] mn / 64
    times."""
    return ([ROW // tile.elem_shared, mn], 1) if kmajor(tile) else ([64, 64], mn // 64)


def ring_and_barriers(spec: GemmSpec, t: Tiling) -> int:
    """Bytes of the stage ring and its full/empty mbarriers (8 bytes each)."""
    ta, tb = operand_tiles(spec, t)
    return t.stages * (ta.stage_bytes + tb.stage_bytes) + 16 * t.stages


def ring_bytes(spec: GemmSpec, t: Tiling) -> int:
    """Where the shared memory after the ring starts (the TMA-store staging): the tiling's variant's
    `ring_bytes` (wgmma_tma: the ring and its mbarriers; wgmma_fp8 adds its scale slots and aligns)."""
    from kernelgen.variants import get

    v = get(t.variant)
    assert isinstance(v, WgmmaTma), t.variant
    return v.ring_bytes(spec, t)


def tma_store(spec: GemmSpec) -> bool:
    """Whether the epilogue goes registers -> shared staging -> TMA store: no C to read (beta = 0 keeps the
    epilogue to alpha/scale/bias/activation/cast), a row-major f32/f16/bf16 D whose row stride is a multiple of
    16 bytes (a tensor map's). Otherwise the accumulators go registers -> global (emit_acc_epilogue)."""
    es = DTYPE_BYTES.get(spec.dtype_out, 0)
    return (not spec.has_c and spec.layout_c == "row" and spec.dtype_out in ("f32", "f16", "bf16", "s32")
            and (spec.dtype_acc == "f32") == (spec.dtype_out != "s32")  # s8: exact s32 sums, or emit_epilogue's cvt
            and spec.N.align(16 // es) >= 16 // es)


def store_slabs(spec: GemmSpec, t: Tiling) -> tuple[int, int, int]:
    """(slabs, buffers, slab bytes) of the TMA-store epilogue, per consumer warpgroup: its tm x TILE_N
    sub-tile is TILE_N * es / 128 column slabs of one 128-byte swizzle row each (a TMA box [128 / es, tm]);
    `buffers` of them (at most all) fit in shared memory beside the stage ring. (0, 0, 0) without TMA store;
    buffers 0 when not even one fits."""
    if not tma_store(spec):
        return 0, 0, 0
    slab = t.tm * ROW
    slabs = t.bn * DTYPE_BYTES[spec.dtype_out] // ROW
    room = (SHARED_LIMIT - ring_bytes(spec, t)) // (t.grid_m * slab)
    return slabs, max(0, min(slabs, room)), slab


def smem_bytes(spec: GemmSpec, t: Tiling) -> int:
    """Dynamic shared bytes: the stage ring, the consumers' TMA-store staging slabs, the mbarriers."""
    _, nb, slab = store_slabs(spec, t)
    return ring_bytes(spec, t) + t.grid_m * nb * slab


def tensormaps(spec: GemmSpec, t: Tiling, name: str) -> list[dict[str, Any]]:
    """The "tensormap" metadata params of A and B (dims innermost first, byte strides of dims[1:])."""
    M, N, K = spec.nominal()
    out = []
    for role, tile, mn, ext in (("A", operand_tiles(spec, t)[0], t.bm, M), ("B", operand_tiles(spec, t)[1], t.bn, N)):
        es = DTYPE_BYTES[spec.dtype_a]
        dims = [K, ext] if kmajor(tile) else [ext, K]
        out.append({"name": f"{name}_tmap_{role.lower()}", "kind": "tensormap", "of": role,
                    "dtype": spec.dtype_a, "dims": dims, "strides": [dims[0] * es],
                    "box": load_box(tile, mn, t, role.lower())[0], "swizzle": 128, "element_strides": [1, 1]})
    return out


def store_tensormap(spec: GemmSpec, t: Tiling, name: str) -> dict[str, Any]:
    """The "tensormap" metadata param of D for the TMA-store epilogue: row-major [N, M], box [128 / es, tm]
    (one staging slab), 128-byte swizzle (the layout the consumers write the slab in)."""
    M, N, _ = spec.nominal()
    es = DTYPE_BYTES[spec.dtype_out]
    return {"name": f"{name}_tmap_d", "kind": "tensormap", "of": "D", "dtype": spec.dtype_out, "dims": [N, M],
            "strides": [N * es], "box": [ROW // es, t.tm], "swizzle": 128, "element_strides": [1, 1]}


def _tile_origin(b: PtxBuilder, tile: str, tiles: tuple[str, str], t: Tiling) -> tuple[str, str]:
    """(bm0, bn0) of linear tile index `tile` in grouped order: GROUP_M tile rows, column-major inside."""
    tiles_m, tiles_n = tiles
    width, grp, first, gsz, r, im, jn, bm0, bn0 = b.regs("u32", 9)
    p = b.reg("pred")
    b.i(f"mul.lo.u32 {width}, {tiles_n}, {GROUP_M}")
    b.i(f"div.u32 {grp}, {tile}, {width}")
    b.i(f"mul.lo.u32 {first}, {grp}, {GROUP_M}")
    b.i(f"sub.u32 {gsz}, {tiles_m}, {first}")
    b.i(f"setp.gt.u32 {p}, {gsz}, {GROUP_M}")
    b.i(f"selp.b32 {gsz}, {GROUP_M}, {gsz}, {p}")
    b.i(f"mul.lo.u32 {r}, {grp}, {width}")
    b.i(f"sub.u32 {r}, {tile}, {r}")
    b.i(f"rem.u32 {im}, {r}, {gsz}")
    b.i(f"add.u32 {im}, {im}, {first}")
    b.i(f"div.u32 {jn}, {r}, {gsz}")
    b.i(f"shl.b32 {bm0}, {im}, {log2(t.bm)}")
    b.i(f"shl.b32 {bn0}, {jn}, {log2(t.bn)}")
    return bm0, bn0


def empty_count(t: Tiling) -> int:
    """Arrivals that release a stage (empty[s]'s count): every consumer thread (128 per warpgroup), or with a
    cluster one arrival per consumer warp of every CTA of the cluster."""
    return 4 * t.grid_m * t.cluster if t.clustered else 128 * t.grid_m


def first_tile(t: Tiling) -> str:
    """The special register a CTA starts its walk of the tile schedule at: its cluster's with a cluster (the
    two CTAs of a cluster walk the cluster tiles together), else its own."""
    return "%clusterid.x" if t.clustered else "%ctaid.x"


def arrive_op(t: Tiling) -> str:
    """The consumers' release of a stage: a local arrive, or (cluster) one on a shared::cluster address
    (mapa's) with release semantics at cluster scope, so the partner's producer sees the stage read."""
    return ("mbarrier.arrive.release.cluster.shared::cluster.b64" if t.clustered
            else "mbarrier.arrive.shared::cta.b64")


def cta_origin(b: PtxBuilder, tile: str, tiles: tuple[str, str], t: Tiling, rank: str | None) -> tuple[str, str]:
    """(bm0, bn0) of this CTA in linear tile `tile` of the grouped order; with a cluster the schedule's tiles
    are cluster tiles (cluster_m TILE_M x cluster_n TILE_N) and the CTA of rank r takes the r-th block."""
    if not t.clustered:
        return _tile_origin(b, tile, tiles, t)
    assert rank is not None
    bm0, bn0 = _tile_origin(b, tile, tiles, replace(t, bm=t.bm * t.cluster_m, bn=t.bn * t.cluster_n))
    off = b.reg("u32")
    along_m = t.cluster_m > 1
    b.i(f"shl.b32 {off}, {rank}, {log2(t.bm if along_m else t.bn)}")
    b.i(f"add.u32 {bm0 if along_m else bn0}, {bm0 if along_m else bn0}, {off}")
    return bm0, bn0


@dataclass
class Setup:
    """What emit_setup leaves in registers: the tensor-map addresses by role, %tid.x and its warpgroup, the
    shared carve-up (A stages, B stages, full[0], empty[0]), the staging's first byte ("" without staging),
    the tile schedule (tiles_m, tiles_n, tiles, K tiles, CTAs or clusters walking them) and the CTA's rank in
    its cluster ("" without a cluster)."""

    tmap: dict[str, str]
    tid: str
    wg: str
    smem: tuple[str, str, str, str]
    staging: str
    sched: tuple[str, str, str, str, str]
    rank: str


def emit_setup(b: PtxBuilder, name: str, t: Tiling, P: dict[str, str], stage_bytes: tuple[int, int],
               roles: tuple[str, ...] = ("a", "b"), staging: int | None = None, ktiles_note: str = "") -> Setup:
    """The warp-specialised kernels' common start (wgmma_tma, wgmma_fp8): the tensor maps' generic addresses
    (`{name}_tmap_{role}`), the shared carve-up (stage_bytes: A's and B's bytes per stage; `staging` bytes of
    TMA-store slabs after the B stages, None for no staging register at all), thread 0's mbarrier init (full:
    1 arrival + bytes, empty: empty_count), a CTA barrier (a cluster barrier with a cluster: the
    partner's barriers must be initialised before the first multicast or remote arrive reaches them) and the
    tile schedule with t.bk-wide K tiles (cluster tiles with a cluster)."""
    S = t.stages
    tmap = {}
    for role in roles:
        r = b.reg("u64")
        b.i(f"mov.b64 {r}, {name}_tmap_{role}")
        b.i(f"cvta.param.u64 {r}, {r}")
        tmap[role] = r
    b.comment(f"Shared: {S} A stages of {stage_bytes[0]} B, {S} B stages of {stage_bytes[1]} B, "
              + (f"{staging} B of TMA-store staging, " if staging else "") + f"full[{S}], empty[{S}]")
    if staging is None:
        tid, wg, sa, sb, full0, empty0 = b.regs("u32", 6)
        sst = ""
    else:
        tid, wg, sa, sb, sst, full0, empty0 = b.regs("u32", 7)
    b.i(f"mov.u32 {tid}, %tid.x")
    b.i(f"shr.u32 {wg}, {tid}, 7")
    b.i(f"mov.u32 {sa}, {name}_smem")
    b.i(f"add.u32 {sb}, {sa}, {S * stage_bytes[0]}")
    if sst:
        b.i(f"add.u32 {sst}, {sb}, {S * stage_bytes[1]}")
        b.i(f"add.u32 {full0}, {sst}, {staging}")
    else:
        b.i(f"add.u32 {full0}, {sb}, {S * stage_bytes[1]}")
    b.i(f"add.u32 {empty0}, {full0}, {8 * S}")
    p0, pinit = b.reg("pred"), b.label("init_done")
    b.i(f"setp.ne.u32 {p0}, {tid}, 0")
    b.i(f"@{p0} bra {pinit}")
    for i in range(S):
        b.i(f"mbarrier.init.shared::cta.b64 [{full0}+{8 * i}], 1")
        b.i(f"mbarrier.init.shared::cta.b64 [{empty0}+{8 * i}], {empty_count(t)}")
    b.i("fence.mbarrier_init.release.cluster")
    b.put_label(pinit)
    if t.clustered:
        b.i("barrier.cluster.arrive.release.aligned")
        b.i("barrier.cluster.wait.acquire.aligned")
    else:
        b.i("bar.sync 0")
    cm, cn = t.cluster_m, t.cluster_n
    b.comment(f"Tile schedule: tiles_m x tiles_n tiles, ktiles = {ktiles_note}"
              + (f"; cluster tiles of {cm} x {cn} CTA tiles, walked by the clusters" if t.clustered else ""))
    tiles_m, tiles_n, ntiles, ktiles, nct = b.regs("u32", 5)
    b.i(f"add.u32 {tiles_m}, {P['M']}, {t.bm * cm - 1}")
    b.i(f"shr.u32 {tiles_m}, {tiles_m}, {log2(t.bm * cm)}")
    b.i(f"add.u32 {tiles_n}, {P['N']}, {t.bn * cn - 1}")
    b.i(f"shr.u32 {tiles_n}, {tiles_n}, {log2(t.bn * cn)}")
    b.i(f"mul.lo.u32 {ntiles}, {tiles_m}, {tiles_n}")
    b.i(f"add.u32 {ktiles}, {P['K']}, {t.bk - 1}")
    b.i(f"shr.u32 {ktiles}, {ktiles}, {log2(t.bk)}")
    b.i(f"mov.u32 {nct}, {'%nclusterid.x' if t.clustered else '%nctaid.x'}")
    rank = ""
    if t.clustered:
        rank = b.reg("u32")
        b.i(f"mov.u32 {rank}, %cluster_ctarank")
    return Setup(tmap, tid, wg, (sa, sb, full0, empty0), sst, (tiles_m, tiles_n, ntiles, ktiles, nct), rank)


def _advance_ring(b: PtxBuilder, s: str, phase: str, stages: int) -> None:
    p = b.reg("pred")
    b.i(f"add.u32 {s}, {s}, 1")
    b.i(f"setp.eq.u32 {p}, {s}, {stages}")
    b.i(f"selp.b32 {s}, 0, {s}, {p}")
    b.i(f"@{p} xor.b32 {phase}, {phase}, 1")


def _wait(b: PtxBuilder, bar: str, phase: str, stem: str) -> None:
    """Spin on mbarrier.try_wait.parity until the phase of parity `phase` of `bar` has completed."""
    lab, p = b.label(stem), b.reg("pred")
    b.put_label(lab)
    b.i(f"mbarrier.try_wait.parity.shared::cta.b64 {p}, [{bar}], {phase}")
    b.i(f"@!{p} bra {lab}")


@dataclass
class Profile:
    """--profile of a persistent CTA: the clock64 read at CTA start (every thread), the writer (thread 0 of
    consumer warpgroup 0) and its record's address, PROFILE_SLOTS u64 at [%ctaid.x * PROFILE_SLOTS]; with a
    trace, the CTA's trace base (TRACE_SLOTS u64 per K step after the nctaid.x records) and its step count."""

    start: str
    writer: str
    addr: str
    trace: str = ""
    steps: int = 0
    timer: str = ""
    slots: int = 0  # u64 trace slots per K step (len(TRACE_SLOTS); wgmma_fp8's own layout has more)

    def trace_step(self, b: PtxBuilder, g: str, j: int, who: str, shift: str = "") -> None:
        """_trace_step into this CTA's trace: slot j of K step g."""
        _trace_step(b, self.trace, g, self.steps, j, who, shift, self.slots)


# per K step g: the producer's issue (empty[s] seen) and the end of its TMA issues; for each consumer warpgroup c
# (thread 0 of it) full[g] seen, its wgmmas issued and committed, its wait_group 1 returned, stage g-1 released
TRACE_SLOTS = ("issue", "issued", "full", "wgmma", "waited", "release_prev", "full1", "wgmma1", "waited1",
               "release_prev1")
CONSUMER_SLOTS = 4  # the consumer slots per warpgroup: full, wgmma, waited, release_prev (+ CONSUMER_SLOTS x c)


def _trace_base(b: PtxBuilder, P: dict[str, str], steps: int, slots: int = len(TRACE_SLOTS)) -> str:
    """This CTA's trace: u64 slots after the per-CTA records, [nctaid.x * PROFILE_SLOTS + ctaid.x * slots * steps
    + slots * g + j] (slots = len(TRACE_SLOTS) here)."""
    n, x = b.reg("u32"), b.reg("u32")
    b.i(f"mov.u32 {n}, %nctaid.x")
    b.i(f"mov.u32 {x}, %ctaid.x")
    b.i(f"mul.lo.u32 {x}, {x}, {slots * steps}")
    b.i(f"mad.lo.u32 {x}, {n}, {PROFILE_SLOTS}, {x}")
    off, a = b.reg("u64"), b.reg("u64")
    b.i(f"mul.wide.u32 {off}, {x}, 8")
    b.i(f"add.u64 {a}, {P['profile']}, {off}")
    return a


def _trace_step(b: PtxBuilder, base: str, g: str, steps: int, j: int, who: str, shift: str = "",
                slots: int = len(TRACE_SLOTS)) -> None:
    """clock64 into slot j of K step g (a running count across the CTA's tiles) when g < steps, by `who`;
    `shift` (u64 bytes, a register) moves the slot: the consumer warpgroup's own slots."""
    p, o, a, r = b.reg("pred"), b.reg("u64"), b.reg("u64"), b.reg("u64")
    b.i(f"mov.u64 {r}, %clock64")
    b.i(f"setp.lt.and.u32 {p}, {g}, {steps}, {who}")
    b.i(f"mul.wide.u32 {o}, {g}, {8 * slots}")
    b.i(f"add.u64 {a}, {base}, {o}")
    if shift:
        b.i(f"add.u64 {a}, {a}, {shift}")
    b.i(f"@{p} st.global.u64 [{a}+{8 * j}], {r}")


def _profile_slot(b: PtxBuilder, prof: Profile | None, slot: int, what: str) -> None:
    if prof is None:
        return
    b.comment(f"Profile slot {slot}: clock64 {what}")
    r = b.reg("u64")
    b.i(f"mov.u64 {r}, %clock64")
    b.i(f"@{prof.writer} st.global.u64 [{prof.addr}+{8 * slot}], {r}")


def emit_cta_end(b: PtxBuilder, store: StoreRegs | None, prof: Profile | None, consumers: int) -> None:
    """A persistent CTA's end (wgmma_tma and wgmma_fp8): the TMA-store epilogue's last stores waited for (their
    reads of the staging; with --profile the stores themselves), then --profile's last clock64 slot after both
    consumer warpgroups and the %globaltimer end, and `ret`."""
    if store is not None:
        if prof is not None:
            b.comment("Profile: the last TMA stores complete (not only their reads of the staging)")
            b.i(f"@{store.lane0} cp.async.bulk.wait_group 0")
        b.comment("The staging slabs must outlive the last TMA stores' reads of them")
        b.i(f"@{store.lane0} cp.async.bulk.wait_group.read 0")
    if prof is not None:
        b.comment("Profile: both consumer warpgroups are done before the CTA's last clock64 read")
        b.i(f"bar.sync {PROFILE_BARRIER}, {128 * consumers}")
        _profile_slot(b, prof, 3, "at CTA end")
        gt2 = b.reg("u64")
        b.i(f"mov.u64 {gt2}, %globaltimer")
        b.i(f"@{prof.writer} st.global.u64 [{prof.timer}+8], {gt2}")
    b.i("ret")


def _profile_setup(b: PtxBuilder, P: dict[str, str], start: tuple[str, str], tid: str, steps: int = 0,
                   slots: int = len(TRACE_SLOTS)) -> Profile:
    """One record of PROFILE_SLOTS clock64 values per persistent CTA, written by thread 128 (consumer 0's first):
    0 CTA start, 1 the consumers' start of the tile walk (after setup and setmaxnreg), 2 after the last tile's K
    loop (its wait_group 0), 3 after the last epilogue's TMA stores completed (or its st.global) and both
    consumers' barrier: the CTA's end. The CTA's tile count is the schedule's, ceil((tiles - ctaid) / grid)
    (the header's "profile": "tiles_per_cta")."""
    b.comment(f"Profile (--profile): thread 128 writes {PROFILE_SLOTS} u64 clock64 values per persistent CTA at "
              f"[ctaid.x * {PROFILE_SLOTS} + slot]")
    w, x = b.reg("pred"), b.reg("u32")
    b.i(f"setp.eq.u32 {w}, {tid}, 128")
    b.i(f"mov.u32 {x}, %ctaid.x")
    off, a = b.reg("u64"), b.reg("u64")
    b.i(f"mul.wide.u32 {off}, {x}, {8 * PROFILE_SLOTS}")
    b.i(f"add.u64 {a}, {P['profile']}, {off}")
    b.i(f"@{w} st.global.u64 [{a}], {start[0]}")
    b.comment("Profile: %globaltimer (ns) at CTA start and end into the timer buffer, [ctaid.x * 2 + i]: the SM clock "
              "the cycles ran at")
    toff, ta = b.reg("u64"), b.reg("u64")
    b.i(f"mul.wide.u32 {toff}, {x}, 16")
    b.i(f"add.u64 {ta}, {P['timer']}, {toff}")
    b.i(f"@{w} st.global.u64 [{ta}], {start[1]}")
    return Profile(start[0], w, a, _trace_base(b, P, steps, slots) if steps else "", steps, ta, slots)


def consumer_entry(b: PtxBuilder, t: Tiling, label: str, tid_wg: tuple[str, str], C: int) -> list[str]:
    """The consumers' entry at `label`: with two consumer warpgroups setmaxnreg.inc to CONSUMER_REGS; then each
    thread's cw (its consumer warpgroup, wg - 1), lane, q (warp in the warpgroup), g (lane / 4), t4 (lane % 4)
    and wga (its warpgroup's row offset in a stage: cw * TILE_M/C rows of 128 bytes)."""
    tid, wg = tid_wg
    b.put_label(label)
    if C == 2:
        b.i(f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS}")
    b.comment(f"Consumers: warpgroup c = wg - 1 owns rows c*{t.tm}.. of each tile; q = warp % 4, g = lane / 4, "
              "t4 = lane % 4")
    cw, lane, q, g, t4, wga = regs = b.regs("u32", 6)
    b.i(f"sub.u32 {cw}, {wg}, 1")
    b.i(f"and.b32 {lane}, {tid}, 31")
    b.i(f"shr.u32 {q}, {tid}, 5")
    b.i(f"and.b32 {q}, {q}, 3")
    b.i(f"shr.u32 {g}, {lane}, 2")
    b.i(f"and.b32 {t4}, {lane}, 3")
    b.i(f"mul.lo.u32 {wga}, {cw}, {t.tm * ROW}")
    return regs


def build_start(spec: GemmSpec, name: str, counting: bool, profiled: bool
                ) -> tuple[PtxBuilder, tuple[str, str] | None, list[Param], dict[str, str]]:
    """A TMA kernel's opening: the builder; when `profiled`, the CTA's start clock64 and %globaltimer (`start`:
    their registers) and the "timer" param appended; the params (A and B leave through their tensor maps, not
    as params) and their loaded registers P."""
    b = PtxBuilder(counting)
    start = None
    if profiled:
        gt = b.reg("u64")
        start = (emit_profile_start(b), gt)
        b.i(f"mov.u64 {gt}, %globaltimer")
    params = [p for p in kernel_params(spec, name, profiled) if p.role not in ("A", "B")]
    if start is not None:
        params.append(Param("timer", f"{name}_timer", ".u64", "buffer", "u64"))
    return b, start, params, load_params(b, params)


def _build(spec: GemmSpec, t: Tiling, name: str, counting: bool, profile: bool = False,
           trace: int = 0) -> tuple[PtxBuilder, list[Param]]:
    b, start, params, P = build_start(spec, name, counting, profile or bool(trace))
    ta, tb = operand_tiles(spec, t)
    S, C, ab = t.stages, t.grid_m, spec.dtype_a
    ms, BN = t.tm // 64, t.bn
    a_bytes, b_bytes = ta.stage_bytes, tb.stage_bytes

    slabs, nb, slab = store_slabs(spec, t)
    if slabs and not nb:
        raise ValueError(f"wgmma_tma.py: tiling {t.key()} leaves no room for one {slab}-byte TMA-store slab per "
                         f"consumer beside its {ring_bytes(spec, t)}-byte stage ring; use fewer stages")
    su = emit_setup(b, name, t, P, (a_bytes, b_bytes), ("a", "b", "d") if slabs else ("a", "b"), C * nb * slab,
                    f"ceil(K / {t.bk}) K tiles each")
    tmap, tid, wg, sst = su.tmap, su.tid, su.wg, su.staging
    sa, sb, full0, empty0 = su.smem
    tiles_m, tiles_n, ntiles, ktiles, nct = su.sched
    pz = b.reg("pred")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    consumer = b.label("consumer")
    pc = b.reg("pred")
    b.i(f"setp.ne.u32 {pc}, {wg}, 0")
    b.i(f"@{pc} bra {consumer}")

    _producer(b, spec, t, (ta, tb), (sa, sb, full0, empty0), tmap, (tiles_m, tiles_n, ntiles, ktiles, nct), pz,
              su.rank, (_trace_base(b, P, trace), trace, len(TRACE_SLOTS)) if trace else None)

    cw, lane, q, g, t4, wga = consumer_entry(b, t, consumer, (tid, wg), C)
    store = _store_setup(b, spec, t, (tid, cw, q, g, t4), sst, tmap.get("d")) if slabs else None
    prof = _profile_setup(b, P, start, tid, trace) if start is not None else None
    _profile_slot(b, prof, 1, "as the consumers start their tile walk")
    pone = b.reg("pred")
    b.i("mov.pred " + pone + ", -1")
    acc_t = WGMMA_FORMS[ab][1]
    acc = [b.regs("f32" if acc_t == "f32" else "u32", BN // 2) for _ in range(ms)]  # s32: .b32 registers
    release, signal = empty0, ""
    if t.clustered:
        b.comment(f"Cluster of {t.cluster}: a stage is released to every producer of the cluster, once per warp (the "
                  f"warpgroup's wait_group is collective): lane r < {t.cluster} of each consumer warp arrives on "
                  f"empty[s] of the CTA of rank r, so each CTA's empty[s] counts the {empty_count(t)} consumer warps "
                  "of the cluster")
        peer, release, signal = b.reg("u32"), b.reg("u32"), b.reg("pred")
        b.i(f"and.b32 {peer}, {tid}, 31")
        b.i(f"setp.lt.u32 {signal}, {peer}, {t.cluster}")
        b.i(f"and.b32 {peer}, {peer}, {t.cluster - 1}")
        b.i(f"mapa.shared::cluster.u32 {release}, {empty0}, {peer}")
    tile, s, ph, ps, kt = b.regs("u32", 5)
    b.i(f"mov.u32 {tile}, {first_tile(t)}")
    b.i(f"mov.u32 {s}, 0")
    b.i(f"mov.u32 {ph}, 0")
    b.i(f"mov.u32 {ps}, 0")
    gc = tw = tsh = ""
    if prof is not None and prof.steps:
        gc, tw, tsh = b.reg("u32"), b.reg("pred"), b.reg("u64")
        b.i(f"mov.u32 {gc}, 0")
        b.comment("Trace: thread 0 of each consumer warpgroup writes its own slots (+ 8 x 4 x c bytes)")
        tl = b.reg("u32")
        b.i(f"and.b32 {tl}, {tid}, 127")
        b.i(f"setp.eq.u32 {tw}, {tl}, 0")
        b.i(f"mul.wide.u32 {tsh}, {cw}, {8 * CONSUMER_SLOTS}")
    tloop, cend, kloop, kdone = b.label("c_tile"), b.label("c_end"), b.label("c_k"), b.label("c_kdone")
    b.put_label(tloop)
    pe = b.reg("pred")
    b.i(f"setp.ge.u32 {pe}, {tile}, {ntiles}")
    b.i(f"@{pe} bra {cend}")
    bm0, bn0 = cta_origin(b, tile, (tiles_m, tiles_n), t, su.rank)

    def zero() -> None:
        for blk in acc:
            for r in blk:
                b.i(f"mov.f32 {r}, {f32_hex(0.0)}" if acc_t == "f32" else f"mov.s32 {r}, 0")
    b.part(("wgmma.zero", ms, BN, acc_t), zero)
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"@{pz} bra {kdone}")
    b.put_label(kloop)
    b.region = "iter"
    b.comment("Wait until stage s is full (its TMA bytes have landed)")
    fb = b.reg("u32")
    b.i(f"mad.lo.u32 {fb}, {s}, 8, {full0}")
    _wait(b, fb, ph, "c_full")
    if gc:
        assert prof is not None
        prof.trace_step(b, gc, 2, tw, tsh)
    da, db = emit_descriptors(b, s, (a_bytes, b_bytes), (sa, sb), wga, (desc_high(ta), desc_high(tb)))
    emit_wgmma_tile(b, acc, (da, db), (ta, tb), t.k_steps, ab, -1 if gc else 1, pone)
    if gc:
        assert prof is not None
        prof.trace_step(b, gc, 3, tw, tsh)
        b.i("wgmma.wait_group.sync.aligned 1")
        prof.trace_step(b, gc, 4, tw, tsh)
    b.comment("wait_group 1: the previous K tile's wgmmas are done, so its stage goes back to the producer")
    pk, eb = b.reg("pred"), b.reg("u32")
    b.i(f"setp.ne.u32 {pk}, {kt}, 0")
    if signal:
        b.i(f"and.pred {pk}, {pk}, {signal}")
    b.i(f"mad.lo.u32 {eb}, {ps}, 8, {release}")
    b.i(f"@{pk} {arrive_op(t)} _, [{eb}]")
    if gc:
        assert prof is not None
        prof.trace_step(b, gc, 5, tw, tsh)
        b.i(f"add.u32 {gc}, {gc}, 1")
    b.i(f"mov.u32 {ps}, {s}")
    _advance_ring(b, s, ph, S)
    pl = b.reg("pred")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.region = "post"
    b.i("wgmma.wait_group.sync.aligned 0")
    eb2 = b.reg("u32")
    b.i(f"mad.lo.u32 {eb2}, {ps}, 8, {release}")
    b.i(f"{'@' + signal + ' ' if signal else ''}{arrive_op(t)} _, [{eb2}]")
    b.put_label(kdone)
    _profile_slot(b, prof, 2, "after this tile's K loop (the last tile's value stays)")
    if store is None:
        emit_acc_epilogue(b, spec, P, acc, (cw, q, g, t4), (bm0, bn0), t.tm)
    else:
        emit_store_epilogue(b, spec, P, acc, store, (bm0, bn0), t)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    b.put_label(cend)
    emit_cta_end(b, store, prof, C)
    return b, params


@dataclass
class StoreRegs:
    """A consumer thread's TMA-store state: elected (thread 0 of the warpgroup), the named barrier id
    (1 + consumer), buf0 (its first staging slab), buf (the rolling slab, when fewer buffers than slabs),
    row (the thread's row offset in a slab: (16 q + g) x 128 B, or the stmatrix lane row's), cols (the
    swizzled byte offsets of the thread's column pairs in a slab), tmap (the D map), rowg (warpgroup's first
    tile row), c2 (2 t4: the thread's first column in an n8 block), lane0 and warp_el (lane 0 of warp w: with
    every slab buffered, the stores are issued by lane 0 of the four warps in turn, each waiting on and
    committing its own bulk groups, so no warp holds the next tile's wgmmas for all of them)."""

    elected: str
    bar: str
    buf0: str
    buf: str
    row: str
    cols: list[str]
    tmap: str
    rowg: str
    c2: str
    lane0: str
    warp_el: list[str]


def _store_setup(b: PtxBuilder, spec: GemmSpec, t: Tiling, lane: tuple[str, str, str, str, str], sst: str,
                 tmap: str | None) -> StoreRegs:
    """Per-thread registers of the TMA-store epilogue, computed once per CTA. A slab holds tm rows of 128 bytes
    in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)); a thread's accumulator pair
    (i, i+1) of n8 block nn lies at row 64j + 16q + g + 8h, bytes es * (8 nn + 2 t4), and r % 8 = g."""
    assert tmap is not None
    tid, cw, q, g, t4 = lane
    _, nb, slab = store_slabs(spec, t)
    es = DTYPE_BYTES[spec.dtype_out]
    b.comment(f"TMA-store epilogue: {nb} staging slab(s) of {t.tm} rows x 128 B per consumer, 128-byte swizzle; "
              "thread 0 of each consumer warpgroup issues the stores")
    x, bar, buf0, buf, row, rowg = b.regs("u32", 6)
    el = b.reg("pred")
    b.i(f"and.b32 {x}, {tid}, 127")
    b.i(f"setp.eq.u32 {el}, {x}, 0")
    lane0, warp_el = b.reg("pred"), []
    b.i(f"and.b32 {x}, {tid}, 31")
    b.i(f"setp.eq.u32 {lane0}, {x}, 0")
    if nb == store_slabs(spec, t)[0]:  # every slab buffered: lane 0 of warp w issues slabs w, w + 4, ...
        for w in range(min(4, store_slabs(spec, t)[0])):
            pw = b.reg("pred")
            b.i(f"setp.eq.and.u32 {pw}, {q}, {w}, {lane0}")
            warp_el.append(pw)
    b.i(f"add.u32 {bar}, {cw}, 1")
    b.i(f"mad.lo.u32 {buf0}, {cw}, {nb * slab}, {sst}")
    b.i(f"mov.u32 {buf}, {buf0}")
    b.i(f"mul.lo.u32 {rowg}, {cw}, {t.tm}")
    b.i(f"mad.lo.u32 {row}, {q}, 16, {g}")
    b.i(f"shl.b32 {row}, {row}, 7")
    cols = []
    per = ROW // (8 * es)  # n8 blocks per slab: 4 (f32) or 8 (16-bit)
    hi, lo = b.reg("u32"), b.reg("u32")
    if es == 4:  # pair bytes 32 nn + 8 t4: chunk 2 nn + t4 / 2, byte 8 (t4 % 2) inside it
        b.i(f"shr.u32 {hi}, {t4}, 1")
        b.i(f"and.b32 {lo}, {t4}, 1")
        b.i(f"shl.b32 {lo}, {lo}, 3")
    else:  # pair bytes 16 nn + 4 t4: chunk nn, byte 4 t4 inside it
        b.i(f"mov.u32 {hi}, 0")
        b.i(f"shl.b32 {lo}, {t4}, 2")
    nb_all = nb == store_slabs(spec, t)[0]
    for nn in range(per):  # row + swizzled column bytes (+ the first buffer when every slab has its own)
        c = b.reg("u32")
        b.i(f"add.u32 {c}, {hi}, {nn * (2 if es == 4 else 1)}")
        b.i(f"xor.b32 {c}, {c}, {g}")
        b.i(f"shl.b32 {c}, {c}, 4")
        b.i(f"add.u32 {c}, {c}, {lo}")
        b.i(f"add.u32 {c}, {c}, {row}")
        if nb_all:
            b.i(f"add.u32 {c}, {c}, {buf0}")
        cols.append(c)
    c2 = b.reg("u32")
    b.i(f"shl.b32 {c2}, {t4}, 1")
    return StoreRegs(el, bar, buf0, buf, row, cols, tmap, rowg, c2, lane0, warp_el)


def _store_values(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], vals: list[str], cols: list[str]) -> list[str]:
    """act(alpha * acc [x scale[n]] [+ bias[n]]) of each accumulator in `vals`, column register cols[i] (its
    n); scale and bias read only for n < N (rows and columns past M, N are clipped by the TMA store). An s32 D
    (s8 GEMM) takes the exact sums as they are."""
    if spec.dtype_out == "s32":
        return vals
    vec: dict[str, dict[str, str]] = {}
    for role, present in (("scale", spec.has_scale), ("bias", spec.has_bias)):
        if not present:
            continue
        vec[role] = {}
        for c in dict.fromkeys(cols):
            p, v, off, a = b.reg("pred"), b.reg("f32"), b.reg("u64"), b.reg("u64")
            b.i(f"setp.lt.u32 {p}, {c}, {P['N']}")
            b.i(f"mov.f32 {v}, {f32_hex(0.0)}")
            b.i(f"mul.wide.u32 {off}, {c}, 4")
            b.i(f"add.u64 {a}, {P[role]}, {off}")
            b.i(f"@{p} ld.global.f32 {v}, [{a}]")
            vec[role][c] = v
    out = []
    for acc, c in zip(vals, cols):
        v = b.reg("f32")
        b.i(f"mul.f32 {v}, {acc}, {P['alpha']}")
        if "scale" in vec:
            b.i(f"mul.f32 {v}, {v}, {vec['scale'][c]}")
        if "bias" in vec:
            b.i(f"add.f32 {v}, {v}, {vec['bias'][c]}")
        emit_activation(b, spec, v)
        out.append(v)
    return out


def emit_store_epilogue(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], acc: list[list[str]], st: StoreRegs,
                        origin: tuple[str, str], t: Tiling) -> None:
    """The TMA-store epilogue of one tile, per consumer warpgroup and column slab: the elected thread waits
    until the slab's buffer has been read by its previous store (cp.async.bulk.wait_group.read), a named
    barrier of the warpgroup's 128 threads, every thread writes its accumulators of the slab (epilogue ops
    applied, cast) into the swizzled buffer, fence.proxy.async.shared::cta, the barrier again, and the elected
    thread issues the slab's cp.async.bulk.tensor store (out-of-range rows/columns clipped by the TMA unit) and
    commits it as a bulk group. The consumers then go on to the next tile while the stores drain."""
    bm0, bn0 = origin
    slabs, nb, slab = store_slabs(spec, t)
    es = DTYPE_BYTES[spec.dtype_out]
    per = ROW // (8 * es)  # n8 blocks per slab
    ms = len(acc)
    b.comment(f"TMA-store epilogue: {slabs} slab(s) of {per * 8} columns, {nb} buffer(s)")
    rowc = b.reg("u32")
    b.i(f"add.u32 {rowc}, {bm0}, {st.rowg}")

    def body(j: int, buf: str) -> None:
        pairs, cols = [], []
        for nn in range(per):
            n8 = j * per + nn
            for h in range(2):
                for blk in range(ms):
                    i = 4 * n8 + 2 * h
                    pairs.append((blk, h, nn, acc[blk][i], acc[blk][i + 1]))
        if spec.has_bias or spec.has_scale:
            cregs = {}
            for nn in range(per):
                for e in range(2):
                    c = b.reg("u32")
                    b.i(f"add.u32 {c}, {bn0}, {8 * (j * per + nn) + e}")
                    b.i(f"add.u32 {c}, {c}, {st.c2}")
                    cregs[(nn, e)] = c
            cols = [cregs[(nn, e)] for _, _, nn, _, _ in pairs for e in range(2)]
        else:
            cols = ["_"] * (2 * len(pairs))
        vals = _store_values(b, spec, P, [v for _, _, _, a0, a1 in pairs for v in (a0, a1)], cols)
        addr: dict[int, str] = {}
        for k, (blk, h, nn, _, _) in enumerate(pairs):
            v0, v1 = vals[2 * k], vals[2 * k + 1]
            if nb == slabs:  # cols[nn] holds buf0: the slab's buffer is an immediate
                a, off = st.cols[nn], j * slab + blk * 64 * ROW + h * 8 * ROW
            else:
                if nn not in addr:
                    addr[nn] = b.reg("u32")
                    b.i(f"add.u32 {addr[nn]}, {buf}, {st.cols[nn]}")
                a, off = addr[nn], blk * 64 * ROW + h * 8 * ROW
            dst = f"[{a}+{off}]" if off else f"[{a}]"
            if es == 4:
                b.i(f"st.shared.v2.{'b32' if spec.dtype_out == 's32' else 'f32'} {dst}, {{{v0}, {v1}}}")
            else:
                pk = b.reg("u32")
                b.i(f"cvt.rn.{spec.dtype_out}x2.f32 {pk}, {v1}, {v0}")
                b.i(f"st.shared.b32 {dst}, {pk}")

    def issue(j: int, buf: str, who: str) -> None:
        c0 = b.reg("u32")
        b.i(f"add.u32 {c0}, {bn0}, {j * per * 8}")
        b.i(f"@{who} cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{st.tmap}, {{{c0}, {rowc}}}], "
            f"[{buf}]")

    if nb == slabs:
        b.comment("Every slab has a buffer: lane 0 of each warp waits once for its stores of the previous tile to "
                  "have read them")
        b.i(f"@{st.lane0} cp.async.bulk.wait_group.read 0")
        b.i(f"bar.sync {st.bar}, 128")
        bufs = []
        for j in range(slabs):
            buf = st.buf0
            if j:
                buf = b.reg("u32")
                b.i(f"add.u32 {buf}, {st.buf0}, {j * slab}")
            bufs.append(buf)
            body(j, buf)
        b.i("fence.proxy.async.shared::cta")
        b.i(f"bar.sync {st.bar}, 128")
        for j in range(slabs):
            issue(j, bufs[j], st.warp_el[j % 4])
        b.i(f"@{st.lane0} cp.async.bulk.commit_group")
        return
    b.comment(f"{nb} buffers for {slabs} slabs: slab j's buffer was last read by the store {nb} groups back")
    pw = b.reg("pred")
    for j in range(slabs):
        b.i(f"@{st.elected} cp.async.bulk.wait_group.read {nb - 1}")
        b.i(f"bar.sync {st.bar}, 128")
        body(j, st.buf)
        b.i("fence.proxy.async.shared::cta")
        b.i(f"bar.sync {st.bar}, 128")
        issue(j, st.buf, st.elected)
        b.i(f"@{st.elected} cp.async.bulk.commit_group")
        b.i(f"add.u32 {st.buf}, {st.buf}, {slab}")
        lim = b.reg("u32")
        b.i(f"add.u32 {lim}, {st.buf0}, {nb * slab}")
        b.i(f"setp.eq.u32 {pw}, {st.buf}, {lim}")
        b.i(f"@{pw} mov.u32 {st.buf}, {st.buf0}")


def _split_mn_boxes(spec: GemmSpec, t: Tiling, cm: int, cn: int) -> bool:
    """Whether a cluster would share an MN-major operand of several [64, 64] boxes: wrong on the H200 for B (the
    2026-12-01 smoke run: col A / row B with B multicast at TILE_N 128 and 256 fails its numpy check where rank 1
    holds rows of D, TILE_N 64 passes, A multicast of 2 boxes passes, and the simulator passes all of them; not
    understood), so such tilings are not offered, for A either."""
    ta, tb = operand_tiles(spec, t)
    tile, mn = (tb, t.bn) if cm > 1 else (ta, t.bm)
    return not kmajor(tile) and box(tile, mn)[1] > 1


def shared_operand(t: Tiling) -> str:
    """The operand the CTAs of a cluster share and multicast: B along M (same N tile), A along N; "" without."""
    return "b" if t.cluster_m > 1 else "a" if t.cluster_n > 1 else ""


def load_box(tile: OperandTile, mn: int, t: Tiling, role: str) -> tuple[list[int], int]:
    """box() of the tile each CTA loads: the shared operand of a cluster is loaded in cluster-size parts, each
    CTA issuing every box with its outer dimension (mn rows K-major, k rows MN-major) cut by the cluster size."""
    dims, n = box(tile, mn)
    if role == shared_operand(t):
        dims = [dims[0], dims[1] // t.cluster]
    return dims, n


def _producer(b: PtxBuilder, spec: GemmSpec, t: Tiling, tiles: tuple[OperandTile, OperandTile],
              smem: tuple[str, str, str, str], tmap: dict[str, str], sched: tuple[str, str, str, str, str],
              pz: str, rank: str = "", trace: tuple[str, int, int] | None = None,
              side: tuple[int, Callable[[str, str, str, str, str], None]] | None = None) -> None:
    """Warpgroup 0: thread 0 walks the tiles and their K tiles, waiting on empty[s] and issuing the TMA
    boxes of A and B into stage s with arrive.expect_tx on full[s]; the other threads exit. With a cluster
    (rank: %cluster_ctarank) the shared operand's boxes are cut in parts, the CTA of rank r loads part r of
    each and multicasts it to every CTA of the cluster (ctaMask all ones), completing its bytes on full[s] of
    each; each CTA still expects the whole stage. empty[s] then counts both CTAs' consumers, so a stage is
    refilled only when the partner has read it too, and before exiting thread 0 waits for every stage's
    last release (the partner's remote arrives must land while this CTA lives). `side` (wgmma_fp8's scale
    slots): (bytes per stage, emit(s, full[s], kt, bm0, bn0)) issues more copies per stage on full[s], their
    bytes expected with A's and B's."""
    ta, tb = tiles
    sa, sb, full0, empty0 = smem
    tiles_m, tiles_n, ntiles, ktiles, nct = sched
    a_bytes, b_bytes = ta.stage_bytes, tb.stage_bytes
    shared = shared_operand(t)
    b.comment(f"Producer warpgroup: {'setmaxnreg.dec to ' + str(PRODUCER_REGS) + ', ' if t.grid_m == 2 else ''}"
              "thread 0 issues every TMA load; the others exit")
    if t.grid_m == 2:
        b.i(f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS}")
    tid, tile, s, ph, kt, kl = b.regs("u32", 6)
    b.i(f"mov.u32 {tid}, %tid.x")
    pn, pend = b.reg("pred"), b.label("p_end")
    b.i(f"setp.ne.u32 {pn}, {tid}, 0")
    b.i(f"@{pn} bra {pend}")
    gp = ""
    if trace:
        gp = b.reg("u32")
        b.i(f"mov.u32 {gp}, 0")
    mask = roff = rbytes = ""
    if shared:
        tile_op, mn = (tb, t.bn) if shared == "b" else (ta, t.bm)
        part = box(tile_op, mn)[0][1] // t.cluster
        b.comment(f"Cluster: this CTA loads rows [rank x {part}, +{part}) of every {shared.upper()} box and "
                  f"multicasts them (ctaMask {(1 << t.cluster) - 1:#x})")
        mask, roff, rbytes = b.reg("b16"), b.reg("u32"), b.reg("u32")
        b.i(f"mov.b16 {mask}, {(1 << t.cluster) - 1}")
        b.i(f"mul.lo.u32 {roff}, {rank}, {part}")
        b.i(f"mul.lo.u32 {rbytes}, {rank}, {part * ROW}")
    b.i(f"mov.u32 {tile}, {first_tile(t)}")
    b.i(f"mov.u32 {s}, 0")
    b.i(f"mov.u32 {ph}, 1")
    tloop, knext, kloop = b.label("p_tile"), b.label("p_next"), b.label("p_k")
    pdone = b.label("p_drain") if shared else pend
    b.put_label(tloop)
    pe = b.reg("pred")
    b.i(f"setp.ge.u32 {pe}, {tile}, {ntiles}")
    b.i(f"@{pe} bra {pdone}")
    bm0, bn0 = cta_origin(b, tile, (tiles_m, tiles_n), t, rank or None)
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"mov.u32 {kl}, 0")
    b.i(f"@{pz} bra {knext}")
    b.put_label(kloop)
    eb, fb = b.reg("u32"), b.reg("u32")
    b.i(f"mad.lo.u32 {eb}, {s}, 8, {empty0}")
    b.i(f"mad.lo.u32 {fb}, {s}, 8, {full0}")
    _wait(b, eb, ph, "p_empty")
    if trace:
        pt = b.reg("pred")
        b.i(f"setp.eq.u32 {pt}, {tid}, 0")
        _trace_step(b, trace[0], gp, trace[1], 0, pt, "", trace[2])
    b.i(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{fb}], {a_bytes + b_bytes + (side[0] if side else 0)}")
    for tile_op, base, nbytes, org, mn, role in ((ta, sa, a_bytes, bm0, t.bm, "a"), (tb, sb, b_bytes, bn0, t.bn, "b")):
        dst = b.reg("u32")
        b.i(f"mad.lo.u32 {dst}, {s}, {nbytes}, {base}")
        if role == shared:
            b.i(f"add.u32 {dst}, {dst}, {rbytes}")
        n = box(tile_op, mn)[1]
        for j in range(n):
            if kmajor(tile_op):
                c0, c1 = kl, org
            else:
                c0, c1 = org, kl
                if j:
                    c0 = b.reg("u32")
                    b.i(f"add.u32 {c0}, {org}, {64 * j}")
            d = dst if not j else f"{dst}+{BLOCK * j}"
            if role == shared:
                if j:  # the destination in a register of its own, not [reg+imm] (the H200 smoke failure's suspect)
                    d = b.reg("u32")
                    b.i(f"add.u32 {d}, {dst}, {BLOCK * j}")
                c1r = b.reg("u32")
                b.i(f"add.u32 {c1r}, {c1}, {roff}")
                b.i(f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                    f"[{d}], [{tmap[role]}, {{{c0}, {c1r}}}], [{fb}], {mask}")
                continue
            b.i(f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], "
                f"[{tmap[role]}, {{{c0}, {c1}}}], [{fb}]")
    if side:
        side[1](s, fb, kt, bm0, bn0)
    if trace:
        _trace_step(b, trace[0], gp, trace[1], 1, pt, "", trace[2])
        b.i(f"add.u32 {gp}, {gp}, 1")
    _advance_ring(b, s, ph, t.stages)
    pl = b.reg("pred")
    b.i(f"add.u32 {kl}, {kl}, {t.bk}")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.put_label(knext)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    if shared:
        b.put_label(pdone)
        b.comment("Cluster: wait until both CTAs' consumers released every stage (no remote arrive is in flight)")
        for _ in range(t.stages):
            eb = b.reg("u32")
            b.i(f"mad.lo.u32 {eb}, {s}, 8, {empty0}")
            _wait(b, eb, ph, "p_tail")
            _advance_ring(b, s, ph, t.stages)
    b.put_label(pend)
    b.i("ret")


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False, trace: int = 0) -> str:
    """The kernel; `profile`: one clock64 record per persistent CTA (_profile_setup); `trace` > 0 (a measurement
    tool, benchmarks/tma_trace.py): the record and, for the CTA's first `trace` K steps, TRACE_SLOTS clock64 values
    each (the producer's issue after its empty wait, the consumer's full wait done, the previous stage's release)."""
    name = name or f"{spec.name}_wgmma_tma"
    b, params = _build(spec, t, name, False, profile, trace)
    store = tma_store(spec)
    meta = tma_metadata(spec, t, name, params, prediction, store, trace)
    title = (f"Warp-specialised persistent GEMM {t.key()}: TMA 128B swizzle, {t.stages}-stage mbarrier ring, wgmma "
             f"m64n{t.bn}k16 {spec.dtype_a}, A {spec.layout_a}, B {spec.layout_b}, D {spec.dtype_out} {spec.layout_c}"
             f"{' through shared staging and TMA stores' if store else ''}")
    maps = tensormaps(spec, t, name) + ([store_tensormap(spec, t, name)] if store else [])
    tm_params = [(f"{m['name']}[128]", ".align 64 .b8") for m in maps]
    ptx = render_kernel(header_json(meta), name, tm_params + [(p.ptx_name, p.ptx_type) for p in params], [], b,
                        title)
    # a launch bound fixes the entry register count (384 threads: 168), the pool setmaxnreg redistributes
    # .explicitcluster: the launch gives the cluster shape (cuLaunchKernelEx's attribute, the header's "cluster")
    ptx = ptx.replace(")\n{", f")\n.maxntid {t.threads + 128}, 1, 1\n.minnctapersm 1\n"
                      + (".explicitcluster\n" if t.clustered else "") + "{", 1)
    decl = f".extern .shared .align {ATOM} .b8 {name}_smem[];\n\n.visible .entry"
    return ptx.replace(".visible .entry", decl, 1)


def _shift(expr: str, n: int = 2) -> str:
    return re.sub(r"\bp(\d+)\b", lambda m: f"p{int(m.group(1)) + n}", expr)


def tma_metadata(spec: GemmSpec, t: Tiling, name: str, params: list[Param], prediction: dict[str, Any],
                 store: bool = False, trace: int = 0) -> dict:
    """emit_common.metadata for the passed params, then: A and B as hidden buffers and the tensor maps (A, B,
    and D with store, the TMA-store epilogue's) first in the list (PTX param i of ranges/extents shifts by
    the maps), the persistent grid, the producer warpgroup in the block and the dynamic shared bytes."""
    timer = [p for p in params if p.role == "timer"]
    meta = metadata(spec, t, name, [p for p in params if p.role != "timer"], prediction)
    M, N, K = spec.nominal()
    hidden = [{"name": f"{name}_{r}", "kind": "buffer", "dtype": dt, "role": r, "count": n, "init": "random",
               "hidden": True} for r, dt, n in (("A", spec.dtype_a, M * K), ("B", spec.dtype_b, K * N))]
    maps = tensormaps(spec, t, name) + ([store_tensormap(spec, t, name)] if store else [])
    meta["params"] = hidden + maps + meta["params"]
    for key in ("ranges", "extents"):
        meta[key] = {_shift(k, len(maps)): _shift(v, len(maps)) if isinstance(v, str) else v
                     for k, v in meta[key].items()}
    meta["grid"] = [persistent_grid(t, (M, N)), 1, 1]
    if timer:  # the last PTX param: two %globaltimer values (ns) per persistent CTA
        meta["params"].append({"name": timer[0].ptx_name, "kind": "buffer", "dtype": "u64", "role": "timer",
                               "count": 2 * meta["grid"][0], "init": "zeros"})
        meta["extents"][f"p{len(params) - 1 + len(maps)}"] = str(16 * meta["grid"][0])
    if "profile" in meta:  # one record per persistent CTA; the header's param index counts the hidden buffers and maps
        meta["profile"] = {**meta["profile"], "param": meta["profile"]["param"] + len(hidden) + len(maps),
                           "records": meta["grid"][0], "tiles_per_cta": profile_tiles(t, (M, N)),
                           "timer": {"param": len(meta["params"]) - 1, "per_cta": ["start_ns", "end_ns"]}}
        if trace:  # the buffer: the records, then every CTA's trace (the nominal grid's)
            i = meta["profile"]["param"]
            n = meta["grid"][0] * (PROFILE_SLOTS + len(TRACE_SLOTS) * trace)
            meta["params"][i] = {**meta["params"][i], "count": n}
            meta["extents"][f"p{i - len(hidden)}"] = str(8 * n)
            meta["profile"]["trace"] = {"steps": trace, "slots": list(TRACE_SLOTS)}
    if t.clustered:
        meta["cluster"] = [t.cluster, 1, 1]
    meta["block"] = [t.threads + 128, 1, 1]
    meta["dynamic_shared"] = smem_bytes(spec, t)
    return meta


class WgmmaTma(Wgmma):
    name = "wgmma_tma"
    opt_in = False
    profiles = True  # --profile: one clock64 record per persistent CTA (_profile_setup)

    def ring_bytes(self, spec: GemmSpec, t: Tiling) -> int:
        """The shared bytes before the TMA-store staging (module function ring_bytes): the ring and its
        mbarriers."""
        return ring_and_barriers(spec, t)

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        if spec.packed_s4:
            return "s4 (packed two per byte) has no wgmma form here; use --variant mma (m16n8k64.s4)"
        if spec.dtype_a == "s8" and hw.wgmma is not None:  # wgmma m64nNk32.s32.s8.s8 (issue 16)
            if spec.dtype_b != "s8" or (spec.layout_a, spec.layout_b, spec.layout_c) not in (
                    ("row", "col", "row"), ("row", "col", "col")):
                return ("s8 wgmma reads K-major operands only: A row-major, B col-major (s8 both), D row or col; "
                        "use --variant mma")
            if spec.K.align(16) < 16:
                return "K must be a multiple of 16 (16-byte TMA row strides of the s8 A and B); use --variant mma"
            return None
        why = super().unavailable(spec, hw)
        if why and "multiple of 8" in why:
            return why.replace("cp.async chunks", "TMA row strides") + "; use --variant mma"
        return why

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        for bm, tm in ((64, 64), (128, 64), (128, 128), (256, 128)):
            if spec.M.hi <= bm - tm:
                # the last consumer warpgroup's rows lie beyond M in every tile: it multiplies the zero-filled half of
                # each A box. Measured (H200, benchmarks/data/top4_bench_h200_2026-12-01_run4.json, 128x64 t64x64
                # s6 at 64x7168xK): 1.6-1.75x the time of 64x64 s6 and 1.4-1.5x the modelled cycles (the zero-fill
                # trip under that load is not modelled): never worth emitting
                continue
            for bn in (64, 128, 256):
                if tm // 64 * bn // 2 > 128:
                    continue
                for stages in (3, 4, 5, 6):  # TILE_K: one 128-byte swizzle row; one wgmma step: 32 bytes of K
                    es = DTYPE_BYTES[spec.dtype_a]
                    t = Tiling("wgmma_tma", bm, bn, ROW // es, tm, bn, stages, 0, 0, 16 // es, 16 // es, 0, 32 // es)
                    slabs, nb, _ = store_slabs(spec, t)
                    if smem_bytes(spec, t) <= SHARED_LIMIT and (nb or not slabs):  # the staging counts too
                        out.append(t)
        # 2-CTA clusters along M (B multicast) and along N (A multicast), same shared bytes per CTA: only where the
        # spec asks (a CLUSTER range reaching 2). Measured on the H200 (docs/wgmma-tma.md section 6) at 0.51-0.80x
        # of the cluster-1 kernel at every shape, a cost the model does not have: kept out of the default search
        r = spec.tile_range("CLUSTER")
        if r is None or not r.allows(2):
            return out
        return out + [replace(t, cluster_m=cm, cluster_n=cn) for t in out for cm, cn in CLUSTERS
                      if not _split_mn_boxes(spec, t, cm, cn)]

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def shared_bytes(self, spec: GemmSpec, t: Tiling) -> int:
        """The movement layer's shared bytes per CTA: the ring, its mbarriers and the TMA-store staging."""
        return smem_bytes(spec, t)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _counts(spec, t)

    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        ta, tb = operand_tiles(spec, t)
        boxes = box(ta, t.bm)[1] + box(tb, t.bn)[1]
        slabs, nb, _ = store_slabs(spec, t)
        return tma_cycle_model(spec, t, hw, shape, dram_cycles, miss_rate, _counts(spec, t), PERSISTENT_CTAS, boxes,
                               (slabs, nb) if slabs else None, loaded_dram=True)

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        exposed = max(0.0, mem_lat - (t.stages - 1) * compute_cycles_per_tile * ctas_per_core)
        return SyncPlan(0, 0, 0, 0, sync_lat, exposed, True,
                        "full/empty mbarrier ring: the producer waits only on stages the consumers released")


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    return tally(_build(spec, t, "k", True)[0], (0, 0))


VARIANT = WgmmaTma()
