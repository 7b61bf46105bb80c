"""validation.formal on wmma.load / wmma.store (validation/formal/memory.py do_wmma): a thread's access is
one element of the warp's tile, whichever (the ISA leaves the fragment layout unspecified), so bounds covers
the tile and two warps race exactly when their tiles share a byte; nvcc's wmma kernels proved, planted
races reported with a witness. Small kernels (one or two warps), < 1 s each."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402
from validation.formal.properties import NAMES  # noqa: E402

CUDA = Path(__file__).parent / "fixtures" / "cuda"


def verify(text: str, file: str = "wmma.ptx", **flags) -> dict:
    args = SimpleNamespace(kernel=flags.get("kernel"), grid=flags.get("grid", "1,1,1"),
                           block=flags.get("block", "64,1,1"), param=flags.get("param", []),
                           extent=flags.get("extent", []), dynamic_shared=None,
                           timeout=60.0)
    return verify_text(text, file, args)


def statuses(rep: dict) -> dict:
    return {p["name"]: p["status"] for p in rep["properties"]}


def the(rep: dict, name: str) -> dict:
    return next(p for p in rep["properties"] if p["name"] == name)


def _tiles(rows_apart: int = 16, sync: str = "    bar.sync 0;", read_other: bool = True) -> str:
    """Two warps: warp w stores its 16x16 f32 accumulator tile at row 16*w... (rows_apart rows per warp) of
    a 32 x 16 shared array, `sync`, then loads the other warp's tile (or its own) as a C fragment."""
    regs = "{" + ", ".join(f"%f{i}" for i in range(8)) + "}"
    other = "    xor.b32 %r3, %r2, 1;" if read_other else "    mov.u32 %r3, %r2;"
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", ".visible .entry tiles()", "{",
        "    .reg .b32 %r<16>;", "    .reg .f32 %f<16>;", "    .shared .align 16 .b8 acc[2048];",
        "    mov.u32 %r0, %tid.x;", "    shr.u32 %r2, %r0, 5;", "    mov.u32 %r1, acc;",
        f"    mul.lo.u32 %r4, %r2, {rows_apart * 64};", "    add.u32 %r4, %r4, %r1;",
        *(f"    mov.f32 %f{i}, 0f00000000;" for i in range(8)),
        f"    wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%r4], {regs}, 16;", sync, other,
        "    mul.lo.u32 %r5, %r3, 1024;", "    add.u32 %r5, %r5, %r1;",
        "    wmma.load.c.sync.aligned.row.m16n16k16.shared.f32 {" + ", ".join(f"%f{i}" for i in range(8, 16))
        + "}, [%r5], 16;",
        "    ret;", "}", ""])


def test_two_warps_exchange_tiles_proved():
    rep = verify(_tiles())
    assert statuses(rep) == {n: "proved" for n in NAMES}, json.dumps(rep)[:2000]


def test_reading_the_other_warps_tile_without_a_barrier_races():
    p = the(verify(_tiles(sync="    // (no barrier)")), "shared_race")
    assert p["status"] == "violated", p
    w = p["witness"]
    assert w["thread"][0] // 32 != w["other_thread"][0] // 32 and "wmma" in p["detail"], w
    assert 0 <= w["address"] < 2048


def test_overlapping_tiles_race_and_a_warps_own_tile_does_not():
    # tiles 8 rows apart overlap in rows 8..15: warp 0's and warp 1's stores write the same bytes
    p = the(verify(_tiles(rows_apart=8)), "shared_race")
    assert p["status"] == "violated" and "wmma.store" in p["detail"], p
    # a warp storing its tile and loading it back, no barrier: one warp's collective accesses, in order
    assert statuses(verify(_tiles(sync="", read_other=False)))["shared_race"] == "proved"


def test_tile_past_the_shared_array_is_out_of_bounds():
    p = the(verify(_tiles(rows_apart=24)), "bounds")
    assert p["status"] == "violated" and "acc" in p["detail"], p


@pytest.mark.slow
def test_nvcc_wmma_kernels_proved():
    # wmma_smem 5.5 s of process time (its K loop around the staging loop), wmma_gemm 1.1 s; 30-40 s wall at
    # load 12 on the shared 2-core machine
    src = CUDA / "wmma_gemm.ptx"
    text = src.read_text()
    # shared staging, __syncwarp in a one-warp CTA (the CTA barrier), f16 accumulators stored col-major
    rep = verify(text, str(src), kernel="wmma_smem", block="32,1,1", param=["p3=48"],
                 extent=["p0=1536", "p1=1536", "p2=512"])
    assert statuses(rep) == {n: "proved" for n in NAMES}, json.dumps(rep)[:2000]
    # global loads and stores with a run-time stride (K, N): every element of every tile in bounds
    rep = verify(text, str(src), kernel="wmma_gemm", block="64,1,1", grid="2,2,1",
                 param=["p3=32", "p4=48", "p5=64"], extent=["p0=4096", "p1=6144", "p2=6144"])
    assert statuses(rep) == {n: "proved" for n in NAMES}, json.dumps(rep)[:2000]
    # C one row short: the last tile's store leaves it
    rep = verify(text, str(src), kernel="wmma_gemm", block="64,1,1", grid="2,2,1",
                 param=["p3=32", "p4=48", "p5=64"], extent=["p0=4096", "p1=6144", "p2=5952"])
    p = the(rep, "bounds")
    assert p["status"] == "violated" and "wmma.store" in p["detail"], p


@pytest.mark.slow
def test_wmma_smem_without_the_first_syncwarp_races():
    # the wmma.load reads sa/sb while other lanes' staging stores of the same K step may still write them
    src = CUDA / "wmma_gemm.ptx"
    lines = src.read_text().split("\n")
    start = next(i for i, x in enumerate(lines) if x.startswith(".visible .entry wmma_smem"))
    syncs = [i for i, x in enumerate(lines) if i > start and "bar.warp.sync" in x]
    assert len(syncs) == 2, syncs
    del lines[syncs[0]]
    rep = verify("\n".join(lines), str(src), kernel="wmma_smem", block="32,1,1", param=["p3=48"],
                 extent=["p0=1536", "p1=1536", "p2=512"])
    p = the(rep, "shared_race")
    assert p["status"] == "violated" and "wmma.load" in p["detail"], p
