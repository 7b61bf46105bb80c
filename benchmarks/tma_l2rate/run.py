"""On the H200: the L2's TMA read rate (issue 14, per-CTA prediction within 10%; docs/wgmma-tma.md section 14).
One invocation, ~1 minute of GPU time, writes $OUT/tma_l2rate.json:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_l2rate/run.py --out $OUT

tma_l2rate.ptx: lane 0 of each of P warps is a producer with its own ring of `depth` stages (one mbarrier each),
issuing per stage one TMA box of A and/or one of B as a wgmma_tma producer does (128-byte swizzle, bf16 K-major,
64 columns x 64 or 128 rows = 8 or 16 KiB), reissuing a stage as soon as it has landed. One CTA per SM (>= 120 KiB of
shared memory each). Per CTA: clock64 and %globaltimer at the start, at producer 0's step `q` (a quarter of the way:
the ramp and the first pass over the boxes excluded) and at the end, and %smid. Rates are over [q, end]: the bytes
landed in that window (steps - (q - depth + 1) stages of every producer) over its ns (and SM cycles).

Patterns (`MODES`; footprints L2-resident, 1-35 MB, below the 40 MiB the L2 holds: h200.yaml l2.held_footprints):
- distinct8 / distinct16: every CTA its own boxes (8 KiB [64 rows] / 16 KiB [128 rows]), kt columns of one row tile
  read again and again (kt 16 / 8: 128 KiB per CTA; `footprint` rows vary kt);
- pair8: 2 CTAs per box (kt 32: the same footprint as distinct8);
- all8 / all16: every CTA the same boxes (a 128 x 7168 bf16 tensor, 1.75 MiB, walked along K: the GEMM's A at M = 128,
  read by all CTAs at once);
- mix: the GEMM's stage, 128x64 t64x64 at 128x7168xK: A 16 KiB shared by all + B 8 KiB distinct (L2-resident);
- mix_dram: the same with B streamed from DRAM (a new row tile per pass over K = 7168, 363 MB tensor, a 512 MiB read
  between launches): the GEMM itself minus its consumers;
- mix2 / mix2_dram: 64x128 at 128x7168xK: A 8 KiB shared by half the CTAs + B 16 KiB by 2 (L2-resident / DRAM);
- dram8: B alone from DRAM (tma.dram_peak_gbps's pattern).
Depth sweeps (stages in flight per producer) at 64 / 112 / 132 CTAs; 2 and 4 producers per CTA for some (is one
waiting thread the bound?); "clock": four cases at 112 CTAs cool (after 1 s idle) and hot (after 0.5 s of
back-to-back 8192^3 bf16 matmuls, each launch right behind 50 ms more of them): is the rate fixed in ns or in SM
cycles?
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PTX = Path(__file__).with_name("tma_l2rate.ptx")
K = 7168
KT = K // 64
BIG_ROWS = 3 * 132 * 64  # three passes of 132 row tiles of 64 rows (363 MB): DRAM streaming never wraps
HOT_ROWS = 128
GRIDS = (64, 112, 132)
MIN_SHARED = 120 << 10  # more than half of the SM's 228 KiB: one CTA per SM
MAX_SHARED = 226 << 10
L2_BYTES_PER_CTA = 6 << 20
ALL = 1 << 20  # a group no grid reaches: every CTA the same row tile
HALF = 0  # a group of half the grid: two row tiles (the A of 64x128 tiles at M = 128)
FLUSH = 512 << 20
LAUNCHES = 3  # timed, after one warm-up launch

# mode: (A: map, bytes, kt, group) or None, (B: map, bytes, kt, group, pass: 0 L2-resident / -1 the grid), DRAM?
MODES: dict[str, tuple] = {
    "distinct8": (None, ("big64", 8192, 16, 1, 0), False),
    "distinct16": (None, ("big128", 16384, 8, 1, 0), False),
    "pair8": (None, ("big64", 8192, 32, 2, 0), False),
    "all8": (None, ("hot64", 8192, KT, ALL, 0), False),
    "all16": (None, ("hot128", 16384, KT, ALL, 0), False),
    "mix": (("hot128", 16384, KT, ALL), ("big64", 8192, 16, 1, 0), False),
    "mix_dram": (("hot128", 16384, KT, ALL), ("big64", 8192, KT, 1, -1), True),
    "mix2": (("hot64", 8192, KT, HALF), ("big128", 16384, 16, 2, 0), False),
    "mix2_dram": (("hot64", 8192, KT, HALF), ("big128", 16384, KT, 2, -1), True),
    "mix3": (("hot64", 8192, KT, HALF), ("big64", 8192, 32, 2, 0), False),
    "readers8": (None, ("big64", 8192, 16, 1, 0), False),
    "readers16": (None, ("big128", 16384, 8, 1, 0), False),
    "dram8": (None, ("big64", 8192, KT, 1, -1), True),
}
D8, D16, D24 = (2, 4, 6, 8, 12, 16), (2, 4, 6, 8, 12), (2, 3, 4, 5, 6, 8)


def cases() -> list[dict]:
    """Every case of the sweep: mode, grid, depth, producers, B's kt (None: the mode's)."""
    out: list[dict] = []

    def add(mode: str, grids: tuple[int, ...], depths: tuple[int, ...], producers: int = 1,
            kt: int | None = None, part: str = "depth") -> None:
        out.extend({"part": part, "mode": mode, "grid": g, "depth": d, "producers": producers, "b_kt": kt}
                   for g in grids for d in depths)

    add("mix", GRIDS, D24)
    add("mix_dram", GRIDS, (3, 5, 6, 8))
    add("mix2", GRIDS, (3, 5, 6, 8))
    add("mix2_dram", GRIDS, (5, 6))
    add("distinct8", GRIDS, D8)
    add("all16", GRIDS, D16)
    add("pair8", GRIDS, D8)
    add("all8", GRIDS, D8)
    add("distinct16", GRIDS, D16)
    add("dram8", GRIDS, (6, 16))
    for g in (112, 132):
        add("distinct8", (g,), (6, 8), producers=2, part="producers")
        add("distinct8", (g,), (6,), producers=4, part="producers")
        add("all16", (g,), (6,), producers=2, part="producers")
        add("mix", (g,), (4,), producers=2, part="producers")
        add("pair8", (g,), (6,), producers=2, part="producers")
    for kt in (8, 24, 32):
        add("distinct8", (112, 132), (8,), kt=kt, part="footprint")
    return out


def cases2() -> list[dict]:
    """Run 2 (`--set 2`): run 1 found one producer thread bound at ~243 SM cycles per stage (123 ns at 1,978 MHz,
    any box size, depth or pattern), so every case here has 2-4 producers per CTA (up to 134 B/cycle per SM of
    issue) to reach the L2's rate: readers per line 1..all (B's group; kt grown with it up to K so the footprint stays
    ~15 MB while the group is small), the GEMM stages, DRAM, and the clock part on L2-bound cases."""
    out: list[dict] = []

    def add(mode: str, grids: tuple[int, ...], depths: tuple[int, ...], producers: int, part: str,
            **kw: object) -> None:
        out.extend({"part": part, "mode": mode, "grid": g, "depth": d, "producers": producers, "b_kt": None, **kw}
                   for g in grids for d in depths)

    for group in (1, 2, 4, 8, 16, HALF, ALL):
        kt = min(KT, 16 * group) if group not in (HALF, ALL) else KT
        add("readers8", GRIDS, (6,), 4, "readers", b_group=group, b_kt=kt)
    for group in (1, 2, ALL):
        kt = 8 * group if group != ALL else KT
        add("readers16", (112, 132), (4,), 3, "readers", b_group=group, b_kt=kt)
    add("readers8", (132,), (2, 3, 4), 4, "readers_depth", b_group=1, b_kt=16)
    add("readers8", (132,), (2, 3, 4), 4, "readers_depth", b_group=ALL, b_kt=KT)
    add("mix", GRIDS, (4,), 2, "gemm")
    add("mix", GRIDS, (2,), 4, "gemm")
    add("mix2", GRIDS, (4,), 2, "gemm")
    add("mix3", (64, 112, 128, 132), (6,), 2, "gemm")
    add("mix3", (64, 112, 128, 132), (3,), 4, "gemm")
    add("mix_dram", GRIDS, (4,), 2, "gemm")
    add("mix2_dram", GRIDS, (4,), 2, "gemm")
    add("dram8", GRIDS, (6,), 4, "gemm")
    return out


CLOCK1 = (("mix", 5, 1, {}), ("mix_dram", 5, 1, {}), ("distinct8", 8, 1, {}), ("all16", 6, 1, {}))
CLOCK2 = (("readers8", 6, 4, {"b_group": 1, "b_kt": 16}), ("readers8", 6, 4, {"b_group": ALL, "b_kt": KT}),
          ("readers8", 6, 4, {"b_group": 2, "b_kt": 32}), ("mix", 4, 2, {}), ("mix_dram", 4, 2, {}))


def plan(case: dict) -> dict:
    """The kernel arguments of a case (steps per producer, q, shared bytes, footprint) or ValueError."""
    a, b, dram = MODES[case["mode"]]
    grid, depth, prod = case["grid"], case["depth"], case["producers"]
    bmap, bbytes, bkt, bgroup, bpass = b
    bkt = case.get("b_kt") or bkt
    bgroup = case.get("b_group", bgroup)
    if bgroup == HALF:
        bgroup = grid // 2
    if a and a[3] == HALF:
        a = (*a[:3], grid // 2)
    abytes = a[1] if a else 0
    stage = abytes + bbytes
    ring = prod * depth * stage
    if ring > MAX_SHARED or depth > 8 and prod > 1 or depth > 16:
        raise ValueError(f"ring {ring} B / depth {depth} x {prod} producers does not fit")
    if dram:
        steps = 3 * KT // prod  # three passes over K, each a new row tile: every box from DRAM
    else:
        steps = max(64, L2_BYTES_PER_CTA // (stage * prod))
    q = steps // 4
    if q < depth + 1:
        raise ValueError("too few steps for the mid timestamp")
    passes = -(-steps * prod // bkt)
    readers = min(bgroup, grid)
    b_pass = -(-grid // readers) if bpass < 0 else 0
    b_rows = bbytes // 128
    last_row = ((grid - 1) // readers + (passes - 1) * b_pass + 1) * b_rows
    if last_row > (BIG_ROWS if bmap.startswith("big") else HOT_ROWS):
        raise ValueError(f"B rows up to {last_row} exceed the tensor")
    b_foot = -(-grid // readers) * bkt * bbytes * (passes if dram else 1)
    foot = b_foot + (KT * abytes * -(-grid // a[3]) if a else 0)
    return {"steps": steps, "q": q, "stage_bytes": stage, "shared": max(MIN_SHARED, ring),
            "a": a, "b": (bmap, bbytes, bkt, bgroup, b_pass), "dram": dram, "footprint_bytes": foot,
            "b_readers": readers, "a_readers": min(a[3], grid) if a else 0}


def summary(raw: np.ndarray, grid: int, p: dict, depth: int, producers: int) -> dict:
    """Rates of one launch from its per-CTA record (8 u64 per CTA: clk start / mid / end, ns start / mid / end,
    smid, producers)."""
    v = raw.astype(np.int64).reshape(-1, 8)[:grid]
    c0, cm, c1, g0, gm, g1, smid = (v[:, i] for i in range(7))
    stage = p["stage_bytes"]
    landed = producers * (p["steps"] - (p["q"] - depth + 1))  # stages landed in [mid, end] per CTA
    wb = landed * stage
    wns = np.maximum(g1 - gm, 1)
    wcyc = np.maximum(c1 - cm, 1)
    rate = wb / wns  # GB/s per CTA (bytes per ns)
    mhz = (c1 - c0) / np.maximum(g1 - g0, 1) * 1e3
    overlap = int(g1.min() - gm.max())
    return {
        "ns_per_stage": float(np.median(wns / landed * producers)),  # per producer ring, a K step's analogue
        "ns_per_stage_p10_p90": [float(np.percentile(wns / landed * producers, x)) for x in (10, 90)],
        "cycles_per_stage": float(np.median(wcyc / landed * producers)),
        "cta_gb_s": float(np.median(rate)),
        "cta_gb_s_min_max": [float(rate.min()), float(rate.max())],
        "device_tb_s": float(rate.sum() / 1e3),  # every CTA's window rate summed (the windows overlap)
        "device_tb_s_union": float(grid * wb / max(1, int(g1.max() - gm.min())) / 1e3),
        "bytes_per_cycle_per_sm": float(np.median(wb / wcyc)),
        "clock_mhz": float(np.median(mhz)),
        "clock_mhz_min_max": [float(mhz.min()), float(mhz.max())],
        "window_ns": float(np.median(wns)),
        "windows_overlap_ns": overlap,
        "start_skew_ns": int(g0.max() - g0.min()),
        "run_ns": int(g1.max() - g0.min()),
        "sms": len(set(smid.tolist())),
    }


def run(torch, budget: float, which: str = "1") -> dict:
    from benchmarks.gpucommon import event_times
    from validation.tensormap import encode_tiled, prepare_cuda_python

    ptx = PTX.read_bytes()
    t0 = time.time()
    bf = torch.bfloat16
    big = torch.randn(BIG_ROWS, K, device="cuda", dtype=bf)  # random: no compressible lines
    hot = torch.randn(HOT_ROWS, K, device="cuda", dtype=bf)
    scratch = torch.ones(FLUSH // 4, device="cuda", dtype=torch.float32)
    ha = torch.randn(8192, 8192, device="cuda", dtype=bf)
    hb = torch.randn(8192, 8192, device="cuda", dtype=bf)
    hc = torch.empty(8192, 8192, device="cuda", dtype=bf)
    maps = {f"{name}{rows}": encode_tiled("bf16", int(t.data_ptr()), (K, t.shape[0]), (K * 2,), (64, rows), (1, 1), 128)
            for name, t in (("big", big), ("hot", hot)) for rows in (64, 128)}
    props = torch.cuda.get_device_properties(0)
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "device": props.name, "sms": props.multi_processor_count, "K": K,
                 "l2_bytes_per_cta": L2_BYTES_PER_CTA, "launches": LAUNCHES,
                 "load_average": os.getloadavg()[0], "cases": [], "clock": []}

    def evict() -> None:
        scratch.sum()  # 512 MiB of clean lines: the L2 then holds none of the tensors and no dirty line

    def heat(seconds: float) -> int:
        n, t = 0, time.time()
        while time.time() - t < seconds:
            for _ in range(8):
                torch.matmul(ha, hb, out=hc)
            n += 8
            torch.cuda.synchronize()
        return n

    def launcher(case: dict, p: dict):
        a, b = p["a"], p["b"]
        out = torch.zeros(8 * case["grid"], device="cuda", dtype=torch.int64)
        amap, abytes, akt, agroup = a if a else ("big64", 0, KT, 1)
        bmap, bbytes, bkt, bgroup, bpass = b
        call = prepare_cuda_python(ptx, "tma_l2rate", (case["grid"], 1, 1), (32 * case["producers"], 1, 1),
                                   p["shared"],
                                   [("tmap", maps[amap]), ("tmap", maps[bmap]), ("u64", int(out.data_ptr())),
                                    ("u32", p["steps"]), ("u32", case["depth"]), ("u32", p["q"]),
                                    ("u32", abytes), ("u32", akt), ("u32", agroup),
                                    ("u32", bbytes), ("u32", bkt), ("u32", bgroup), ("u32", bpass)])
        return call, out

    def measure(case: dict, p: dict, count: int, before=None) -> list[dict]:
        call, out = launcher(case, p)
        got: list[dict] = []

        def after(r: int) -> None:
            got.append(summary(out.cpu().numpy(), case["grid"], p, case["depth"], case["producers"]))

        times = event_times(call, count, before=before, after=after)
        for g, ms in zip(got, times):
            g["wall_ms"] = ms
        return got

    def row_of(case: dict, p: dict) -> dict:
        return {**case, "b_kt": p["b"][2], "steps": p["steps"], "q": p["q"], "stage_bytes": p["stage_bytes"],
                "footprint_bytes": p["footprint_bytes"], "a_readers": p["a_readers"], "b_readers": p["b_readers"],
                "dram": p["dram"]}

    keys = ("ns_per_stage", "cycles_per_stage", "cta_gb_s", "device_tb_s", "device_tb_s_union",
            "bytes_per_cycle_per_sm", "clock_mhz")
    for case in (cases2() if which == "2" else cases()):
        row: dict = {**case}
        try:
            p = plan(case)
            row = row_of(case, p)
            if time.time() - t0 > budget:
                row["error"] = "skipped: budget"
            else:
                flush = (lambda r: evict()) if p["dram"] else None
                got = measure(case, p, LAUNCHES + 1, flush)[1:]
                row["launches"] = got
                row.update({k: float(np.median([g[k] for g in got])) for k in keys})
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        res["cases"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "launches"}), flush=True)

    # is the rate fixed in ns or in SM cycles? the same case cool and hot
    for mode, depth, prod, kw in (CLOCK2 if which == "2" else CLOCK1):
        case = {"part": "clock", "mode": mode, "grid": 112 if which == "1" else 132, "depth": depth,
                "producers": prod, "b_kt": None, **kw}
        p = plan(case)
        row = row_of(case, p)
        try:
            if time.time() - t0 > budget + 30:
                raise RuntimeError("skipped: budget")
            flush = (lambda r: evict()) if p["dram"] else None
            measure(case, p, 1, flush)  # loads the module, warms the L2
            time.sleep(1.0)
            row["cool"] = measure(case, p, LAUNCHES, flush)
            row["heat_matmuls"] = heat(0.5)

            def hot_before(r: int, fl=flush) -> None:
                if fl is not None:
                    fl(r)
                for _ in range(30):  # ~50 ms of 8192^3 bf16 matmul, queued right ahead of the launch
                    torch.matmul(ha, hb, out=hc)

            row["hot"] = measure(case, p, LAUNCHES + 1, hot_before)
            for k in ("cool", "hot"):
                row[k + "_median"] = {x: float(np.median([g[x] for g in row[k]])) for x in keys}
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        res["clock"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("cool", "hot")}), flush=True)
    res["seconds"] = time.time() - t0
    return res


def report(path: Path) -> str:
    """The recorded run as tables: per pattern and grid, each depth's ns per stage, device TB/s, B/cycle per SM and
    SM clock (medians of the timed launches); then the clock part."""
    d = json.loads(path.read_text())
    lines = [f"{d.get('date')} {d.get('device')} ({d.get('seconds', 0):.0f} s)"]
    lines.append(f"{'part':13} {'mode':10} {'grid':>4} {'P':>1} {'rdA':>3} {'rdB':>3} {'kt':>3} {'MB':>5} {'depth':>5} "
                 f"{'ns/stage':>8} "
                 f"{'TB/s':>6} {'union':>6} {'B/cyc/SM':>8} {'MHz':>5} {'SMs':>4}")
    for r in d["cases"]:
        if "error" in r:
            lines.append(f"{r['part']:13} {r['mode']:10} {r['grid']:>4} {r['depth']:>5}  {r['error']}")
            continue
        sms = min(g["sms"] for g in r["launches"])
        lines.append(f"{r['part']:13} {r['mode']:10} {r['grid']:>4} {r['producers']:>1} {r.get('a_readers', 0):>3} "
                     f"{r.get('b_readers', 0):>3} {r['b_kt']:>3} "
                     f"{r['footprint_bytes'] / 1e6:5.1f} {r['depth']:>5} {r['ns_per_stage']:8.1f} "
                     f"{r['device_tb_s']:6.2f} {r['device_tb_s_union']:6.2f} {r['bytes_per_cycle_per_sm']:8.1f} "
                     f"{r['clock_mhz']:5.0f} {sms:>4}")
    for r in d["clock"]:
        if "error" in r:
            lines.append(f"clock {r['mode']}: {r['error']}")
            continue
        for k in ("cool", "hot"):
            for g in r[k]:
                lines.append(f"clock {r['mode']:10} P {r['producers']} readers {r.get('b_readers', 0):>3} {k:4} "
                             f"depth {r['depth']} {g['ns_per_stage']:8.1f} ns/stage "
                             f"{g['cycles_per_stage']:7.1f} cyc/stage {g['device_tb_s']:6.2f} TB/s "
                             f"{g['bytes_per_cycle_per_sm']:6.1f} B/cyc/SM {g['clock_mhz']:5.0f} MHz")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for tma_l2rate.json (on the GPU)")
    ap.add_argument("--report", help="print a recorded tma_l2rate.json as tables (no GPU)")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for the sweep before it skips cases")
    ap.add_argument("--dry", action="store_true", help="print the cases' plans and exit (no GPU)")
    ap.add_argument("--set", default="1", choices=("1", "2"), help="run 1's sweep or run 2's (cases2)")
    a = ap.parse_args()
    if a.report:
        print(report(Path(a.report)))
        return 0
    if not a.out and not a.dry:
        ap.error("--out DIR is required (or --report FILE / --dry)")
    if a.dry:
        for c in (cases2() if a.set == "2" else cases()):
            try:
                p = plan(c)
                print(c["part"], c["mode"], c["grid"], c["depth"], c["producers"], p["steps"], p["q"],
                      p["stage_bytes"], p["shared"], f"{p['footprint_bytes'] / 1e6:.1f} MB")
            except ValueError as e:
                print(c, "ERROR", e)
        return 0
    import torch

    torch.zeros(1, device="cuda")
    res = run(torch, a.budget, a.set)
    res["set"] = a.set
    Path(a.out).mkdir(parents=True, exist_ok=True)
    name = "tma_l2rate.json" if a.set == "1" else f"tma_l2rate_{a.set}.json"
    (Path(a.out) / name).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
