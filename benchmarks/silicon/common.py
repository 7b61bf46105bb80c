"""What simulate.py and run_gpu.py share: load a suite kernel instrumented, build its launch, check
its outputs and reduce its profile buffer to per-CTA spans."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.silicon.refs import REFS
from benchmarks.silicon.suite import Kernel
from sim.launch import Launch, launch_from_metadata, read_metadata
from sim.reference import check_gemm
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
        if ran is not None:
            return {"passed": None, "max_rel_err": None, "rtol": None, "note": "sampled: not checked"}
        roles = [str(p.get("role", "")) for p in ld.meta["params"]]
        return check_gemm(ld.meta["check"], before.args, outputs, roles)
    err = REFS[k.check](before.args, outputs, ran)
    return {"passed": bool(err <= k.rtol), "max_rel_err": float(err), "rtol": k.rtol}


def summary(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None, "n": 0}
    return {"mean": float(statistics.mean(values)), "median": float(statistics.median(values)),
            "min": int(min(values)), "max": int(max(values)), "n": len(values)}


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__
