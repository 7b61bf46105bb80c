"""The runtime on the GPU with device arrays bound (issue 16 item 2, "page-locked host buffers or device
arrays"): one invocation on the GPU machine, JSON under --out.

1. builds the h200 module 256x256x1..4096 (``deepgemm compile``; cubins when ptxas is found);
2. 20 random K (seed 11, as tests/test_runtime.py -m gpu) with torch CUDA tensors bound for A, B and D:
   each D copied back and checked against numpy's float64 product, the variant against the intervals;
3. the same with pycuda GPUArrays (K = 300), and the one-line refusals (a DeviceAllocation, a float32
   tensor, a non-dense view, a requires-grad tensor, a bf16 tensor);
4. host time of ``launch()`` and wall time of ``launch()`` + ``sync()`` at K = 718 and 4096, medians of 200
   after 20 warm-ups, device arrays against host numpy arrays (page-locked copies), next to the kernel's
   own time (pycuda events on the runtime's stream around a launch);
5. host dispatch: ``Module.dispatch`` and ``Kernel.variant_for`` (timeit medians, as benchmarks/ko_module.py)
   and an empty call for scale;
6. an int4 module (64x64, K in [2, 512]) with packed torch uint8 tensors bound, exact at four K.
Process (CPU) time and the 1-minute load average are recorded with the timings.

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 benchmarks/runtime_device.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

M = N = 256
K_RANGE = (1, 4096)


def expected_variant(manifest: dict, k: int) -> int:
    hits = [v["index"] for v in manifest["variants"] for lo, hi in v["intervals"] if lo <= k <= hi]
    return hits[0] if len(hits) == 1 else -1


def operands(torch: Any, kern: Any, k: int, gen: Any) -> tuple[Any, Any, Any]:
    """A (M x K), B (K x N) in the module's layouts (dense row- or column-major views), D (M x N) f32."""
    a = torch.randn(M, k, device="cuda", dtype=torch.float16, generator=gen)
    if kern.tensors["B"]["layout"] == "col":
        b = torch.randn(N, k, device="cuda", dtype=torch.float16, generator=gen).t()
    else:
        b = torch.randn(k, N, device="cuda", dtype=torch.float16, generator=gen)
    d = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    return a, b, d


def rel_err(np: Any, a: Any, b: Any, d: Any) -> float:
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.linalg.norm(d.astype(np.float64) - ref) / np.linalg.norm(ref))


def timed(kern: Any, n: int, warm: int = 20) -> dict[str, float]:
    """Medians (us) of launch() host time and launch() + sync() wall time, and CPU time per round."""
    for _ in range(warm):
        kern.launch()
        kern.sync()
    la, ls = [], []
    c0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        kern.launch()
        t1 = time.perf_counter()
        kern.sync()
        t2 = time.perf_counter()
        la.append(t1 - t0)
        ls.append(t2 - t0)
    return {"launch_us": statistics.median(la) * 1e6, "launch_sync_us": statistics.median(ls) * 1e6,
            "launch_sync_p10_us": sorted(ls)[n // 10] * 1e6, "cpu_us_per_round": (time.process_time() - c0) / n * 1e6}


def kernel_us(kern: Any, n: int = 50) -> float:
    """The kernel alone: pycuda events recorded on the runtime's stream around each launch."""
    cuda = kern.backend.cuda
    s = kern.backend.stream
    out = []
    for _ in range(n):
        e0, e1 = cuda.Event(), cuda.Event()
        e0.record(s)
        kern.launch()
        e1.record(s)
        kern.sync()
        out.append(e1.time_since(e0) * 1e3)
    return statistics.median(out)


def dispatch_us(fn: Any, ks: list[int]) -> float:
    n = 20_000
    stmt = "; ".join(f"fn({k})" for k in ks)
    return statistics.median(timeit.repeat(stmt, globals={"fn": fn}, number=n, repeat=15)) / (n * len(ks)) * 1e6


def refusal(kern: Any, name: str, obj: Any, io: str = "input") -> str:
    from runtime import RuntimeFailure

    try:
        (kern.bind_input if io == "input" else kern.bind_output)(name, obj)
    except RuntimeFailure as e:
        return str(e)
    return "ACCEPTED (expected a refusal)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "runtime_device_out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"load_average_start": os.getloadavg()[0], "errors": {}}
    section(res, "run")(lambda: run(out, res))
    res["load_average_end"] = os.getloadavg()[0]
    (out / "runtime_device.json").write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k != "k_checks"}, indent=1))
    return 1 if res["errors"] or not res.get("all_passed") else 0


def section(res: dict[str, Any], name: str) -> Any:
    """A decorator that runs a step at once, recording its traceback under errors[name] if it fails (the
    other steps still run and write their figures)."""
    def run_it(fn: Any) -> Any:
        try:
            fn()
        except Exception:  # noqa: BLE001
            res["errors"][name] = traceback.format_exc()
        return fn
    return run_it


def run(out: Path, res: dict[str, Any]) -> None:
    import numpy as np
    import torch

    from kernelgen.cli import main as kg
    from kernelgen.module import read
    from runtime import load

    res["gpu"] = torch.cuda.get_device_name(0)
    ko = out / "h200_256x256x1-4096.ko"
    t0, c0 = time.perf_counter(), time.process_time()
    if kg(["compile", "--hardware", "h200", "--gemm", f"{M}x{N}x{K_RANGE[0]}..{K_RANGE[1]}", "-o", str(ko)]) != 0:
        raise RuntimeError("deepgemm compile failed")
    res["build"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                    "bytes": ko.stat().st_size}
    kern = load(str(ko), device="cuda")
    man = kern.module.manifest
    res["variants"] = [{"index": v["index"], "key": v["plan"]["key"], "intervals": v["intervals"],
                        "cubin": bool(v["cubin"])} for v in man["variants"]]
    res["layouts"] = {t["name"]: t["layout"] for t in man["tensors"]}

    rng = np.random.default_rng(11)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    checks: list[dict[str, Any]] = []
    res["k_checks"] = checks

    @section(res, "k_checks")
    def _k_checks() -> None:  # 2. 20 random K, torch tensors bound, numpy-checked
        for k in rng.integers(K_RANGE[0], K_RANGE[1] + 1, 20).tolist():
            a, b, d = operands(torch, kern, k, gen)
            kern.bind_input("A", a)
            kern.bind_input("B", b)
            kern.bind_output("D", d)
            kern.launch()
            kern.sync()
            err = rel_err(np, a.cpu().numpy(), b.cpu().numpy(), d.cpu().numpy())
            want = expected_variant(man, k)
            checks.append({"K": k, "variant": kern.last_variant, "expected_variant": want, "rel_err": err,
                           "passed": bool(err < 1e-2 and kern.last_variant == want)})

    res["k_checks_passed"] = sum(c["passed"] for c in checks)
    section(res, "gpuarray")(lambda: gpuarray_and_refusals(np, torch, kern, man, rng, res))
    section(res, "latency")(lambda: latency(np, torch, kern, gen, res))
    section(res, "dispatch")(lambda: dispatch(kern, read(ko), rng, res))
    section(res, "s4_module")(lambda: s4_module(np, torch, kg, load, out, res))
    lat = res.get("latency", {})
    res["all_passed"] = bool(res["k_checks_passed"] == 20 and "gpuarray" in res
                             and res["gpuarray"]["rel_err"] < 1e-2
                             and res["gpuarray"]["variant"] == res["gpuarray"]["expected_variant"]
                             and not any(v.startswith("ACCEPTED") for v in res.get("refusals", {}).values())
                             and all(x["host_arrays"]["rel_err"] < 1e-2 and x["device_arrays"]["rel_err"] < 1e-2
                                     for x in lat.values()) and len(lat) == 2
                             and all(c["exact"] for c in res.get("s4_module", {}).get("checks", [{"exact": False}])))


def gpuarray_and_refusals(np: Any, torch: Any, kern: Any, man: dict, rng: Any, res: dict[str, Any]) -> None:
    """3. pycuda GPUArrays bound, and the one-line refusals."""
    import pycuda.gpuarray as gpuarray

    k = 300
    a_h = rng.standard_normal((M, k)).astype(np.float16)
    b_h = rng.standard_normal((k, N)).astype(np.float16)
    b_dev = gpuarray.to_gpu(np.asfortranarray(b_h) if res["layouts"]["B"] == "col" else b_h)
    d_dev = gpuarray.zeros((M, N), np.float32)
    kern.bind_input("A", gpuarray.to_gpu(a_h))
    kern.bind_input("B", b_dev)
    kern.bind_output("D", d_dev)
    kern.launch()
    kern.sync()
    res["gpuarray"] = {"K": k, "rel_err": rel_err(np, a_h, b_h, d_dev.get()),
                       "variant": kern.last_variant, "expected_variant": expected_variant(man, k)}
    import pycuda.driver as cuda

    a32 = torch.zeros(M, k, device="cuda")
    res["refusals"] = {
        "DeviceAllocation": refusal(kern, "A", cuda.mem_alloc(M * k * 2)),
        "float32": refusal(kern, "A", a32),
        "non_dense": refusal(kern, "A", torch.zeros(M, 2 * k, device="cuda", dtype=torch.float16)[:, ::2]),
        "requires_grad": refusal(kern, "A", torch.zeros(M, k, device="cuda", dtype=torch.float16,
                                                        requires_grad=True)),
        "bf16": refusal(kern, "A", torch.zeros(M, k, device="cuda", dtype=torch.bfloat16)),
        "cpu_tensor": refusal(kern, "A", torch.zeros(M, k, dtype=torch.float16)),
    }


def latency(np: Any, torch: Any, kern: Any, gen: Any, res: dict[str, Any]) -> None:
    """4. launch / sync latency: device arrays vs host arrays, next to the kernel's own time."""
    lat: dict[str, Any] = {}
    res["latency"] = lat
    for k in (718, 4096):
        a, b, d = operands(torch, kern, k, gen)
        kern.bind_input("A", a)
        kern.bind_input("B", b)
        kern.bind_output("D", d)
        dev = timed(kern, 200)
        dev["kernel_us"] = kernel_us(kern)
        dev["rel_err"] = rel_err(np, a.cpu().numpy(), b.cpu().numpy(), d.cpu().numpy())
        a_h, b_h = a.cpu().numpy(), np.ascontiguousarray(b.cpu().numpy())
        d_h = np.zeros((M, N), np.float32)
        kern.bind_input("A", a_h)
        kern.bind_input("B", b_h)
        kern.bind_output("D", d_h)
        host = timed(kern, 200)
        host["kernel_us"] = kernel_us(kern)
        host["rel_err"] = rel_err(np, a_h, b_h, d_h)
        lat[str(k)] = {"device_arrays": dev, "host_arrays": host, "variant": kern.last_variant,
                       "load_average": os.getloadavg()[0]}


def s4_module(np: Any, torch: Any, kg: Any, load: Any, out: Path, res: dict[str, Any]) -> None:
    """6. an int4 K-range module (64x64, K in [2, 512] even) with packed torch uint8 tensors bound: exact."""
    spec = out / "s4.yaml"
    spec.write_text("M: 64\nN: 64\nK: {range: [2, 512], multiple_of: 2}\ndtype: {a: int4, out: s32}\n")
    ko = out / "s4.ko"
    if kg(["compile", "--hardware", "h200", "--op", str(spec), "-o", str(ko)]) != 0:
        raise RuntimeError("deepgemm compile of the s4 module failed")
    kern = load(str(ko), device="cuda")
    rng = np.random.default_rng(5)

    def pack(x: Any) -> Any:
        x = (x & 0xF).astype(np.uint8)
        return x[:, 0::2] | (x[:, 1::2] << 4)

    checks = []
    for k in (2, 66, 300, 512):
        a, bt = rng.integers(-8, 8, (64, k)), rng.integers(-8, 8, (64, k))
        d = torch.zeros(64, 64, device="cuda", dtype=torch.int32)
        kern.bind_input("A", torch.from_numpy(pack(a)).cuda())
        kern.bind_input("B", torch.from_numpy(pack(bt)).cuda().t())  # K/2 x N column-major
        kern.bind_output("D", d)
        kern.launch()
        kern.sync()
        checks.append({"K": k, "variant": kern.last_variant, "exact": bool(np.array_equal(d.cpu().numpy(), a @ bt.T))})
    res["s4_module"] = {"variants": [v["plan"]["key"] for v in kern.module.variants], "checks": checks}


def dispatch(kern: Any, m: Any, rng: Any, res: dict[str, Any]) -> None:
    """5. host dispatch."""
    ks = rng.integers(K_RANGE[0], K_RANGE[1] + 1, 8).tolist()
    res["dispatch"] = {"Module.dispatch_us": dispatch_us(m.dispatch, ks),
                       "Kernel.variant_for_us": dispatch_us(kern.variant_for, ks),
                       "empty_call_us": dispatch_us(int, ks), "load_average": os.getloadavg()[0]}


if __name__ == "__main__":
    sys.exit(main())
