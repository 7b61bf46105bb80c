"""What simulate.py and run_gpu.py share: load a suite kernel instrumented, build its launch, check
its outputs and reduce its profile buffer to per-CTA spans."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.silicon.refs import REFS
from benchmarks.silicon.suite import Kernel
from sim.launch import Launch, buffer_to_float64, launch_from_metadata, read_metadata
from sim.reference import check_gemm, gemm_reference, relative_error
from validation.instrument import cta_spans, instrument_ptx

SEED = 0


@dataclass
class Loaded:
    text: str  # instrumented PTX
    meta: dict
    profile_param: int
    warps_per_cta: int


def load(k: Kernel) -> Loaded:
    inst = instrument_ptx(k.ptx.read_text(), str(k.ptx))
    meta = read_metadata(inst.text, str(k.ptx))
    if meta is None or inst.param_index is None or inst.warps_per_cta is None:
        raise SystemExit(f"{k.ptx}: no @workbench header; run benchmarks/silicon/build.py")
    return Loaded(inst.text, meta, inst.param_index, inst.warps_per_cta)


def make_launch(ld: Loaded) -> Launch:
    return launch_from_metadata(ld.meta, np.random.default_rng(SEED))


def spans(ld: Loaded, outputs: dict[int, np.ndarray]) -> dict[int, int]:
    return cta_spans(outputs[ld.profile_param], ld.warps_per_cta)


def check(k: Kernel, ld: Loaded, before: Launch, outputs: dict[int, np.ndarray],
          ran: set[int] | None) -> dict[str, Any] | None:
    """{"passed", "max_rel_err", "rtol"} or None when the kernel has no check; a sampled run
    (``ran`` not all CTAs) of a header-checked GEMM is reported as not checked."""
    if k.check is None:
        return None
    if k.check == "header":
        roles = [str(p.get("role", "")) for p in ld.meta["params"]]
        if ran is None:
            return check_gemm(ld.meta["check"], before.args, outputs, roles)
        return _check_gemm_tiles(k, ld, before, outputs, roles, ran)
    err = REFS[k.check](before.args, outputs, ran)
    return {"passed": bool(err <= k.rtol), "max_rel_err": float(err), "rtol": k.rtol}


def _check_gemm_tiles(k: Kernel, ld: Loaded, before: Launch, outputs: dict[int, np.ndarray], roles: list[str],
                      ran: set[int]) -> dict[str, Any]:
    """The GEMM check on the D tiles of the CTAs that ran (a sampled simulation): kernelgen's grid is
    (ceil(N / TILE_N), ceil(M / TILE_M)), CTA (x, y) writes rows y*TILE_M.., columns x*TILE_N.."""
    chk = ld.meta["check"]
    ref = gemm_reference(chk, before.args, roles)
    M, N = ref.shape
    d = roles.index("D")
    flat = buffer_to_float64(outputs[d], before.args[d].dtype)[:M * N]
    got = flat.reshape(M, N) if chk.get("layout_d", chk.get("layout_c", "row")) == "row" else flat.reshape(N, M).T
    assert k.plan is not None
    t = json.loads(k.plan.read_text())["tiling"]
    gx = int(ld.meta["grid"][0])
    mask = np.zeros((M, N), dtype=bool)
    for c in ran:
        y, x = divmod(c, gx)
        mask[y * t["TILE_M"]:(y + 1) * t["TILE_M"], x * t["TILE_N"]:(x + 1) * t["TILE_N"]] = True
    rtol = float(chk.get("rtol", 1e-2))
    err = relative_error(got[mask], ref[mask])
    return {"passed": bool(err <= rtol), "max_rel_err": float(err), "rtol": rtol,
            "note": f"tiles of the {len(ran)} simulated CTAs"}


def summary(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None, "n": 0}
    return {"mean": float(statistics.mean(values)), "median": float(statistics.median(values)),
            "min": int(min(values)), "max": int(max(values)), "n": len(values)}


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__
