"""s4 GEMMs (issue 16 item 4): two values per byte, planned and emitted as the s8 kernel over packed bytes
with mma.sync m16n8k64.s4; exact against numpy (the packed bytes unpacked, lower nibble first), on
odd shapes and partial K tiles, with a dequantising epilogue, ptxas-accepted; bad specs one line."""

import shutil
import subprocess
import sys

import numpy as np
import pytest

from kernelgen.cli import main as kg
from kernelgen.spec import parse_spec
from sim.errors import UsageError
from sim.launch import random_array, unpack_s4


def test_unpack_is_lower_nibble_first_and_signed():
    assert unpack_s4(np.array([0x21, 0xF8, 0x7F], dtype=np.uint8)).tolist() == [1, 2, -8, -1, -1, 7]
    vals = unpack_s4(random_array("s4x2", 4096, np.random.default_rng(1)))
    assert vals.min() == -8 and vals.max() == 7 and np.any(vals)


@pytest.mark.parametrize(("shape", "out", "extra"), [
    ("200x136x264", "s32", []),
    ("33x17x70", "s32", []),  # K = 70: a partial packed K tile (35 bytes)
    ("64x40x128", "f16", ["--variant", "mma"]),
])
def test_s4_gemm_exact_in_the_simulator(tmp_path, shape, out, extra):
    assert kg(["compile", "--hw", "h200", "--gemm", shape, "--dtype", "int4", "--out-dtype", out, "-o",
               str(tmp_path)] + extra) == 0
    ptx = tmp_path / "kernel.ptx"
    text = ptx.read_text()
    assert "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32" in text and '"dtype": "s4x2"' in text
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(ptx), "--hw", "h200", "--functional"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout + r.stderr
    if out == "s32":
        assert "rel err 0.00e+00" in r.stdout
    if shutil.which("ptxas"):
        subprocess.run(["ptxas", "-arch=sm_90a", str(ptx), "-o", str(tmp_path / "k.o")], check=True)


def test_s4_dequantising_epilogue_on_npu7nm(tmp_path):
    spec = tmp_path / "s4.yaml"
    spec.write_text("M: 48\nN: 40\nK: 96\ndtype: {a: int4, out: f32}\nalpha: 0.5\nepilogue: [scale, bias, relu]\n")
    assert kg(["compile", "--hw", "npu7nm", "--op", str(spec), "-o", str(tmp_path / "k")]) == 0
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(tmp_path / "k" / "kernel.ptx"), "--hw", "npu7nm",
                        "--functional"], capture_output=True, text=True)
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize(("data", "key"), [
    ({"M": 16, "N": 16, "K": 33, "dtype": "int4"}, "K"),
    ({"M": 16, "N": 16, "K": [2, 64], "dtype": "s4"}, "K"),
    ({"M": 16, "N": 16, "K": 32, "dtype": {"a": "s4", "b": "s8"}}, "dtype.b"),
])
def test_bad_s4_specs_are_one_line(data, key):
    with pytest.raises(UsageError) as e:
        parse_spec(data, "s4.yaml")
    assert f"'{key}'" in str(e.value) and "\n" not in str(e.value)


def test_s4_needs_k_contiguous_layouts(tmp_path, capsys):
    spec = tmp_path / "s4.yaml"
    spec.write_text("M: 16\nN: 16\nK: 64\ndtype: int4\nlayout: {a: col, b: col}\n")
    assert kg(["compile", "--hw", "h200", "--op", str(spec), "-o", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "K contiguous" in err


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 29, 74), (512, 384, 1024), (4096, 4096, 4096)])
def test_s4_gemm_on_gpu_exact(shape, tmp_path):
    """The H200 runs the generated s4 kernel (full-range nibbles): D equals numpy's int64 product exactly;
    the same run times it against the s8 kernel of the same shape (recorded in the test output)."""
    from validation.gpu import gpu_available

    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from kernelgen.planner import plan
    from kernelgen.variants import get
    from sim.hw import load_hw
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu

    M, N, K = shape
    rng = np.random.default_rng()
    A = rng.integers(-8, 8, (M, K))
    Bt = rng.integers(-8, 8, (N, K))  # B col-major: K contiguous per column

    def pack(x):
        x = (x & 0xF).astype(np.uint8).reshape(-1)
        return (x[0::2] | (x[1::2] << 4)).astype(np.uint8)

    times = {}
    for dt in ("s4", "s8"):
        spec = parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": dt, "out": "s32"}})
        ptx = get("mma").emit(spec, plan(spec, load_hw("h200"), "mma").best.tiling, {})
        launch = launch_from_metadata(read_metadata(ptx), rng)
        roles = {a.role: i for i, a in enumerate(launch.args)}
        launch.args[roles["A"]].array = pack(A) if dt == "s4" else A.astype(np.int8).reshape(-1)
        launch.args[roles["B"]].array = pack(Bt) if dt == "s4" else Bt.astype(np.int8).reshape(-1)
        m = run_on_gpu(ptx, launch, warmup=2, repeats=10)
        got = m.outputs[roles["D"]].reshape(M, N).astype(np.int64)
        assert np.array_equal(got, A @ Bt.T), dt
        times[dt] = m.wall_ms_median
    print(f"\ns4 {M}x{N}x{K}: {times['s4']:.4f} ms, s8 {times['s8']:.4f} ms "
          f"({2 * M * N * K / times['s4'] / 1e9:.0f} / {2 * M * N * K / times['s8'] / 1e9:.0f} TOPS)")
