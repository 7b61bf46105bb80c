"""``python -m validation calibrate``: the H200 microbenchmark figures, measured vs simulated.

One table of figures (:data:`FIGURES`) serves three users: ``benchmarks/measure_micro.py`` runs each
on the GPU (large sizes, :func:`measure_gpu`), the calibration test and this command simulate each
on a HwConfig (tiny sizes, :func:`simulate_figure`), and ``docs/calibration.md`` is written from
both (:func:`write_markdown`). A figure is a per-step cycle count taken by *difference* of two runs
(``(cycles(s2) - cycles(s1)) / (s2 - s1)``), so start-up and cold misses cancel; the DRAM figure is
one cold run divided by its steps (every step touches a new line).

The measured side is committed in ``validation/micro/h200_micro.json`` (package data; see :data:`MEASURED_JSON`).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim import atomic
from validation.micro import MICRO_DIR, by_name, make_chain
from validation.yamledit import rewrite_fields

MEASURED_JSON = MICRO_DIR / "h200_micro.json"
TOLERANCE = 0.10  # every simulated figure within 10% of the measured one


@dataclass(frozen=True)
class Figure:
    name: str
    case: str  # validation.micro MICRO_CASES name
    what: str  # one line for the table
    gpu: dict  # sizes on the GPU
    sim: dict  # sizes in the simulator (tiny)
    steps_key: str  # the size key that counts steps ("steps" or "iters")
    lo_hi: tuple[str, str]  # the two values of steps_key: keys into gpu/sim dicts ("s1", "s2")
    per_step: int = 1  # figure = delta / (steps delta * per_step)
    chain_stride: int | None = None  # words; None = random chain
    cycles_out: int = 0  # arg index of the cycle output
    cycles_elem: int = 0  # element of it (result[0] = total, cycles[lane 0])
    single: bool = False  # one cold run: figure = cycles(s2) / s2


def _bank(stride: int) -> Figure:
    return Figure(f"bank_stride_{stride}", "bank_conflict",
                  f"shared bank conflicts, stride {stride} words: cycles per warp-wide ld.volatile.shared",
                  {"stride": stride, "s1": 1024, "s2": 2048}, {"stride": stride, "s1": 16, "s2": 48},
                  "iters", ("s1", "s2"), cycles_out=1)


FIGURES: list[Figure] = [
    Figure("shared_latency", "pchase_shared", "pointer chase ld.shared.u32 (random, 4 KiB): cycles per load",
           {"n": 1024, "s1": 1024, "s2": 2048}, {"n": 256, "s1": 32, "s2": 96}, "steps", ("s1", "s2"),
           cycles_out=3),
    Figure("l1_latency", "pchase_global_ca",
           "pointer chase ld.global.ca (random, 4 KiB, L1 hit) incl. address arithmetic: cycles per load",
           {"n": 1024, "s1": 4096, "s2": 8192}, {"n": 32, "s1": 8, "s2": 72}, "steps", ("s1", "s2"),
           cycles_out=2),
    Figure("l2_latency", "pchase_global_cg",
           "pointer chase ld.global.cg (4 MiB, 64 B stride, L2 hit) incl. address arithmetic: cycles per load",
           {"n": 1 << 20, "s1": 65536, "s2": 131072}, {"n": 512, "s1": 32, "s2": 96}, "steps", ("s1", "s2"),
           chain_stride=16, cycles_out=2),
    Figure("dram_latency", "pchase_global_cg",
           "pointer chase ld.global.cg (cold, 16 KiB stride, every load a new line): cycles per load",
           {"n": 1 << 28, "s1": 0, "s2": 16384}, {"n": 4096 * 64, "s1": 0, "s2": 48}, "steps", ("s1", "s2"),
           chain_stride=4096, cycles_out=2, single=True),
    *[_bank(s) for s in (1, 2, 4, 8, 16, 32, 33)],
    Figure("mma_latency", "mma_chain", "dependent mma.sync m16n8k16 f16->f32 chain: cycles per mma",
           {"s1": 1024, "s2": 2048}, {"s1": 8, "s2": 24}, "iters", ("s1", "s2"), cycles_out=4),
]

BY_NAME = {f.name: f for f in FIGURES}

# runner(case, sizes, args) -> {arg index: output array}
Runner = Callable[[Any, dict, list], dict]


def _args_for(fig: Figure, sizes: dict) -> tuple[Any, list]:
    case = by_name(fig.case)
    rng = np.random.default_rng(1)
    if fig.chain_stride is not None:  # a strided chain: do not build (then drop) a huge random one
        args = case.make_args(rng, {**sizes, "n": 16})
        args[0] = make_chain(rng, sizes["n"], fig.chain_stride)
    else:
        args = case.make_args(rng, sizes)
    return case, args


def to_launch(case: Any, args: list) -> Any:
    from sim.launch import Arg, Launch

    grid, block = case.launch()
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(Arg("buffer", str(a.dtype), array=a))
        else:
            out.append(Arg("scalar", a[1], value=a[0]))
    return Launch(case.kernel, grid, block, out)


def run_figure(fig: Figure, which: str, runner: Runner) -> dict:
    """Run the figure's two step counts with ``runner``; returns {"value", "raw"}."""
    base = fig.gpu if which == "gpu" else fig.sim
    raw = {}
    lo, hi = (base[k] for k in fig.lo_hi)
    for steps in ([hi] if fig.single else [lo, hi]):
        sizes = {k: v for k, v in base.items() if k not in ("s1", "s2")}
        sizes[fig.steps_key] = steps
        case, args = _args_for(fig, sizes)
        outs = runner(case, sizes, args)
        raw[steps] = int(np.asarray(outs[fig.cycles_out]).view(np.int64)[fig.cycles_elem])
    if fig.single:
        value = raw[hi] / hi / fig.per_step
    else:
        value = (raw[hi] - raw[lo]) / (hi - lo) / fig.per_step
    return {"value": round(float(value), 3), "raw": {str(k): v for k, v in raw.items()}}


def sim_runner(hw: Any) -> Runner:
    def run(case: Any, sizes: dict, args: list) -> dict:
        from sim.ptx.parser import parse_file
        from sim.timing import simulate

        res = simulate(parse_file(str(case.ptx_path)), to_launch(case, args), hw)
        return res.outputs
    return run


def gpu_runner() -> Runner:
    def run(case: Any, sizes: dict, args: list) -> dict:
        from validation.gpu import run_on_gpu

        text = pathlib.Path(case.ptx_path).read_text()
        m = run_on_gpu(text, to_launch(case, args), warmup=0, repeats=1)
        return m.outputs
    return run


def simulate_figure(name: str, hw: Any) -> float:
    return run_figure(BY_NAME[name], "sim", sim_runner(hw))["value"]


def load_measured(path: pathlib.Path | str = MEASURED_JSON) -> dict:
    return json.loads(pathlib.Path(path).read_text())


def compare(hw: Any, measured: dict, names: list[str] | None = None) -> list[dict]:
    rows = []
    for fig in FIGURES:
        if names and fig.name not in names:
            continue
        m = measured["figures"].get(fig.name, {}).get("value")
        s = simulate_figure(fig.name, hw)
        err = (s - m) / m if m else float("nan")
        rows.append({"name": fig.name, "what": fig.what, "measured": m, "simulated": s, "rel_err": err,
                     "ok": bool(m and abs(err) <= TOLERANCE)})
    return rows


def write_markdown(rows: list[dict], measured: dict, hw_path: str, path: pathlib.Path | str) -> None:
    lines = [
        "# Calibration: H200 microbenchmarks, measured vs simulated",
        "",
        "Written by `python -m validation calibrate --hw h200.yaml --write-md docs/calibration.md`",
        "(figures: `validation/calibrate.py`; measured side: `validation/micro/h200_micro.json`,",
        f"{measured.get('device', '?')}, {measured.get('date', '?')}; simulated on `{hw_path}`).",
        "Each figure is the cycles per step of a microbenchmark PTX in `validation/micro/`, taken by",
        "difference of two step counts (the DRAM one: a single cold run). The GPU runs the large sizes,",
        "the simulator tiny ones; both execute the same PTX. Tolerance: 10%.",
        "",
        "| figure | what | measured | simulated | error | within 10% |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['name']} | {r['what']} | {r['measured']:.2f} | {r['simulated']:.2f} | "
                     f"{100 * r['rel_err']:+.1f}% | {'yes' if r['ok'] else 'NO'} |")
    lines += ["", "How the H200 numbers map onto `hwconfigs/h200.yaml`: see docs/timing.md (calibration).", ""]
    atomic.write_text(path, "\n".join(lines))


def measure_gpu(names: list[str] | None = None) -> dict:
    """Run every figure on the GPU (one JIT + launch per step count); errors are recorded, not raised."""
    from validation.gpu import gpu_available

    ok, device = gpu_available()
    out: dict[str, Any] = {"device": device if ok else None, "figures": {}}
    run = gpu_runner()
    for fig in FIGURES:
        if names and fig.name not in names:
            continue
        try:
            out["figures"][fig.name] = {**run_figure(fig, "gpu", run), "what": fig.what, "sizes": fig.gpu}
        except Exception as e:  # noqa: BLE001 - keep measuring the others
            out["figures"][fig.name] = {"error": f"{type(e).__name__}: {e}"}
    return out


# -- fitting -----------------------------------------------------------------------------------------
# figure -> (YAML section, pipe name or None, key): a latency figure moves its field by the cycles the
# simulation is off; the bank-conflict slope sets shared.pass_cycles.
FIT_FIELDS = {
    "shared_latency": ("shared", None, "latency"),
    "l1_latency": ("l1", None, "hit_latency"),
    "l2_latency": ("l2", None, "hit_latency"),
    "dram_latency": ("dram", None, "latency"),
    "mma_latency": ("pipes", "tensor", "latency"),
}


def fit(hw: Any, rows: list[dict]) -> dict[tuple, int]:
    """New values for the fitted fields: old + round(measured - simulated); pass_cycles from the
    measured cycles per extra conflict way (bank strides 1 and 32: 31 extra ways)."""
    by = {r["name"]: r for r in rows}
    out: dict[tuple, int] = {}
    for name, (section, pipe, key) in FIT_FIELDS.items():
        r = by.get(name)
        if not r or r["measured"] is None:
            continue
        if section == "pipes":
            old = hw.pipe_for("tensor").latency if pipe == "tensor" else None
        else:
            old = getattr(getattr(hw, section), key)
        if old is None:
            continue
        out[(section, pipe, key)] = max(0, int(round(old + r["measured"] - r["simulated"])))
    b1, b32 = by.get("bank_stride_1"), by.get("bank_stride_32")
    if b1 and b32 and b1["measured"] and b32["measured"]:
        out[("shared", None, "pass_cycles")] = max(1, int(round((b32["measured"] - b1["measured"]) / 31)))
    return out


def write_fitted_yaml(src: pathlib.Path, fitted: dict[tuple, int], dest: pathlib.Path, note: str) -> None:
    """Copy the YAML text, replacing each fitted number in place with a `# source:` naming the fit."""
    text, _ = rewrite_fields(src.read_text(), {f: (v, note) for f, v in fitted.items()})
    atomic.write_text(dest, text)


# -- CLI ---------------------------------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("--hw", default="h200.yaml", help="hardware config to simulate (path or bundled name)")
    p.add_argument("--measured", default=str(MEASURED_JSON), help="committed measurements (JSON)")
    p.add_argument("--gpu", action="store_true", help="measure live on the GPU instead of the JSON")
    p.add_argument("--figure", action="append", help="only this figure (repeatable)")
    p.add_argument("--write-md", metavar="PATH", help="also write the markdown table to PATH")
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.add_argument("--write-hw", metavar="PATH", help="write a copy of the hwconfig with the latencies and "
                   "shared.pass_cycles fitted to the measurements")


def cli_main(args) -> int:
    from sim.hw import load_hw

    hw = load_hw(args.hw)
    measured = measure_gpu(args.figure) if args.gpu else load_measured(args.measured)
    rows = compare(hw, measured, args.figure)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'figure':18s} {'measured':>10s} {'simulated':>10s} {'error':>8s}")
        for r in rows:
            print(f"{r['name']:18s} {r['measured']:10.2f} {r['simulated']:10.2f} {100 * r['rel_err']:+7.1f}%"
                  f"{'' if r['ok'] else '  (outside 10%)'}")
    if args.write_md:
        write_markdown(rows, measured, hw.path, args.write_md)
    if args.write_hw:
        from sim.hw import load_hw as _load

        fitted = fit(hw, rows)
        src = pathlib.Path(hw.path)
        note = f"fitted by validation calibrate to {args.measured if not args.gpu else 'a live GPU run'}"
        write_fitted_yaml(src, fitted, pathlib.Path(args.write_hw), note)
        _load(args.write_hw)  # the fitted file must load
        print(f"wrote {args.write_hw}: " + ", ".join(f"{s_}.{p_ + '.' if p_ else ''}{k} = {v}"
                                                    for (s_, p_, k), v in fitted.items()))
    return 0 if all(r["ok"] for r in rows) else 1
