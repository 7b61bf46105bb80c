"""On the GPU machine: wgmma_tma without and with 2-CTA thread block clusters (TMA multicast of the shared
operand), each kernel numpy-checked and timed against cuBLAS (torch.matmul) in the same run.

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 benchmarks/cluster_bench.py --out $OUT            # writes $OUT/cluster_bench.json

Per shape (bf16 inputs, A row-major M x K, B col-major: N x K, D row-major), per D dtype (f32, bf16) and per
cluster size (1, 2): the planner's best wgmma_tma kernel among the tilings of that cluster size
(`kernelgen.planner.plan(..., only=...)`), launched through validation.tensormap.prepare_cuda_python
(cuLaunchKernelEx with the cluster-dimension attribute for a cluster) on device buffers that torch owns.

Check (every kernel): D is poisoned (NaN bytes) before the checked launch; afterwards no element may be
non-finite, the relative Frobenius norm of D - ref against a float64 reference of the same bf16 inputs
(torch, float64 on the GPU) must be below TOL[D], and a numpy float64 product of 32 random rows and 32
random columns (+ the last row and column: the edge tiles) must agree to the same tolerance.

Time: CUDA events around each launch, median of `--repeats` after 3 warm-ups; cuBLAS = torch.matmul of the
same bf16 operands (B as a row-major K x N tensor, as benchmarks/gpu_bench.py times it), which writes bf16.

Probe (the M = 64/128 model gap, docs/wgmma-tma.md section 6): the cluster-1 pick of 64x7168x4096 and
128x4096x7168 run again with the persistent grid cut to 8..full CTAs (each CTA walks more tiles) and with 3..6
stages: per-CTA time per K tile that stays flat as the grid shrinks is a per-SM latency/issue limit; one that
falls is a shared bandwidth (L2/DRAM) limit; one that falls with more stages is the ring's latency.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gpucommon import event_times, median_ms  # noqa: E402
from kernelgen.planner import plan, prediction_dict  # noqa: E402
from kernelgen.spec import parse_spec  # noqa: E402
from kernelgen.variants import get  # noqa: E402
from sim.hw import load_hw  # noqa: E402
from sim.launch import Arg, normalize_dtype, read_metadata  # noqa: E402
from validation.gpu import ptx_entries  # noqa: E402
from validation.gpu_tma import assemble_args, tensormap_params, without_tensormaps  # noqa: E402

BIG = [(4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192), (4096, 7168, 2048)]
SMALL = [(m, n, k) for m in (64, 128) for n in (4096, 7168) for k in (4096, 7168)]
TOL = {"f32": 1e-4, "bf16": 1e-2}  # relative Frobenius norm; bf16 D: one rounding of 2^-9 per element
CLOCK_MHZ = 1980  # the H200's clock under load ([clock_mhz] of hwconfigs/h200.yaml)
PROBE_SHAPES = [(64, 7168, 4096), (128, 4096, 7168)]
COLD_WARM = [(64, 4096, 2048), (64, 7168, 4096), (128, 4096, 7168)]  # B 16 MiB (L2-resident when warm), 56 MiB


def spec_of(M: int, N: int, K: int, out: str, layouts: tuple[str, str] = ("row", "col"),
            tiling: list[str] | None = None):
    return parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": "bf16", "b": "bf16", "out": out},
                       "layout": {"a": layouts[0], "b": layouts[1]}, **({"tiling": tiling} if tiling else {})})


def build(M: int, N: int, K: int, out: str, cluster: int, stages: int | None = None, along: str = "") -> dict:
    """The planner's best wgmma_tma kernel of that cluster size (and stage count; `along` "m" or "n": that
    cluster direction only): PTX, header, tiling."""
    spec, hw = spec_of(M, N, K, out, tiling=["CLUSTER in [1, 2]"]), load_hw("h200")  # clusters are opt-in
    only = [t for t in get("wgmma_tma").tilings(spec) if t.cluster == cluster and stages in (None, t.stages)
            and (not along or (t.cluster_m if along == "m" else t.cluster_n) == cluster)]
    p = plan(spec, hw, variant="wgmma_tma", only=only)
    t = p.best.tiling
    ptx = get("wgmma_tma").emit(spec, t, prediction_dict(p))
    return {"ptx": ptx, "meta": read_metadata(ptx), "tiling": t.key(), "t": t, "bound": p.best.model.bound,
            "predicted_cycles": p.best.cycles,
            "terms": {k: round(v, 1) for k, v in (p.best.model.terms or {}).items()}}


def spills(ptx: str, tmp: Path) -> dict | None:
    """ptxas -arch=sm_90a -v: registers and spill bytes (None without ptxas)."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    src = tmp / "k.ptx"
    src.write_text(ptx)
    r = subprocess.run([exe, "-arch=sm_90a", "-v", str(src), "-o", str(tmp / "k.cubin")], capture_output=True,
                       text=True, timeout=120)
    log = r.stdout + r.stderr
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    return {"ok": r.returncode == 0, "registers": int(regs.group(1)) if regs else None,
            "spill_store_bytes": int(spill.group(1)) if spill else None,
            "log": "" if r.returncode == 0 else log[-400:]}


class Runner:
    """Device buffers (torch) and the cuda-python launch of one kernel on them."""

    def __init__(self, torch_mod):
        self.torch = torch_mod

    def launcher(self, k: dict, tensors: dict[str, object], grid: int | None = None):
        from validation.tensormap import encode_tiled, prepare_cuda_python

        meta = k["meta"]
        args: list[Arg] = []
        ptrs: dict[int, int] = {}
        for i, p in enumerate(without_tensormaps(meta)["params"]):
            if p["kind"] == "buffer":
                role = p.get("role", "")
                if role not in tensors:
                    raise ValueError(f"buffer role {role!r} is not bound by this bench (A, B, D only)")
                ptrs[i] = int(tensors[role].data_ptr())  # type: ignore[attr-defined]
                args.append(Arg("buffer", normalize_dtype(p["dtype"]), name=p["name"], role=role,
                                hidden=bool(p.get("hidden"))))
            else:
                args.append(Arg("scalar", normalize_dtype(p["dtype"]), value=p["value"], name=p["name"],
                                role=p.get("role", "")))
        targs = assemble_args(ptx_entries(k["ptx"])[meta["kernel"]], tensormap_params(meta), args, ptrs, encode_tiled)
        g = grid or meta["grid"][0]
        cluster = tuple(meta["cluster"]) if meta.get("cluster") else None
        return prepare_cuda_python(k["ptx"].encode(), meta["kernel"], (g, 1, 1), tuple(meta["block"]),
                                   meta["dynamic_shared"], targs, cluster)  # type: ignore[arg-type]

    def time_ms(self, call, repeats: int) -> float:
        return median_ms(call, repeats)


def check(torch, D, A, Bt, ref, out: str, rng: np.random.Generator, host: tuple | None = None) -> dict:
    """Poisoned-output, float64 relative-norm and numpy row/column checks of D (M x N) = A Bt^T (host: A and
    Bt as float64 numpy arrays, when the caller has them)."""
    M, N = D.shape
    d64 = D.double()
    finite = bool(torch.isfinite(d64).all().item())
    rel = float(torch.linalg.norm(d64 - ref) / torch.linalg.norm(ref)) if finite else float("inf")
    rows = np.unique(np.append(rng.choice(M, min(32, M), replace=False), M - 1))
    cols = np.unique(np.append(rng.choice(N, min(32, N), replace=False), N - 1))
    a, bt = host or (A.double().cpu().numpy(), Bt.double().cpu().numpy())
    d = d64.cpu().numpy()
    want_r = a[rows] @ bt.T  # numpy float64
    want_c = a @ bt[cols].T
    rel_rows = float(np.linalg.norm(d[rows] - want_r) / np.linalg.norm(want_r))
    rel_cols = float(np.linalg.norm(d[:, cols] - want_c) / np.linalg.norm(want_c))
    ok = finite and max(rel, rel_rows, rel_cols) < TOL[out]
    return {"passed": ok, "finite": finite, "rel_norm": rel, "rel_norm_rows_numpy": rel_rows,
            "rel_norm_cols_numpy": rel_cols, "tolerance": TOL[out]}


def cublas_ms(torch, A, Bt, runner: Runner, repeats: int) -> float:
    y = Bt.t().contiguous()  # K x N row-major, as benchmarks/gpu_bench.py times torch.matmul
    torch.backends.cuda.matmul.allow_tf32 = False
    return runner.time_ms(lambda: torch.matmul(A, y), repeats)


SMOKE = [((200, 136, 264), ("row", "col")), ((200, 136, 264), ("col", "row")), ((520, 392, 200), ("row", "col"))]
SMOKE_TILES = ((64, 64), (128, 256), (256, 128), (128, 128))


def smoke(out: Path, only_mn: bool = False) -> int:
    """Every cluster direction x D dtype x tile shape family on small odd shapes (edge tiles, a partner
    CTA whose tile lies past M or N, several tiles per cluster): checked, not timed. Exit 1 on a failure.
    only_mn: just the col A / row B kernels with B multicast over several boxes (run 1's failures)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    torch.zeros(1, device="cuda")
    runner, rng, rows, ok = Runner(torch), np.random.default_rng(1), [], True
    for (M, N, K), layouts in SMOKE:
        A = (torch.randn(M, K, device="cuda") / 8).to(torch.bfloat16)
        Bt = (torch.randn(N, K, device="cuda") / 8).to(torch.bfloat16)
        ref = A.double() @ Bt.double().t()
        bufs = {"A": A if layouts[0] == "row" else A.t().contiguous(),  # col A: K x M; row B: K x N
                "B": Bt if layouts[1] == "col" else Bt.t().contiguous()}
        for od in ("f32", "bf16"):
            spec = spec_of(M, N, K, od, layouts, ["CLUSTER in [1, 2]"])
            ts = get("wgmma_tma").tilings(spec)
            if layouts == ("col", "row"):  # also the MN-major shared operands tilings() no longer offers
                ts = [dataclasses.replace(t, cluster_m=cm, cluster_n=cn) for t in ts if not t.clustered
                      for cm, cn in ((2, 1), (1, 2))]
            for t in ts:
                if not t.clustered or t.stages != 3 or (t.bm, t.bn) not in SMOKE_TILES:
                    continue
                if only_mn and not (layouts == ("col", "row") and t.cluster_m == 2 and t.bn > 64):
                    continue
                ptx = get("wgmma_tma").emit(spec, t, {})
                k = {"ptx": ptx, "meta": read_metadata(ptx)}
                D = torch.empty(M, N, device="cuda", dtype=torch.float32 if od == "f32" else torch.bfloat16)
                D.view(torch.uint8).fill_(0xFF)
                for grid in (2, k["meta"]["grid"][0]):  # one cluster walking every tile, then the full grid
                    runner.launcher(k, {**bufs, "D": D}, grid)()
                    torch.cuda.synchronize()
                    c = check(torch, D, A, Bt, ref, od, rng)
                    rows.append({"M": M, "N": N, "K": K, "layouts": layouts, "out_dtype": od, "tiling": t.key(),
                                 "grid": grid, **c})
                    ok &= c["passed"]
                    print(json.dumps(rows[-1]), flush=True)
                    D.view(torch.uint8).fill_(0xFF)
    (out / ("cluster_smoke_mn.json" if only_mn else "cluster_smoke.json")).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


def cold_warm(torch, runner: Runner, M: int, N: int, K: int, repeats: int) -> dict:
    """The cluster-1 pick timed back to back (B left in the L2 by the previous launch where it fits: 60 MiB) and
    after a 512 MiB scratch write before each launch (B from DRAM): a K-tile time that does not move is a per-SM
    limit, one that falls when warm is the DRAM side (latency under load or its access pattern)."""
    k = build(M, N, K, "f32", 1)
    A = (torch.randn(M, K, device="cuda") / 8).to(torch.bfloat16)
    Bt = (torch.randn(N, K, device="cuda") / 8).to(torch.bfloat16)
    D = torch.empty(M, N, device="cuda", dtype=torch.float32)
    call = runner.launcher(k, {"A": A, "B": Bt, "D": D})
    warm = runner.time_ms(call, repeats)
    scratch = torch.empty(512 << 20, device="cuda", dtype=torch.uint8)
    cold = float(np.median(event_times(call, repeats, before=lambda r: scratch.fill_(r & 0xFF))))
    t = k["t"]
    per = -(-(-(-M // t.bm) * -(-N // t.bn)) // k["meta"]["grid"][0]) * -(-K // t.bk)  # K tiles per CTA
    return {"M": M, "N": N, "K": K, "tiling": k["tiling"], "grid": k["meta"]["grid"][0], "warm_ms": warm,
            "cold_ms": cold, "warm_cycles_per_ktile": warm * 1e-3 * CLOCK_MHZ * 1e6 / per,
            "cold_cycles_per_ktile": cold * 1e-3 * CLOCK_MHZ * 1e6 / per, "predicted_cycles": k["predicted_cycles"],
            "terms": k["terms"]}


def cluster_occupancy(k: dict) -> dict:
    """cuOccupancyMaxActiveClusters of a cluster kernel at its launch shape (how many of its clusters the
    H200 holds at once: a persistent grid of more clusters runs the rest in a second wave)."""
    from cuda.bindings import driver as drv  # noqa: PLC0415

    meta = k["meta"]
    err, mod = drv.cuModuleLoadData(k["ptx"].encode() + b"\0")
    err, fn = drv.cuModuleGetFunction(mod, meta["kernel"].encode())
    drv.cuFuncSetAttribute(fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           meta["dynamic_shared"])
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = meta["grid"]
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = meta["block"]
    cfg.sharedMemBytes = meta["dynamic_shared"]
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = meta["cluster"]
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    err, n = drv.cuOccupancyMaxActiveClusters(fn, cfg)
    return {"tiling": k["tiling"], "grid": meta["grid"][0], "clusters_launched": meta["grid"][0] // meta["cluster"][0],
            "max_active_clusters": int(n), "error": getattr(err, "name", str(err))}


def run_smoke(out: str, flag: str = "--smoke") -> int | str:
    """The smoke subprocess (120 s timeout): its exit status, or "timeout"."""
    try:
        r = subprocess.run([sys.executable, __file__, "--out", out, flag], timeout=120, capture_output=True,
                           text=True)
        print(r.stdout[-3000:], r.stderr[-2000:], flush=True)
        return r.returncode
    except subprocess.TimeoutExpired:
        print("smoke: timeout (hang) after 120 s", flush=True)
        return "timeout"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--budget", type=float, default=190.0,
                    help="seconds from the start (smoke included); later cases are skipped past it")
    ap.add_argument("--shapes", help="MxNxK,... (default: the 4 large shapes and the 8 of M in {64, 128})")
    ap.add_argument("--no-probe", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="only the small cluster cases (run first, in a subprocess)")
    ap.add_argument("--no-clusters", action="store_true", help="cluster-1 kernels only (no smoke, no cluster rows)")
    ap.add_argument("--no-micro", action="store_true", help="skip the tma_pitch / tma_store microbenchmarks")
    ap.add_argument("--smoke-mn", action="store_true",
                    help="first, the smoke's col A / row B B-multicast kernels of several boxes (run 1's 12 failures), "
                         "in a subprocess; written to cluster_smoke_mn.json")
    ap.add_argument("--smoke-mn-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--occupancy", action="store_true",
                    help="also cuOccupancyMaxActiveClusters of the cluster-2 picks of 4096^3 and 64x4096x4096")
    a = ap.parse_args()
    a.clusters = True
    if a.smoke:
        return smoke(Path(a.out))
    if a.smoke_mn_only:
        return smoke(Path(a.out), only_mn=True)
    t0 = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    # the cluster protocol's first run on silicon: small cases in a subprocess with a timeout, so a hang (a
    # wrong parity or a lost remote arrive) costs 120 s and the cluster-1 rows still run; a wrong result (exit
    # 1) is recorded and the cluster kernels are still timed
    smoke_rc: int | str = "skipped"
    if not a.no_clusters:
        smoke_rc = run_smoke(a.out)
    smoke_mn_rc: int | str = "skipped"
    if a.smoke_mn:
        smoke_mn_rc = run_smoke(a.out, "--smoke-mn-only")
    a.clusters = smoke_rc in (0, 1)
    import torch

    torch.zeros(1, device="cuda")  # the primary context, current for cuda-python's launches
    runner = Runner(torch)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")] if a.shapes else BIG + SMALL
    res: dict = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(0), "rows": [],
                 "probe": [], "skipped": [], "smoke_rc": smoke_rc, "smoke_mn_rc": smoke_mn_rc, "cold_warm": []}
    tmp = Path(tempfile.mkdtemp())
    # microbenchmarks first (a few seconds): the TMA load rate by DRAM access pattern (the M = 64/128 model
    # term) and the TMA store's drain rate (the f32-D epilogue's term); benchmarks/tma_pitch, benchmarks/tma_store
    if a.occupancy:
        res["cluster_occupancy"] = []
        for (M, N, K) in ((4096, 4096, 4096), (64, 4096, 4096)):
            try:
                res["cluster_occupancy"].append(cluster_occupancy(build(M, N, K, "bf16", 2)))
            except Exception as e:  # noqa: BLE001
                res["cluster_occupancy"].append({"M": M, "error": f"{type(e).__name__}: {e}"[:300]})
            print("  occupancy", json.dumps(res["cluster_occupancy"][-1]), flush=True)
    for key, folder in () if a.no_micro else (("tma_pitch", "tma_pitch"), ("tma_store", "tma_store")):
        try:
            spec_ = importlib.util.spec_from_file_location(f"{key}_run", ROOT / "benchmarks" / folder / "run.py")
            assert spec_ is not None and spec_.loader is not None
            mod = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(mod)
            res[key] = mod.run(torch)
        except Exception as e:  # noqa: BLE001
            res[key] = {"error": f"{type(e).__name__}: {e}"[:400]}
        (out / "cluster_bench.json").write_text(json.dumps(res, indent=1, default=str))
    for (M, N, K) in shapes:
        if time.time() - t0 > a.budget:
            res["skipped"].append([M, N, K])
            continue
        torch.manual_seed(M + N + K)
        A = (torch.randn(M, K, device="cuda") / 8).to(torch.bfloat16)
        Bt = (torch.randn(N, K, device="cuda") / 8).to(torch.bfloat16)  # B col-major: N x K, K contiguous
        ref = A.double() @ Bt.double().t()
        host = (A.double().cpu().numpy(), Bt.double().cpu().numpy())
        cub = cublas_ms(torch, A, Bt, runner, a.repeats)
        flop = 2 * M * N * K
        for od in ("f32", "bf16"):
            picked = ""
            # cluster 1, the planner's cluster-2 pick, and (large shapes) the other direction
            for cl, along in ((1, ""), (2, ""), (2, "other")) if (M, N, K) in BIG else ((1, ""), (2, "")):
                if along == "other":
                    along = "n" if picked == "m" else "m"
                if cl == 2 and not a.clusters:
                    continue
                row: dict = {"M": M, "N": N, "K": K, "out_dtype": od, "cluster": cl, "along": along,
                             "cublas_ms": cub, "cublas_tflops": flop / (cub * 1e-3) / 1e12}
                try:
                    k = build(M, N, K, od, cl, None, along)
                    if cl == 2 and not along:
                        picked = "m" if k["t"].cluster_m == 2 else "n"
                    row.update({x: k[x] for x in ("tiling", "bound", "predicted_cycles", "terms")})
                    row.update({"grid": k["meta"]["grid"], "cluster_dims": k["meta"].get("cluster"),
                                "dynamic_shared": k["meta"]["dynamic_shared"],
                                "ptxas": spills(k["ptx"], tmp) if cl > 1 else None})
                    D = torch.empty(M, N, device="cuda", dtype=torch.float32 if od == "f32" else torch.bfloat16)
                    D.view(torch.uint8).fill_(0xFF)  # poison: NaN in f32 and bf16
                    call = runner.launcher(k, {"A": A, "B": Bt, "D": D})
                    call()
                    torch.cuda.synchronize()
                    row["check"] = check(torch, D, A, Bt, ref, od, rng, host)
                    ms = runner.time_ms(call, a.repeats)
                    row.update({"time_ms": ms, "tflops": flop / (ms * 1e-3) / 1e12, "ratio": cub / ms,
                                "measured_cycles": ms * 1e-3 * CLOCK_MHZ * 1e6,
                                "predicted_over_measured": k["predicted_cycles"] / (ms * 1e-3 * CLOCK_MHZ * 1e6)})
                except Exception as e:  # noqa: BLE001 - record and go on
                    row["error"] = f"{type(e).__name__}: {e}"[:500]
                res["rows"].append(row)
                print(json.dumps({x: row.get(x) for x in ("M", "N", "K", "out_dtype", "cluster", "tiling", "tflops",
                                                          "cublas_tflops", "ratio", "predicted_over_measured",
                                                          "error")}), flush=True)
                print("  check", json.dumps(row.get("check")), flush=True)
        del ref
    if not a.no_probe:
        for (M, N, K) in PROBE_SHAPES:
            if time.time() - t0 > a.budget + 15:
                res["skipped"].append(["probe", M, N, K])
                continue
            A = (torch.randn(M, K, device="cuda") / 8).to(torch.bfloat16)
            Bt = (torch.randn(N, K, device="cuda") / 8).to(torch.bfloat16)
            D = torch.empty(M, N, device="cuda", dtype=torch.float32)
            base = build(M, N, K, "f32", 1)
            for stages in (3, 6, 10):  # the same tiling at other ring depths (10: past the search's 6)
                try:
                    t = dataclasses.replace(base["t"], stages=stages)
                    try:
                        ptx = get("wgmma_tma").emit(spec_of(M, N, K, "f32"), t, {})
                    except ValueError:  # no room for the staging beside that ring
                        continue
                    k = {**base, "ptx": ptx, "meta": read_metadata(ptx), "tiling": t.key(), "t": t}
                    if k["meta"]["dynamic_shared"] > 227 * 1024:
                        continue
                    full = k["meta"]["grid"][0]
                    for grid in sorted({8, 32, full}) if stages != 6 else sorted({8, 16, 32, 64, full}):
                        if grid > full:
                            continue
                        ms = runner.time_ms(runner.launcher(k, {"A": A, "B": Bt, "D": D}, grid), a.repeats)
                        tiles = -(-(-(-M // t.bm) * -(-N // t.bn)) // grid)  # tiles per CTA
                        ktiles = -(-K // 64)
                        res["probe"].append({"M": M, "N": N, "K": K, "tiling": k["tiling"], "stages": stages,
                                             "grid": grid, "full_grid": full, "time_ms": ms,
                                             "cycles_per_ktile_per_cta": ms * 1e-3 * CLOCK_MHZ * 1e6 / tiles / ktiles})
                        print("  probe", json.dumps(res["probe"][-1]), flush=True)
                except Exception as e:  # noqa: BLE001
                    res["probe"].append({"M": M, "N": N, "K": K, "stages": stages,
                                         "error": f"{type(e).__name__}: {e}"[:400]})
        for (M, N, K) in COLD_WARM:
            if time.time() - t0 > a.budget + 25:
                res["skipped"].append(["cold_warm", M, N, K])
                continue
            try:
                res["cold_warm"].append(cold_warm(torch, runner, M, N, K, a.repeats))
                print("  cold/warm", json.dumps(res["cold_warm"][-1]), flush=True)
            except Exception as e:  # noqa: BLE001
                res["cold_warm"].append({"M": M, "N": N, "K": K, "error": f"{type(e).__name__}: {e}"[:400]})
    res["seconds"] = time.time() - t0
    (out / "cluster_bench.json").write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
