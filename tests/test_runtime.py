"""K-range modules (kernelgen.krange, kernelgen.module) and the runtime (load, bind, launch, sync) on the
simulator; ``-m gpu`` runs the same module on the GPU (device="cuda")."""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kernelgen.cli import main
from kernelgen.krange import bucket_of, bucket_span, partition
from kernelgen.module import ABI_VERSION, build, read
from kernelgen.spec import parse_spec
from runtime import RuntimeFailure, load
from sim.hw import load_hw

# small tiles only, so that the anchors' full plans take a fraction of a second
SPEC = {"M": 16, "N": 16, "K": [1, 256], "dtype": "fp16", "name": "kr",
        "tiling": ["TILE_M in [16, 16]", "TILE_N in [16, 16]"]}


@pytest.fixture(scope="module")
def npu() -> tuple:
    hw = load_hw("npu7nm")
    p = partition(parse_spec(SPEC, "kr.yaml"), hw, threshold=0.005)
    return p, hw


@pytest.fixture(scope="module")
def ko(npu, tmp_path_factory) -> Path:
    p, hw = npu
    path = tmp_path_factory.mktemp("ko") / "kr.ko"
    path.write_bytes(build(p, hw, Path(hw.path).read_text(), cubin=False))
    return path


def _expected_variant(manifest: dict, k: int) -> int:
    """From the variants' intervals, not from the dispatch table."""
    hits = [v["index"] for v in manifest["variants"] for lo, hi in v["intervals"] if lo <= k <= hi]
    assert len(hits) == 1, (k, hits)
    return hits[0]


def _gemm(kern, M: int, N: int, K: int, rng: np.random.Generator) -> float:
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    d = np.full((M, N), np.nan, np.float32)
    kern.bind_input("A", a)
    kern.bind_input("B", b)
    kern.bind_output("D", d)
    kern.launch()
    kern.sync()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.linalg.norm(d - ref) / np.linalg.norm(ref))


def test_buckets_cover_every_offset_once():
    for sub in (0, 2, 3):
        prev = -1
        for x in range(3000):
            b = bucket_of(x, sub)
            lo, hi = bucket_span(b, sub)
            assert lo <= x <= hi and b in (prev, prev + 1)
            prev = b
    assert bucket_span(bucket_of(1000, 3), 3)[1] - bucket_span(bucket_of(1000, 3), 3)[0] + 1 <= 1000 // 8


def test_partition_steps_and_boundaries(npu):
    p, _ = npu
    taken = [s for s in p.steps if s.taken]
    assert len(taken) >= 2 and len(p.chosen) >= 2, p.steps  # a K range this wide needs more than one
    assert all(s.gain >= p.threshold for s in taken[1:])
    last = p.steps[-1]
    assert not last.taken and last.gain < p.threshold
    assert p.boundaries
    for bd in p.boundaries:  # each side of a boundary is served by the faster of the two neighbours
        assert bd.at_left[1] <= bd.at_left[2] and bd.at_right[2] <= bd.at_right[1], bd
    ivs = p.intervals()
    assert ivs[0][0] == 1 and ivs[-1][1] == 256
    assert all(a[1] + 1 == b[0] for a, b in zip(ivs, ivs[1:]))


def test_module_manifest_and_dispatch(ko, npu):
    p, _ = npu
    m = read(ko)
    man = m.manifest
    assert man["abi"] == ABI_VERSION and man["hw"]["name"] == "npu7nm" and man["spec"]["K"]["range"] == [1, 256]
    assert {t["name"] for t in man["tensors"]} == {"A", "B", "D"}
    for v in man["variants"]:
        assert v["prediction"]["cycles"] > 0 and v["plan"]["key"] and v["cubin"] is None
        assert f".entry {v['kernel']}" in m.text(v["ptx"])
    for k in range(1, 257):
        assert m.dispatch(k) == p.dispatch(k) == _expected_variant(man, k)
    with pytest.raises(Exception, match="outside the module's range"):
        m.dispatch(257)


def test_sim_backend_numpy_across_k(ko):
    """Random K values plus both sides of every boundary: the right variant runs and D matches float64."""
    kern = load(str(ko), device="sim:npu7nm")
    man = kern.module.manifest
    rng = np.random.default_rng(7)
    edges = [b["k"] for b in man["partition"]["boundaries"]]
    ks = sorted({1, 256, *edges, *(e - 1 for e in edges), *rng.integers(1, 257, 4).tolist()})
    seen = set()
    for k in ks:
        err = _gemm(kern, 16, 16, k, rng)
        assert kern.last_variant == _expected_variant(man, k), k
        assert err < 1e-2, (k, err)
        seen.add(kern.last_variant)
    assert seen == set(range(len(man["variants"])))


def test_launch_is_async_and_sync_writes(ko):
    kern = load(str(ko), device="sim:npu7nm")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 40)).astype(np.float16)
    b = rng.standard_normal((40, 16)).astype(np.float16)
    d = np.full((16, 16), np.nan, np.float32)
    kern.bind_input("A", a)
    kern.bind_input("B", b)
    kern.bind_output("D", d)
    kern.launch()
    with pytest.raises(RuntimeFailure, match="still in flight"):
        kern.launch()
    kern.sync()
    assert np.isfinite(d).all()


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_missing_binding_and_bad_binding(ko):
    kern = load(str(ko), device="sim:npu7nm")
    kern.bind_input("A", np.ones((16, 8), np.float16))
    kern.bind_input("B", np.ones((8, 16), np.float16))
    with pytest.raises(RuntimeFailure) as e:
        kern.launch()
    assert "missing binding: D" in _one_line(e) and "bind_output('D'" in str(kern.last_error)
    with pytest.raises(RuntimeFailure) as e:
        kern.bind_output("D", np.ones((16, 16), np.float64))
    assert "dtype float64" in _one_line(e) and "f32" in str(e.value)
    with pytest.raises(RuntimeFailure, match="no tensor 'X'"):
        kern.bind_input("X", np.ones((1, 1), np.float16))
    kern.bind_output("D", np.ones((8, 16), np.float32))
    with pytest.raises(RuntimeFailure, match="M=8 but A gives M=16|M=16 but D gives M=8"):
        kern.launch()
    kern.bind_input("A", np.ones((8, 8), np.float16))
    with pytest.raises(RuntimeFailure, match="M=8 but the module was built for M=16"):
        kern.launch()


def test_wrong_abi_and_wrong_device(ko, tmp_path):
    bad = tmp_path / "abi2.ko"
    with zipfile.ZipFile(ko) as src, zipfile.ZipFile(bad, "w") as dst:
        for n in src.namelist():
            data = src.read(n)
            if n == "module.json":
                man = json.loads(data)
                man["abi"] = ABI_VERSION + 1
                data = json.dumps(man).encode()
            dst.writestr(n, data)
    with pytest.raises(RuntimeFailure) as e:
        load(str(bad), device="sim:npu7nm")
    assert f"module ABI {ABI_VERSION + 1}, this runtime reads ABI {ABI_VERSION}" in _one_line(e)
    with pytest.raises(RuntimeFailure) as e:
        load(str(ko), device="sim:h200")
    assert "built for hardware 'npu7nm'" in _one_line(e) and "sim:h200" in str(e.value)
    with pytest.raises(RuntimeFailure, match="names no GPU arch"):
        load(str(ko), device="cuda")
    (tmp_path / "junk.ko").write_text("not a zip")
    with pytest.raises(RuntimeFailure, match="not a module"):
        load(str(tmp_path / "junk.ko"))


def test_dispatch_cost_is_sub_microsecond_scale(ko):
    """Host dispatch: one subtraction, a bit length, a shift, a tuple index (docs/module.md has the figure)."""
    m = read(ko)
    t0 = time.perf_counter()
    for k in range(1, 257):
        m.dispatch(k)
    per = (time.perf_counter() - t0) / 256
    assert per < 50e-6  # generous: the machine is shared; the median measured is ~0.3 us


@pytest.mark.slow
def test_cli_writes_module_and_rejects_bad_input(tmp_path, capsys):
    spec = tmp_path / "g.yaml"
    spec.write_text("M: 16\nN: 16\nK: in [1, 64]\ndtype: fp16\n"
                    "tiling:\n  - TILE_M in [16, 16]\n  - TILE_N in [16, 16]\n")
    out = tmp_path / "g.ko"
    rc = main(["compile", "--hardware", "npu7nm", "--op", str(spec), "-o", str(out), "--no-cubin"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert read(out).manifest["source"] == "source/g.yaml"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".g.ko")]  # no temp file left
    rc = main(["compile", "--hardware", "npu7nm", "--op", "gemm", "--shape", "16x16x1..40", "--dtype", "fp16",
               "-o", str(tmp_path / "op.ko"), "--no-cubin"])
    assert rc == 0, capsys.readouterr().err
    assert read(tmp_path / "op.ko").manifest["dispatch"]["hi"] == 40
    rc = main(["compile", "--hardware", "npu7nm", "--op", "gemm", "-o", str(tmp_path / "op2.ko")])
    assert rc == 2 and "give --shape MxNxK" in capsys.readouterr().err
    spec.write_text("M: 16\nN: 16\nK: [1, 64]\ndtype: int4_e2m1\n")
    rc = main(["compile", "--hardware", "npu7nm", "--op", str(spec), "-o", str(tmp_path / "h.ko")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "g.yaml" in err and "'int4_e2m1' is not one of" in err
    assert not (tmp_path / "h.ko").exists()
    spec.write_text("M: 16\nN: 16\nK: [1, 64]\nbogus: 1\n")
    rc = main(["compile", "--hardware", "npu7nm", "--op", str(spec), "-o", str(tmp_path / "h.ko")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "g.yaml" in err and "bogus" in err


@pytest.mark.slow
def test_sim_timed_backend_reports_cycles(ko):
    kern = load(str(ko), device="sim:npu7nm", timed=True)
    err = _gemm(kern, 16, 16, 200, np.random.default_rng(3))
    assert err < 1e-2 and kern.last_cycles and kern.last_cycles > 0


@pytest.mark.slow
def test_h200_module_has_cubins_and_runs_on_the_simulator(tmp_path, capsys):
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on the PATH")
    out = tmp_path / "h.ko"
    rc = main(["compile", "--hardware", "h200", "--gemm", "64x64x1..1024", "--dtype", "fp16", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    kern = load(str(out), device="sim:h200")
    assert all(v["cubin"] for v in kern.module.variants)
    rng = np.random.default_rng(5)
    for k in rng.integers(1, 1025, 5).tolist():
        assert _gemm(kern, 64, 64, k, rng) < 1e-2
        assert kern.last_variant == _expected_variant(kern.module.manifest, k)


@pytest.mark.gpu
def test_cuda_backend_k_range(tmp_path, capsys):
    """The issue's done-when: 20 random K on the H200, each numpy-checked, dispatching to the right variant."""
    pytest.importorskip("pycuda.driver")
    out = tmp_path / "h.ko"
    rc = main(["compile", "--hardware", "h200", "--gemm", "256x256x1..4096", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    kern = load(str(out), device="cuda")
    rng = np.random.default_rng(11)
    for k in rng.integers(1, 4097, 20).tolist():
        assert _gemm(kern, 256, 256, k, rng) < 1e-2, k
        assert kern.last_variant == _expected_variant(kern.module.manifest, k)


@pytest.mark.gpu
def test_cuda_backend_binds_torch_tensors(tmp_path, capsys):
    """Device arrays on the H200: torch CUDA tensors bound for A, B and D, read and written in place."""
    pytest.importorskip("pycuda.driver")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    out = tmp_path / "h.ko"
    assert main(["compile", "--hardware", "h200", "--gemm", "64x64x1..512", "-o", str(out)]) == 0, \
        capsys.readouterr().err
    kern = load(str(out), device="cuda")
    col = kern.tensors["B"]["layout"] == "col"
    for k in (1, 37, 256, 511):
        a = torch.randn(64, k, device="cuda", dtype=torch.float16)
        b = torch.randn(64, k, device="cuda", dtype=torch.float16).t() if col else \
            torch.randn(k, 64, device="cuda", dtype=torch.float16)
        d = torch.full((64, 64), float("nan"), device="cuda")
        kern.bind_input("A", a)
        kern.bind_input("B", b)
        kern.bind_output("D", d)
        kern.launch()
        kern.sync()
        ref = a.cpu().numpy().astype(np.float64) @ b.cpu().numpy().astype(np.float64)
        got = d.cpu().numpy()
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2, k
        assert kern.last_variant == _expected_variant(kern.module.manifest, k)


def test_seed_hardware_module_runs(tmp_path):
    """A module planned for the seed 000 hardware.yaml keeps that text; the simulator backend converts it."""
    seed = Path(__file__).resolve().parent.parent / "examples" / "seeds" / "hardware.yaml"
    hw = load_hw(seed)
    spec = parse_spec({**SPEC, "K": [1, 32]}, "kr.yaml")
    path = tmp_path / "seed.ko"
    path.write_bytes(build(partition(spec, hw), hw, seed.read_text(), cubin=False))
    kern = load(str(path), device=f"sim:{hw.name}")
    assert _gemm(kern, 16, 16, 20, np.random.default_rng(2)) < 1e-2


# ---- device arrays (no GPU needed: a stand-in exposing __cuda_array_interface__ over host memory and a
# backend that records what it was handed) ----

class FakeDevice:
    """A device array as torch/cupy/numba present one (CUDA array interface v3)."""

    def __init__(self, arr: np.ndarray, readonly: bool = False, stream: int | None = None, mask=None):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "shape": arr.shape, "typestr": arr.dtype.str, "data": (arr.ctypes.data, readonly),
            "strides": None if arr.flags.c_contiguous else arr.strides, "version": 3, "stream": stream,
            "mask": mask}


class RecordingBackend:
    device = "cuda"
    device_arrays = True
    copies_at_submit = False  # it keeps the arguments: each launch's host inputs must be copies

    def __init__(self):
        self.calls: list = []

    def submit(self, variant, args, grid, device):
        from runtime.backends import Job

        self.calls.append((variant, args, grid, device))
        return Job(variant, args)

    def wait(self, job):
        return {}, None


def _device_kernel(ko):
    from runtime.kernel import Kernel

    return Kernel(read(ko), RecordingBackend())


def test_device_arrays_are_passed_by_pointer(ko):
    kern = _device_kernel(ko)
    a = FakeDevice(np.ones((16, 40), np.float16))
    b = np.ones((40, 16), np.float16)  # a host array beside device ones: copied as before
    d = FakeDevice(np.full((16, 16), 7, np.float32))
    kern.bind_input("A", a)
    kern.bind_input("B", b)
    kern.bind_output("D", d)
    kern.launch()
    kern.sync()
    v, args, grid, device = kern.backend.calls[-1]
    roles = {x.role: i for i, x in enumerate(args)}
    assert set(device) == {roles["A"], roles["D"]}
    assert device[roles["A"]].ptr == a.arr.ctypes.data and device[roles["D"]].ptr == d.arr.ctypes.data
    assert args[roles["A"]].array is None and args[roles["B"]].array is not None
    assert args[roles["K"]].value == 40 and v == _expected_variant(kern.module.manifest, 40)
    assert (d.arr == 7).all()  # sync() writes nothing into a device output: the kernel wrote it in place


@pytest.mark.parametrize("bad, msg", [
    (lambda: FakeDevice(np.ones((16, 40), np.float32)), "dtype float32 (<f4), the module declares f16"),
    (lambda: FakeDevice(np.ones(640, np.float16)), "1-d device array, expected 2-d (M x K)"),
    (lambda: FakeDevice(np.ones((40, 16), np.float16).T), "not dense row-major storage of (16, 40)"),
    (lambda: FakeDevice(np.ones((16, 40), np.float16), mask=np.ones(1)), "masked device array"),
])
def test_device_array_checks_are_one_line(ko, bad, msg):
    kern = _device_kernel(ko)
    with pytest.raises(RuntimeFailure) as e:
        kern.bind_input("A", bad())
    assert msg in _one_line(e) and msg in str(kern.last_error)


def test_device_output_read_only_and_odd_objects(ko):
    kern = _device_kernel(ko)
    with pytest.raises(RuntimeFailure, match="output device array is read-only"):
        kern.bind_output("D", FakeDevice(np.ones((16, 16), np.float32), readonly=True))

    class DeviceAllocation:  # pycuda's raw allocation: a pointer without shape or dtype
        pass

    with pytest.raises(RuntimeFailure, match=r"wrap it, pycuda.gpuarray.GPUArray\(shape, dtype, gpudata="):
        kern.bind_input("A", DeviceAllocation())

    class Bf16Tensor:
        @property
        def __cuda_array_interface__(self):
            raise TypeError("The dtype torch.bfloat16 is not supported\nmore")

    with pytest.raises(RuntimeFailure) as e:
        kern.bind_input("A", Bf16Tensor())
    assert "t.view(torch.int16)" in _one_line(e)
    with pytest.raises(RuntimeFailure, match="neither a numpy array nor a device array"):
        kern.bind_input("A", [[1.0]])
    with pytest.raises(RuntimeFailure, match=r"dtype \|V2 \(\|V2 \(torch's bf16\)\), the module declares f16"):
        kern.bind_input("A", FakeDevice(np.zeros((16, 40), "V2")))  # torch describes a bf16 tensor so


def test_simulator_refuses_device_arrays(ko):
    kern = load(str(ko), device="sim:npu7nm")
    with pytest.raises(RuntimeFailure) as e:
        kern.bind_input("A", FakeDevice(np.ones((16, 40), np.float16)))
    assert "sim:npu7nm runs on host memory: bind a numpy array" in _one_line(e)


def test_dense_orders():
    from runtime.devarray import device_view

    x = np.zeros((6, 4), np.float16)
    assert device_view(FakeDevice(x)).dense_in("C") and not device_view(FakeDevice(x)).dense_in("F")
    assert device_view(FakeDevice(x.T)).dense_in("F") and not device_view(FakeDevice(x.T)).dense_in("C")
    assert not device_view(FakeDevice(x[:, :2])).dense_in("C")  # a column slice: rows with gaps
    assert device_view(FakeDevice(x[:1])).dense_in("F")  # one row: its stride does not matter
    assert device_view(x) is None


def test_repeated_launch_reuses_the_dispatch_until_a_rebind(ko):
    kern = _device_kernel(ko)
    a = np.ones((16, 40), np.float16)
    kern.bind_input("A", a)
    kern.bind_input("B", FakeDevice(np.ones((16, 40), np.float16).T))
    kern.bind_output("D", FakeDevice(np.zeros((16, 16), np.float32)))
    kern.launch()
    kern.sync()
    a[...] = 2  # a host array changed in place is copied again at the next launch
    kern.launch()
    kern.sync()
    (_, args1, _, _), (_, args2, _, _) = kern.backend.calls
    ia = [x.role for x in args1].index("A")
    assert args1[ia].array.max() == 1 and args2[ia].array.max() == 2
    kern.set_scalar("alpha", 0.5)
    kern.bind_input("A", np.ones((16, 200), np.float16))
    kern.bind_input("B", FakeDevice(np.ones((16, 200), np.float16).T))
    kern.launch()
    kern.sync()
    args3 = kern.backend.calls[-1][1]
    vals = {x.role: x.value for x in args3 if x.kind == "scalar"}
    assert vals["K"] == 200 and vals["alpha"] == 0.5
    assert kern.last_variant == _expected_variant(kern.module.manifest, 200)


def _pack_s4(x: np.ndarray) -> np.ndarray:
    """Rows of s4 values -> bytes of two along the row, the lower nibble first."""
    x = (x & 0xF).astype(np.uint8)
    return x[:, 0::2] | (x[:, 1::2] << 4)


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_integer_modules_are_exact(dtype, tmp_path):
    """s8 and s4 modules through the runtime (one K: the binding is under test, not the range); s4 tensors
    are bound packed (two per byte along K), K counted in values."""
    hw = load_hw("npu7nm")
    spec = parse_spec({**SPEC, "K": 34, "dtype": {"a": dtype, "out": "s32"}}, "kr.yaml")
    path = tmp_path / "int.ko"
    path.write_bytes(build(partition(spec, hw), hw, Path(hw.path).read_text(), cubin=False))
    kern = load(str(path), device="sim:npu7nm")
    rng = np.random.default_rng(4)
    lo, hi = (-8, 8) if dtype == "int4" else (-128, 128)
    a, bt = rng.integers(lo, hi, (16, 34)), rng.integers(lo, hi, (16, 34))
    d = np.zeros((16, 16), np.int32)
    if dtype == "int4":
        kern.bind_input("A", _pack_s4(a))
        kern.bind_input("B", _pack_s4(bt).T)  # K x N col-major: packed along K
    else:
        kern.bind_input("A", a.astype(np.int8))
        kern.bind_input("B", bt.T.astype(np.int8))
    kern.bind_output("D", d)
    kern.launch()
    kern.sync()
    assert np.array_equal(d, a @ bt.T)
    assert kern.dims()["K"] == 34 and kern.last_variant == _expected_variant(kern.module.manifest, 34)
    if dtype == "int4":
        with pytest.raises(RuntimeFailure) as e:
            kern.bind_input("A", a.astype(np.int8))
        assert "module declares s4 (uint8, 2 values per element along K, the lower nibble first)" in _one_line(e)


def test_bf16_device_tensors_bind_as_bits(tmp_path):
    """A bf16 module takes torch's bf16 tensors as they describe themselves ("|V2") or their int16 view."""
    from runtime.kernel import Kernel

    hw = load_hw("npu7nm")
    spec = parse_spec({**SPEC, "K": 32, "dtype": "bf16"}, "kr.yaml")
    path = tmp_path / "bf16.ko"
    path.write_bytes(build(partition(spec, hw), hw, Path(hw.path).read_text(), cubin=False))
    kern = Kernel(read(path), RecordingBackend())
    kern.bind_input("A", FakeDevice(np.zeros((16, 32), "V2")))
    kern.bind_input("B", FakeDevice(np.zeros((16, 32), np.int16).T))
    with pytest.raises(RuntimeFailure, match=r"dtype float16 \(<f2\), the module declares bf16"):
        kern.bind_input("A", FakeDevice(np.zeros((16, 32), np.float16)))
