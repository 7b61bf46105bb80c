"""TMA (cp.async.bulk.tensor, cp.async.bulk) in the functional model: the H200's own bytes for the same
PTX and maps (benchmarks/data/tma_probe_2026-12-01), a numpy reference for a 3-D box at negative
coordinates with its store, 1-D bulk copies, and the launch forms of a tensor map (header, command line)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.errors import ExecutionError, UsageError
from sim.functional.runner import run_functional
from sim.launch import Arg, Launch, bind_launch, launch_from_metadata
from sim.ptx.parser import parse_ptx
from sim.tensormap import TensorMapSpec
from tests.simhelp import ptxas_ok

ROOT = Path(__file__).resolve().parents[1]
TILE = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_tile.ptx"
BOX = ROOT / "tests" / "fixtures" / "tma" / "tma_box.ptx"
PROBE = ROOT / "benchmarks" / "data" / "tma_probe_2026-12-01"


def tile_launch(case: dict, host: np.ndarray, out_elems: int) -> Launch:
    """tma_tile as benchmarks/tma_probe/run.py launched it: one CTA of 128 threads per box."""
    box = tuple(case["box"])
    bb = box[0] * box[1] * 2
    spec = TensorMapSpec("in", "bf16", 2, (case["cols"], case["rows"]), (case["cols"] * 2,), box, case["swizzle"])
    args = [Arg("buffer", "u16", array=np.full(out_elems, 0x7FC0, np.uint16), name="out"),
            Arg("tensormap", "bf16", name="tmap", tmap=spec),
            *(Arg("scalar", "u32", value=v) for v in (bb, box[0], box[1])),
            Arg("buffer", "bf16", array=host.ravel().copy(), name="in", hidden=True)]
    return Launch("tma_tile", (case["grid"][0], case["grid"][1], 1), (128, 1, 1), args, bb + 1024)


PROBE_CASES = json.loads(PROBE.with_suffix(".json").read_text())["cases"]


@pytest.mark.parametrize("case", PROBE_CASES, ids=[c["name"] for c in PROBE_CASES])
def test_tile_load_equals_the_h200(case):
    data = np.load(PROBE.with_suffix(".npz"))
    want = data[f"{case['name']}_out"]
    res = run_functional(parse_ptx(TILE.read_text(), str(TILE)), tile_launch(case, data[f"{case['name']}_in"],
                                                                             want.size))
    got = res.outputs[0]
    assert got.shape == want.shape
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {want.size} elements differ"


def ref_box(t: np.ndarray, coords: tuple[int, ...], box: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The box of tensor t (numpy order: outermost first) at coords (innermost first), zero outside,
    and the mask of elements inside."""
    out = np.zeros(box[::-1], dtype=t.dtype)
    inside = np.ones(box[::-1], dtype=bool)
    idx = []
    for d, (c, b) in enumerate(zip(coords, box)):
        x = np.arange(c, c + b)
        ok = (x >= 0) & (x < t.shape[-1 - d])
        shape = [1] * len(box)
        shape[-1 - d] = b
        inside &= ok.reshape(shape)
        idx.append(np.clip(x, 0, t.shape[-1 - d] - 1))
    out[...] = t[np.ix_(*idx[::-1])]
    out[~inside] = 0
    return out, inside


def swizzle_bytes(raw: np.ndarray, s: int) -> np.ndarray:
    """Dense box bytes -> the shared layout: 16-byte chunk at offset o moves to o ^ (((o >> 7) & (s/16-1)) << 4)."""
    if not s:
        return raw
    out = np.empty_like(raw)
    for o in range(0, raw.size, 16):
        d = o ^ (((o >> 7) & (s // 16 - 1)) << 4)
        out[d: d + 16] = raw[o: o + 16]
    return out


def test_3d_box_at_negative_coordinates_and_its_store(tmp_path):
    ptxas_ok(BOX.read_text(), tmp_path)
    rng = np.random.default_rng(11)
    dims, box, coords, sw = (24, 10, 6), (8, 4, 3), (-4, 7, -1), 32  # coords[0] x 4 bytes: 16-byte aligned
    t = rng.standard_normal(dims[::-1]).astype(np.float32)
    nbytes = int(np.prod(box)) * 4
    spec_in = TensorMapSpec("src", "f32", 4, dims, (dims[0] * 4, dims[0] * dims[1] * 4), box, sw)
    spec_out = TensorMapSpec("dst", "f32", 4, dims, spec_in.strides, box, sw)
    args = [Arg("buffer", "f32", array=np.full(nbytes // 4, np.nan, np.float32), name="out"),
            Arg("tensormap", "f32", name="tmap_in", tmap=spec_in),
            Arg("tensormap", "f32", name="tmap_out", tmap=spec_out),
            Arg("scalar", "u32", value=nbytes), *(Arg("scalar", "s32", value=c) for c in coords),
            Arg("buffer", "f32", array=t.ravel().copy(), name="src", hidden=True),
            Arg("buffer", "f32", array=np.full(t.size, np.nan, np.float32), name="dst", hidden=True)]
    res = run_functional(parse_ptx(BOX.read_text(), str(BOX)), Launch("tma_box3d", (1, 1, 1), (128, 1, 1), args,
                                                                      nbytes))
    want, inside = ref_box(t.astype(np.float64), coords, box)
    assert inside.any() and not inside.all()
    shared = swizzle_bytes(want.astype(np.float32).view(np.uint8).ravel(), sw)
    assert np.array_equal(res.outputs[0].view(np.uint8), shared)
    stored = res.outputs[8].reshape(t.shape)
    ref = np.full(t.shape, np.nan)
    sel = [np.arange(c, c + b) for c, b in zip(coords, box)][::-1]
    for i in np.ndindex(*box[::-1]):
        if inside[i]:
            ref[tuple(s[k] for s, k in zip(sel, i))] = want[i]
    assert np.array_equal(np.isnan(stored), np.isnan(ref))
    assert np.linalg.norm(stored[~np.isnan(ref)] - ref[~np.isnan(ref)]) == 0


def test_1d_bulk_load_and_store():
    rng = np.random.default_rng(5)
    src = rng.integers(1, 1 << 30, 96).astype(np.uint32)
    dst = np.full(96, 0xFFFFFFFF, np.uint32)
    launch = Launch("bulk1d", (1, 1, 1), (64, 1, 1), [Arg("buffer", "u32", array=src), Arg("buffer", "u32", array=dst),
                                                      Arg("scalar", "u32", value=src.nbytes)], src.nbytes)
    res = run_functional(parse_ptx(BOX.read_text(), str(BOX)), launch)
    assert np.array_equal(res.outputs[1], src)


def test_tensor_load_without_a_map_names_the_line():
    text = TILE.read_text()
    launch = Launch("tma_tile", (1, 1, 1), (128, 1, 1), [
        Arg("buffer", "u16", array=np.zeros(512, np.uint16)),
        Arg("tensormap", "bf16", tmap=TensorMapSpec("in", "bf16", 2, (64, 8), (128,), (64, 8), 128)),
        *(Arg("scalar", "u32", value=v) for v in (1024, 64, 8)),
        Arg("buffer", "bf16", array=np.ones(512, np.uint16), name="in", hidden=True)], 2048)
    assert run_functional(parse_ptx(text, str(TILE)), launch).outputs[0].any()
    bad = text.replace("cvta.param.u64 \t%rd5, %rd4;", "mov.u64 \t%rd5, %rd3;")
    assert bad != text
    with pytest.raises(ExecutionError, match=r"tma_tile.ptx:\d+: .*holds no tensor map.*--tensormap"):
        run_functional(parse_ptx(bad, str(TILE)), launch)


def test_multicast_beyond_the_cluster_is_rejected():
    text = BOX.read_text().replace(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r7], "
        "[%rd3, {%r2, %r3, %r4}], [%r6];",
        "mov.u16 %rs1, 3;\n\tcp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%r7], [%rd3, {%r2, %r3, %r4}], [%r6], %rs1;").replace(
        ".reg .b64 %rd<10>;", ".reg .b64 %rd<10>;\n\t.reg .b16 %rs<2>;", 1)
    spec = TensorMapSpec("src", "f32", 4, (8, 4, 3), (32, 128), (8, 4, 3), 32)
    args = [Arg("buffer", "f32", array=np.zeros(96, np.float32)), Arg("tensormap", "f32", tmap=spec),
            Arg("tensormap", "f32", tmap=spec), Arg("scalar", "u32", value=384),
            *(Arg("scalar", "s32", value=0) for _ in range(3)),
            Arg("buffer", "f32", array=np.ones(96, np.float32), name="src", hidden=True)]
    with pytest.raises(ExecutionError, match=r"tma_box.ptx:\d+: multicast ctaMask 0x3 .*cluster of 1 CTA"):
        run_functional(parse_ptx(text, str(BOX)), Launch("tma_box3d", (1, 1, 1), (128, 1, 1), args, 384))


HEADER_META = {"kernel": "tma_box3d", "grid": [1, 1, 1], "block": [128, 1, 1], "dynamic_shared": 384, "params": [
    {"name": "out", "kind": "buffer", "dtype": "f32", "count": 96, "init": "poison"},
    {"name": "tmap_in", "kind": "tensormap", "of": "A", "dtype": "f32", "dims": [8, 4, 3], "strides": [32, 128],
     "box": [8, 4, 3], "swizzle": 32},
    {"name": "tmap_out", "kind": "tensormap", "of": "A", "dtype": "f32", "dims": [8, 4, 3], "strides": [32, 128],
     "box": [8, 4, 3], "swizzle": 32},
    {"name": "nbytes", "kind": "scalar", "dtype": "u32", "value": 384},
    *({"name": n, "kind": "scalar", "dtype": "s32", "value": 0} for n in "xyz"),
    {"name": "a", "role": "A", "kind": "buffer", "dtype": "f32", "count": 96, "hidden": True}]}


def test_metadata_tensormap_and_hidden_buffer():
    prog = parse_ptx(BOX.read_text(), str(BOX))
    k = prog.kernel("tma_box3d")
    launch = bind_launch(k.name, [(p.name, p.type) for p in k.params], HEADER_META, [], None, None, None,
                         np.random.default_rng(1))
    assert [a.kind for a in launch.args][-1] == "buffer" and launch.args[-1].hidden
    a = launch.args[-1].array.copy()
    res = run_functional(prog, launch)
    assert np.array_equal(res.outputs[0].view(np.uint8), swizzle_bytes(a.view(np.uint8), 32))
    bad = json.loads(json.dumps(HEADER_META))
    bad["params"][1]["swizzle"] = 16
    with pytest.raises(UsageError, match="tmap_in.*swizzle 16 must be one of 0, 32, 64, 128"):
        launch_from_metadata(bad, np.random.default_rng(1))
    bad["params"][1].update(swizzle=32, of="B")
    with pytest.raises(UsageError, match="'of' 'B' names no buffer param"):
        launch_from_metadata(bad, np.random.default_rng(1))


def _cli(*extra: str, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", "run", str(TILE), "--hw", "h200", "--functional",
                           "--grid", "4,4", "--block", "128", "--shared", "2048", "--arg", "zeros:u16:8192",
                           "--arg", "1024", "--arg", "64", "--arg", "8", "--out", str(tmp), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_command_line_tensormap(tmp_path):
    data = np.load(PROBE.with_suffix(".npz"))
    np.save(tmp_path / "in.npy", data["sw128_in"])
    form = f"tma_tile_param_1=of=@{tmp_path / 'in.npy'},dtype=bf16,dims=256x32,strides=512,box=64x8,swizzle=128"
    r = _cli("--tensormap", form, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "arg0.npy"), data["sw128_out"])
    r = _cli("--tensormap", form.replace("box=64x8", "box=64"), tmp=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "box and element_strides need 2 entries" in lines[0] and "write NAME=of=" in lines[0]
    r = _cli(tmp=tmp_path)
    assert r.returncode == 2 and "bind it with --tensormap tma_tile_param_1=of=" in r.stderr


def test_box_with_an_unaligned_innermost_coordinate_is_rejected():
    """The H200 stops a kernel whose TMA tile copy starts a box row off a 16-byte boundary (coords[0] x element
    size not a multiple of 16: "an illegal instruction was encountered", kernelgen's fp8 scale_b box at K block kb,
    2026-12-02); the simulator refuses it with the file, the line and the rule, as it does other invalid copies.
    Aligned negative coordinates stay legal (the test above)."""
    dims, box = (24, 10, 6), (8, 4, 3)
    spec = TensorMapSpec("src", "f32", 4, dims, (dims[0] * 4, dims[0] * dims[1] * 4), box, 32)
    nbytes = int(np.prod(box)) * 4
    for c0 in (-3, 1, 6):
        args = [Arg("buffer", "f32", array=np.zeros(nbytes // 4, np.float32), name="out"),
                Arg("tensormap", "f32", name="tmap_in", tmap=spec),
                Arg("tensormap", "f32", name="tmap_out", tmap=dataclasses.replace(spec, of="dst")),
                Arg("scalar", "u32", value=nbytes), *(Arg("scalar", "s32", value=c) for c in (c0, 7, -1)),
                Arg("buffer", "f32", array=np.ones(int(np.prod(dims)), np.float32), name="src", hidden=True),
                Arg("buffer", "f32", array=np.ones(int(np.prod(dims)), np.float32), name="dst", hidden=True)]
        why = r"tma_box\.ptx:\d+: the box's innermost coordinate .* not a multiple of 16"
        with pytest.raises(ExecutionError, match=why):
            run_functional(parse_ptx(BOX.read_text(), str(BOX)), Launch("tma_box3d", (1, 1, 1), (128, 1, 1), args,
                                                                         nbytes))


@pytest.mark.parametrize("x,status", [(4, "ok"), (1, "violated"), (-3, "violated")])
def test_verifier_proves_the_innermost_coordinate_aligned(x, status):
    """`bounds` proves every tile-mode tensor copy's innermost coordinate x element bytes a multiple of 16 (the
    rule the H200 enforces by stopping the kernel): tma_box3d with x fixed by the header's range, f32 elements:
    x = 4 passes (16 bytes), x = 1 and x = -3 are violations naming the copy and the coordinate."""
    from validation.formal.cli import verify_text

    meta = json.loads(json.dumps(HEADER_META))
    meta["ranges"] = {"p3": [384, 384], "p4": [x, x], "p5": [0, 0], "p6": [0, 0]}
    meta["extents"] = {"p0": "384"}
    text = "// @workbench " + json.dumps({"version": 1, **meta}) + "\n" + BOX.read_text()
    args = type("A", (), dict(kernel=None, grid=None, block=None, param=[], extent=[], dynamic_shared=None,
                              timeout=60.0, tensormap=[]))()
    rep = verify_text(text, str(BOX), args)
    b = next(p for p in rep["properties"] if p["name"] == "bounds")
    if status == "ok":
        assert b["status"] == "proved", b
    else:
        assert b["status"] == "violated" and f"innermost coordinate {x} x 4 bytes" in b["detail"], b
