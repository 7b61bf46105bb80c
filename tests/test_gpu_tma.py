"""The GPU runner's tensor-map path without a GPU (validation/gpu_tma.py, validation.gpu.build_launch): the
launch bound from a wgmma_tma header (hidden A and B allocated and filled, the maps left out), and the
cuLaunchKernel argument list assembled from the PTX entry with a recording encoder in place of
cuTensorMapEncodeTiled."""

from __future__ import annotations

from argparse import Namespace

import numpy as np
import pytest

from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get
from sim.errors import UsageError
from sim.launch import launch_from_metadata, read_metadata
from validation.gpu import build_launch, ptx_entries
from validation.gpu_tma import assemble_args, tensormap_params, without_tensormaps


def _kernel(la: str = "row", lb: str = "row") -> str:
    spec = parse_spec({"M": 300, "N": 136, "K": 200, "dtype": "bf16", "layout": {"a": la, "b": lb},
                       "beta": 0.5, "epilogue": ["bias"]})
    return get("wgmma_tma").emit(spec, Tiling("wgmma_tma", 128, 128, 64, 64, 128, 4, 0, 0, 8, 8, 0), {})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, dtype, address, dims, strides, box, element_strides, swizzle) -> bytes:
        self.calls.append((dtype, address, dims, strides, box, element_strides, swizzle))
        return bytes([len(self.calls)]) * 128


@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")])
def test_assemble_args_encodes_maps_from_the_mapped_buffers(layouts):
    ptx = _kernel(*layouts)
    meta = read_metadata(ptx)
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(0))
    assert [a.role for a in launch.args] == ["A", "B", "C", "bias", "D", "M", "N", "K", "alpha", "beta"]
    pointers = {i: 0x7000_0000 + 0x100_0000 * i for i, a in enumerate(launch.args) if a.kind == "buffer"}
    enc = Recorder()
    out = assemble_args(ptx_entries(ptx)[meta["kernel"]], tensormap_params(meta), launch.args, pointers, enc)
    assert [k for k, _ in out] == ["tmap", "tmap", "u64", "u64", "u64", "u32", "u32", "u32", "f32", "f32"]
    assert out[0][1] == bytes([1]) * 128 and out[1][1] == bytes([2]) * 128
    (da, pa, dims_a, st_a, box_a, es_a, sw_a), (_, pb, dims_b, st_b, box_b, _, _) = enc.calls
    assert (da, pa, pb, sw_a, es_a) == ("bf16", pointers[0], pointers[1], 128, (1, 1))
    if layouts[0] == "row":  # A row-major: K innermost, rows of K * 2 bytes, box 64 x TILE_M
        assert (dims_a, st_a, box_a) == ((200, 300), (400,), (64, 128))
    else:
        assert (dims_a, st_a, box_a) == ((300, 200), (600,), (64, 64))
    if layouts[1] == "row":  # B row-major: N innermost, MN-major boxes of 64 x 64
        assert (dims_b, st_b, box_b) == ((136, 200), (272,), (64, 64))
    else:
        assert (dims_b, st_b, box_b) == ((200, 136), (400,), (64, 128))
    assert [v for _, v in out[2:5]] == [pointers[2], pointers[3], pointers[4]]
    assert [v for _, v in out[5:]] == [300, 136, 200, 1.0, 0.5]


def test_assemble_args_names_what_is_missing():
    ptx = _kernel()
    meta = read_metadata(ptx)
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(0))
    maps = tensormap_params(meta)
    ptrs = {i: 16 * (i + 1) for i, a in enumerate(launch.args) if a.kind == "buffer"}
    entry = ptx_entries(ptx)[meta["kernel"]]
    with pytest.raises(UsageError, match="maps 'X'"):
        assemble_args(entry, [{**maps[0], "of": "X"}, maps[1]], launch.args, ptrs, Recorder())
    with pytest.raises(UsageError, match="neither a header param nor a tensor map"):
        assemble_args(entry + [("u32", "extra")], maps, launch.args, ptrs, Recorder())
    with pytest.raises(UsageError, match=r"\.b8 .*\[128\]"):
        assemble_args([("u64", maps[0]["name"])], maps, launch.args, ptrs, Recorder())


def test_build_launch_binds_the_header_buffers_hidden_ones_included(tmp_path):
    ptx = _kernel()
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    ns = Namespace(kernel=None, grid=None, block=None, shared=None, arg=["gemm_wgmma_tma_alpha=2.0"], seed=1,
                   symbol=[])
    launch, meta, check = build_launch(ptx, str(f), ns)
    by_role = {a.role: a for a in launch.args}
    assert by_role["A"].hidden and by_role["B"].hidden and by_role["A"].array.size == 300 * 200
    assert [a.role for a in launch.args][-2:] == ["A", "B"]  # the passed params first, then the hidden ones
    assert by_role["alpha"].value == 2.0 and check is not None and check["M"] == 300
    assert launch.block == (384, 1, 1) and launch.dynamic_shared == 4 * (16384 + 16384) + 64
    assert not tensormap_params(meta)


class _FakeCuda:
    """Just enough of pycuda.driver for validation.gpu._run_in_context (no device)."""

    class jit_option:  # noqa: N801 - pycuda's spelling
        LOG_VERBOSE = 0

    class function_attribute:  # noqa: N801
        NUM_REGS = LOCAL_SIZE_BYTES = SHARED_SIZE_BYTES = MAX_DYNAMIC_SHARED_SIZE_BYTES = 0

    class Context:
        @staticmethod
        def synchronize() -> None: ...

    class Event:
        def record(self) -> None: ...

        def synchronize(self) -> None: ...

        def time_till(self, other) -> float:
            return 1.0

    class _Alloc(int):
        def free(self) -> None: ...

    def __init__(self) -> None:
        self.next = 0x1000

    def module_from_buffer(self, data, options, handler):
        return self

    def get_function(self, name):
        return self

    def get_attribute(self, attr) -> int:
        return 0

    def set_attribute(self, attr, value) -> None: ...

    def prepare(self, types) -> None:
        raise AssertionError("a kernel with tensor maps must not go through pycuda's prepare")

    def mem_alloc(self, n: int):
        self.next += 1 << 20
        return self._Alloc(self.next)

    def memcpy_htod(self, dst, src) -> None: ...

    def memcpy_dtoh(self, dst, src) -> None: ...


def test_runner_launches_tensor_map_kernels_through_cuda_python(monkeypatch):
    import validation.tensormap as tm
    from validation.gpu import _run_in_context

    ptx = _kernel()
    meta = read_metadata(ptx)
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(0))
    enc, launches = Recorder(), []

    def prepare(ptx_bytes, kernel, grid, block, shared, args):
        assert ptx_bytes == ptx.encode() and kernel == meta["kernel"] and shared == meta["dynamic_shared"]
        assert grid == tuple(meta["grid"]) and block == (384, 1, 1)
        launches.append(args)
        return lambda: launches.append("launch")

    monkeypatch.setattr(tm, "encode_tiled", enc)
    monkeypatch.setattr(tm, "prepare_cuda_python", prepare)
    m = _run_in_context(_FakeCuda(), "fake", ptx, launch, 2, 3, None, None, None, None, 0,
                        tensormap_params(meta))
    args = launches[0]
    assert [k for k, _ in args[:2]] == ["tmap", "tmap"] and len(enc.calls) == 2
    assert enc.calls[0][1] != enc.calls[1][1]  # A's and B's own allocations
    assert launches[1:] == ["launch"] * (1 + 2 + 3 + 3) and m.wall_ms_median == 1.0


def test_assemble_args_encodes_im2col_maps():
    """A header tensor map with 'im2col' fields goes to cuTensorMapEncodeIm2col's encoder (corners, channels,
    pixels), not the tiled one."""
    from sim.launch import Arg

    maps = [{"name": "tmap", "kind": "tensormap", "of": "in", "dtype": "f32", "dims": [16, 6, 5, 2],
             "strides": [64, 384, 1920], "im2col": {"lower": [-1, -1], "upper": [-1, -1], "channels": 8, "pixels": 16}}]
    args = [Arg("buffer", "f32", array=np.zeros(4, np.float32), name="out"),
            Arg("buffer", "f32", array=np.zeros(960, np.float32), name="in", hidden=True)]
    calls: list[tuple] = []

    def im2col(*a: object) -> bytes:
        calls.append(a)
        return b"\x07" * 128

    out = assemble_args([("u64", "out"), ("array", "tmap")], maps, args, {0: 0x1000, 1: 0x2000}, Recorder(), im2col)
    assert out == [("u64", 0x1000), ("tmap", b"\x07" * 128)]
    assert calls == [("f32", 0x2000, (16, 6, 5, 2), (64, 384, 1920), (-1, -1), (-1, -1), 8, 16, (1, 1, 1, 1), 0)]
