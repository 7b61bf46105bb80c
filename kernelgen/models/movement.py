"""Data-movement model: bytes per level, bandwidth demand vs supply, burst and bank efficiency.

Formulas (HwConfig fields in brackets):
- global bytes requested per CTA = k_tiles * (bm*bk + bk*bn) * in_bytes + bm*bn * out_bytes (+ C)
- DRAM bytes = unique bytes + re-reads that miss L2: requests beyond the unique footprint hit L2
  with probability min(1, [l2.size] / footprint); when the footprint exceeds the L2, at most what the
  waves of [core.count] CTAs read once each (their distinct block rows of A and columns of B), the
  CTAs of a wave moving over K together
- supply = [dram.bandwidth_gbps] * 1e9 / ([clock_mhz] * 1e6) bytes per cycle (HwConfig.dram_bytes_per_cycle)
- burst efficiency = contiguous bytes per tile row / (bursts touched * [dram.burst]); for blocked-PxQ and
  striped-N from the tile's element addresses (its maximal contiguous runs, sim/layouts.py)
- bank-conflict score = sum over [shared.banks] banks of (accesses - mean)^2 per warp access, from the
  addresses the emitted st.shared / ld.shared / ldmatrix use (tiling.copy_sites, variant.compute_sites);
  bank = (address / [shared.bank_width]) % [shared.banks]; passes = max accesses to one bank
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from kernelgen.models import frozen
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import OperandTile, Site, Tiling, copy_sites, operand_tiles
from kernelgen.variants import get
from sim.hw import HwConfig
from sim.layouts import parse_layout


@dataclass(frozen=True)
class Movement:
    smem_bytes: int  # shared memory per block
    global_bytes_per_cta: int
    global_bytes: int  # all CTAs, requested from L2
    dram_bytes: int
    l2_hit_rate: float
    shared_bytes_per_cta: int  # bytes read from shared by the compute loop
    register_bytes_per_cta: int  # fragment bytes moved shared -> registers
    dram_cycles: float  # dram_bytes / supply
    burst_efficiency: float
    bank_conflict_score: float  # per K tile, warp 0
    bank_passes_per_tile: int  # shared-memory passes a warp needs per K tile (>= accesses)
    bank_accesses_per_tile: int


def _phase_words(site: Site, width: int) -> list[set[int]]:
    """The bank words each phase of a warp-wide access touches (16-byte accesses go in phases of 8 lanes, 8-byte
    ones in 16); the same word from several lanes of a phase is one broadcast access."""
    per_phase = 8 if site.width >= 16 else (16 if site.width == 8 else 32)
    span = range(max(1, site.width // width))
    return [{a // width + w for a in site.addrs[p0:p0 + per_phase] for w in span}
            for p0 in range(0, len(site.addrs), per_phase)]


def site_score(site: Site, banks: int, width: int) -> tuple[float, int, int]:
    """(score, passes, accesses) of one warp-wide access; 16-byte accesses go in phases of 8 lanes.
    With [shared.banks] a power of two, a phase's sum over the banks of (c - mean)^2 is sum c^2 - words^2 /
    banks over the banks it touches: every term a multiple of 1 / banks^2, so both are exact and the same float
    (_site_score_banks, the sum over every bank, is the other path; tests/test_plan_memo.py compares them)."""
    if banks & (banks - 1):
        return _site_score_banks(site, banks, width)
    score, passes, phases = 0.0, 0, 0
    for words in _phase_words(site, width):
        counts: dict[int, int] = {}
        for w in words:
            b = w % banks
            counts[b] = counts.get(b, 0) + 1
        k = len(words)
        score += sum(c * c for c in counts.values()) - k * k / banks
        passes += max(counts.values(), default=0)
        phases += 1
    return score, passes, phases


def _site_score_banks(site: Site, banks: int, width: int) -> tuple[float, int, int]:
    """site_score as the sum over every bank of (accesses - mean)^2."""
    score, passes, phases = 0.0, 0, 0
    for words in _phase_words(site, width):
        counts = [0] * banks
        for w in words:
            counts[w % banks] += 1
        mean = len(words) / banks
        score += sum((c - mean) ** 2 for c in counts)
        passes += max(counts)
        phases += 1
    return score, passes, phases



@lru_cache(maxsize=65536)
def _shifted_site(kind: str, width: int, addrs: tuple[int, ...], banks: int, bw: int) -> tuple[float, int, int]:
    return site_score(Site("", kind, width, addrs, 1), banks, bw)


@lru_cache(maxsize=65536)
def _copy_banks(tile: OperandTile, threads: int, banks: int, width: int) -> tuple[float, int, int]:
    """(score, passes, accesses) of warp 0's copies of one K tile into shared, summed over its copies:
    site_score of each copy's addresses, all copies at once with numpy (_copy_banks_np) where that gives
    the same figures exactly, else copy by copy (_copy_banks_py)."""
    lanes = min(32, threads)
    w = tile.vec * tile.elem_shared if not tile.f32 else tile.elem_shared
    phase = min(lanes, 8 if w >= 16 else (16 if w == 8 else 32))
    if not tile.linear_copies(threads) and banks & (banks - 1) == 0 and lanes % phase == 0:
        return _copy_banks_np(tile, threads, banks, width)
    return _copy_banks_py(tile, threads, banks, width)


def _copy_banks_np(tile: OperandTile, threads: int, banks: int, width: int) -> tuple[float, int, int]:
    """_copy_banks over every copy and phase at once: copy i of lane l stores chunk e = l + i x threads
    (tiling.chunk_coords) at tile.shared_offset; per phase, the distinct words (a broadcast is one access),
    their count per bank c, score sum (c - mean)^2 = sum c^2 - words^2 / banks, passes max c. With
    [shared.banks] a power of two every term is a multiple of 1 / banks, so the float sums are exact
    and equal site_score's in any order (tests/test_plan_speed.py compares both on whole spaces)."""
    import numpy as np

    n = tile.chunks // threads
    lanes = min(32, threads)
    w = tile.vec * tile.elem_shared if not tile.f32 else tile.elem_shared
    phase = min(lanes, 8 if w >= 16 else (16 if w == 8 else 32))
    span = max(1, w // width)
    e = np.arange(lanes)[None, :] + (np.arange(n) * threads)[:, None]
    row, col = e // tile.chunks_per_row, (e % tile.chunks_per_row) * tile.vec
    if tile.f32:  # stored [k][mn] (OperandTile.shared_offset)
        k, mn = (col, row) if tile.col_dim == "k" else (row, col)
        addr = (k * (tile.mn_extent + tile.pad) + mn) * tile.elem_shared
    else:
        addr = (row * (tile.cols + tile.pad) + col) * tile.elem_shared
    words = ((addr // width)[:, :, None] + np.arange(span)).reshape(n * (lanes // phase), phase * span)
    words.sort(axis=1)
    first = np.ones(words.shape, dtype=bool)
    first[:, 1:] = words[:, 1:] != words[:, :-1]
    rows = words.shape[0]
    ids = (np.arange(rows)[:, None] * banks + words % banks)[first]
    counts = np.bincount(ids, minlength=rows * banks).reshape(rows, banks)
    distinct = first.sum(axis=1)
    score = float(((counts * counts).sum(axis=1) - distinct * distinct / banks).sum())
    return score, int(counts.max(axis=1).sum()), rows


def _copy_banks_py(tile: OperandTile, threads: int, banks: int, width: int) -> tuple[float, int, int]:
    """Copy i of every lane is copy 0 shifted by a compile-time offset (tiling.chunk_coords is
    linear), so only the offset modulo banks*width matters: one score per residue."""
    n = tile.chunks // threads
    lanes = min(32, threads)
    w = tile.vec * tile.elem_shared if not tile.f32 else tile.elem_shared
    if not tile.linear_copies(threads):  # not linear: each copy's own addresses
        parts = [_shifted_site("st", w, site.addrs, banks, width) for site in copy_sites(tile, threads)]
        return sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)
    # tile.shared_offset(*tile.chunk_coords(lane, i, threads)) inline: (x stride + y) x element bytes, (x, y)
    # the (row, col) in the global orientation, (col, row) where an f32 tile stores K of a [mn][k] tile first
    cpr, vec, es = tile.chunks_per_row, tile.vec, tile.elem_shared
    swap = tile.f32 and tile.col_dim == "k"
    stride = (tile.mn_extent if tile.f32 else tile.cols) + tile.pad
    base = tuple(((l % cpr * vec) * stride + l // cpr if swap else (l // cpr) * stride + l % cpr * vec) * es
                 for l in range(lanes))
    period = banks * width
    score, passes, acc = 0.0, 0, 0
    seen: dict[int, tuple[float, int, int]] = {}  # by residue: the copies repeat a few of them
    for i in range(n):
        e = i * threads
        imm = (((e % cpr * vec) * stride + e // cpr if swap else (e // cpr) * stride + e % cpr * vec) * es) % period
        hit = seen.get(imm)
        if hit is None:
            hit = seen[imm] = _shifted_site("st", w, tuple(a + imm for a in base), banks, width)
        sc, ps, ph = hit
        score, passes, acc = score + sc, passes + ps, acc + ph
    return score, passes, acc


@lru_cache(maxsize=4096)
def _layout_burst(layout: str, row_dim: str, col_dim: str, rows: int, cols: int, ext_row: int, ext_col: int,
                  ein: int, burst: int) -> float:
    """Burst efficiency of the tile at the origin stored ``layout`` (blocked-PxQ, striped-N): its element
    addresses (sim/layouts.py) in maximal contiguous runs, each run from a burst boundary, bytes over
    [dram.burst]-sized bursts touched. The tile's (row, col) are the logical (r, c) of a row-like layout,
    (c, r) of a col-like one. blocked-PxQ walks its blocks (_blocked_runs), the others every element."""
    import numpy as np

    lay = parse_layout(layout)
    if lay.kind == "blocked":
        r, c = min(rows, ext_row), min(cols, ext_col)
        runs_b = _blocked_runs(lay.p, lay.q, r, c, -(-ext_col // lay.q))
        return float(r * c * ein / (sum(-(-(n * ein) // burst) for n in runs_b) * burst))
    gr, gc = np.meshgrid(np.arange(min(rows, ext_row)), np.arange(min(cols, ext_col)), indexing="ij")
    idx = lay.index(gr, gc, ext_row, ext_col) if lay.row_like else lay.index(gc, gr, ext_col, ext_row)
    srt = np.sort(idx.ravel())
    starts = np.flatnonzero(np.diff(srt) != 1) + 1
    runs = np.diff(np.concatenate(([0], starts, [srt.size]))) * ein
    return float(srt.size * ein / (np.sum(-(-runs // burst)) * burst))


def _blocked_runs(p: int, q: int, rows: int, cols: int, nbc: int) -> list[int]:
    """The maximal contiguous runs (elements, in address order) of rows x cols elements at the origin of a
    blocked-PxQ matrix of nbc block columns (sim/layouts.py: block (I, J) at (I nbc + J) P Q, row-major
    inside): a block's covered part is its first rows' first columns, one run where they span the block's
    width, else a run per row; a run goes on into the next block where it ends at the block's end and
    the next block starts there. What sorting every element's index gives (tests/test_layouts.py)."""
    runs: list[int] = []
    end = -1  # where the last run ends
    for bi in range(-(-rows // p)):
        pr = min(p, rows - bi * p)
        for bj in range(-(-cols // q)):
            qc = min(q, cols - bj * q)
            base = (bi * nbc + bj) * p * q
            for start, n in ((base, pr * q),) if qc == q else ((base + i * q, qc) for i in range(pr)):
                if start == end:
                    runs[-1] += n
                else:
                    runs.append(n)
                end = start + n
    return runs


@lru_cache(maxsize=65536)
def compute_banks(spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
    """variant.compute_banks, once per tiling (the movement model and the cycle model both read it)."""
    return get(t.variant).compute_banks(spec, t, banks, width)


def bank_model(spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
    """(score, passes, accesses) per K tile for warp 0: copies into shared + compute-side loads."""
    a, b = operand_tiles(spec, t)
    T = t.threads
    (s0, p0, n0), (s1, p1, n1), (s2, p2, n2) = (_copy_banks(a, T, banks, width), _copy_banks(b, T, banks, width),
                                                compute_banks(spec, t, banks, width))
    return sum((s0, s1, s2)), sum((p0, p1, p2)), sum((n0, n1, n2))


def tile_key(t: Tiling) -> tuple[object, ...]:
    """The fields of ``t`` the data-movement model reads besides its stages (the shared bytes and the
    DRAM re-reads' L2 fit) and the K steps per trip (``unroll_k``, which it never reads): tilings that
    differ only in those share ``_per_tile`` (tests/test_plan_speed.py compares every tiling of several
    specs and hwconfigs with its own uncached model)."""
    return (t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.pad_a, t.pad_b, t.vec_a, t.vec_b, t.mma_k, t.cluster_m,
            t.cluster_n)


def _pad_free_key(t: Tiling) -> tuple[object, ...]:
    """tile_key less the pads: what _pad_free reads."""
    return (t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.vec_a, t.vec_b, t.mma_k, t.cluster_m, t.cluster_n)


class _PerTile(NamedTuple):
    """movement()'s figures that do not depend on the stages (see tile_key)."""
    stage_bytes: int  # both operands' shared bytes of one stage
    per_cta: int
    total: int
    unique: int
    footprint: int
    dram: float  # DRAM bytes before the wave rule (which reads the stages)
    wave_rows: int  # the wave rule's block rows and columns (0: the footprint fits the L2)
    wave_cols: int
    waves: int
    burst: float
    score: float
    passes: int
    accesses: int
    sh_read: int
    reg_bytes: int
    shared_bytes: Any  # the variant's own shared bytes (wgmma_tma: more than its stages), or None


# memos by (hw, spec) identity (a loaded HwConfig and a GemmSpec are not mutated): keyed by the shape and the
# tiling's fields, without hashing the spec (the planner asks them per candidate)
SpecMemo = dict[tuple[int, int], tuple[HwConfig, GemmSpec, dict[Any, Any]]]
_PER_TILE: SpecMemo = {}
_PAD_FREE: SpecMemo = {}


def spec_memo(table: SpecMemo, spec: GemmSpec, hw: HwConfig) -> dict[Any, Any]:
    """The memo of ``table`` for ``spec`` on ``hw`` (by identity; the entry holds both, so their ids are not
    reused while it lives); emptied past 65,536 entries, the table past 16 (spec, hw) pairs."""
    hit = table.get((id(hw), id(spec)))
    if hit is None or hit[0] is not hw or hit[1] is not spec or len(hit[2]) > 65536:
        if len(table) >= 16:
            table.clear()
        hit = table[(id(hw), id(spec))] = (hw, spec, {})
    return hit[2]


def _per_tile(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> _PerTile:
    """The stage-free figures: the shared bytes of a stage and the bank model read the pads; the rest
    (_pad_free) does not and is shared by the tilings that differ only in them."""
    memo = spec_memo(_PAD_FREE, spec, hw)
    key = (shape, _pad_free_key(t))
    free = memo.get(key)
    if free is None:
        free = memo[key] = _pad_free(spec, t, hw, shape)
    a, b = operand_tiles(spec, t)
    score, passes, acc = bank_model(spec, t, hw.shared.banks, hw.shared.bank_width)
    return _PerTile._make((a.stage_bytes + b.stage_bytes, *free[:9], score, passes, acc, *free[9:]))


def _pad_free(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> tuple[Any, ...]:
    """_PerTile's fields from per_cta to burst, then sh_read, reg_bytes and the variant's shared_bytes: they
    read neither the stages nor the pads (tests/test_plan_memo.py compares every tiling with its own model)."""
    M, N, K = shape
    ein, eout = DTYPE_BYTES[spec.dtype_a], DTYPE_BYTES[spec.dtype_out]
    a, b = operand_tiles(spec, t)
    ktiles = -(-K // t.bk)
    ctas = -(-M // t.bm) * -(-N // t.bn)
    out_bytes = t.bm * t.bn * eout * (2 if spec.has_c else 1)
    per_cta = ktiles * (t.bm + t.bn) * t.bk * ein + out_bytes
    total = ctas * per_cta
    unique = (M * K + K * N) * ein + M * N * eout * (2 if spec.has_c else 1)
    footprint = (M * K + K * N) * ein
    dram = unique + (total - unique) * (1.0 - min(1.0, hw.l2.size / max(1, footprint)))  # [l2.size]
    rows = cols = waves = 0
    if footprint > hw.l2.size:
        # A wave of W CTAs (launch order, x along N fastest) advances over K roughly in step, so the
        # operand slices its CTAs share are read from DRAM once per wave: its distinct block rows of A
        # and block columns of B, while one K tile of each of them (x stages) fits in the L2.
        # W = [core.count] CTAs (one per core: the concurrency every tiling reaches).
        gx, gy = -(-N // t.bn), -(-M // t.bm)
        W = max(1, min(ctas, hw.core.count))
        rows = min(gy, -(-W // gx) + (1 if W % gx else 0))
        cols = min(gx, W)
        waves = -(-ctas // W)
    # burst efficiency of the global tile rows: contiguous run per row of each operand tile
    effs = []
    ext = {"m": M, "n": N, "k": K}
    for tile in (a, b):
        layout = getattr(spec, "layout_" + tile.name)
        if layout in ("row", "col"):
            run = tile.cols * ein
            bursts = -(-run // hw.dram.burst)  # [dram.burst]
            effs.append(run / (bursts * hw.dram.burst))
        else:
            effs.append(_layout_burst(layout, tile.row_dim, tile.col_dim, tile.rows, tile.cols,
                                      ext[tile.row_dim], ext[tile.col_dim], ein, hw.dram.burst))
    v = get(t.variant)
    sh_read, reg_bytes = v.shared_traffic(t, ktiles, ein)
    return (per_cta, total, unique, footprint, dram, rows, cols, waves, min(effs), sh_read, reg_bytes,
            getattr(v, "shared_bytes", None))


def movement(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> Movement:
    hit = _PER_TILE.get((id(hw), id(spec)))
    memo = hit[2] if hit is not None and hit[0] is hw and hit[1] is spec and len(hit[2]) <= 65536 else \
        spec_memo(_PER_TILE, spec, hw)
    key = (shape, tile_key(t))
    pt = memo.get(key)
    if pt is None:
        pt = memo[key] = _per_tile(spec, t, hw, shape)
    own = pt.shared_bytes  # a variant with more than its stages (wgmma_tma)
    smem = t.stages * pt.stage_bytes if own is None else own(spec, t)
    dram = pt.dram
    if pt.wave_rows:
        ein = DTYPE_BYTES[spec.dtype_a]
        live = (pt.wave_rows * t.bm + pt.wave_cols * t.bn) * t.bk * ein * t.stages
        if live <= hw.l2.size:
            dram = min(dram, max(pt.unique, pt.waves * (pt.wave_rows * t.bm + pt.wave_cols * t.bn) * shape[2] * ein
                                 + pt.unique - pt.footprint))
    l2_hit = 1.0 - dram / pt.total if pt.total else 0.0
    supply = hw.dram_bytes_per_cycle  # [dram.bandwidth_gbps], [clock_mhz]
    return frozen(Movement, smem, pt.per_cta, pt.total, int(dram), l2_hit, pt.sh_read, pt.reg_bytes, dram / supply,
                  pt.burst, pt.score, pt.passes, pt.accesses)
