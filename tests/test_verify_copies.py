"""validation.formal on tile copies whose chunks do not divide the threads (issue 15's leftover): kernelgen's
TILE_K 48 copies take (row, chunk column) = divmod(tid, 6) once and carry them from copy to copy (add,
add, setp.ge, two predicated updates); with more chunks than a multiple of the threads, threads copy
different counts (guarded by row < rows). The race query pairing two threads' copies bit-blasted a divider
per division and timed out (unknown); division by a constant is now a quotient and remainder tied
linearly (instructions.DivisionMixin) and such queries go to integer arithmetic first
(properties.Verifier.divisions_first)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402


def carried_copy(rows: int, threads: int = 64, cols: int = 6, barrier: bool = True) -> str:
    """A tile of `rows` rows x `cols` 16-byte chunks (rows padded by one chunk); chunk c = tid + threads*i
    goes to row c / cols, column c % cols, carried from copy to copy; every thread then reads the last
    chunk of row tid % rows (another thread's copy)."""
    copies = (rows * cols + threads - 1) // threads
    pitch = cols * 16 + 16
    out = [".version 8.0", ".target sm_90a", ".address_size 64", ".visible .entry carried()", "{",
           "    .reg .b32 %r<16>;", "    .reg .pred %p<64>;", f"    .shared .align 16 .b8 tile[{rows * pitch}];",
           "    mov.u32 %r0, %tid.x;", "    mov.u32 %r1, tile;",
           f"    div.u32 %r2, %r0, {cols};", f"    rem.u32 %r3, %r0, {cols};"]
    for i in range(copies):
        if i:
            out += [f"    add.u32 %r3, %r3, {threads % cols};", f"    add.u32 %r2, %r2, {threads // cols};",
                    f"    setp.ge.u32 %p{i}, %r3, {cols};", f"    @%p{i} sub.u32 %r3, %r3, {cols};",
                    f"    @%p{i} add.u32 %r2, %r2, 1;"]
        out += [f"    setp.lt.u32 %p{32 + i}, %r2, {rows};", f"    mad.lo.u32 %r4, %r2, {pitch}, %r1;",
                "    shl.b32 %r5, %r3, 4;", "    add.u32 %r4, %r4, %r5;",
                f"    @%p{32 + i} st.shared.v4.u32 [%r4], {{%r0, %r0, %r0, %r0}};"]
    out += ["    bar.sync 0;" if barrier else "    // (no barrier)", f"    rem.u32 %r6, %r0, {rows};",
            f"    mad.lo.u32 %r7, %r6, {pitch}, %r1;",
            f"    ld.shared.v4.u32 {{%r8, %r9, %r10, %r11}}, [%r7+{(cols - 1) * 16}];", "    ret;", "}", ""]
    return "\n".join(out)


def race(text: str, threads: int = 64, query_ms: int = 1500) -> dict:
    args = SimpleNamespace(kernel=None, grid="1,1,1", block=f"{threads},1,1", param=[], extent=[],
                           dynamic_shared=None, timeout=30.0, query_timeout_ms=query_ms)
    rep = verify_text(text, "carried.ptx", args)
    st = {p["name"]: p["status"] for p in rep["properties"]}
    assert st["bounds"] == "proved", rep
    return next(p for p in rep["properties"] if p["name"] == "shared_race")


@pytest.mark.parametrize("rows", [10, 11], ids=["2-or-1-copies", "3-or-2-copies"])
def test_uneven_carried_copies_race_free(rows):
    # 32 threads: 60 chunks (threads 0..27 copy 2, 28..31 one), 66 chunks (threads 0, 1 copy 3, the others 2);
    # the last copy is guarded by row < rows. About 0.5 s each at load 12
    p = race(carried_copy(rows, threads=32), threads=32)
    assert p["status"] == "proved", p


def test_uneven_carried_copies_without_barrier_race():
    p = race(carried_copy(10, threads=32, barrier=False), threads=32)
    w = p["witness"]
    assert p["status"] == "violated" and "st.shared" in w["access"] and "ld.shared" in w["other_access"], p
    assert w["address"] == w["other_address"] and w["thread"] != w["other_thread"]


@pytest.mark.slow
@pytest.mark.parametrize("rows", [32, 30], ids=["3-copies-each", "uneven-3-or-2"])
def test_kernelgen_sized_carried_copies(rows):
    # the TILE_K 48 A tile of the layout test (32 rows x 6 chunks, 64 threads; unknown at a 4 s query limit
    # before), and 30 rows (threads 0..51 copy 3 chunks, 52..63 two); 1.5-2.5 s each at load 12
    assert race(carried_copy(rows))["status"] == "proved"
    p = race(carried_copy(rows, barrier=False))
    assert p["status"] == "violated" and p["witness"]["address"] == p["witness"]["other_address"], p


def test_overlapping_carried_copies_race():
    # a pitch one chunk short of the row (rows of 6 chunks every 80 bytes): row r's last chunk is row r+1's first
    text = carried_copy(10, threads=32).replace("mad.lo.u32 %r4, %r2, 112,", "mad.lo.u32 %r4, %r2, 80,")
    p = race(text, threads=32)
    assert p["status"] == "violated" and p["witness"]["access"] == p["witness"]["other_access"], p


@pytest.mark.slow
@pytest.mark.skipif(__import__("os").environ.get("WORKBENCH_LONG") != "1",
                    reason="about 150 s of Z3: WORKBENCH_LONG=1 python -m pytest -m slow")
def test_kernelgen_tile_k_48_layout_kernel_races_proved():
    """kernelgen's TILE_K 48 layout kernel (tests/test_layouts.py NPOT_RUNTIME_DIV: A and B tiles of 6 chunks a
    row carried from divmod(tid, 6), a 3-stage cp.async pipeline): shared_race and async_copy were unknown
    (every B copy's query timed out); with the division ties and the integer / bit-vector split all 7 are
    proved (about 130 s of CPU for the race and async-copy analyses at load 9)."""
    from sim.hw import load_hw
    from validation.formal.properties import NAMES
    from validation.layout_check import emit_case, layout_spec

    variant, dtype, shape, layouts = ("mma", "f16", (32, 100, 96), ("blocked-16x16", "striped-8", "row"))
    tiling = ("TILE_K in [48, 48]", "TILE_N in [96, 96]", "TILE_M in [32, 32]")
    text, _ = emit_case(layout_spec(variant, dtype, shape, layouts, tiling), load_hw("h200"), variant, "planner")
    args = SimpleNamespace(kernel=None, grid=None, block=None, param=[], extent=[], dynamic_shared=None,
                           timeout=1200.0, query_timeout_ms=30_000)
    rep = verify_text(text, "npot.ptx", args)
    st = {p["name"]: p["status"] for p in rep["properties"]}
    assert st == {n: "proved" for n in NAMES}, [(p["name"], p["detail"]) for p in rep["properties"]]
