"""validation.gpu: the same PTX on a real GPU (``-m gpu``; skipped without pycuda or a GPU).

The kernels are tests/data/gpu/saxpy.cu compiled with ``nvcc -ptx -arch=sm_90`` into saxpy.ptx
(two entries: ``saxpy`` and ``gemm_naive``). Each test writes a copy with a ``// @workbench``
header into tmp_path. The tests without the gpu marker need neither pycuda nor a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.errors import PtxError, UsageError
from sim.launch import Arg, Launch, launch_from_metadata
from validation.gpu import gpu_available, ptx_entries

DATA = Path(__file__).parent / "data" / "gpu"
PTX = (DATA / "saxpy.ptx").read_text()
ROOT = Path(__file__).resolve().parent.parent

_OK, _WHY = gpu_available()
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not _OK, reason=f"no GPU for validation.gpu: {_WHY}")

SAXPY_N = 1000


def _buf(name, dtype, role, count, init):
    return {"name": name, "kind": "buffer", "dtype": dtype, "role": role, "count": count, "init": init}


def _sc(name, dtype, role, value):
    return {"name": name, "kind": "scalar", "dtype": dtype, "role": role, "value": value}


def _saxpy_meta(n=SAXPY_N, a=2.5):
    return {
        "version": 1, "kernel": "saxpy", "grid": [(n + 127) // 128, 1, 1], "block": [128, 1, 1],
        "params": [
            _sc("saxpy_param_0", "u32", "n", n),
            _sc("saxpy_param_1", "f32", "a", a),
            _buf("saxpy_param_2", "f32", "x", n, "random"),
            _buf("saxpy_param_3", "f32", "y", n, "random"),
        ],
    }


def _gemm_meta(M=20, N=40, K=33, alpha=1.5, beta=0.5, **check):
    gx, gy = (N + 15) // 16, (M + 15) // 16
    chk = {"op": "gemm", "M": M, "N": N, "K": K, "layout_a": "row", "layout_b": "row", "layout_c": "row",
           "alpha": alpha, "beta": beta, "epilogue": [], "out_dtype": "f32", "rtol": 1e-5}
    chk.update(check)
    p = "gemm_naive_param_"
    return {
        "version": 1, "kernel": "gemm_naive", "grid": [gx, gy, 1], "block": [16, 16, 1],
        "params": [
            _sc(p + "0", "u32", "M", M),
            _sc(p + "1", "u32", "N", N),
            _sc(p + "2", "u32", "K", K),
            _sc(p + "3", "f32", "alpha", alpha),
            _buf(p + "4", "f32", "A", M * K, "random"),
            _buf(p + "5", "f32", "B", K * N, "random"),
            _sc(p + "6", "f32", "beta", beta),
            _buf(p + "7", "f32", "C", M * N, "random"),
            _buf(p + "8", "f32", "D", M * N, "poison"),
            _buf(p + "9", "u64", "profile", 2 * gx * gy, "zeros"),
        ],
        "check": chk,
        "profile": {"param": 9, "slots": 2},
    }


def _with_header(tmp_path: Path, meta: dict | None, text: str = PTX, name: str = "k.ptx") -> Path:
    path = tmp_path / name
    header = f"// @workbench {json.dumps(meta)}\n" if meta is not None else ""
    path.write_text(header + text)
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "validation", "gpu", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


# ------------------------------------------------------------------------------------------
# no GPU needed


def test_ptx_entries_reads_param_types():
    entries = ptx_entries(PTX)
    assert entries["saxpy"] == [("u32", "saxpy_param_0"), ("f32", "saxpy_param_1"),
                                ("u64", "saxpy_param_2"), ("u64", "saxpy_param_3")]
    assert [t for t, _ in entries["gemm_naive"]] == ["u32"] * 3 + ["f32", "u64", "u64", "f32"] + ["u64"] * 3
    odd = ".visible .entry k(\n .param .u64 .ptr.global .align 16 k_A, // comment\n" \
          " .param .align 8 .b8 k_s[16]\n)\n{ ret; }"
    assert ptx_entries(odd) == {"k": [("u64", "k_A"), ("array", "k_s")]}


def test_cli_usage_errors_exit_2(tmp_path):
    p = _with_header(tmp_path, None)
    r = _cli(p)
    assert r.returncode == 2 and "several entries (saxpy, gemm_naive); pick one with --kernel" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _cli(p, "--kernel", "saxpy")
    assert r.returncode == 2 and "give --grid X,Y,Z --block X,Y,Z" in r.stderr
    r = _cli(p, "--kernel", "saxpy", "--grid", "8", "--block", "128", "--arg", "1.5")
    assert r.returncode == 2 and r.stderr.startswith(f"{p}: argument 0 ('1.5'): float literal")
    r = _cli(p, "--kernel", "saxpy", "--grid", "8", "--block", "128", "--arg", "8", "--arg", "2.0")
    assert r.returncode == 2 and "parameter 2 (saxpy_param_2) is not bound; add --arg" in r.stderr
    bad = _with_header(tmp_path, None, '// @workbench {"kernel": \n' + PTX, "bad.ptx")
    r = _cli(bad)
    assert r.returncode == 2 and r.stderr.startswith(f"{bad}:1: malformed @workbench metadata JSON")
    r = _cli(tmp_path / "missing.ptx")
    assert r.returncode == 2 and "cannot read the PTX file" in r.stderr


def test_run_without_gpu_is_an_error():
    if _OK:
        pytest.skip("a GPU is present")
    from sim.errors import ExecutionError
    from validation.gpu import run_on_gpu

    with pytest.raises(ExecutionError, match="no GPU to run on"):
        run_on_gpu(PTX, Launch("saxpy", (1, 1, 1), (1, 1, 1), []))


# ------------------------------------------------------------------------------------------
# on the GPU


@gpu
@needs_gpu
def test_saxpy_run_on_gpu():
    from validation.gpu import run_on_gpu

    rng = np.random.default_rng(7)
    n, a = SAXPY_N, np.float32(-1.25)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    launch = Launch("saxpy", (8, 1, 1), (128, 1, 1), [
        Arg("scalar", "u32", value=n), Arg("scalar", "f32", value=float(a)),
        Arg("buffer", "f32", array=x), Arg("buffer", "f32", array=y.copy())])
    m = run_on_gpu(PTX, launch, warmup=2, repeats=25)
    want = a.astype(np.float64) * x + y
    np.testing.assert_allclose(m.outputs[3], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(m.outputs[2], x)
    np.testing.assert_array_equal(launch.args[3].array, y)  # host inputs untouched
    assert len(m.wall_ms_all) == 25 and all(t > 0 for t in m.wall_ms_all)
    assert m.wall_ms_median == statistics.median(m.wall_ms_all)  # recorded, not bounded: a benchmark
    assert m.check is None and m.per_cta_cycles is None
    assert m.device and "num_regs" in m.extra
    print(f"\n[gpu] jit log: {m.jit_log!r}")
    print(f"\n[gpu] device={m.device} saxpy n={n}: median {m.wall_ms_median * 1e3:.2f} us")


@gpu
@needs_gpu
def test_dynamic_shared_above_48k():
    from validation.gpu import run_on_gpu

    launch = launch_from_metadata(_saxpy_meta(), np.random.default_rng(0))
    launch.dynamic_shared = 100 * 1024
    m = run_on_gpu(PTX, launch, warmup=0, repeats=3)
    x, y = launch.args[2].array, launch.args[3].array
    np.testing.assert_allclose(m.outputs[3], 2.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)


@gpu
@needs_gpu
def test_saxpy_cli_with_header(tmp_path):
    meta = _saxpy_meta()
    p = _with_header(tmp_path, meta)
    out = tmp_path / "out"
    r = _cli(p, "--json", "--out", out, "--repeats", "20")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kernel"] == "saxpy" and d["check"] is None and d["time_ms"] > 0 and d["device"]
    assert "per_cta_cycles" not in d
    ref = launch_from_metadata(meta, np.random.default_rng(0))  # the CLI's default seed
    x, y = ref.args[2].array, ref.args[3].array
    want = 2.5 * x.astype(np.float64) + y
    np.testing.assert_allclose(np.load(out / "arg3.npy"), want, rtol=1e-6, atol=1e-6)
    # the human-readable form
    r = _cli(p)
    assert r.returncode == 0 and "time:" in r.stdout and "check:   none" in r.stdout
    # override the header: by name and positionally, and the grid
    np.save(tmp_path / "x.npy", np.ones(256, dtype=np.float32))
    r = _cli(p, "--json", "--grid", "2", "--out", out, "--arg", "256", "--arg", "3",
             "--arg", f"saxpy_param_2=@{tmp_path / 'x.npy'}", "--arg", "p3=zeros:f32:256")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out / "arg3.npy"), np.full(256, 3, dtype=np.float32))


@gpu
@needs_gpu
def test_gemm_check_and_profile_cli(tmp_path):
    p = _with_header(tmp_path, _gemm_meta())
    r = _cli(p, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    d = json.loads(r.stdout)
    assert d["check"]["passed"] is True and d["check"]["max_rel_err"] < 1e-5
    assert len(d["per_cta_cycles"]) == 3 * 2 and all(c > 0 for c in d["per_cta_cycles"])
    print(f"\n[gpu] {d['device']} gemm_naive 20x40x33: {d['time_ms'] * 1e3:.2f} us, "
          f"rel err {d['check']['max_rel_err']:.2e}, per-CTA cycles {d['per_cta_cycles']}")
    # a check that does not match what the kernel computes fails with exit 1
    wrong = _with_header(tmp_path, _gemm_meta(layout_b="col"), name="wrong.ptx")
    r = _cli(wrong, "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["check"]["passed"] is False
    r = _cli(wrong)
    assert r.returncode == 1 and "FAIL" in r.stdout


@gpu
@needs_gpu
def test_ptx_syntax_error_gives_jit_log(tmp_path):
    from validation.gpu import run_on_gpu

    broken = PTX.replace("ld.param.f32", "ld.parm.f32", 1)
    assert broken != PTX
    lineno = next(i for i, line in enumerate(broken.splitlines(), 1) if "ld.parm.f32" in line)
    launch = launch_from_metadata(_saxpy_meta(), np.random.default_rng(0))
    with pytest.raises(PtxError) as e:
        run_on_gpu(broken, launch)
    assert "CUDA JIT rejected the PTX" in e.value.message
    p = _with_header(tmp_path, None, broken, "broken.ptx")
    r = _cli(p, "--kernel", "saxpy", "--grid", "8", "--block", "128",
             "--arg", "1000", "--arg", "2", "--arg", "zeros:f32:1000", "--arg", "zeros:f32:1000")
    assert r.returncode == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"{p}:") and "CUDA JIT rejected the PTX" in err
    assert "parm" in err or "error" in err.lower()
    # the JIT log names the PTX line; the header shifted nothing (no header in this copy)
    print(f"\n[gpu] JIT error line: {err}")
    assert f"{p}:{lineno}:" in err or f"line {lineno}" in err


@gpu
@needs_gpu
def test_unknown_kernel_name_is_usage_error():
    from validation.gpu import run_on_gpu

    with pytest.raises(UsageError, match="not an entry of the PTX"):
        run_on_gpu(PTX, Launch("nope", (1, 1, 1), (1, 1, 1), []))
