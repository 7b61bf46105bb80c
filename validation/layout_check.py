"""Layout cases checked from dense matrices: the inputs are built as numpy matrices, stored in the
spec's layouts (sim/layouts.py: padding filled with NaN, or 127 for s8, so a read of it shows), the
kernel runs (simulator or GPU), and D, read back through layout.c, is compared with numpy's
alpha * A @ B + beta * C. The metadata's own check (sim/reference.py) is run on the same buffers.

Plain numpy; the runner is passed in (sim.functional or validation.gpu).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernelgen.planner import plan, prediction_dict
from kernelgen.spec import GemmSpec, parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get
from sim.hw import HwConfig
from sim.launch import Launch, buffer_to_float64, f32_to_bf16_bits, launch_from_metadata, read_metadata
from sim.layouts import parse_layout
from sim.reference import check_from_metadata, relative_error

Runner = Callable[[str, Launch], dict[int, np.ndarray]]


def layout_spec(variant: str, dtype: str, shape: tuple[int, int, int], layouts: tuple[str, str, str],
                tiling: tuple[str, ...] = ()) -> GemmSpec:
    M, N, K = shape
    extra: dict[str, Any] = {} if dtype == "s8" else {"beta": 0.5}
    if tiling:
        extra["tiling"] = list(tiling)
    return parse_spec({"M": M, "N": N, "K": K, "dtype": dtype, "name": f"lay_{variant}",
                       "layout": dict(zip("abc", layouts)), **extra}, "<layout case>")


def small_tiling(spec: GemmSpec, variant: str) -> Tiling:
    """The variant's smallest CTA (fewest threads, then smallest block tile, widest copies): several CTAs
    and K tiles at the small case shapes, so the edges and the K loop are exercised."""
    ts = get(variant).tilings(spec)
    return min(ts, key=lambda t: (t.threads, t.bm * t.bn, -t.vec_a - t.vec_b, t.stages, t.bk, t.key()))


def emit_case(spec: GemmSpec, hw: HwConfig, variant: str, pick: str) -> tuple[str, Tiling]:
    """The kernel of ``pick``: "planner" (the planner's best) or "small" (small_tiling)."""
    only = None if pick == "planner" else [small_tiling(spec, variant)]
    p = plan(spec, hw, variant, only=only)
    t = p.best.tiling
    return get(variant).emit(spec, t, prediction_dict(p)), t


def _store(dense: np.ndarray, layout: str, dtype: str) -> np.ndarray:
    lay = parse_layout(layout)
    if dtype == "s8":
        return lay.scatter(dense.astype(np.int8), fill=127)
    flat = lay.scatter(dense.astype(np.float32), fill=np.nan)
    if dtype == "bf16":
        return f32_to_bf16_bits(flat)
    return flat.astype({"f16": np.float16, "f32": np.float32}[dtype])


def _held(dense: np.ndarray, layout: str, dtype: str) -> np.ndarray:
    """The values the kernel sees: ``dense`` rounded to dtype, as stored and read back through the layout."""
    rows, cols = dense.shape
    return parse_layout(layout).gather(buffer_to_float64(_store(dense, layout, dtype), dtype), rows, cols)


def run_case(spec: GemmSpec, text: str, runner: Runner, seed: int = 0) -> dict[str, Any]:
    """Build dense inputs, store them in the layouts, run, compare D with numpy; returns
    {"dense_err", "rtol", "passed", "meta_check"}."""
    meta = read_metadata(text)
    assert meta is not None, "a kernelgen kernel carries its @workbench header"
    rng = np.random.default_rng(seed)
    launch = launch_from_metadata(meta, rng)
    M, N, K = spec.nominal()
    dt = spec.dtype_a
    A: np.ndarray
    B: np.ndarray
    if dt == "s8":
        A, B = rng.integers(-4, 5, (M, K)).astype(np.float64), rng.integers(-4, 5, (K, N)).astype(np.float64)
    else:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    dense = {"A": (A, spec.layout_a, dt), "B": (B, spec.layout_b, dt)}
    C = rng.standard_normal((M, N))
    if spec.has_c:
        dense["C"] = (C, spec.layout_c, spec.dtype_out)
    for a in launch.args:
        if a.role in dense:
            m, lay, d = dense[a.role]
            arr = _store(m, lay, d)
            assert a.array is not None and arr.size == a.array.size, (a.role, arr.size)
            a.array = arr
    before = launch.copy()
    outputs = runner(text, launch)
    idx = next(i for i, a in enumerate(launch.args) if a.role == "D")
    flat = buffer_to_float64(outputs[idx], launch.args[idx].dtype)
    got = parse_layout(spec.layout_c).gather(flat, M, N)
    ref = spec.alpha * (_held(A, spec.layout_a, dt) @ _held(B, spec.layout_b, dt))
    if spec.has_c:
        ref = ref + spec.beta * _held(C, spec.layout_c, spec.dtype_out)
    err = relative_error(got, ref)
    rtol = float(meta["check"]["rtol"])
    meta_check = check_from_metadata(meta, before, outputs)
    return {"dense_err": err, "rtol": rtol, "passed": bool(err <= rtol and meta_check and meta_check["passed"]),
            "meta_check": meta_check}


def sim_runner(text: str, launch: Launch) -> dict[int, np.ndarray]:
    from sim.functional.runner import run_functional
    from sim.ptx.parser import parse_ptx

    return run_functional(parse_ptx(text, "<layout case>"), launch).outputs
