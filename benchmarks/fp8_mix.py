"""On the H200: does one warpgroup's f32 FMA stream slow another warpgroup's e4m3 wgmmas on the same SM? (issue 14,
the fp8 kernel's K block: its promotion FMAs cost ~83 cycles per K block on silicon (benchmarks/fp8_step.py run 1)
although the model has them run beside the other consumer's wgmmas.) One invocation, < 1 minute, one JSON:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/fp8_mix.py --out $OUT         # writes $OUT/fp8_mix.json
    python3 benchmarks/fp8_mix.py --out DIR --check  # here: ptxas -arch=sm_90a accepts every kernel
    python3 benchmarks/fp8_mix.py --out DIR --sim --measured benchmarks/data/fp8_mix_h200_2026-12-02.json
                                                     # here: the simulator (PTX, SASS mode) beside the H200

One CTA of two warpgroups (256 threads); after bar.sync each warpgroup runs its role, clock64-bracketed per warp
(lane 0 writes start, end):
- `mma`: REPS x (wgmma.fence, 4 x wgmma m64n128k32 e4m3 (shared-memory operands, no swizzle; the fp8 kernel's N
  half), commit, wait_group 0) — the fp8 kernel's wgmma group without the promotion;
- `ffma`: FREPS x 64 independent fma.rn.f32 (acc_i = x_i * s + acc_i: the promotion's form) — long enough to cover
  the other warpgroup's whole loop;
- `promote`: REPS x (the `mma` group, wait_group 0, then 64 fma.rn.f32 acc_i = blk_i * s + acc_i reading the
  block accumulators: one N half of the fp8 kernel's K block, with no scale loads or TMA);
- `idle`: nothing (the warpgroup exits).
Cases (role of warpgroup 0 + role of warpgroup 1): mma+idle, mma+mma, mma+ffma, ffma+idle, promote+idle,
promote+promote, promote+ffma. Per warp: cycles per iteration of its loop; per case the warpgroups' medians.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPS, FREPS = 64, 512  # mma: 64 x 4 x 64 MAC cycles ~ 16K cycles; ffma: 512 x 64 FMAs ~ 32K+ cycles
GROUP, N = 4, 128
CASES = (("mma", "idle"), ("mma", "mma"), ("mma", "ffma"), ("ffma", "idle"), ("promote", "idle"),
         ("promote", "promote"), ("promote", "ffma"), ("ffma", "ffma"), ("mma", "promote"),
         ("p1", "idle"), ("p1ld", "idle"), ("p1late", "idle"))


def _desc(offset: int) -> str:
    """No-swizzle K-major descriptor constant: LBO 128, SBO 256 (>> 4) (benchmarks/micro_wgmma)."""
    return f"{(128 >> 4) << 16 | (256 >> 4) << 32 | (offset >> 4):#x}"


def _role(role: str, w: int) -> str:
    """PTX of one warpgroup's role; labels and registers suffixed by w."""
    nacc = N // 2
    blk = "{" + ", ".join(f"%b{i}" for i in range(nacc)) + "}"
    # `promote` starts each group fresh (scale-d false: the fp8 kernel's block accumulators); `mma` accumulates
    # across its loop (else ptxas drops all but the last group's wgmmas: their results are dead)
    mma = "\n".join(f"    wgmma.mma_async.sync.aligned.m64n{N}k32.f32.e4m3.e4m3 {blk}, %rd3, %rd4, "
                    f"{'%p0' if k == 0 and role == 'promote' else '%p1'}, 1, 1;" for k in range(GROUP))
    fmas_x = "\n".join(f"    fma.rn.f32 %c{i}, %x{i}, %s, %c{i};" for i in range(nacc))
    fmas_b = "\n".join(f"    fma.rn.f32 %c{i}, %b{i}, %s, %c{i};" for i in range(nacc))
    group = f"    wgmma.fence.sync.aligned;\n{mma}\n    wgmma.commit_group.sync.aligned;\n" \
            "    wgmma.wait_group.sync.aligned 0;"
    if role.startswith("p1"):  # one-wgmma groups: the fence-to-fence window (~190 cycles) under the L2's latency
        return _p1(role, w)
    body = {"mma": group, "promote": group + "\n" + fmas_b, "ffma": fmas_x}[role]
    return _loop(w, body, FREPS if role == "ffma" else REPS)


def _loop(w: int, body: str, trips: int, pre: str = "", post: str = "") -> str:
    """`trips` x `body` between two clock64 reads (%t0, %t1), then to DONE."""
    return f"""{pre}    mov.u64 %t0, %clock64;
    mov.u32 %r4, 0;
L{w}:
{body}
    add.u32 %r4, %r4, 1;
    setp.lt.u32 %p2, %r4, {trips};
    @%p2 bra L{w};
    mov.u64 %t1, %clock64;
{post}    bra.uni DONE;"""


def _p1(role: str, w: int) -> str:
    """`p1`: REPS x (fence, one m64n128k32 wgmma, commit, wait_group 0, 64 promotion FMAs); `p1ld`: + a global
    load (ld.global.cg, an L2 hit after the first launch) issued after the wgmma and read by the first FMA after
    the wait (its latency against the group's); `p1late`: the same load read one iteration later (two iterations
    per loop trip, the loads alternating between two registers): nothing in its own iteration waits for it, so
    if it still costs, the next wgmma.fence waited for it."""
    nacc = N // 2
    blk = "{" + ", ".join(f"%b{i}" for i in range(nacc)) + "}"

    def one(load: str, use: str) -> str:
        lines = ["    wgmma.fence.sync.aligned;",
                 f"    wgmma.mma_async.sync.aligned.m64n{N}k32.f32.e4m3.e4m3 {blk}, %rd3, %rd4, %p0, 1, 1;"]
        if load:
            lines.append(f"    ld.global.cg.f32 {load}, [%rd11];")
        lines += ["    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 0;"]
        lines += [f"    fma.rn.f32 %c{i}, %b{i}, {use if i == 0 and use else '%s'}, %c{i};" for i in range(nacc)]
        return "\n".join(lines)
    if role == "p1late":
        body, trips = one("%g0", "%g1") + "\n" + one("%g1", "%g0"), REPS // 2
    else:
        body, trips = one("%g0" if role == "p1ld" else "", "%g0" if role == "p1ld" else ""), REPS
    return _loop(w, body, trips, "    mov.f32 %g0, 0f3F800000;\n    mov.f32 %g1, 0f3F800000;\n",
                 "    add.f32 %c1, %c1, %g0;\n    add.f32 %c1, %c1, %g1;\n")


def ptx(roles: tuple[str, str]) -> str:
    nacc = N // 2
    decl = "\n".join(f"    .reg .f32 %{p}<{nacc}>;" for p in ("b", "c", "x"))
    init = "\n".join(f"    add.u32 %r10, %r9, {i};\n    cvt.rn.f32.u32 %x{i}, %r10;\n    mov.f32 %c{i}, 0f00000000;\n"
                     f"    mov.f32 %b{i}, 0f00000000;" for i in range(nacc))
    keep = "\n".join(f"    add.f32 %k, %k, %c{i};\n    add.f32 %k, %k, %b{i};" for i in range(nacc))
    parts = []
    for w, role in enumerate(roles):
        parts.append(f"WG{w}:\n" + (_role(role, w) if role != "idle" else "    ret;"))
    return f""".version 8.4
.target sm_90a
.address_size 64

.visible .entry fp8_mix(.param .u64 out, .param .f32 scale, .param .u64 src)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .u64 %t<4>;
    .reg .f32 %s, %k, %g0, %g1;
{decl}
    .shared .align 1024 .b8 smem[32768];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.f32 %s, [scale];
    ld.param.u64 %rd11, [src];
    cvta.to.global.u64 %rd11, %rd11;
    mov.u32 %r0, %tid.x;
    and.b32 %r9, %r0, 31;
    mov.u32 %r2, smem;
    shr.u32 %r3, %r2, 4;
    cvt.u64.u32 %rd2, %r3;
    or.b64 %rd3, %rd2, {_desc(0)};
    add.s64 %rd4, %rd2, {_desc(16384)};
    setp.ne.u32 %p0, %r0, %r0;
    setp.eq.u32 %p1, %r0, %r0;
{init}
    bar.sync 0;
    shr.u32 %r5, %r0, 7;
    setp.eq.u32 %p3, %r5, 0;
    @%p3 bra WG0;
    bra.uni WG1;
{chr(10).join(parts)}
DONE:
    and.b32 %r6, %r0, 31;
    setp.ne.u32 %p3, %r6, 0;
    @%p3 bra END;
    shr.u32 %r7, %r0, 5;
    mul.wide.u32 %rd8, %r7, 24;
    add.s64 %rd9, %rd1, %rd8;
    st.global.u64 [%rd9], %t0;
    st.global.u64 [%rd9+8], %t1;
    mov.f32 %k, 0f00000000;
{keep}
    st.global.f32 [%rd9+16], %k;
END:
    ret;
}}
"""


def check() -> int:
    from sim.sass.tools import compile_ptx

    for roles in CASES:
        log = compile_ptx(ptx(roles)).ptxas_log
        print(roles, [x for x in log.splitlines() if "registers" in x or "spill" in x][:2])
    return 0


def _launch():
    from sim.launch import Arg, Launch

    return Launch("fp8_mix", (1, 1, 1), (256, 1, 1),
                  [Arg("buffer", "uint64", array=np.zeros(8 * 3, dtype=np.uint64)), Arg("scalar", "f32", value=1.0),
                   Arg("buffer", "float32", array=np.ones(1024, dtype=np.float32))])


def _per_iter(out: np.ndarray, roles: tuple[str, str]) -> dict[str, float]:
    """Per non-idle warpgroup: the median over its 4 warps of (clock64 after - before) / the loop's trips."""
    s = np.asarray(out).view(np.uint64).reshape(8, 3).astype(np.int64)
    return {f"wg{w}_{role}_cycles_per_iter": float(np.median([(s[k, 1] - s[k, 0]) / (FREPS if role == "ffma" else REPS)
                                                              for k in range(4 * w, 4 * w + 4)]))
            for w, role in enumerate(roles) if role != "idle"}


def simulate_cases(measured: Path | None, cases: tuple = CASES) -> dict:
    """Every case in the simulator (h200.yaml), PTX mode and SASS mode, beside the H200's figures of `measured`
    (a fp8_mix.json): cycles per loop iteration of each warpgroup."""
    from benchmarks.gpucommon import simulate_isa

    gpu = {r["case"]: r for r in json.loads(measured.read_text())["rows"]} if measured else {}
    rows = []
    for roles in cases:
        text, case = ptx(roles), "+".join(roles)
        row: dict = {"case": case}
        for mode in ("ptx", "sass"):
            r = simulate_isa(text, _launch(), mode, "fp8_mix.ptx")
            row.update({f"{mode}_{k}": v for k, v in _per_iter(r.outputs[0], roles).items()})
        row.update({f"gpu_{k}": v for k, v in gpu.get(case, {}).items() if k.endswith("_cycles_per_iter")})
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "hw": "h200",
            "measured": str(measured) if measured else None, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--sim", action="store_true", help="here: simulate every case (PTX and SASS mode) instead")
    ap.add_argument("--measured", help="with --sim: an H200 fp8_mix.json to set beside the simulated figures")
    a = ap.parse_args()
    if a.check:
        return check()
    if a.sim:
        res = simulate_cases(Path(a.measured) if a.measured else None)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "fp8_mix_sim.json").write_text(json.dumps(res, indent=1))
        return 0
    from benchmarks.gpucommon import nvidia_smi
    from validation.gpu import run_on_gpu

    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "load_average": os.getloadavg()[0], "reps": REPS, "freps": FREPS, "group": GROUP, "n": N,
                 "rows": []}
    res["device"] = nvidia_smi("name,driver_version,clocks.sm")
    for roles in CASES:
        row: dict = {"case": "+".join(roles), "roles": list(roles)}
        try:
            samples = []
            for _ in range(5):
                m = run_on_gpu(ptx(roles), _launch(), warmup=2, repeats=3)
                samples.append(np.asarray(m.outputs[0]).view(np.uint64).reshape(8, 3))
            for w, role in enumerate(roles):
                if role == "idle":
                    continue
                iters = FREPS if role == "ffma" else REPS
                per = [float(np.median([(s[k, 1] - s[k, 0]) / iters for s in samples]))
                       for k in range(4 * w, 4 * w + 4)]
                row[f"wg{w}_{role}_cycles_per_iter"] = float(np.median(per))
                row[f"wg{w}_per_warp"] = per
                row[f"wg{w}_start_spread"] = float(max(s[4 * w:4 * w + 4, 0].max() - s[:, 0][s[:, 0] > 0].min()
                                                       for s in samples))
                if role in ("mma", "promote"):
                    row[f"wg{w}_cycles_per_wgmma"] = float(np.median(per)) / GROUP
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        res["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if "per_warp" not in k}), flush=True)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fp8_mix.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
