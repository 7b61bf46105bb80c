"""TMA im2col loads and the CTA-to-CTA / reduction bulk copies (issue 12): the fixtures of validation/tma_cases.py
(nvcc 13 -arch=sm_90a output) against their numpy references, functional and timed; the im2col tensor map's
checks and command-line form; cp.reduce.async.bulk's element operations; one-line errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import ExecutionError, PtxError, UsageError
from sim.functional.ops_bulk import reduce_bytes
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import Arg, Launch, bind_tensormaps
from sim.ptx.parser import parse_ptx
from sim.tensormap import TensorMap, make_spec
from sim.timing import simulate
from validation.tma_cases import CASES, im2col_spec

# the im2col grid cut to two start pixels (the corner and the row wrap) to stay under a second timed
BY_NAME = {c.name: dataclasses.replace(c, grid=(9, 2, 1)) if c.kernel == "tma_im2col" else c for c in CASES}


def _diff(case, outputs) -> dict[int, int]:
    want = case.expected(case.launch())
    return {i: int(np.sum(outputs[i].view(np.uint32) != w.view(np.uint32))) for i, w in want.items()}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_fixture_equals_numpy_functional(name):
    case = BY_NAME[name]
    res = run_functional(parse_ptx(case.ptx.read_text(), str(case.ptx)), case.launch())
    assert set(_diff(case, res.outputs).values()) == {0}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_fixture_equals_numpy_timed(name):
    case = BY_NAME[name]
    res = simulate(parse_ptx(case.ptx.read_text(), str(case.ptx)), case.launch(), load_hw("h200"))
    assert set(_diff(case, res.outputs).values()) == {0}
    assert res.cycles > 0


def test_im2col_column_walks_the_bounding_box():
    """A column that starts at the box's last pixel of image 0 wraps into image 1; the filter offset moves
    every pixel; pixels and channels outside the tensor read zeros."""
    tm = TensorMap(im2col_spec(), 0)
    addrs, inside = tm.im2col_addresses((0, 4, 3, 0), (1, 2))  # w 4 h 3 is the box's last pixel (upper -1)
    pix = (addrs.reshape(16, 8)[:, 0] // 64)  # pixel index n*30 + h*6 + w (C = 16 f32 = 64 bytes)
    assert list(pix[:3]) == [0 * 30 + 5 * 6 + 5, 1 * 30 + 1 * 6 + 0, 1 * 30 + 1 * 6 + 1]
    assert not inside.reshape(16, 8)[0].any()  # h 3 + 2 = 5 is past H = 5
    assert inside.reshape(16, 8)[1].all()


@pytest.mark.parametrize("fields,msg", [
    ({"lower": [-1], "upper": [-1, -1], "channels": 8, "pixels": 16}, "lower needs 2 entries"),
    ({"lower": [-200, 0], "upper": [0, 0], "channels": 8, "pixels": 16}, r"-128\.\.127"),
    ({"lower": [0, 0], "upper": [0, 0], "channels": 3, "pixels": 16}, "multiple of 16 bytes"),
    ({"lower": [0, 0], "upper": [0, 0], "channels": 8, "pixels": 2000}, "1..1024"),
    ({"lower": [0, 0], "upper": [0, 0], "channels": 8}, "'im2col' must be"),
])
def test_im2col_map_problems(fields, msg):
    with pytest.raises(ValueError, match=msg):
        make_spec("in", "f32", 4, [16, 6, 5, 2], [64, 384, 1920], None, 0, [], fields)


def test_im2col_map_from_the_command_line():
    base = [None, None]
    params = [("out", "u64"), ("tmap", "b8")]
    hidden = bind_tensormaps(["tmap=of=out,dtype=f32,dims=16x6x5x2,strides=64x384x1920,lower=-1x-1,upper=-1x-1,"
                              "channels=8,pixels=16"], params, base)  # type: ignore[arg-type]
    assert hidden == [] and base[1] is not None
    assert base[1].tmap == dataclasses.replace(im2col_spec(), of="out")
    with pytest.raises(UsageError, match="'upper=' is missing"):
        bind_tensormaps(["tmap=of=out,dtype=f32,dims=16x6x5x2,strides=64x384x1920,lower=-1x-1,channels=8,pixels=16"],
                        params, [None, None])  # type: ignore[arg-type]


def test_reduce_bytes_per_type():
    def red(op, t, a, b):
        return reduce_bytes(op, t, np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
    assert list(red("add", "u32", np.array([0xFFFFFFFF, 1], np.uint32), np.array([2, 2], np.uint32))
                .view(np.uint32)) == [1, 3]
    assert list(red("min", "s32", np.array([-5, 7], np.int32), np.array([3, -9], np.int32)).view(np.int32)) == [-5, -9]
    assert list(red("inc", "u32", np.array([4, 9], np.uint32), np.array([4, 10], np.uint32)).view(np.uint32)) == [0, 10]
    assert list(red("dec", "u32", np.array([0, 5], np.uint32), np.array([7, 7], np.uint32)).view(np.uint32)) == [7, 4]
    f = red("add", "f32", np.array([1e8], np.float32), np.array([3.0], np.float32)).view(np.float32)
    assert f[0] == np.float32(1e8) + np.float32(3.0)
    h = red("add", "f16", np.array([2048], np.float16), np.array([1], np.float16)).view(np.float16)
    assert h[0] == np.float16(2048)  # 2049 rounds to even
    bf = red("max", "bf16", np.array([0x3F80], np.uint16), np.array([0x4000], np.uint16)).view(np.uint16)
    assert bf[0] == 0x4000
    with pytest.raises(ValueError, match="not a cp.reduce.async.bulk operation"):
        red("and", "f32", np.zeros(1, np.float32), np.zeros(1, np.float32))


def test_im2col_offsets_missing_is_one_line():
    case = BY_NAME["im2col_4d"]
    bad = case.ptx.read_text().replace("[%r8], {%rs1, %rs2};", "[%r8];")
    with pytest.raises(PtxError, match=r"tma_im2col.ptx:\d+: .*needs 2 im2col offsets"):
        run_functional(parse_ptx(bad, str(case.ptx)), case.launch())


def test_im2col_load_with_a_tiled_map_is_rejected():
    case = BY_NAME["im2col_4d"]
    launch = case.launch()
    spec = launch.args[1].tmap
    launch.args[1].tmap = make_spec("in", "f32", 4, list(spec.dims), list(spec.strides), [8, 4, 4, 1], 0, [])
    with pytest.raises(ExecutionError, match="needs an im2col tensor map"):
        run_functional(parse_ptx(case.ptx.read_text(), str(case.ptx)), launch)


ISSUE_LINE = CASES[0].ptx.parents[1] / "tma" / "tma_issue_line.ptx"


@pytest.mark.parametrize("queue,warps,warp_issue,want", [
    (0, 1, 0, [[101, 101, 101]]),  # held until each copy is accepted: tma.issue 100 + the %clock read
    (0, 2, 0, [[101, 200, 200], [199, 200, 200]]),  # the other warp's copies hold it too: one unit per SM
    (1, 1, 0, [[2, 99, 100]]),  # one copy may wait: the second waits for the first to be accepted
    (3, 1, 0, [[2, 2, 2]]),  # room for all three: no stall
    (3, 1, 40, [[41, 41, 41]]),  # tma.warp_issue: ptxas' issue sequence holds the warp 40 cycles per copy
])
def test_tma_issue_backpressure_timeline(queue, warps, warp_issue, want):
    """tma.queue: lane 0 of each warp issues three 1-D bulk loads reading %clock around them
    (tests/fixtures/tma/tma_issue_line.ptx) on an h200 whose TMA unit takes 100 cycles per copy (its constant
    cache warm: the parameters' cold line would delay the first copy's address, docs/const-cold.md)."""
    hw = load_hw("h200")
    hw = dataclasses.replace(hw, constant=None,
                             tma=dataclasses.replace(hw.tma, issue=100, queue=queue, warp_issue=warp_issue))
    launch = Launch("tma_issue_line", (1, 1, 1), (32 * warps, 1, 1),
                    [Arg("buffer", "u32", array=np.arange(64, dtype=np.uint32)),
                     Arg("buffer", "u32", array=np.zeros(4 * warps, np.uint32))], 0)
    res = simulate(parse_ptx(ISSUE_LINE.read_text(), str(ISSUE_LINE)), launch, hw)
    clocks = res.outputs[1].reshape(warps, 4).astype(np.int64)
    assert np.diff(clocks).tolist() == want
    assert (res.stalls.get("tma", 0) > 0) == (queue < 3 or warp_issue > 0)


def test_cta_to_cta_copy_pays_the_dsmem_trip():
    """cp.async.bulk.shared::cluster.shared::cta lands shared.remote_extra cycles after its bytes streamed (the
    SM-to-SM trip a DSMEM load pays, docs/clusters.md): the receiving CTA's wait ends that much later."""
    case = BY_NAME["bulk_peer_2"]
    prog = parse_ptx(case.ptx.read_text(), str(case.ptx))
    hw = load_hw("h200")
    cycles = []
    for extra in (1000, 2000):  # both long enough that the landing decides when the CTAs end
        h = dataclasses.replace(hw, shared=dataclasses.replace(hw.shared, remote_extra=extra))
        cycles.append(simulate(prog, case.launch(), h).cycles)
    assert cycles[1] - cycles[0] == 1000, cycles


def test_tensor_reduce_adds_the_box(tmp_path):
    """cp.reduce.async.bulk.tensor ... .add.tile.bulk_group: tma_box3d's store as a reduction adds the box into
    the tensor (elements inside it; its map's f32 elements, one rounding each)."""
    from tests.simhelp import ptxas_ok
    from tests.test_tma import BOX, TensorMapSpec

    text = BOX.read_text().replace("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group",
                                   "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group")
    ptxas_ok(text, tmp_path)
    rng = np.random.default_rng(4)
    dims, box, coords = (24, 10, 6), (8, 4, 3), (-4, 7, -1)  # coords[0] x 4 bytes: 16-byte aligned
    t = rng.standard_normal(dims[::-1]).astype(np.float32)
    base = rng.standard_normal(dims[::-1]).astype(np.float32)
    nbytes = int(np.prod(box)) * 4
    spec_in = TensorMapSpec("src", "f32", 4, dims, (dims[0] * 4, dims[0] * dims[1] * 4), box, 32)
    spec_out = dataclasses.replace(spec_in, of="dst")
    args = [Arg("buffer", "f32", array=np.zeros(nbytes // 4, np.float32), name="out"),
            Arg("tensormap", "f32", name="tmap_in", tmap=spec_in),
            Arg("tensormap", "f32", name="tmap_out", tmap=spec_out),
            Arg("scalar", "u32", value=nbytes), *(Arg("scalar", "s32", value=c) for c in coords),
            Arg("buffer", "f32", array=t.ravel().copy(), name="src", hidden=True),
            Arg("buffer", "f32", array=base.ravel().copy(), name="dst", hidden=True)]
    res = run_functional(parse_ptx(text, "reduce.ptx"), Launch("tma_box3d", (1, 1, 1), (128, 1, 1), args, nbytes))
    want = base.copy()
    sl = tuple(slice(max(c, 0), min(c + b, d)) for c, b, d in zip(coords, box, dims))[::-1]
    want[sl] = base[sl] + t[sl]
    assert np.array_equal(res.outputs[8].reshape(t.shape), want)
    from sim.sass.tools import tools_available
    if tools_available():  # the same in SASS mode (UTMAREDG.3D.ADD)
        from sim.sass.exec import run_sass_functional

        sass = run_sass_functional(text, Launch("tma_box3d", (1, 1, 1), (128, 1, 1), args, nbytes), file="reduce.ptx")
        assert np.array_equal(sass.outputs[8].reshape(t.shape), want)


def test_verifier_counts_an_im2col_column():
    """The verifier's expect_tx bookkeeping: an im2col map's load brings channels x pixels elements."""
    from validation.formal.cli import tensormap_box_bytes

    meta = {"params": [{"name": "tmap", "kind": "tensormap", "dtype": "f32", "dims": [16, 6, 5, 2],
                        "im2col": {"lower": [-1, -1], "upper": [-1, -1], "channels": 8, "pixels": 16}}]}
    assert tensormap_box_bytes(meta) == {"tmap": 4 * 8 * 16}
