"""The verifier on cluster kernels and TMA kernels without a header (validation/formal: asyncprops.cluster_symmetry,
memory.cluster_split, instructions._mapa, cli --tensormap): bulk_peer's CTA-to-CTA copies complete on the peer
CTA's mbarrier, which the per-thread rules check through the cluster's symmetry (all 7 properties proved); the
planted bugs (wrong expect_tx bytes, a wait on the wrong barrier, a copy completing on another CTA than it writes)
are reported with witnesses; a TMA load whose tensor map is unknown makes the mbarrier property unknown with the
reason (it was a false "violated"), and with the map given on the command line it is proved (or, with wrong
expect_tx bytes, violated)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "fixtures" / "cluster" / "bulk_peer.ptx"
TILE = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_tile.ptx"
PEER_EXTENTS = ["p0=4096", "p1=8192", "p2=2048", "p3=4096", "p4=4096"]  # grid 4: in, out, gsum, gf, copy


def _verify(text: str, path: Path, grid: str, block: str, **kw) -> dict[str, dict]:
    args = SimpleNamespace(kernel=None, grid=grid, block=block, param=kw.get("param", []), extent=kw.get("extent", []),
                           dynamic_shared=kw.get("dynamic_shared"), timeout=60.0, tensormap=kw.get("tensormap", []))
    return {p["name"]: p for p in verify_text(text, str(path), args)["properties"]}


def _peer(text: str) -> dict[str, dict]:
    return _verify(text, PEER, "4,1,1", "128,1,1", extent=PEER_EXTENTS)


def _planted(old: str, new: str) -> str:
    text = PEER.read_text()
    assert old in text
    return text.replace(old, new)


@pytest.mark.slow
def test_bulk_peer_all_properties_proved():
    got = _peer(PEER.read_text())
    assert {n: p["status"] for n, p in got.items() if p["status"] != "proved"} == {}


@pytest.mark.slow
def test_bulk_peer_wrong_expect_tx_bytes_reported():
    got = _peer(_planted("mov.u32 \t%r32, 2048;", "mov.u32 \t%r32, 1024;"))["mbarrier"]
    assert got["status"] == "violated"
    assert got["witness"]["bytes_missing"] == -1024 and got["witness"]["expect_line"] == 104


@pytest.mark.slow
def test_bulk_peer_wait_on_the_wrong_barrier_reported():
    got = _peer(_planted("mov.u32 \t%r56, _ZZ9bulk_peerE3bar;", "mov.u32 \t%r56, _ZZ9bulk_peerE3acc;"))["mbarrier"]
    assert got["status"] == "violated"
    assert got["witness"]["copy_line"] == 135 and got["witness"]["barrier"] != got["witness"]["waited_barrier"]


@pytest.mark.slow
def test_bulk_peer_copy_completing_on_another_cta_reported():
    """The peer's recv, but this CTA's mbarrier (mapa to the own rank): the receiver's wait does not cover it."""
    got = _peer(_planted("mapa.shared::cluster.u32 %r39, %r40, %r41;",
                         "mapa.shared::cluster.u32 %r39, %r40, %r14;"))["mbarrier"]
    assert got["status"] == "violated"
    assert got["witness"]["destination_rank"] != got["witness"]["barrier_rank"]


def test_headerless_tma_load_is_unknown_not_violated():
    got = _verify(TILE.read_text(), TILE, "2,1,1", "128,1,1", param=["p2=1024", "p3=64", "p4=8"],
                  dynamic_shared=2048)["mbarrier"]
    assert got["status"] == "unknown"
    assert "cannot tell which tensor map it reads" in got["detail"]


def test_tma_load_with_the_map_on_the_command_line():
    kw = {"param": ["p2=1024", "p3=64", "p4=8"], "dynamic_shared": 2048, "extent": ["p0=4096"],
          "tensormap": ["p1=dtype=bf16,box=64x8"]}
    got = _verify(TILE.read_text(), TILE, "2,1,1", "128,1,1", **kw)
    assert {n: p["status"] for n, p in got.items() if p["status"] != "proved"} == {}


@pytest.mark.slow
def test_tma_load_with_the_map_on_the_command_line_and_wrong_bytes():
    kw = {"param": ["p2=2048", "p3=64", "p4=8"], "dynamic_shared": 2048, "extent": ["p0=8192"],
          "tensormap": ["p1=dtype=bf16,box=64x8"]}  # expect_tx announces two boxes, one comes
    bad = _verify(TILE.read_text(), TILE, "2,1,1", "128,1,1", **kw)["mbarrier"]
    assert bad["status"] == "violated" and bad["witness"]["bytes_missing"] == 1024


def test_timeout_counts_from_the_process_start():
    """--timeout bounds the run from the interpreter's start (guard.process_age): a run whose budget went into
    the start answers unknown at once, naming the limit (on a loaded machine the start and imports took 2-4 s, which
    put the wall time more than 5 s past --timeout)."""
    import time

    from validation.formal.guard import process_age

    assert 0.0 < process_age() < 24 * 3600
    args = SimpleNamespace(kernel=None, grid="2,1,1", block="128,1,1", param=["p2=1024", "p3=64", "p4=8"], extent=[],
                           dynamic_shared=2048, timeout=1.0, tensormap=["p1=dtype=bf16,box=64x8"])
    t0 = time.monotonic()
    rep = verify_text(TILE.read_text(), str(TILE), args, started=time.monotonic() - 5.0)
    assert time.monotonic() - t0 < 3.0
    assert [p["status"] for p in rep["properties"]] == ["unknown"] * len(rep["properties"])
    assert len(rep["properties"]) == 8
    assert any("time limit" in p["detail"] for p in rep["properties"])
