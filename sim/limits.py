"""CUDA launch and module limits, applied when a launch is bound or a module is loaded, before any
memory is allocated: each violation is one line naming the limit and its source."""

from __future__ import annotations

from sim.errors import UsageError

# source: CUDA C++ Programming Guide, Technical Specifications per Compute Capability, 9.0:
# max x-dimension of a grid of thread blocks 2^31-1, y- and z-dimension 65535
GRID_MAX = (2**31 - 1, 65535, 65535)
# source: same table: max x- or y-dimension of a block 1024, z-dimension 64, threads per block 1024
BLOCK_MAX = (1024, 1024, 64)
BLOCK_THREADS_MAX = 1024
# source: same table: max amount of local memory per thread 512 KB
LOCAL_PER_THREAD_MAX = 512 * 1024


def check_dims(grid: tuple[int, int, int], block: tuple[int, int, int], file: str | None = None) -> None:
    for what, dims, lim in (("grid", grid, GRID_MAX), ("block", block, BLOCK_MAX)):
        for axis, v, m in zip("xyz", dims, lim):
            if not 1 <= v <= m:
                raise UsageError(f"{what} {axis} = {_num(v)} is outside 1..{m:,} (CUDA limit, compute "
                                 f"capability 9.0); give a smaller --{what}", file)
    n = block[0] * block[1] * block[2]
    if n > BLOCK_THREADS_MAX:
        raise UsageError(f"block {block} has {n:,} threads, more than {BLOCK_THREADS_MAX} (CUDA limit, compute "
                         "capability 9.0); give a smaller --block", file)


def check_memory(shared: int, dynamic: int, local: int, smem_limit: int, hw_name: str, file: str | None) -> None:
    """Shared memory per block against the hwconfig's limits.smem_per_block; local memory per thread."""
    if shared + dynamic > smem_limit:
        raise UsageError(f"the block needs {_num(shared + dynamic)} bytes of shared memory ({_num(shared)} static "
                         f"+ {_num(dynamic)} dynamic), more than {smem_limit:,} (limits.smem_per_block of "
                         f"{hw_name}); shrink the .shared arrays or --shared", file)
    if local > LOCAL_PER_THREAD_MAX:
        raise UsageError(f"each thread needs {_num(local)} bytes of .local memory, more than {LOCAL_PER_THREAD_MAX:,} "
                         "(CUDA limit, compute capability 9.0); shrink the .local arrays", file)


def _num(v: int) -> str:
    s = f"{v:,}"
    return s if len(s) <= 30 else f"{s[:20]}... ({len(str(v))} digits)"
