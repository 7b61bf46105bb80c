"""What limits cp.async streaming on the H200, and what the stage depth buys the planner's kernels (issue 11 item 4):

1. stream.ptx (stream.cu): every CTA (one per SM, 128 threads) streams `tiles` tiles of `tile` bytes with `depth`
   tiles issued ahead (kernelgen's cp.async pipeline without the math), from DRAM (fresh lines, the L2 filled
   with clean lines of another buffer before each launch) or from the L2 (a 4-tile window per CTA, warmed), as
   one contiguous run per tile, as a GEMM B operand walk (64 ... 256 rows of 128 B at a pitch of grid x 128 B:
   at grid 112 the B tile walk of a 64 x 7168 GEMM), or the same tiles for every CTA ("same": the A block that
   every CTA of an M = 64/128 GEMM reads at once). Per row: the cycles per tile (clock64, median over CTAs),
   bytes per cycle per SM, the whole chip's GB/s (%globaltimer span of all CTAs) and, by Little's law, the
   round trip of a tile under that load (depth x cycles per tile when the stream is latency-bound).
2. GEMMs: the cp.async wgmma (bf16) at M = 64/128, N = 7168 and 4096^3-8192^3, and the mma top-4 tilings of
   docs/top4.md at the long-K shapes, each with 2 ... 6 stages: per-CTA clock64 and the profile's phases
   (prologue, K loop, epilogue) on the first launch after the inputs' upload and on the last of the timed
   launches, the median wall time, and the planner's prediction beside them.

    (device) source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
             python3 benchmarks/cpasync_stream/run.py --out $OUT

Writes OUT/cpasync_stream.json (every row also printed on stdout). About 1-3 minutes; part 2 stops at the
--budget (seconds since the start, default 200) and records the kernels it skipped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

DEPTHS = (1, 2, 3, 4, 6, 8)
TILES = (4096, 8192, 16384, 32768)
GRIDS = (1, 16, 66, 112, 132)
THREADS = 128
SMEM_MAX = 227 * 1024

# part 2, in order of importance: (shape, dtype, out dtype, tiling key without the stage count, stages)
GEMMS = [
    ("64x7168x4096", "bf16", "bf16", "wgmma_64x64x64_t64x64_s{}_p0.0_v8.8", (2, 3, 4, 5, 6)),
    ("128x7168x4096", "bf16", "bf16", "wgmma_128x64x64_t64x64_s{}_p0.0_v8.8", (2, 3, 4, 6)),
    ("64x7168x7168", "bf16", "bf16", "wgmma_64x64x64_t64x64_s{}_p0.0_v8.8", (3, 4, 6)),
    ("128x7168x7168", "bf16", "bf16", "wgmma_128x64x64_t64x64_s{}_p0.0_v8.8", (3, 4, 6)),
    # the default picks (wgmma_tma) at the same shapes, for the cp.async-vs-TMA ranking
    ("64x7168x4096", "bf16", "bf16", "wgmma_tma_64x64x64_t64x64_s{}_p0.0_v8.8", (5,)),
    ("64x7168x7168", "bf16", "bf16", "wgmma_tma_64x64x64_t64x64_s{}_p0.0_v8.8", (5,)),
    ("128x7168x4096", "bf16", "bf16", "wgmma_tma_128x64x64_t128x64_s{}_p0.0_v8.8", (5,)),
    ("128x7168x7168", "bf16", "bf16", "wgmma_tma_128x64x64_t128x64_s{}_p0.0_v8.8", (5,)),
    ("128x4096x7168", "f16", "f32", "mma_64x64x64_t32x32_s{}_p8.8_v8.8", (2, 3, 4, 5, 6)),
    ("1024x1024x1024", "f16", "f32", "mma_64x128x64_t64x32_s{}_p8.8_v8.8", (2, 3, 4)),
    ("1024x1024x1024", "f16", "f32", "mma_128x64x64_t64x32_s{}_p8.8_v8.8", (2, 3, 4)),
    ("64x4096x4096", "f16", "f32", "mma_32x64x64_t32x16_s{}_p8.8_v8.8", (2, 3, 4)),
    ("64x4096x4096", "f16", "f32", "mma_32x64x64_t16x32_s{}_p8.8_v8.8", (2, 3, 4)),
    ("64x4096x4096", "bf16", "bf16", "wgmma_64x64x64_t64x64_s{}_p0.0_v8.8", (3, 4, 6)),
    ("64x4096x4096", "bf16", "bf16", "wgmma_tma_64x64x64_t64x64_s{}_p0.0_v8.8", (6,)),
    ("4096x4096x4096", "bf16", "bf16", "wgmma_128x128x64_t64x128_s{}_p0.0_v8.8", (2, 3, 4)),
    ("128x4096x7168", "f16", "f32", "mma_32x128x64_t32x32_s{}_p8.8_v8.8", (2, 3, 4)),
    ("4096x4096x4096", "f16", "f32", "mma_128x256x64_t64x64_s{}_p8.8_v8.8", (2, 3, 4)),
    ("2048x2048x2048", "f16", "f32", "mma_128x256x64_t64x64_s{}_p8.8_v8.8", (2, 3, 4)),
    ("6144x6144x6144", "bf16", "bf16", "wgmma_128x128x64_t64x128_s{}_p0.0_v8.8", (3, 4)),
    ("8192x8192x8192", "bf16", "bf16", "wgmma_128x128x64_t64x128_s{}_p0.0_v8.8", (3, 4)),
]


# part 2 of the second run (--set 2): at the cuBLAS table's M = 64/128 shapes the default pick (wgmma_tma) beside
# the cp.async wgmma the planner ranks best (bf16 in and out), and the top-4 stage pairs again
GEMMS2 = [
    (f"{m}x{n}x{k}", "bf16", "bf16", key, stages)
    for m in (64, 128) for n in (4096, 7168) for k in (4096, 7168)
    for key, stages in ((("wgmma_tma_64x64x64_t64x64_s{}_p0.0_v8.8" if m == 64 else
                          ("wgmma_tma_64x128x64_t64x128_s{}_p0.0_v8.8" if n == 4096 else
                           "wgmma_tma_128x64x64_t128x64_s{}_p0.0_v8.8")), (6 if n == 4096 else 5,)),
                        (("wgmma_64x64x64_t64x64_s{}_p0.0_v8.8" if m == 64 or n == 4096 else
                          "wgmma_128x64x64_t128x64_s{}_p0.0_v8.8"), (4,)))
] + [
    ("128x4096x7168", "f16", "f32", "mma_64x64x64_t32x32_s{}_p8.8_v8.8", (3, 4)),
    ("1024x1024x1024", "f16", "f32", "mma_64x128x64_t64x32_s{}_p8.8_v8.8", (2, 3)),
    ("4096x4096x4096", "bf16", "bf16", "wgmma_tma_256x128x64_t128x128_s{}_p0.0_v8.8", (3,)),
    ("4096x4096x4096", "bf16", "bf16", "wgmma_128x256x64_t64x256_s{}_p0.0_v8.8", (4,)),
]


def stream_part(cuda, dev, rows: list[dict]) -> None:
    sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    mod = cuda.module_from_buffer((HERE / "stream.ptx").read_bytes())
    fns = {d: mod.get_function(f"stream_d{d}") for d in DEPTHS}
    for f in fns.values():
        f.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM_MAX)
    big = 768 << 20
    src = cuda.mem_alloc(big)
    cuda.memset_d32(src, 0x3F800000, big // 4)  # 1.0f (the sums are not checked; the bytes only have to be read)
    flush = cuda.mem_alloc(160 << 20)  # read (clean lines) before every DRAM launch: evicts src from the L2
    cuda.memset_d32(flush, 0, (160 << 20) // 4)
    times = cuda.mem_alloc(sms * 5 * 8)
    sink = cuda.mem_alloc(sms * THREADS * 4)
    i64, i32 = np.int64, np.int32
    grids = sorted({g for g in GRIDS if g <= sms} | {sms})

    def launch(d: int, grid: int, cta_off: int, row: int, pitch: int, tile: int, tiles: int, window: int,
               work: int, buf=src) -> None:
        fns[d](buf, i64(cta_off), i32(row), i64(pitch), i32(tile), i32(tiles), i32(window), i32(work), times,
               sink, block=(THREADS, 1, 1), grid=(grid, 1, 1), shared=(d + 1) * tile)

    def evict() -> None:  # 132 CTAs stream the 160 MiB flush buffer (1.2 MiB each) with 8 tiles in flight
        n = (160 << 20) // (sms * 16384)
        launch(8, sms, n * 16384, 16384, 16384, 16384, n, 0, 0, buf=flush)

    for source in ("dram", "l2"):
        for pattern in ("contiguous", "bcol", "same"):
            for grid in grids:
                for tile in TILES:
                    for d in DEPTHS:
                        if (d + 1) * tile > SMEM_MAX:
                            continue
                        for work in ((0, 1000) if (grid == 112 and pattern == "bcol") else (0,)):
                            tiles = 64
                            if pattern == "contiguous":
                                row, pitch, cta_off = tile, tile, tile * tiles
                            elif pattern == "same":  # every CTA reads the same tiles (a GEMM's shared A block)
                                if grid not in (1, 112, sms):
                                    continue
                                row, pitch, cta_off = tile, tile, 0
                            else:  # B operand: rows of 128 B, the grid's CTAs side by side in a row
                                row, pitch, cta_off = 128, 128 * grid, 128
                            window = 4 if source == "l2" else 0
                            if cta_off * grid + tiles * (tile // row) * pitch > big:
                                continue
                            spans, per_tile, gspan = [], [], []
                            for rep in range(3):
                                if source == "dram":
                                    evict()
                                elif rep == 0:
                                    launch(d, grid, cta_off, row, pitch, tile, tiles, window, work)  # warm
                                cuda.Context.synchronize()
                                launch(d, grid, cta_off, row, pitch, tile, tiles, window, work)
                                cuda.Context.synchronize()
                                t = np.empty(grid * 5, np.int64)
                                cuda.memcpy_dtoh(t, times)
                                t = t.reshape(grid, 5)
                                loop = t[:, 2] - t[:, 1]
                                spans.append(float(np.median(t[:, 2] - t[:, 0])))
                                per_tile.append(float(np.median(loop)) / tiles)
                                gspan.append(float(t[:, 4].max() - t[:, 3].min()))
                            cyc = float(np.median(per_tile))
                            ns = float(np.median(gspan))
                            r = {"part": "stream", "source": source, "pattern": pattern, "grid": grid, "tile": tile,
                                 "depth": d, "work": work, "tiles": tiles, "in_flight_bytes": d * tile,
                                 "cycles_per_tile": cyc, "cycles_per_tile_reps": per_tile,
                                 "span_cycles": float(np.median(spans)),
                                 "bytes_per_cycle_per_sm": tile / cyc,
                                 "round_trip_littles_law": d * cyc,
                                 "chip_gbps": grid * tiles * tile / ns if ns > 0 else None,
                                 "clock_mhz": float(np.median(spans)) / ns * 1e3 if ns > 0 else None}
                            rows.append(r)
                            print(json.dumps({k: v for k, v in r.items() if k != "cycles_per_tile_reps"}), flush=True)
    for b in (src, flush, times, sink):
        b.free()


def gemm_part(rows: list[dict], t_start: float, budget: float, repeats: int, gemms: list | None = None) -> None:
    from benchmarks.planner_silicon import tiling_of
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.spec import shorthand
    from kernelgen.variants import get
    from sim.hw import load_hw
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import _per_cta_cycles, _phase_means, run_on_gpu
    from validation.gpu_tma import without_tensormaps

    hw = load_hw("h200")
    for shape, dtype, out_dtype, fmt, stages in gemms or GEMMS:
        inputs: dict = {}
        M, N, K = (int(x) for x in shape.split("x"))
        for s in stages:
            key = fmt.format(s)
            row: dict = {"part": "gemm", "shape": shape, "dtype": dtype, "out_dtype": out_dtype, "tiling": key,
                         "stages": s}
            if time.time() - t_start > budget:
                row["error"] = f"skipped: the {budget:.0f} s budget was spent"
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            try:
                spec = shorthand(shape, dtype, out_dtype)
                t = tiling_of(key)
                p = plan(spec, hw, t.variant, only=[t])
                ev = p.best
                cm = ev.model
                ktiles = -(-K // t.bk)
                row.update(predicted_cycles=ev.cycles, predicted_cycles_per_cta=ev.cycles_per_cta,
                           predicted_phases=[round(cm.pre_cycles), round(ktiles * cm.iter_cycles),
                                             round(cm.post_cycles)],
                           predicted_iter=cm.iter_cycles, predicted_bound=cm.bound,
                           predicted_terms={k: round(v, 1) for k, v in cm.terms.items()})
                text = get(t.variant).emit(spec, t, prediction_dict(p), profile=True)
                meta = read_metadata(text) or {}
                m = without_tensormaps(meta)  # the tensor maps are encoded at launch (run_on_gpu)
                if inputs:
                    m = {**m, "params": [{**q, "init": "zeros"} if q.get("role") in inputs else q
                                         for q in m["params"]]}
                launch = launch_from_metadata(m, np.random.default_rng(1))
                for a in launch.args:
                    if a.role in ("A", "B", "C") and a.kind == "buffer":
                        if a.role in inputs and inputs[a.role].shape == a.array.shape:
                            a.array = inputs[a.role]
                        else:
                            inputs[a.role] = a.array
                slots = (meta.get("profile") or {}).get("slots")
                res = run_on_gpu(text, launch, warmup=3, repeats=repeats,
                                 check=meta.get("check") if M * N * K <= 1 << 31 else None,
                                 profile_slots=slots, read_after=("profile",))
                pi = next(i for i, a in enumerate(launch.args) if a.role == "profile")
                first = res.per_cta_cycles or []
                last_arr = res.extra.get("after", {}).get(pi)
                last = _per_cta_cycles(last_arr, slots) if last_arr is not None else []
                row.update(time_ms=res.wall_ms_median, time_ms_batched=res.extra.get("time_ms_batched"),
                           check=bool(res.check["passed"]) if res.check else None,
                           registers=res.extra.get("num_regs"), grid=list(launch.grid),
                           first_cycles_per_cta=float(np.mean(first)) if first else None,
                           first_cycles_per_cta_max=int(max(first)) if first else None,
                           first_phases=res.extra.get("profile_phase_cycles"),
                           last_cycles_per_cta=float(np.mean(last)) if last else None,
                           last_cycles_per_cta_max=int(max(last)) if last else None,
                           last_phases=_phase_means(last_arr, slots) if last_arr is not None else None,
                           ktiles=ktiles)
                if row["last_phases"]:
                    row["last_cycles_per_ktile"] = row["last_phases"][1] / ktiles
                if row["first_phases"]:
                    row["first_cycles_per_ktile"] = row["first_phases"][1] / ktiles
            except Exception as e:  # noqa: BLE001 - record and go on
                row["error"] = f"{type(e).__name__}: {e}"[:400]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "predicted_terms"}), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=200.0, help="seconds; part 2 skips what starts later")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--skip-stream", action="store_true")
    ap.add_argument("--set", type=int, default=1, choices=(1, 2),
                    help="2: the second run's GEMMs (GEMMS2: default picks beside the cp.async wgmma), no stream part")
    a = ap.parse_args(argv)
    t0 = time.time()
    import pycuda.driver as cuda

    cuda.init()
    dev = cuda.Device(0)
    rows: list[dict] = []
    if not a.skip_stream and a.set == 1:
        ctx = dev.retain_primary_context()
        ctx.push()
        try:
            stream_part(cuda, dev, rows)
        finally:
            cuda.Context.pop()
    t1 = time.time()
    gemm_part(rows, t0, a.budget, a.repeats, GEMMS2 if a.set == 2 else GEMMS)
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "device": dev.name(),
           "sms": dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT), "load_average": os.getloadavg()[0],
           "seconds_stream": t1 - t0, "seconds": time.time() - t0, "source_file": "benchmarks/cpasync_stream",
           "rows": rows}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("cpasync_stream.json" if a.set == 1 else "cpasync_stream2.json")).write_text(json.dumps(res, indent=1))
    print(f"{time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
