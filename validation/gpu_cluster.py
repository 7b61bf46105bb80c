"""The thread block cluster fixtures (validation/cluster_cases.py) on the GPU and in the simulator, side by
side: each case is compiled with ``ptxas -arch=sm_90a``, launched through cuda-python's cuLaunchKernelEx
with the cluster-dimension attribute (the kernels declare .explicitcluster), its buffers read back and
compared with numpy and with the simulator's functional and timed runs of the same launch (hw h200).
The GPU time of each case is the median of 20 launches (CUDA events); cluster_latency's clock64
readings (shared and DSMEM dependent-load latency, cluster barrier round) are recorded for the GPU and
the timed simulator side by side (the numbers docs/clusters.md lists as unmeasured assumptions).

    python -m validation.gpu_cluster --out $OUT/cluster.json

One JSON file: the device, the date, and per case the GPU/numpy/simulator agreement (elements that differ),
GPU microseconds and simulated cycles. Errors of one case are recorded in its entry; the run goes on."""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from validation.cluster_cases import CASES, Case


def _check(res: Any, what: str) -> Any:
    from cuda.bindings import driver as drv  # noqa: PLC0415 - the GPU image's cuda-python

    err = res[0] if isinstance(res, tuple) else res
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed ({getattr(err, 'name', err)})")
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


def compile_cubin(ptx: Path, tmp: Path) -> tuple[bytes, str]:
    """(module image, how): ptxas -arch=sm_90a's cubin, or the PTX for the driver's JIT where no ptxas is
    found (on PATH or in /usr/local/cuda/bin)."""
    out = tmp / (ptx.stem + ".cubin")
    for exe in ("ptxas", "/usr/local/cuda/bin/ptxas"):
        try:
            subprocess.run([exe, "-arch=sm_90a", str(ptx), "-o", str(out)], check=True, capture_output=True,
                           text=True)
            return out.read_bytes(), exe
        except FileNotFoundError:
            continue
    return ptx.read_bytes() + b"\0", "driver JIT"


def run_gpu(case: Case, cubin: bytes, repeats: int = 20) -> tuple[dict[int, np.ndarray], list[float]]:
    """The case's buffers after one launch on the GPU, and the times (us) of `repeats` more launches."""
    from cuda.bindings import driver as drv  # noqa: PLC0415

    from validation.tensormap import encode_spec

    launch = case.launch()
    mod = _check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
    fn = _check(drv.cuModuleGetFunction(mod, case.kernel.encode()), "cuModuleGetFunction")
    ptrs: dict[int, int] = {}
    for i, a in enumerate(launch.args):
        if a.kind == "buffer":
            arr = np.ascontiguousarray(a.array)
            p = int(_check(drv.cuMemAlloc(max(arr.nbytes, 16)), "cuMemAlloc"))
            _check(drv.cuMemcpyHtoD(p, arr.ctypes.data, arr.nbytes), "cuMemcpyHtoD")
            ptrs[i] = p
    store: list[Any] = []
    for i, a in enumerate(launch.args):
        if a.hidden:
            continue
        if a.tmap is not None:
            t = a.tmap
            target = next(j for j, b in enumerate(launch.args) if b.kind == "buffer" and b.name == t.of)
            raw = encode_spec(t, ptrs[target])  # tiled or im2col (validation/tensormap.py)
            store.append((ctypes.c_uint8 * 128).from_buffer_copy(raw))
        elif a.kind == "buffer":
            store.append(ctypes.c_uint64(ptrs[i]))
        else:
            store.append(ctypes.c_uint32(int(a.value or 0)))  # the fixtures' scalars are u32
    argv = (ctypes.c_void_p * len(store))(*[ctypes.addressof(v) for v in store])
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = case.grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = case.block
    cfg.sharedMemBytes = case.shared
    cfg.hStream = drv.CUstream(0)
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = case.cluster
    if ".reqnctapercluster" in case.ptx.read_text() or case.cluster == (1, 1, 1):  # compile-time shape, or none
        cfg.attrs = []
        cfg.numAttrs = 0
    else:
        cfg.attrs = [attr]
        cfg.numAttrs = 1

    def launch_once() -> None:
        _check(drv.cuLaunchKernelEx(cfg, fn, ctypes.addressof(argv), 0), "cuLaunchKernelEx")

    launch_once()
    _check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
    outs: dict[int, np.ndarray] = {}
    for i, p in ptrs.items():
        host = np.empty_like(launch.args[i].array)
        _check(drv.cuMemcpyDtoH(host.ctypes.data, p, host.nbytes), "cuMemcpyDtoH")
        outs[i] = host
    times = []
    start = _check(drv.cuEventCreate(0), "cuEventCreate")
    stop = _check(drv.cuEventCreate(0), "cuEventCreate")
    for _ in range(repeats):
        _check(drv.cuEventRecord(start, drv.CUstream(0)), "cuEventRecord")
        launch_once()
        _check(drv.cuEventRecord(stop, drv.CUstream(0)), "cuEventRecord")
        _check(drv.cuEventSynchronize(stop), "cuEventSynchronize")
        times.append(float(_check(drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime")) * 1000.0)
    for p in ptrs.values():
        drv.cuMemFree(p)
    drv.cuModuleUnload(mod)
    return outs, times


def _diff(case: Case, got: dict[int, np.ndarray], want: dict[int, np.ndarray]) -> dict[str, int]:
    return {str(i): int(np.sum(case.compared(i, got[i]).view(np.uint32) != case.compared(i, w).view(np.uint32)))
            for i, w in want.items()}


def sass_entry(case: Case) -> dict[str, Any]:
    """The case's outputs in SASS mode (ptxas + nvdisasm, sim/sass) against numpy, functional and timed (and
    cluster_latency's readings from the timed SASS run)."""
    from sim.hw import load_hw
    from sim.sass.exec import run_sass_functional
    from sim.sass.timing import simulate_sass

    try:
        want = case.expected(case.launch())
        text = case.ptx.read_text()
        f = run_sass_functional(text, case.launch(), file=str(case.ptx))
        t = simulate_sass(text, case.launch(), load_hw("h200"), str(case.ptx))
        out: dict[str, Any] = {"sim_sass_vs_numpy": _diff(case, f.outputs, want),
                               "sim_sass_timed_vs_numpy": _diff(case, t.outputs, want), "sim_sass_cycles": t.cycles}
        if case.measured(t.outputs) is not None:
            out["sim_sass_measured"] = case.measured(t.outputs)
        return out
    except Exception as e:  # noqa: BLE001 - recorded per case (e.g. no nvdisasm on this machine)
        return {"sim_sass_error": f"{type(e).__name__}: {e}"}


def run_case(case: Case, tmp: Path, gpu: bool) -> dict[str, Any]:
    from sim.functional.runner import run_functional
    from sim.hw import load_hw
    from sim.ptx.parser import parse_ptx
    from sim.timing import simulate

    entry: dict[str, Any] = {"case": case.name, "kernel": case.kernel, "grid": case.grid, "block": case.block,
                             "cluster": case.cluster}
    launch = case.launch()
    want = case.expected(launch)
    prog = parse_ptx(case.ptx.read_text(), str(case.ptx))
    try:
        fr = run_functional(prog, case.launch())
        entry["sim_functional_vs_numpy"] = _diff(case, fr.outputs, want)
        t0 = time.time()
        sr = simulate(prog, case.launch(), load_hw("h200"))
        entry["sim_timed_vs_numpy"] = _diff(case, sr.outputs, want)
        entry["sim_cycles"] = sr.cycles
        entry["sim_cycles_per_cta"] = sr.cycles_per_cta
        if case.measured(sr.outputs) is not None:
            entry["sim_measured"] = case.measured(sr.outputs)
        entry["sim_seconds"] = round(time.time() - t0, 2)
        sim_out = fr.outputs
    except Exception as e:  # noqa: BLE001 - recorded per case
        entry["sim_error"] = f"{type(e).__name__}: {e}"
        sim_out = None
    if gpu:
        try:
            cubin, entry["compiled_by"] = compile_cubin(case.ptx, tmp)
            outs, times = run_gpu(case, cubin)
            entry["gpu_vs_numpy"] = _diff(case, outs, want)
            if case.measured(outs) is not None:
                entry["gpu_measured"] = case.measured(outs)
            if sim_out is not None:
                entry["gpu_vs_sim"] = _diff(case, outs, {i: sim_out[i] for i in want})
            entry["gpu_us_median"] = round(statistics.median(times), 3)
            entry["gpu_us_all"] = [round(t, 3) for t in times]
        except Exception as e:  # noqa: BLE001 - recorded per case
            entry["gpu_error"] = f"{type(e).__name__}: {e}"
            entry["gpu_traceback"] = traceback.format_exc(limit=4)
    entry["passed"] = all(v == 0 for k in ("sim_functional_vs_numpy", "sim_timed_vs_numpy", "gpu_vs_numpy",
                                           "gpu_vs_sim") for v in entry.get(k, {}).values()) and \
        "sim_error" not in entry and (not gpu or "gpu_error" not in entry)
    return entry


def device_name() -> str:
    from cuda.bindings import driver as drv  # noqa: PLC0415

    _check(drv.cuInit(0), "cuInit")
    dev = _check(drv.cuDeviceGet(0), "cuDeviceGet")
    ctx = _check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    name = _check(drv.cuDeviceGetName(64, dev), "cuDeviceGetName")
    return bytes(name).split(b"\0")[0].decode()


def start_result(no_gpu: bool) -> tuple[dict[str, Any], bool]:
    """The result JSON's head (date, device, no cases yet) and whether the GPU runs: a device that cannot be
    opened is recorded as device_error and the cases run on the simulator and numpy only."""
    gpu = not no_gpu
    result: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                              "device": "none", "cases": []}
    if gpu:
        try:
            result["device"] = device_name()
        except Exception as e:  # noqa: BLE001
            result["device_error"] = f"{type(e).__name__}: {e}"
            gpu = False
    return result, gpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--no-gpu", action="store_true", help="simulator and numpy only")
    ap.add_argument("--case", action="append", default=[], help="run only these cases")
    args = ap.parse_args(argv)
    result, gpu = start_result(args.no_gpu)
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if args.case and case.name not in args.case:
                continue
            entry = run_case(case, Path(tmp), gpu)
            entry.update(sass_entry(case))
            result["cases"].append(entry)
            print(json.dumps({k: v for k, v in entry.items() if k not in ("gpu_us_all", "sim_cycles_per_cta",
                                                                         "gpu_traceback")}), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=list) + "\n")
    ok = all(c["passed"] for c in result["cases"]) and "device_error" not in result
    print(f"{sum(c['passed'] for c in result['cases'])}/{len(result['cases'])} cases passed; wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
