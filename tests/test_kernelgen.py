"""kernelgen: spec parsing, planner (pruning, infeasible message, speed), ptxas acceptance and the
register prediction, CLI outputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from kernelgen.cli import main
from kernelgen.planner import plan, prediction_dict
from kernelgen.spec import load_spec, parse_spec, shorthand
from kernelgen.variants import get
from sim.errors import UsageError
from sim.hw import Branch, Cache, Core, GlobalMemory, HwConfig, Limits, Pipe, RegisterFile, SharedMemory
from validation.cases import SHAPES, VARIANTS


def h200_like() -> HwConfig:
    return HwConfig(
        version=1, name="h200-test", clock_mhz=1755.0, warp_size=32,
        core=Core(count=132, schedulers=4, issue_width=1, policy="gto", max_threads=2048, max_ctas=32,
                  max_warps=64, registers=65536),
        pipes=(Pipe("alu", ("alu", "branch", "sync"), 64, 4, 1, 1), Pipe("fma", ("fma",), 128, 4, 1, 1),
               Pipe("sfu", ("sfu",), 16, 16, 1, 1), Pipe("tensor", ("tensor",), 4096, 32, 1, 1),
               Pipe("lsu", ("lsu",), 32, 30, 1, 1)),
        registers=RegisterFile(255, 4, 2, 1), shared=SharedMemory(233472, 32, 4, 1, 30, 1),
        l1=Cache(262144, 128, 32, 4, "lru", 30), l2=Cache(52428800, 128, 32, 16, "lru", 200),
        dram=GlobalMemory(4800.0, 32, 32, 500), branch=Branch("none", 4, 0), limits=Limits(1024, 255, 232448))


def hw_configs() -> list[HwConfig]:
    out = [h200_like()]
    try:
        from sim.hw import load_hw

        out += [load_hw("h200"), load_hw("npu7nm")]
    except Exception:  # loader or bundled configs not there yet
        pass
    return out


# ------------------------------------------------------------------------------------------ spec


def test_spec_yaml_full(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text("""
M: {range: [1, 4096], multiple_of: 8}
N: 17
K: [16, 512]
dtype: {a: bf16, b: bf16, acc: f32, out: f16}
layout: {a: col, b: row, c: col}
alpha: 2
beta: 0.5
epilogue: [bias, gelu, cast]
constraints:
  - registers_per_thread <= 128
  - occupancy ~ 0.5
tiling:
  - TILE_K in [16, 128], TILE_K % 16 == 0
""")
    s = load_spec(p)
    assert (s.M.lo, s.M.hi, s.M.multiple_of) == (1, 4096, 8) and s.N.fixed and s.K.hi == 512
    assert (s.dtype_a, s.dtype_out, s.layout_a, s.layout_b, s.layout_c) == ("bf16", "f16", "col", "row", "col")
    assert s.alpha == 2.0 and s.has_c and s.has_bias and s.activation == "gelu"
    assert [c.hard for c in s.constraints] == [True, False]
    tk = s.tile_range("TILE_K")
    assert tk.allows(32) and not tk.allows(40) and not tk.allows(144)


def test_shorthand():
    s = shorthand("128x64x96", "bf16")
    assert s.nominal() == (128, 64, 96) and s.dtype_a == "bf16" and s.layout_b == "col"


@pytest.mark.parametrize("data,key", [
    ({"M": 1, "N": 1}, "'K'"),
    ({"M": 1, "N": 1, "K": 1, "dtype": "f64"}, "'dtype.a'"),
    ({"M": 1, "N": 1, "K": 1, "layout": {"a": "diag"}}, "'layout.a'"),
    ({"M": 0, "N": 1, "K": 1}, "'M'"),
    ({"M": 1, "N": 1, "K": 1, "bogus": 1}, "'bogus'"),
    ({"M": 1, "N": 1, "K": 1, "alpha": "x"}, "'alpha'"),
    ({"M": 1, "N": 1, "K": 1, "epilogue": ["softmax"]}, "'epilogue[0]'"),
    ({"M": 1, "N": 1, "K": 1, "constraints": ["registers_per_thread < 3"]}, "'constraints[0]'"),
    ({"M": 1, "N": 1, "K": 1, "constraints": ["speed <= 3"]}, "'constraints[0]'"),
    ({"M": 1, "N": 1, "K": 1, "tiling": ["TILE_Q in [1, 2]"]}, "'tiling[0]'"),
])
def test_spec_errors_name_the_key(data, key):
    with pytest.raises(UsageError) as e:
        parse_spec(data, "g.yaml")
    msg = str(e.value)
    assert key in msg and "\n" not in msg and msg.startswith("g.yaml")


def test_spec_yaml_syntax_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("M: [1, 2\nN: 3\n")
    with pytest.raises(UsageError, match="bad.yaml"):
        load_spec(p)


# --------------------------------------------------------------------------------------- planner


def test_plan_4096_whole_space_recorded():
    """Planning 4096^3 covers the whole candidate space and records its time (the figure itself,
    under one second, is measured by benchmarks/plan_speed.py: no test fails because the machine
    is slow)."""
    hw = h200_like()
    plan(shorthand("64x64x64"), hw)  # warm caches and imports
    p = plan(shorthand("4096x4096x4096"), hw)
    assert p.seconds > 0 and p.candidates > 1000
    assert p.best.tiling.variant == "mma"
    pred = prediction_dict(p)
    assert pred["cycles"] >= p.best.schedule.min_cycles_per_cta
    assert 0 < pred["utilization"]["tensor"] <= 1


def test_pruning_logged_and_constraints_applied():
    spec = parse_spec({"M": 512, "N": 512, "K": 512, "constraints": ["registers_per_thread <= 64",
                                                                   "shared_memory_per_block <= 16384"],
                       "tiling": ["TILE_K in [32, 64], TILE_K % 32 == 0"]})
    p = plan(spec, h200_like(), "mma")
    assert p.best.registers.per_thread <= 64 and p.best.movement.smem_bytes <= 16384
    assert p.best.tiling.bk in (32, 64)
    assert p.pruned["tiling"] and p.pruned["registers"] and p.pruned["movement"]
    assert any("removed" in line for line in p.log)


def test_soft_constraint_penalises_not_prunes():
    spec = parse_spec({"M": 512, "N": 512, "K": 512, "constraints": ["registers_per_thread ~ 40"]})
    p = plan(spec, h200_like(), "mma")
    assert "registers" not in p.pruned or not any("~" in k for k in p.pruned["registers"])
    assert any(e.penalty > 0 for e in p.survivors)


def test_infeasible_names_binding_constraint():
    spec = parse_spec({"M": 512, "N": 512, "K": 512, "constraints": ["registers_per_thread <= 8"]})
    with pytest.raises(UsageError) as e:
        plan(spec, h200_like(), "mma")
    msg = str(e.value)
    assert "registers_per_thread <= 8" in msg and "nearest candidate" in msg and "relax" in msg


def test_mma_needs_half_inputs():
    with pytest.raises(UsageError, match="variant simt"):
        plan(shorthand("64x64x64", "f32"), h200_like(), "mma")


def test_bank_conflict_score_sees_padding():
    from kernelgen.models.movement import bank_model
    from kernelgen.tiling import Tiling

    spec = shorthand("256x256x256")
    nopad = Tiling("mma", 64, 64, 64, 32, 32, 2, 0, 0, 8, 8)
    pad = Tiling("mma", 64, 64, 64, 32, 32, 2, 8, 8, 8, 8)
    s0, p0, _ = bank_model(spec, nopad, 32, 4)
    s1, p1, _ = bank_model(spec, pad, 32, 4)
    assert s1 < s0 and p1 < p0  # 128-byte rows: ldmatrix rows collide without padding


# ------------------------------------------------------------------------ ptxas + register model

EXTRA = [{}, {"beta": 0.5, "epilogue": ["bias", "gelu"], "layout": {"a": "col", "b": "row", "c": "col"}}]


def _ptxas(ptx: str, tmp_path) -> tuple[int, str]:
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(re.search(r"Used (\d+) registers", r.stderr).group(1)), r.stderr


# the default run keeps the odd shape (edges on every side) and half of its variant x dtype x EXTRA cases, chosen
# so that each variant meets both EXTRAs and each 16-bit dtype both EXTRAs and both variants; the others run with
# the slow set (each case plans on three hwconfigs, emits and assembles: 2-5 s of CPU)
DEFAULT_NO_SPILL = {("simt", "f32", 0), ("simt", "f16", 1), ("simt", "bf16", 0), ("mma", "f16", 0), ("mma", "bf16", 1)}


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
# wgmma's ptxas/no-spill coverage is tests/test_kernelgen_wgmma.py (its tilings; sm_90a only)
@pytest.mark.parametrize("shape,variant,dtype,extra", [
    pytest.param(s, v, d, e, marks=() if s == (33, 17, 40) and (v, d, e) in DEFAULT_NO_SPILL else pytest.mark.slow,
                 id=f"{'x'.join(map(str, s))}-{v}-{d}-{e}")
    for s in SHAPES for v, d in VARIANTS if v != "wgmma" for e in range(len(EXTRA))])
def test_kernel_assembles_no_spill_registers_predicted(shape, variant, dtype, extra, tmp_path):
    M, N, K = shape
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": dtype, **EXTRA[extra]})
    for hw in hw_configs():
        p = plan(spec, hw, variant)
        pred = prediction_dict(p)
        ptx = get(variant).emit(spec, p.best.tiling, pred)
        assert ptx.startswith("// @workbench {")
        meta = json.loads(ptx.splitlines()[0].split("@workbench ", 1)[1])
        assert meta["block"][0] == p.best.tiling.threads and meta["prediction"]["cycles"] == pred["cycles"]
        regs, log = _ptxas(ptx, tmp_path)
        assert "0 bytes spill stores" in log and "0 bytes spill loads" in log
        predicted = p.best.registers.per_thread
        assert abs(predicted - regs) <= 0.1 * regs, f"{hw.name} {p.best.tiling.key()}: {predicted} vs {regs}"


# -------------------------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_writes_four_files(tmp_path, monkeypatch):
    import kernelgen.cli as cli

    monkeypatch.setattr("sim.hw.load_hw", lambda name: h200_like())
    out = tmp_path / "out"
    rc = cli.main(["compile", "--hw", "h200", "--gemm", "128x64x96", "--dtype", "bf16", "-o", str(out),
                   "--verbose"])
    assert rc == 0
    assert sorted(x.name for x in out.iterdir()) == ["analysis.md", "candidates.csv", "kernel.ptx", "plan.json"]
    pj = json.loads((out / "plan.json").read_text())
    for k in ("cycles", "registers_per_thread", "utilization"):
        assert k in pj["prediction"]
    assert pj["search"]["seconds"] >= 0 and pj["search"]["candidates"] > 0
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in (out / "kernel.ptx").read_text()
    assert (out / "candidates.csv").read_text().startswith("key,variant")


def test_cli_error_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sim.hw.load_hw", lambda name: h200_like())
    spec = tmp_path / "g.yaml"
    spec.write_text("M: 64\nN: 64\nK: 64\nconstraints: [registers_per_thread <= 4]\n")
    out = tmp_path / "out"
    rc = main(["compile", "--hw", "h200", "--op", str(spec), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "registers_per_thread <= 4" in err
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())
    rc = main(["compile", "--hw", "h200", "--gemm", "64x64", "-o", str(out)])
    assert rc == 2 and not out.exists()


@pytest.mark.parametrize("example", ["gemm_f16.yaml", "gemm_bf16_epilogue.yaml", "gemm_family.yaml"])
def test_examples_plan(example):
    from pathlib import Path

    spec = load_spec(Path(__file__).parent.parent / "examples" / example)
    p = plan(spec, h200_like())
    assert p.best.cycles > 0


# --- instruction counts, --profile, PAD / UNROLL_K -------------------------------------------------

def _regions(ptx):
    from sim.ptx.parser import parse_ptx

    k = next(iter(parse_ptx(ptx, "k.ptx").kernels.values()))
    lo = hi = None
    for ins in k.body:
        if ins.opcode == "bra":
            lab = next((o.name for o in ins.operands if o.kind == "label"), None)
            if k.labels[lab] <= ins.index and (lo is None or k.labels[lab] < lo):
                lo, hi = k.labels[lab], ins.index
    out = {"pre": {}, "iter": {}, "post": {}}
    for ins in k.body:
        r = "pre" if ins.index < lo else ("iter" if ins.index <= hi else "post")
        out[r][ins.pipe] = out[r].get(ins.pipe, 0) + 1
    regs = sum((2 if t.endswith("64") else 1) for t in k.regs.values() if t != "pred")
    return out, regs


@pytest.mark.parametrize("variant,dtype,extra", [("simt", "f32", {}), ("simt", "bf16", {"beta": 0.5}),
                                                 ("mma", "f16", {}), ("mma", "bf16", {
                                                     "epilogue": ["bias", "gelu"],
                                                     "layout": {"a": "col", "b": "row", "c": "col"}})])
def test_counts_match_parsed_ptx(variant, dtype, extra):
    import random

    spec = parse_spec({"M": 40, "N": 24, "K": 48, "dtype": dtype, **extra})
    random.seed(3)
    v = get(variant)
    for t in random.sample(v.tilings(spec), 5):
        got, regs = _regions(v.emit(spec, t, {}))
        c = v.counts(spec, t)
        for r in ("pre", "iter", "post"):
            assert got[r] == {k: v for k, v in getattr(c, r).items() if v}, (t.key(), r)
        assert regs == c.ptx_regs, t.key()


def test_spec_pad_and_unroll_k():
    from kernelgen.planner import plan
    from kernelgen.spec import parse_spec
    from sim.hw import load_hw

    hw = load_hw("npu7nm")
    spec = parse_spec({"M": 64, "N": 64, "K": 256, "dtype": "f16",
                       "tiling": ["PAD in [0, 0]", "UNROLL_K in [1, 1]", "TILE_K in [64, 64]"]})
    p = plan(spec, hw, "mma")
    assert p.best.tiling.pad_a == 0 and p.best.tiling.unroll == 1 and p.best.tiling.k_steps == 4
    assert all(e.tiling.pad_a == 0 and e.tiling.unroll == 1 for e in p.survivors)
    with pytest.raises(UsageError, match="tiling"):
        parse_spec({"M": 1, "N": 1, "K": 1, "tiling": ["UNROLL_K in [0, 1]"]})


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("variant,extra", [("mma", []), ("simt", []), ("mma", ["--op"])])
def test_profile_kernel(tmp_path, variant, extra):
    import json
    import subprocess
    import sys

    import numpy as np

    out = tmp_path / "k"
    if extra:  # rolled inner loop + profile
        op = tmp_path / "op.yaml"
        op.write_text("M: 32\nN: 16\nK: 128\ndtype: f16\ntiling:\n  - UNROLL_K in [1, 1]\n  - TILE_K in [64, 64]\n"
                      "  - PAD in [0, 0]\n")
        src = ["--op", str(op)]
    else:
        src = ["--gemm", "33x17x40"]
    r = subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", *src, "--variant", variant,
                        "--profile", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ptx = out / "kernel.ptx"
    a = subprocess.run(["ptxas", "-arch=sm_90a", str(ptx), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                       text=True)
    assert a.returncode == 0, a.stderr
    meta = json.loads(ptx.read_text().splitlines()[0].split("@workbench", 1)[1])
    prof = meta["profile"]
    assert prof["slots"] == 4 and meta["params"][prof["param"]]["role"] == "profile"
    s = subprocess.run([sys.executable, "-m", "sim", "run", str(ptx), "--hw", "h200", "--out", str(tmp_path / "run"),
                        "--json"], capture_output=True, text=True)
    assert s.returncode == 0, s.stderr
    res = json.loads(s.stdout)
    assert res["check"]["passed"]
    buf = np.load(tmp_path / "run" / f"arg{prof['param']}.npy").astype(np.int64).reshape(-1, 4)
    assert buf.shape[0] == meta["grid"][0] * meta["grid"][1]
    assert (np.diff(buf, axis=1) > 0).all()
    # per CTA (index = ctaid.y * nctaid.x + ctaid.x = launch order): span within 10% of the simulator's
    spans = (buf[:, 3] - buf[:, 0]).tolist()
    for got, want in zip(spans, res["cycles_per_cta"]):
        assert abs(got - want) <= 0.1 * want, (spans, res["cycles_per_cta"])


def test_simt_copy_latencies_follow_the_l1_lines():
    """h200 16x16x16 f16, t1x1 (256 threads): each 128-byte line holds 4 rows of 32 bytes, two warps' worth,
    so every warp waits DRAM for one copy and the L1 for the other (the simulator's trace shows exactly
    this: warp 0 misses on A and hits on B, warp 1 the other way round)."""
    from kernelgen.models.l1lines import copy_line_latencies
    from kernelgen.tiling import operand_tiles
    from sim.hw import load_hw

    hw = load_hw("h200")
    spec = shorthand("16x16x16", "f16", "f32")
    from kernelgen.tiling import Tiling

    # the 16x16x16 t1x1 tiling (the planner's pick before the copy-chain change; it now picks t1x2)
    t = Tiling("simt", 16, 16, 16, 1, 1, 1, 4, 4, 1, 1)
    assert hw.l1 is not None
    tiles = operand_tiles(spec, t)
    geo = tuple((x.rows, x.cols, x.vec, x.chunks_per_row, x.elem_global, x.col_dim == "k") for x in tiles)
    ext = {"m": 16, "n": 16, "k": 16}
    lims = tuple((ext[x.col_dim], ext[x.row_dim], ext[x.col_dim]) for x in tiles)
    (first, _), = copy_line_latencies(geo, t.threads, 32, lims, t.bk, 1, 128, 64, 4, 682.0, 278.0, 33.0)
    assert t.threads == 256 and sorted(first) == [33.0, 682.0]


def test_impossible_variant_names_the_alternative_once():
    """A variant's own reason may already say which variant to use (wgmma_tma on an s8 GEMM with K % 16: "...; use
    --variant mma"); the planner's hint is not appended a second time. Without one, the planner adds it, naming
    opt-in variants too (an fp8 spec on wgmma_tma: wgmma_fp8)."""
    from sim.hw import load_hw

    with pytest.raises(UsageError) as e:
        plan(shorthand("1000x520x264", "s8", "s32"), load_hw("h200"), "wgmma_tma")
    assert str(e.value).count("use --variant") == 1 and "use --variant mma" in str(e.value)
    with pytest.raises(UsageError) as e:
        plan(shorthand("64x64x64", "e4m3", "bf16"), load_hw("h200"), "wgmma_tma")
    assert str(e.value).endswith("; use --variant wgmma_fp8"), str(e.value)  # opt-in variants are named too


def test_infeasible_tiling_range_names_the_range_no_candidate_meets(tmp_path, capsys):
    """codegen --tile-k 64 on the fp8 variant (its K tile is one 128-wide scale block): the range that no candidate
    meets is named with the values the candidates have, not whichever range each candidate failed first (it said
    "TILE_M in [128, 128], but the nearest candidate (...64x64...) needs 64 value")."""
    args = ["codegen", "--hw", "h200", "--gemm", "256x256x256", "--tile-m", "128", "--tile-n", "128", "--tile-k",
            "64", "--dtype", "e4m3", "--out-dtype", "bf16", "--variant", "wgmma_fp8", "-o", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("no feasible kernel: TILE_K in [64, 64], but no wgmma_fp8 candidate has such a TILE_K (they "
                   "have 128): relax it"), err
    assert not (tmp_path / "o").exists()


def test_infeasible_tiling_ranges_name_the_nearest_candidate():
    """Each range alone is met (TILE_M 256, TILE_N 256 both exist) but not together: the nearest candidate is the
    one whose TILE_M lies closest to the range, and among those the one that misses fewest ranges (128x256),
    said as "has TILE_M = 128"."""
    from sim.hw import load_hw

    spec = parse_spec({"M": 512, "N": 512, "K": 512, "dtype": "e4m3", "scale": "block128",
                       "tiling": ["TILE_M in [256, 256]", "TILE_N in [256, 256]"]})
    with pytest.raises(UsageError) as e:
        plan(spec, load_hw("h200"), "wgmma_fp8")
    assert str(e.value) == ("no feasible kernel: TILE_M in [256, 256], but the nearest candidate "
                            "(wgmma_fp8_128x256x128_t64x256_s3_p0.0_v16.16_k32) has TILE_M = 128: relax it, or "
                            "widen the tiling ranges"), str(e.value)
