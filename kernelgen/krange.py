"""Partition a K range into intervals, each served by its best variant (tiling), for a fat module.

K in [lo, hi] is cut into log-linear buckets of x = K - lo (``bucket_of``): one bucket per value below
2*S, then S buckets per octave (S = 2**sub, 8 by default: a bucket spans at most 1/8 of its K), so the
dispatch is O(1) (a bit length, a shift, a table index) and small K keep a fine grid. Steps:

1. anchors: a full plan (every tiling of every variant) at a few bucket ends spread in log K; the best
   ``PER_ANCHOR`` tilings of each become the candidates;
2. the candidates' predicted cycles at every bucket's upper end (``plan(only=candidates)``);
3. greedy choice: start with the candidate of least mean predicted slowdown against the best candidate
   per bucket (buckets weigh alike: K log-uniform over the range, as the buckets are), add the
   candidate that lowers that mean the most, stop when the next one gains less than ``threshold``
   (relative) or at ``max_variants``;
4. each bucket takes the chosen candidate of least predicted cycles at its upper end: the dispatch
   table; runs of equal entries are the intervals; each boundary keeps the neighbours' cycles on both
   sides, which is why it sits there.

A kernel takes K as a runtime parameter and zero-fills the last K tile, so a variant serves every K of
its intervals; the K alignment it may assume is the spec's ``multiple_of`` (never one K's divisors).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from kernelgen.planner import Evaluated, plan
from kernelgen.spec import Dim, GemmSpec
from kernelgen.tiling import Tiling
from sim.errors import UsageError
from sim.hw import HwConfig

SUB_BITS = 3
ANCHORS = 6
PER_ANCHOR = 3
THRESHOLD = 0.02
MAX_VARIANTS = 8


@dataclass(frozen=True)
class Step:
    """One greedy step: adding ``key`` brings the mean predicted slowdown to ``slowdown``."""
    key: str
    slowdown: float
    gain: float  # relative drop of the mean slowdown; the first step's is 0
    taken: bool


@dataclass(frozen=True)
class Boundary:
    """Dispatch changes from variant ``left`` to ``right`` at K = ``k`` (the first K of ``right``)."""
    k: int
    left: int
    right: int
    at_left: tuple[int, int, int]  # (K, cycles of left, cycles of right) at the last bucket of left
    at_right: tuple[int, int, int]  # the same at the first bucket of right


@dataclass
class Partition:
    spec: GemmSpec
    lo: int
    hi: int
    sub: int  # log2 of the buckets per octave
    samples: list[int]  # each bucket's upper end
    candidates: list[Tiling]
    cycles: list[list[int | None]]  # [candidate][bucket]; None: the candidate is infeasible there
    chosen: list[int]  # candidate indices, variant i = candidates[chosen[i]]
    table: list[int]  # bucket -> variant index
    steps: list[Step]
    threshold: float
    boundaries: list[Boundary] = field(default_factory=list)

    def intervals(self) -> list[tuple[int, int, int]]:
        """(K lo, K hi, variant) runs of the table."""
        out: list[tuple[int, int, int]] = []
        for b, v in enumerate(self.table):
            k0, k1 = self.bucket_range(b)
            if out and out[-1][2] == v:
                out[-1] = (out[-1][0], k1, v)
            else:
                out.append((k0, k1, v))
        return out

    def bucket_range(self, b: int) -> tuple[int, int]:
        x0, x1 = bucket_span(b, self.sub)
        return self.lo + x0, min(self.hi, self.lo + x1)

    def dispatch(self, k: int) -> int:
        return self.table[bucket_of(k - self.lo, self.sub)]

    def to_json(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "buckets": len(self.table), "sub_bits": self.sub,
                "candidates": [t.key() for t in self.candidates],
                "steps": [dataclasses.asdict(s) for s in self.steps],
                "intervals": [list(iv) for iv in self.intervals()],
                "boundaries": [dataclasses.asdict(b) for b in self.boundaries],
                "cycles": {"K": self.samples,
                           "by_candidate": {t.key(): row for t, row in zip(self.candidates, self.cycles)}}}


def bucket_of(x: int, sub: int) -> int:
    """The bucket of offset x = K - lo >= 0: x itself below 2**sub, else sub-buckets of its octave."""
    if x < 1 << sub:
        return x
    e = x.bit_length() - sub
    return (e << sub) + (x >> (e - 1)) - (1 << sub)


def bucket_span(b: int, sub: int) -> tuple[int, int]:
    """The first and last offset of bucket b (the inverse of bucket_of)."""
    s = 1 << sub
    if b < 2 * s:
        return b, b
    e, r = b >> sub, b & (s - 1)
    return (s + r) << (e - 1), ((s + r + 1) << (e - 1)) - 1


def spec_at(spec: GemmSpec, k: int) -> GemmSpec:
    """The spec planned at K = k: a range ending at k, so that alignment stays the range's multiple_of."""
    if spec.K.fixed:
        return spec
    lo = spec.K.lo if k > spec.K.lo else max(1, k - 1)
    return dataclasses.replace(spec, K=Dim(lo, k, spec.K.multiple_of))


def spec_for(spec: GemmSpec, lo: int, hi: int) -> GemmSpec:
    """The spec of a variant serving K in [lo, hi] (prediction at hi)."""
    return dataclasses.replace(spec, K=Dim(lo, hi, spec.K.multiple_of) if hi > lo else spec_at(spec, hi).K)


def _anchor_indices(samples: list[int], n: int) -> list[int]:
    if len(samples) <= n:
        return list(range(len(samples)))
    logs = [math.log(s) for s in samples]
    picks = {0, len(samples) - 1}
    for i in range(1, n - 1):
        target = logs[0] + (logs[-1] - logs[0]) * i / (n - 1)
        picks.add(min(range(len(samples)), key=lambda j: abs(logs[j] - target)))
    return sorted(picks)


def _top(evaluated: list[Evaluated], n: int) -> list[Tiling]:
    out: list[Tiling] = []
    for e in evaluated:  # already sorted by score
        if e.tiling not in out:
            out.append(e.tiling)
        if len(out) == n:
            break
    return out


def _cycles_at(spec: GemmSpec, hw: HwConfig, k: int, cands: list[Tiling]) -> list[int | None]:
    try:
        p = plan(spec_at(spec, k), hw, only=cands)
    except UsageError:
        return [None] * len(cands)
    by = {e.tiling: e.cycles for e in p.survivors}
    return [by.get(t) for t in cands]


def _slowdown(cols: list[list[int | None]], chosen: list[int], best: list[float], weights: list[int]) -> float:
    total = 0.0
    for b, w in enumerate(weights):
        c = min((cols[i][b] or math.inf for i in chosen), default=math.inf)
        total += w * c / best[b]
    return total / sum(weights)


def partition(spec: GemmSpec, hw: HwConfig, variant: str | None = None, threshold: float = THRESHOLD,
              max_variants: int = MAX_VARIANTS, sub: int = SUB_BITS) -> Partition:
    lo, hi = spec.K.lo, spec.K.hi
    nb = bucket_of(hi - lo, sub) + 1
    spans = [bucket_span(b, sub) for b in range(nb)]
    samples = [min(hi, lo + x1) for _, x1 in spans]
    weights = [1] * nb
    cands: list[Tiling] = []
    for i in _anchor_indices(samples, ANCHORS):
        for t in _top(plan(spec_at(spec, samples[i]), hw, variant).survivors, PER_ANCHOR):
            if t not in cands:
                cands.append(t)
    by_bucket = [_cycles_at(spec, hw, k, cands) for k in samples]
    cols = [[by_bucket[b][i] for b in range(nb)] for i in range(len(cands))]
    best = [float(min((c for c in row if c is not None), default=math.inf)) for row in by_bucket]
    if any(math.isinf(b) for b in best):
        k = samples[best.index(math.inf)]
        raise UsageError(f"no candidate tiling is feasible at K={k}; narrow the K range or relax the constraints",
                         file=spec.source)
    first = min(range(len(cands)), key=lambda i: _slowdown(cols, [i], best, weights))
    chosen = [first]
    cur = _slowdown(cols, chosen, best, weights)
    steps = [Step(cands[first].key(), round(cur, 5), 0.0, True)]
    while len(chosen) < len(cands):
        nxt = min((i for i in range(len(cands)) if i not in chosen),
                  key=lambda i: _slowdown(cols, chosen + [i], best, weights))
        new = _slowdown(cols, chosen + [nxt], best, weights)
        gain = (cur - new) / cur
        take = gain >= threshold and len(chosen) < max_variants
        steps.append(Step(cands[nxt].key(), round(new, 5), round(gain, 5), take))
        if not take:
            break
        chosen.append(nxt)
        cur = new
    table = [min(range(len(chosen)), key=lambda v: cols[chosen[v]][b] or math.inf) for b in range(nb)]
    used = list(dict.fromkeys(table))  # in K order; a chosen candidate that wins no bucket is dropped
    chosen = [chosen[v] for v in used]
    table = [used.index(v) for v in table]
    p = Partition(spec, lo, hi, sub, samples, cands, cols, chosen, table, steps, threshold)
    p.boundaries = _boundaries(p)
    return p


def _boundaries(p: Partition) -> list[Boundary]:
    out = []
    for b in range(1, len(p.table)):
        a, c = p.table[b - 1], p.table[b]
        if a == c:
            continue
        ca, cc = p.cycles[p.chosen[a]], p.cycles[p.chosen[c]]
        out.append(Boundary(p.bucket_range(b)[0], a, c,
                            (p.samples[b - 1], ca[b - 1] or -1, cc[b - 1] or -1),
                            (p.samples[b], ca[b] or -1, cc[b] or -1)))
    return out


def describe(p: Partition) -> list[str]:
    """Lines for the log and analysis: the steps, the intervals and why each boundary is where it is."""
    lines = [f"K in [{p.lo}, {p.hi}]: {len(p.table)} buckets ({1 << p.sub} per octave), "
             f"{len(p.candidates)} candidates"]
    for s in p.steps:
        verb = "add" if s.taken else f"stop (gain {s.gain:.2%} < threshold {p.threshold:.2%})"
        lines.append(f"  {verb} {s.key}: mean predicted slowdown vs best per K {s.slowdown:.4f}"
                     + (f" (gain {s.gain:.2%})" if s.taken and s.gain else ""))
    for lo, hi, v in p.intervals():
        lines.append(f"  K {lo}..{hi}: v{v} {p.candidates[p.chosen[v]].key()}")
    for bd in p.boundaries:
        lines.append(f"  boundary at K={bd.k}: at K={bd.at_left[0]} v{bd.left} {bd.at_left[1]} vs v{bd.right} "
                     f"{bd.at_left[2]} cycles; at K={bd.at_right[0]} v{bd.left} {bd.at_right[1]} vs "
                     f"v{bd.right} {bd.at_right[2]}")
    return lines
