"""The planner's speed-ups keep every result bit for bit: the L1 line walk shared by several sharer
settings (kernelgen.models.l1lines) gives each the result of its own walk, on the shared path and on
the path where warp orders part; and two whole plans (every survivor's repr with cycles and terms, the
pruning, candidates.csv) hash to what they did before the speed-ups (commit 00e8f8c). A change that
moves a prediction on purpose updates the digests here (and says why); benchmarks/plan_compare.py
compares 16 cases the same way."""

from __future__ import annotations

import hashlib

import pytest

import kernelgen.models.l1lines as l1lines
from kernelgen.planner import enumerate_tilings, plan
from kernelgen.report import candidates_csv
from kernelgen.spec import shorthand
from kernelgen.tiling import operand_tiles
from sim.hw import load_hw


def test_shared_walk_equals_own_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = shorthand("1000x520x264", "f16")
    ext = {"m": 1000, "n": 520, "k": 264}
    walk, alone = l1lines._walk, [0]

    def counted(*a: object) -> list:
        alone[0] += len(a[-1]) == 1  # type: ignore[arg-type]
        return walk(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(l1lines, "_walk", counted)
    l1lines.copy_line_latencies.cache_clear()
    settings = (((1, 1), (1, 1)), ((1, 64), (1, 2)), ((64, 1), (8, 1)), ((1 << 20, 1 << 20), (1 << 20, 1 << 20)))
    checked = parted = 0
    for variant in ("simt", "mma"):
        for t in enumerate_tilings(spec, variant)[::9]:
            tiles = operand_tiles(spec, t)
            geo = tuple((x.rows, x.cols, x.vec, x.chunks_per_row, x.elem_global, x.col_dim == "k") for x in tiles)
            lims = tuple((ext[x.col_dim], ext[x.row_dim], ext[x.col_dim]) for x in tiles)
            args = (geo, t.threads, 32, lims, t.bk, 9, 128, 64, 4, 682.0, 278.0, 33.0)
            before = alone[0]
            both = l1lines.copy_line_latencies(*args, settings)
            parted += alone[0] - before
            own = tuple(l1lines.copy_line_latencies(*args, (s,))[0] for s in settings)
            assert both == own, t.key()
            checked += 1
    assert checked > 50
    assert parted, "no walk parted: the split path is not exercised"


# sha256 of the plan dump below: 00e8f8c's plans (before the speed-ups) as the merged tree of 2026-12-01
# prints them (Tiling gained mma_k, the s8 mma K step; wgmma tilings count one fence.proxy.async more)
DIGESTS = {
    ("h200", "1000x520x264", "f16"): "052b9918e4f3b55def5c2f58028a229f900af0927372e5a9a4ee327073de42fa",
    ("npu7nm", "128x64x32", "bf16"): "8685b09b9a2dd48fc6eca3197cbeb902428f7251397181b5f1599fce4df05adc",
}


@pytest.mark.parametrize(("hwname", "shape", "dtype"), list(DIGESTS))
def test_plan_bit_identical(hwname: str, shape: str, dtype: str) -> None:
    p = plan(shorthand(shape, dtype), load_hw(hwname))
    dump = "\n".join([repr(p.pruned)] + [repr(ev) for ev in p.survivors] + [candidates_csv(p)])
    assert hashlib.sha256(dump.encode()).hexdigest() == DIGESTS[hwname, shape, dtype], \
        f"{hwname} {shape} {dtype}: the plan moved; compare with benchmarks/plan_compare.py against 00e8f8c"
