"""What the H200 scripts share (fp8_check.py, s8_check.py, tma_check.py, gpu_bench.py): compile a spec with
kernelgen, check a kernel with ``python -m validation gpu`` in its own process under a timeout, time a kernel
(CUDA events, validation.gpu.run_on_gpu; in a child process: ``python3 benchmarks/gpucommon.py --time PTX``)
and time a torch op; and run a kernel in the simulator in either mode (simulate_isa), beside the GPU's figure."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def nvidia_smi(query: str) -> str | None:
    """`nvidia-smi --query-gpu=QUERY --format=csv,noheader`'s line (the device a run's figures came from), None
    without nvidia-smi."""
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return None


@contextlib.contextmanager
def pycuda_context() -> Iterator[tuple[Any, Any, Any]]:
    """(pycuda.driver, device 0, its context) for a probe script (micro_store, micro_fill, store_buffer run.py);
    the context is popped on the way out, also after an error."""
    import pycuda.driver as cuda

    cuda.init()
    dev = cuda.Device(0)
    ctx = dev.make_context()
    try:
        yield cuda, dev, ctx
    finally:
        ctx.pop()


def write_probe(out: Path, name: str, dev: Any, source_file: str, rows: list[dict], **extra: Any) -> None:
    """OUT/NAME.json: a probe's rows with the date, the device's name, the 1-minute load average, the probe's
    CUDA source and `extra` fields."""
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "device": dev.name(),
           **extra, "load_average": os.getloadavg()[0], "source_file": source_file, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(res, indent=1))


def simulate_isa(text: str, launch: Any, isa: str, file: str, warm_l2: bool = False) -> Any:
    """The PTX `text` timed on h200.yaml in PTX mode (`isa` "ptx", sim.timing) or SASS mode ("sass",
    sim.sass.timing): the SimResult."""
    from sim.hw import load_hw
    from sim.ptx.parser import parse_ptx
    from sim.sass.timing import simulate_sass
    from sim.timing import simulate

    hw = load_hw("h200")
    if isa == "ptx":
        return simulate(parse_ptx(text, file), launch, hw, warm_l2=warm_l2)
    return simulate_sass(text, launch, hw, file, warm_l2=warm_l2)


def compile_spec(spec: dict, variant: str, d: Path) -> Path:
    """kernelgen compile --hw h200 of `spec` (written as d/spec.yaml: JSON is YAML) with --variant; d/kernel.ptx."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.yaml").write_text(json.dumps(spec))
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--op", str(d / "spec.yaml"),
                    "--variant", variant, "-o", str(d)], check=True, capture_output=True, text=True, cwd=ROOT)
    return d / "kernel.ptx"


def _child(row: dict, cmd: list[str], timeout: int, ok: tuple[int, ...]) -> dict | None:
    """Run `cmd` under `timeout`; its last stdout line as JSON when it exits with a code in `ok`, else None with
    row["error"] set (the last stderr line, or the timeout)."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout after {timeout} s (hang?)"
        return None
    if r.returncode in ok and r.stdout.strip():
        return json.loads(r.stdout.strip().splitlines()[-1])
    row["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]
    return None


def _compiled(row: dict, make_ptx: Callable[[], Path]) -> tuple[Path, dict] | None:
    """make_ptx() and its plan.json (the tiling key into `row`), or None with row["error"] on a compile error."""
    try:
        ptx = make_ptx()
    except subprocess.CalledProcessError as e:
        row["error"] = f"compile: {(e.stderr or '').strip()[-300:]}"
        return None
    plan = json.loads((ptx.parent / "plan.json").read_text())
    row["tiling"] = plan["tiling"]["key"]
    return ptx, plan


def gpu_case(row: dict, make_ptx: Callable[[], Path], timeout: int) -> dict:
    """Compile (make_ptx) and check one kernel with ``python -m validation gpu KERNEL.ptx --json`` in a child
    process under `timeout` seconds (a hung mbarrier wait costs one case, not the run); fills `row` with
    passed, time_ms, rel_err, grid, block, the plan's tiling, or an error, prints it and returns it."""
    got = _compiled(row, make_ptx)
    if got is not None:
        d = _child(row, [sys.executable, "-m", "validation", "gpu", str(got[0]), "--json", "--repeats", "5"],
                   timeout, (0, 1))
        if d is not None:
            row.update(passed=bool(d["check"] and d["check"]["passed"]), time_ms=d["time_ms"],
                       rel_err=d["check"] and d["check"].get("max_rel_err"), grid=d["grid"], block=d["block"])
    print(json.dumps(row), flush=True)
    return row


def run_kernel(ptx: Path, repeats: int, check: bool, inputs: dict[str, Any] | None = None,
               last: bool = False) -> dict[str, Any]:
    """One checked run (the header's check, if asked), a warm-up, `repeats` timed runs of a kernelgen PTX.
    `inputs` (a dict, empty at first): the random A, B, C arrays by role, drawn by the first call and reused by
    the later ones (kernels of one GEMM: drawing 8192^3's operands takes seconds). `last`: the per-CTA figures
    (profile, timer) of the last timed launch, the clock settled, instead of the checked first one."""
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu
    from validation.gpu_tma import without_tensormaps

    text = ptx.read_text()
    meta = read_metadata(text) or {}
    reuse = ("A", "B", "C")
    m = without_tensormaps(meta)  # maps: at launch
    if inputs:
        m = {**m, "params": [{**p, "init": "zeros"} if p.get("role") in inputs else p for p in m["params"]]}
    launch = launch_from_metadata(m, np.random.default_rng(1))
    if inputs is not None:
        for a in launch.args:
            if a.role in reuse and a.kind == "buffer":
                if a.role in inputs and inputs[a.role].shape == a.array.shape:
                    a.array = inputs[a.role]
                else:
                    inputs[a.role] = a.array
    prof = meta.get("profile") or {}
    m = run_on_gpu(text, launch, warmup=3, repeats=repeats, check=meta.get("check") if check else None,
                   profile_slots=prof.get("slots"), read_after=("profile", "timer") if last else ())
    per_cta, phases = m.per_cta_cycles, m.extra.get("profile_phase_cycles")
    outs = dict(m.outputs)
    if last and m.extra.get("after"):
        from validation.gpu import _per_cta_cycles, _phase_means

        outs.update(m.extra.pop("after"))
        pi = next((i for i, a in enumerate(launch.args) if a.role == "profile"), None)
        if pi is not None and pi in outs:
            per_cta = _per_cta_cycles(outs[pi], prof.get("slots"))
            phases = _phase_means(outs[pi], prof.get("slots")) or None
    timer = None  # a persistent kernel's %globaltimer at each CTA's start and end (wgmma_tma --profile): its ns
    roles = [a.role for a in launch.args]
    if "timer" in roles and roles.index("timer") in outs:
        tm = np.asarray(outs[roles.index("timer")]).view(np.uint64).astype(np.int64).reshape(-1, 2)
        timer = [int(x) for x in tm[:, 1] - tm[:, 0]]
    return {"time_ms": m.wall_ms_median, "time_ms_batched": m.extra.get("time_ms_batched"),
            "check": m.check, "per_cta_cycles": per_cta, "per_cta_ns": timer,
            "per_cta_from": "last" if last else "first",
            "grid": list(launch.grid), "block": list(launch.block), "prediction": meta.get("prediction"),
            "device": m.device, "registers": m.extra.get("num_regs"),
            "phase_cycles": phases}


def event_times(op: Callable[[], object], repeats: int, before: Callable[[int], object] | None = None,
                after: Callable[[int], object] | None = None) -> list[float]:
    """CUDA-event milliseconds of `repeats` runs of `op`, each waited for; `before(r)` runs ahead of run r's
    start event (e.g. a cache flush), `after(r)` once run r finished (e.g. reading the kernel's clock64 slots)."""
    import torch

    times = []
    for r in range(repeats):
        if before is not None:
            before(r)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        op()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
        if after is not None:
            after(r)
    return times


def median_ms(op: Callable[[], object], repeats: int) -> float:
    """Median CUDA-event time of `op` (a torch call) over `repeats` runs after 3 warm-ups."""
    for _ in range(3):
        op()
    return float(np.median(event_times(op, repeats)))


def timed_case(row: dict, make_ptx: Callable[[], Path], repeats: int, check: bool, timeout: int, clock_mhz: float,
               skip: str | None = None) -> dict | None:
    """Compile (make_ptx), then time the kernel in a child process under `timeout` (numpy-checked first if
    `check`): fills `row` (which has M, N, K) with the plan's tiling and predicted cycles, run_kernel's time,
    check, grid, block, registers, "tflops" (2 M N K per second / 1e12: int ops for s8) and predicted / measured
    at `clock_mhz`, or an error. None (nothing timed) when the plan's tiling is `skip`."""
    got = _compiled(row, make_ptx)
    if got is None:
        return row
    ptx, plan = got
    if row["tiling"] == skip:
        return None
    row["predicted_cycles"] = plan["prediction"]["cycles"]
    d = _child(row, [sys.executable, str(Path(__file__).resolve()), "--time", str(ptx), "--repeats", str(repeats)]
               + (["--check"] if check else []), timeout, (0,))
    if d is not None:
        row.update(d)
        row["tflops"] = 2 * row["M"] * row["N"] * row["K"] / (row["time_ms"] * 1e-3) / 1e12
        row["predicted_over_measured"] = row["predicted_cycles"] / (row["time_ms"] * 1e3 * clock_mhz)
    return row


def main() -> int:
    """The child of timed_case: time one PTX, print one JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    r = run_kernel(Path(a.time), a.repeats, a.check)
    print(json.dumps({k: r[k] for k in ("time_ms", "check", "grid", "block", "registers", "device")}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
