"""The planner's per-tile memos give every tiling what its own uncached model gives: the data-movement
model's figures shared by the tilings of one movement.tile_key (all but the stages and unroll_k; those that
read no pad by the tilings that differ only in their pads too), the registers layer's estimate shared by the
tilings of one planner.register_key (all but the stages and pads), the
analytic bound's stage-free parts (models/bound.py _parts), the ALU scheduling layer's work per pipe
(models/schedule.py _work) and the copies' bank score computed with numpy
(movement._copy_banks_np) against site_score copy by copy (_copy_banks_py). Both hwconfigs and the seed's
hardware.yaml with the seed's gemm.dgemm (non-power-of-two tiles, blocked layouts: copies that are not
linear)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import kernelgen.models.bound as bound
import kernelgen.models.movement as mv
import kernelgen.models.schedule as sch
from kernelgen.cli import load_any_spec
from kernelgen.models.registers import RegisterEstimate, estimate
from kernelgen.models.schedule import schedule
from kernelgen.planner import enumerate_tilings, register_key
from kernelgen.spec import GemmSpec, parse_spec, shorthand
from kernelgen.tiling import OperandTile, Tiling, operand_tiles
from kernelgen.variants import get, names
from sim.hw import HwConfig, load_hw

SEEDS = Path(__file__).resolve().parent.parent / "examples/seeds"


def _seed() -> tuple[GemmSpec, HwConfig]:
    spec, hw, _ = load_any_spec(str(SEEDS / "hardware.yaml"), str(SEEDS / "gemm.dgemm"), None, "f16", "f16", None,
                                "4096x4096x4096")
    return spec, hw


@cache
def _case(i: int) -> tuple[str, GemmSpec, HwConfig]:
    """Case i, loaded once and only when a test asks for it."""
    if i == 4:
        return ("seed", *_seed())
    if i == 3:
        col_a = parse_spec({"M": 1024, "N": 768, "K": 512, "beta": 1.0,
                            "layout": {"a": "col", "b": "row", "c": "row"}})
        return ("npu7nm col-A beta", col_a, load_hw("npu7nm"))
    return [("h200 f16", shorthand("4096x4096x4096"), load_hw("h200")),
            ("npu7nm bf16", shorthand("1000x520x264", "bf16"), load_hw("npu7nm")),
            ("h200 col-A f32", parse_spec({"M": 512, "N": 384, "K": 1000, "dtype": "f32"}), load_hw("h200"))][i]


def _tilings(case: int, every: int) -> list[Tiling]:
    """Every tiling of each tile key of every `every`-th tile key (all their stages and unrolls)."""
    ts = _space(case)
    keys = sorted({mv.tile_key(t) for t in ts}, key=repr)[::every]
    chosen = set(keys)
    return [t for t in ts if mv.tile_key(t) in chosen]


def _fresh_movement(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> mv.Movement:
    mv._PER_TILE.clear()
    mv._PAD_FREE.clear()
    return mv.movement(spec, t, hw, shape)


def _check_memos(case: int, every: int) -> None:
    name, spec, hw = _case(case)
    shape = spec.nominal()
    ts = _tilings(case, every)
    mv._PER_TILE.clear()
    mv._PAD_FREE.clear()
    bound._PARTS.clear()
    bound._PARTS_FREE.clear()
    shared = [mv.movement(spec, t, hw, shape) for t in ts]
    first: dict[tuple[object, ...], RegisterEstimate] = {}  # the planner's registers memo (register_key)
    for t in ts:
        e = first.setdefault(register_key(t), estimate(spec, t, hw.limits.regs_per_thread))
        assert e == estimate(spec, t, hw.limits.regs_per_thread), (name, t.key())
    regs = [first[register_key(t)].per_thread for t in ts]
    args = [(spec, t, hw, shape, m.smem_bytes, m.dram_cycles, 1.0 - m.l2_hit_rate, r)
            for t, m, r in zip(ts, shared, regs)]
    b_shared = [bound.analytic_bound(*a) for a in args]
    s_shared = [schedule(spec, t, hw, shape, r, m.smem_bytes) for t, m, r in zip(ts, shared, regs)]
    for t, m, a, b, sc, r in zip(ts, shared, args, b_shared, s_shared, regs):
        assert m == _fresh_movement(spec, t, hw, shape), (name, t.key())
        bound._PARTS.clear()
        bound._PARTS_FREE.clear()
        bound._OCC.clear()
        assert b == bound.analytic_bound(*a), (name, t.key())
        sch._WORK.clear()
        assert sc == schedule(spec, t, hw, shape, r, m.smem_bytes), (name, t.key())
    assert len({t.stages for t in ts}) > 1 or case == 2  # (case 2: f32, SIMT only: one stage)


@pytest.mark.parametrize("case", range(5))
def test_movement_and_bound_memos_equal_the_uncached_models(case: int) -> None:
    """movement(), analytic_bound() and schedule() with their memos shared by the tilings of a tile key (stages
    and unroll_k apart) equal the same models with the memos emptied before each tiling (every 60th tile key
    of each case: all its tilings; tests/test_plan_bound.py checks the bound against the cycles)."""
    _check_memos(case, 60)


@pytest.mark.slow
@pytest.mark.parametrize("case", range(5))
def test_movement_and_bound_memos_on_whole_spaces(case: int) -> None:
    """The same over every tile key (~2-5 s a case)."""
    _check_memos(case, 1)


@cache
def _space(case: int) -> list[Tiling]:
    _, spec, hw = _case(case)
    return [t for v in names() if not get(v).unavailable(spec, hw) for t in enumerate_tilings(spec, v)]


def _tiles(case: int) -> list[tuple[object, int]]:
    spec = _case(case)[1]
    out = {(x, t.threads) for t in _space(case) for x in operand_tiles(spec, t)}
    return sorted(out, key=repr)


def _check_copy_banks(case: int, every: int) -> None:
    tiles = _tiles(case)
    nonlinear = [(x, T) for x, T in tiles if not x.linear_copies(T)]  # type: ignore[attr-defined]
    linear = [(x, T) for x, T in tiles if x.linear_copies(T)]  # type: ignore[attr-defined]
    checked = 0
    for x, T in nonlinear[::every] + linear[::4 * every]:
        for banks, width in ((32, 4), (16, 4), (64, 4), (32, 8)):
            lanes = min(32, T)
            w = x.vec * x.elem_shared if not x.f32 else x.elem_shared  # type: ignore[attr-defined]
            if lanes % min(lanes, 8 if w >= 16 else (16 if w == 8 else 32)):
                continue
            assert mv._copy_banks_np(x, T, banks, width) == mv._copy_banks_py(x, T, banks, width), (x, T)  # type: ignore[arg-type]
            checked += 1
    assert checked >= 8
    if case == 4:
        assert nonlinear, "the seed spec has copies that are not linear: the numpy path is exercised"


@pytest.mark.parametrize("case", range(5))
def test_copy_banks_numpy_equals_site_scores(case: int) -> None:
    """_copy_banks_np gives site_score's (score, passes, accesses) summed copy by copy, exactly, for the
    copies that are not linear (where _copy_banks uses it) and the linear ones, with [shared.banks] 16,
    32 and 64 and 4- or 8-byte banks (every 16th tile that is not linear, every 64th linear one)."""
    _check_copy_banks(case, 16)


@pytest.mark.slow
@pytest.mark.parametrize("case", range(5))
def test_copy_banks_numpy_on_every_tile(case: int) -> None:
    _check_copy_banks(case, 1)


@pytest.mark.parametrize("case", range(5))
def test_ldmatrix_banks_by_shared_row_equal_each_tiles_own(case: int) -> None:
    """mma._ldmatrix_banks, memoised by the shared row the lanes' addresses read (operand, orientation, row
    elements with the pad, element bytes), == site_score of each operand tile's own ldmatrix addresses."""
    from kernelgen.variants import mma

    _, spec, hw = _case(case)
    if get("mma").unavailable(spec, hw):
        pytest.skip("no mma on this case")
    tiles = {x for t in mma.VARIANT.tilings(spec) for x in operand_tiles(spec, t)}
    for x in tiles:
        assert mma._ldmatrix_banks(x, hw.shared.banks, hw.shared.bank_width) == \
            mma._ldmatrix_score(x, hw.shared.banks, hw.shared.bank_width), x


def test_frozen_makes_the_constructors_instance() -> None:
    """kernelgen.models.frozen (the planner's Movement, Schedule, SyncPlan per candidate, mma's Tilings) == the
    dataclass's own constructor: equal, same hash, repr and fields, still frozen; a wrong field count is refused."""
    import dataclasses

    from kernelgen.models import frozen
    from kernelgen.models.movement import Movement
    from kernelgen.models.schedule import Schedule
    from kernelgen.models.sync import SyncPlan

    _, spec, hw = _case(1)
    t = get("mma").tilings(spec)[0]
    mv_ = mv.movement(spec, t, hw, spec.nominal())
    s = schedule(spec, t, hw, spec.nominal(), 128, mv_.smem_bytes)
    y = get("mma").sync_plan(t, 8, 20, 300.0, 50.0, 2)
    for x in (mv_, s, y, t):  # t: mma.tilings makes its Tilings with frozen too
        values = tuple(getattr(x, f.name) for f in dataclasses.fields(x))
        a, b = frozen(type(x), *values), type(x)(*values)
        assert a == b and repr(a) == repr(b) and type(a) is type(b)
        if x is not s:  # Schedule holds a dict: no hash
            assert hash(a) == hash(b)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.__setattr__(dataclasses.fields(a)[0].name, 0)
    with pytest.raises(TypeError):
        frozen(SyncPlan, 1, 2)
    assert isinstance(s, Schedule) and isinstance(mv_, Movement)


def test_site_score_over_touched_banks_equals_the_sum_over_every_bank() -> None:
    """movement.site_score with power-of-two banks (sum c^2 - words^2 / banks over the banks a phase touches)
    == _site_score_banks (sum of (c - mean)^2 over every bank), bit for bit: random lanes' addresses of every
    access width, broadcasts, strides that conflict, and the copies and ldmatrix rows of the seed's tiles."""
    import random

    from kernelgen.tiling import Site, copy_sites

    rng = random.Random(15)
    sites = []
    for width in (2, 4, 8, 16):
        for stride in (1, 2, 4, 8, 16, 17, 32, 64, 128, 144):
            sites.append(Site("", "st", width, tuple(width * l * stride for l in range(32)), 1))
        for _ in range(40):
            sites.append(Site("", "ld", width, tuple(rng.randrange(0, 4096) // width * width for _ in range(32)), 1))
        sites.append(Site("", "ld", width, (64,) * 32, 1))
    _, spec, hw = _case(4)
    for x, threads in _tiles(4)[::25]:
        sites += copy_sites(x, threads)  # type: ignore[arg-type]
    for site in sites:
        for banks, bw in ((32, 4), (64, 4), (16, 8), (8, 4)):
            assert mv.site_score(site, banks, bw) == mv._site_score_banks(site, banks, bw), (site, banks, bw)
    assert mv.site_score(sites[0], 24, 4) == mv._site_score_banks(sites[0], 24, 4)  # not a power of two: that path


def _copy_banks_by_shared_offset(x: object, T: int, banks: int, width: int) -> tuple[float, int, int]:
    """_copy_banks_py of a linear tile as it was written before its offsets were inlined: each copy's offset from
    OperandTile.shared_offset(*chunk_coords(...))."""
    n = x.chunks // T  # type: ignore[attr-defined]
    w = x.vec * x.elem_shared if not x.f32 else x.elem_shared  # type: ignore[attr-defined]
    base = tuple(x.shared_offset(*x.chunk_coords(l, 0, T)) for l in range(min(32, T)))  # type: ignore[attr-defined]
    score, passes, acc = 0.0, 0, 0
    for i in range(n):
        imm = x.shared_offset(*x.chunk_coords(0, i, T)) % (banks * width)  # type: ignore[attr-defined]
        sc, ps, ph = mv._shifted_site("st", w, tuple(a + imm for a in base), banks, width)
        score, passes, acc = score + sc, passes + ps, acc + ph
    return score, passes, acc


@pytest.mark.parametrize("case", [2, 3, 4])
def test_copy_banks_inline_offsets_equal_shared_offset(case: int) -> None:
    """_copy_banks_py's inlined offsets of linear copies (f32 tiles stored [k][mn] both ways, 16-bit tiles, pads)
    give the figures of OperandTile.shared_offset copy by copy, at a power-of-two bank count and another."""
    linear = [(x, T) for x, T in _tiles(case) if x.linear_copies(T)][::3]  # type: ignore[attr-defined]
    assert len(linear) >= 10
    # SIMT stores f32 [k][mn]: a tile whose global columns are K swaps (row, col), the others do not
    kinds = {(x.f32, x.col_dim == "k") for x, _ in linear}  # type: ignore[attr-defined]
    assert kinds >= {(True, True)} if case == 2 else kinds >= {(True, case == 4), (True, False), (False, False)}
    for x, T in linear:
        for banks, width in ((32, 4), (24, 4)):
            assert mv._copy_banks_py(x, T, banks, width) == _copy_banks_by_shared_offset(x, T, banks, width), (x, T)  # type: ignore[arg-type]


def test_operand_tile_hash_is_the_dataclass_hash() -> None:
    """OperandTile keeps its hash (the movement and bound memos are keyed by tiles): the hash of its fields'
    tuple, as the frozen dataclass's own; equal tiles made apart hash and compare equal."""
    from dataclasses import fields

    tiles = _tiles(4)[::40]
    for x, _ in tiles:
        assert hash(x) == hash(tuple(getattr(x, f.name) for f in fields(x))) == hash(x)  # type: ignore[arg-type]
    a = OperandTile("a", 64, 32, "m", "k", 8, 8, 2, 2, False, 64)
    a2 = OperandTile("a", 64, 32, "m", "k", 8, 8, 2, 2, False, 64)
    hash(a)
    assert a is not a2 and a == a2 and hash(a) == hash(a2) and repr(a) == repr(a2)
    assert a != OperandTile("a", 64, 32, "m", "k", 8, 0, 2, 2, False, 64)


@pytest.mark.parametrize("case", range(5))
def test_operand_tiles_by_what_they_read_equal_each_tilings_own(case: int) -> None:
    """operand_tiles shares one pair among the tilings that differ only in what it does not read (stages, warp
    tiles, unroll): each tiling's pair equals the one written out from the tiling itself."""
    from kernelgen.spec import DTYPE_BYTES
    from sim.layouts import parse_layout

    _, spec, _ = _case(case)
    ts = _space(case)
    for t in ts[::7]:
        f32 = get(t.variant).shared_f32
        es, sh = DTYPE_BYTES[spec.dtype_a], 4 if get(t.variant).shared_f32 else DTYPE_BYTES[spec.dtype_a]
        a = (OperandTile("a", t.bm, t.bk, "m", "k", t.vec_a, t.pad_a, es, sh, f32, t.bm)
             if parse_layout(spec.layout_a).row_like else
             OperandTile("a", t.bk, t.bm, "k", "m", t.vec_a, t.pad_a, es, sh, f32, t.bm))
        b = (OperandTile("b", t.bk, t.bn, "k", "n", t.vec_b, t.pad_b, es, sh, f32, t.bn)
             if parse_layout(spec.layout_b).row_like else
             OperandTile("b", t.bn, t.bk, "n", "k", t.vec_b, t.pad_b, es, sh, f32, t.bn))
        assert operand_tiles(spec, t) == (a, b), t.key()


def test_search_clock_starts_after_the_variants_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan.seconds times the search, not loading the variant plug-ins: every variant is asked (get: its module
    imported) before the planner reads its clock."""
    import kernelgen.planner as planner

    events: list[str] = []
    real_get = planner.get

    def get(name: str) -> object:
        events.append(name)
        return real_get(name)

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            events.append("clock")
            return 0.0

    spec, hw = shorthand("128x64x32"), load_hw("h200")
    only = enumerate_tilings(spec, "mma")[:1]  # one candidate: the variants are resolved all the same
    monkeypatch.setattr(planner, "get", get)
    monkeypatch.setattr(planner, "time", Clock)
    planner.plan(spec, hw, only=only, exhaustive=False)
    assert "clock" in events and set(names()) <= set(events[:events.index("clock")])


@pytest.mark.parametrize("case", [0, 3, 4])
def test_schedule_work_memo_by_pad_free_key_equals_the_uncached_model(case: int) -> None:
    """schedule()'s work memo is shared by the tilings that differ only in their stages, unroll_k and pads
    (movement._pad_free_key): every 40th such key, all its tilings, against schedule() with the memo emptied."""
    _, spec, hw = _case(case)
    shape = spec.nominal()
    ts = _space(case)
    keys = set(sorted({mv._pad_free_key(t) for t in ts}, key=repr)[::40])
    ts = [t for t in ts if mv._pad_free_key(t) in keys]
    assert len({(t.pad_a, t.pad_b) for t in ts}) > 1
    sch._WORK.clear()
    shared = [schedule(spec, t, hw, shape, 64, 16384) for t in ts]
    for t, s in zip(ts, shared):
        sch._WORK.clear()
        assert s == schedule(spec, t, hw, shape, 64, 16384), t.key()


def test_variant_of_is_the_registry() -> None:
    """tiling.variant_of (the registry imported once, for the per-candidate calls below the variants package)
    gives what kernelgen.variants.get gives, and refuses an unknown name the same way."""
    from kernelgen.tiling import variant_of

    for n in names():
        assert variant_of(n) is get(n)
    with pytest.raises(KeyError):
        variant_of("nope")
