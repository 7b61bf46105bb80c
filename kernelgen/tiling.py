"""A candidate tiling and the geometry both the emitters and the models read.

The emitters and the data-movement model take shared-memory addresses from the same functions
(``copy_sites`` below, each variant's ``compute_sites``), so the bank-conflict score is computed from the very
addresses the emitted loads and stores use.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from typing import Any

from kernelgen.spec import DTYPE_BYTES, GemmSpec
from sim.layouts import parse_layout


@dataclass(frozen=True)
class Tiling:
    variant: str  # a name in kernelgen.variants.MODULES
    bm: int  # block tile (TILE_M)
    bn: int  # TILE_N
    bk: int  # TILE_K
    tm: int  # rows per grid cell (a thread or a warp: variant.cell_threads)
    tn: int  # cols per grid cell
    stages: int  # shared-memory buffers (simt: 1; mma: cp.async pipeline depth)
    pad_a: int  # elements of padding per shared row of A
    pad_b: int
    vec_a: int  # elements per global copy of A (1 = scalar; mma: 8 -> 16-byte cp.async)
    vec_b: int
    unroll_k: int = 0  # mma: mma K steps per trip of a rolled inner loop; 0 = all bk/mma_k unrolled
    mma_k: int = 16  # mma: K of one mma.sync (16 for f16/bf16 m16n8k16, 32 for s8 m16n8k32): 32 bytes of K
    cluster_m: int = 1  # wgmma_tma: CTAs of a thread block cluster along M (they share B, multicast)
    cluster_n: int = 1  # wgmma_tma: CTAs of a cluster along N (they share A)

    def __hash__(self) -> int:
        # the dataclass's hash (of its fields' tuple), kept: the planner's caches are keyed by tilings
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.variant, self.bm, self.bn, self.bk, self.tm, self.tn, self.stages, self.pad_a, self.pad_b,
                      self.vec_a, self.vec_b, self.unroll_k, self.mma_k, self.cluster_m, self.cluster_n))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        # the dataclass's repr, with the cluster fields only where a cluster is used (plans of the other
        # variants print as they did before clusters)
        names = [f.name for f in fields(self) if f.name not in ("cluster_m", "cluster_n") or self.clustered]
        return f"Tiling({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    @property
    def cluster(self) -> int:
        """CTAs per thread block cluster (1: no cluster)."""
        return self.cluster_m * self.cluster_n

    @property
    def clustered(self) -> bool:
        return self.cluster > 1

    def __getstate__(self) -> dict[str, object]:  # a string's hash differs from process to process
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def k_steps(self) -> int:
        return self.bk // self.mma_k

    @property
    def mma_macs(self) -> int:
        """MACs of one m16n8kK mma.sync (its lane-operations on the tensor pipe)."""
        return 16 * 8 * self.mma_k

    @property
    def unroll(self) -> int:
        return self.unroll_k or self.k_steps

    @property
    def grid_m(self) -> int:  # threads (simt) or warps (mma) along M
        return self.bm // self.tm

    @property
    def grid_n(self) -> int:
        return self.bn // self.tn

    @cached_property
    def threads(self) -> int:
        return self.grid_m * self.grid_n * variant_of(self.variant).cell_threads

    @property
    def mi(self) -> int:  # mma m16 tiles per warp
        return self.tm // 16

    @property
    def ni(self) -> int:  # mma n8 tiles per warp
        return self.tn // 8

    def key(self) -> str:
        return (f"{self.variant}_{self.bm}x{self.bn}x{self.bk}_t{self.tm}x{self.tn}_s{self.stages}"
                f"_p{self.pad_a}.{self.pad_b}_v{self.vec_a}.{self.vec_b}"
                + (f"_u{self.unroll_k}" if self.unroll_k else "") + (f"_k{self.mma_k}" if self.mma_k != 16 else "")
                + (f"_c{self.cluster_m}x{self.cluster_n}" if self.clustered else ""))


def tile_values(spec: GemmSpec, key: str, defaults: tuple[int, ...], step: int) -> tuple[int, ...]:
    """The values a variant enumerates for ``key`` (TILE_M, TILE_N, TILE_K): its defaults (powers of
    two), then the other multiples of the hardware's ``step`` up to the largest default that the spec's
    range for ``key`` asks for: a range with a divisor (``TILE_K in [8, 64], TILE_K % 8 == 0`` adds 24,
    40, 48, 56) or a single value (``TILE_N in [96, 96]``). Without such a range the search space is
    the defaults, unchanged."""
    r = spec.tile_range(key)
    if r is None or (r.multiple_of == 1 and r.lo != r.hi):
        return defaults
    top = max(defaults)
    return defaults + tuple(v for v in range(step, top + 1, step) if v not in defaults and r.allows(v))


def log2(x: int) -> int:
    if x <= 0 or x & (x - 1):
        raise ValueError(f"value(={x}) must be a power of two")
    return x.bit_length() - 1


_GET: list[Any] = []


def variant_of(name: str) -> Any:
    """kernelgen.variants.get(name), the registry imported once: this module sits below the variants package
    (a module-level import would be circular), and an import statement in a function the planner calls per
    candidate runs importlib's _handle_fromlist (Python code) each time."""
    if not _GET:
        from kernelgen.variants import get

        _GET.append(get)
    return _GET[0](name)


@dataclass(frozen=True)
class OperandTile:
    """One operand's block tile as laid out in global memory and copied to shared memory.

    rows x cols in global orientation (cols contiguous in global memory). ``row_dim``/``col_dim``
    name the problem dims ("m", "n", "k"). Shared layout: ``f32`` (variant.shared_f32) stores it
    transposed to [k][m|n] as f32; otherwise the global orientation (row * (cols + pad) + col).
    """

    name: str  # "a" | "b"
    rows: int
    cols: int
    row_dim: str
    col_dim: str
    vec: int  # elements per copy
    pad: int
    elem_global: int  # bytes per element in global memory
    elem_shared: int  # bytes per element in shared memory
    f32: bool  # stored [k][m|n] as f32 (variant.shared_f32)
    mn_extent: int  # BM or BN (the f32 layout's shared row length before padding)

    def __hash__(self) -> int:
        # the dataclass's hash (of its fields' tuple), kept: the movement and bound memos are keyed by tiles
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.name, self.rows, self.cols, self.row_dim, self.col_dim, self.vec, self.pad,
                      self.elem_global, self.elem_shared, self.f32, self.mn_extent))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def chunks_per_row(self) -> int:
        return self.cols // self.vec

    @property
    def chunks(self) -> int:
        return self.rows * self.chunks_per_row

    def shared_offset(self, row: int, col: int) -> int:
        """Byte offset inside one stage of the shared tile of element (row, col), global orientation."""
        if self.f32:  # stored [k][mn]
            k, mn = (col, row) if self.col_dim == "k" else (row, col)
            return (k * (self.mn_extent + self.pad) + mn) * self.elem_shared
        return (row * (self.cols + self.pad) + col) * self.elem_shared

    @property
    def stage_bytes(self) -> int:
        if self.f32:
            kdim = self.cols if self.col_dim == "k" else self.rows
            b = kdim * (self.mn_extent + self.pad) * self.elem_shared
        else:
            b = self.rows * (self.cols + self.pad) * self.elem_shared
        return (b + 15) // 16 * 16

    def linear_copies(self, threads: int) -> bool:
        """Is copy i of every thread copy 0 shifted by a compile-time (row, col)? Yes when the threads
        cover whole rows of chunks or a row holds whole passes of them (always so for powers of two);
        else each copy carries its (row, column) on from the previous one (emit_common._copy_tile)."""
        cpr = self.chunks_per_row
        return threads % cpr == 0 or cpr % threads == 0

    def chunk_coords(self, tid: int, i: int, threads: int) -> tuple[int, int]:
        """(row, col) in the tile of the i-th copy of thread tid: chunk e = tid + i * threads."""
        e = tid + i * threads
        return e // self.chunks_per_row, (e % self.chunks_per_row) * self.vec


@lru_cache(maxsize=1 << 16)
def operand_tiles(spec: GemmSpec, t: Tiling) -> tuple[OperandTile, OperandTile]:
    # one pair per what it reads: the tilings that differ in their stages, threads or unroll share it
    return _operand_tiles(spec.dtype_a, spec.layout_a, spec.layout_b, variant_of(t.variant).shared_f32, t.bm, t.bn,
                          t.bk, t.vec_a, t.vec_b, t.pad_a, t.pad_b)


@lru_cache(maxsize=1 << 16)
def _operand_tiles(dtype_a: str, layout_a: str, layout_b: str, f32: bool, bm: int, bn: int, bk: int, vec_a: int,
                   vec_b: int, pad_a: int, pad_b: int) -> tuple[OperandTile, OperandTile]:
    es_in = DTYPE_BYTES[dtype_a]
    es_sh = 4 if f32 else es_in
    # row-like layouts (row, blocked-PxQ) keep K (A) / N (B) contiguous; col-like (col, striped-N) M / K
    if parse_layout(layout_a).row_like:
        a = OperandTile("a", bm, bk, "m", "k", vec_a, pad_a, es_in, es_sh, f32, bm)
    else:
        a = OperandTile("a", bk, bm, "k", "m", vec_a, pad_a, es_in, es_sh, f32, bm)
    if parse_layout(layout_b).row_like:
        b = OperandTile("b", bk, bn, "k", "n", vec_b, pad_b, es_in, es_sh, f32, bn)
    else:
        b = OperandTile("b", bn, bk, "n", "k", vec_b, pad_b, es_in, es_sh, f32, bn)
    return a, b


# ---- shared-memory access sites (warp 0), shared by the emitters and the bank-conflict model ----

@dataclass(frozen=True)
class Site:
    name: str
    kind: str  # "st" (copy into shared), "ld" (scalar/vector load), "ldmatrix"
    width: int  # bytes per lane access
    addrs: tuple[int, ...]  # byte address per lane (ldmatrix: per row-supplying lane)
    per_iteration: int  # how many times a warp executes this site per K tile


def copy_sites(tile: OperandTile, threads: int) -> list[Site]:
    """Warp 0's shared stores of one K tile (one site per copy index)."""
    n = tile.chunks // threads
    lanes = min(32, threads)
    out = []
    for i in range(n):
        addrs = tuple(tile.shared_offset(*tile.chunk_coords(l, i, threads)) for l in range(lanes))
        width = tile.vec * tile.elem_shared if not tile.f32 else tile.elem_shared
        out.append(Site(f"st_{tile.name}{i}", "st", width, addrs, 1))
    return out


def lane_ldmatrix_row(tile: OperandTile, lane: int, warp_off: int, x2: bool = False) -> tuple[int, int]:
    """(row, col) in the shared tile of the 16-byte row that ``lane`` supplies to ldmatrix.

    Operand A (16 x 32 bytes of K per m tile) and B (32 bytes of K x 8 per n tile, two n tiles per .x4).
    Matrix j = lane // 8 (see ptx-facts.md): for A, j & 1 selects rows +8 and j >> 1 selects the next 16
    bytes of K (k +8 for f16, +16 for s8); for B, j & 1 selects those 16 bytes and j >> 1 the second
    n tile (n +8). s8 tiles are K-contiguous only (A row, B col): ldmatrix moves 16-bit pairs, so the
    lane's 32-bit word is 4 consecutive s8 of one row, as mma.m16n8k32's fragments want.
    """
    j, i = (lane >> 3) & (1 if x2 else 3), lane & 7
    kb = 16 // tile.elem_shared  # elements in a 16-byte row: 8 f16, 16 s8 (k of one 8x8 b16 matrix)
    if tile.name == "a":
        m, k = warp_off + i + 8 * (j & 1), kb * (j >> 1)
        if tile.row_dim == "m":  # A row: smem [m][k], no transpose
            return m, k
        return 8 * (j >> 1) + i, warp_off + 8 * (j & 1)  # A col: smem [k][m], .trans
    if tile.row_dim == "n":  # B col: smem [n][k], no transpose
        return warp_off + 8 * (j >> 1) + i, kb * (j & 1)
    return 8 * (j & 1) + i, warp_off + 8 * (j >> 1)  # B row: smem [k][n], .trans
