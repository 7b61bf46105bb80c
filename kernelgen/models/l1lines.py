"""Which level serves each global copy of CTA 0's warps (the white-box L1 model the cycle model's
copy chain reads): the lines each warp's copies touch, an LRU walk over the L1's sets, and the
per-copy latencies of the critical warp (schedule.cycle_model)."""

from __future__ import annotations

from functools import lru_cache

from sim.layouts import Layout, parse_layout

# per warp, per copy: (operand, touches a new line, its worst latency, its latency when a sharer on the
# same core brought the new lines: [l1.hit_latency], or [l2.hit_latency] for lines evicted since)
Rec = list[list[tuple[int, bool, float, float]]]


def _layout(geo: tuple) -> Layout:
    """The operand's global layout (geo's 7th field, sim/layouts.py; row when absent): its formula
    places the copies' elements, so the lines are those of the emitted addresses."""
    return parse_layout(geo[6]) if len(geo) > 6 else parse_layout("row")


def _warp_lines(tiles: tuple, threads: int, ws: int, ext: tuple, bk: int, line: int, kts: int, ti: int
                ) -> list[tuple[tuple[tuple[int, ...], ...], ...]]:
    """Per K tile kt < kts, the [l1.line]-sized lines each warp's copy j of operand `ti` touches
    (sorted), from the emitter's chunk coordinates, bounds-predicated lanes skipped; A and B allocated
    back to back, 256-byte aligned (see copy_line_latencies)."""
    import numpy as np

    base = 0
    for (rows_all, ld, elem, lay) in ((e[1], e[0], g[4], _layout(g)) for e, g in zip(ext[:ti], tiles[:ti])):
        size = lay.size(rows_all, ld) if lay.row_like else lay.size(ld, rows_all)  # logical R x C
        base += -(-size * elem // 256) * 256
    rows, cols, vec, cpr, elem, kcol = tiles[ti][:6]
    lay = _layout(tiles[ti])
    ld_ext, row_lim, col_lim = ext[ti]
    n = rows * (cols // vec) // threads
    W = -(-threads // ws)
    lanes = np.arange(W * ws, dtype=np.int64)
    e = lanes[None, :] + np.arange(n, dtype=np.int64)[:, None] * threads
    r, c = e // cpr, (e % cpr) * vec
    shift = np.arange(kts, dtype=np.int64)[:, None, None] * bk
    gr, gc = (r[None] + 0 * shift, c[None] + shift) if kcol else (r[None] + shift, c[None] + 0 * shift)
    ok = (gr < row_lim) & (gc < col_lim) & (lanes < threads)[None, None, :]
    if lay.kind in ("row", "col"):
        idx = gr * ld_ext + gc
    elif lay.row_like:  # the tile's (row, col) are the logical (r, c)
        idx = lay.index(gr, gc, row_lim, col_lim)
    else:
        idx = lay.index(gc, gr, col_lim, row_lim)
    ln = np.where(ok, (base + idx * elem) // line, -1).reshape(kts, n, W, ws)
    srt = np.sort(ln, axis=-1)
    keep = (srt >= 0) & np.concatenate([np.ones((kts, n, W, 1), bool), srt[..., 1:] != srt[..., :-1]], axis=-1)
    counts = keep.sum(axis=-1).ravel().tolist()
    flat = srt[keep].tolist()
    out: list[tuple[int, ...]] = []
    i = 0
    for k in counts:
        out.append(tuple(flat[i:i + k]))
        i += k
    per_copy = [tuple(out[j * W:(j + 1) * W]) for j in range(kts * n)]
    return [tuple(per_copy[kt * n:(kt + 1) * n]) for kt in range(kts)]


def _walk(tiles: tuple, threads: int, ws: int, ext: tuple, bk: int, kts: int, line: int, l1_sets: int,
          l1_assoc: int, new_lat: float, l2_lat: float, l1_lat: float, qs: tuple[tuple[float, float], ...]
          ) -> list[list[Rec]]:
    """Per K tile (kts of them), per warp, what each copy finds, for each q of `qs` (per operand, the
    chance 1 / sharers that this CTA is first on a new line). Within a copy the warps go in the order
    of their latency so far, which depends on q; the settings whose orders agree share one walk (the
    same accesses in the same order), and one whose order departs is walked again on its own."""
    W = -(-threads // ws)
    nsets = max(1, l1_sets)
    sets: list[list[int]] = [[] for _ in range(nsets)]  # per set its lines, least recently used first
    ever: set[int] = set()
    warps = range(W)
    active = list(range(len(qs)))
    out: list[list[Rec]] = [[] for _ in qs]
    apart: list[int] = []
    seen_evicted, seen_held = max(l2_lat, l1_lat), max(0.0, l1_lat)
    lines = [_warp_lines(tiles, threads, ws, ext, bk, line, kts, ti) for ti in range(len(tiles))]
    for kt in range(kts):
        accs = {i: [0.0] * W for i in active}
        rec: Rec = [[] for _ in warps]
        for ti in range(len(tiles)):
            for by_warp in lines[ti][kt]:
                # the warps by latency so far, ties by warp id (a stable sort of ascending ids)
                order = sorted(warps, key=accs[active[0]].__getitem__)
                for i in active[1:]:
                    if sorted(warps, key=accs[i].__getitem__) != order:
                        active.remove(i)
                        apart.append(i)
                for w in order:
                    # per line: in its set (L1 hit, [l1.hit_latency]), else an L2 access ([l2.hit_latency]),
                    # new when no earlier access touched it, evicted before when one did
                    hit = miss = new_line = evicted = False
                    for ln in by_warp[w]:
                        st = sets[ln % nsets]
                        if ln in st:
                            hit = True
                            if st[-1] != ln:
                                st.remove(ln)
                                st.append(ln)
                        else:
                            miss = True
                            if ln in ever:
                                evicted = True
                            else:
                                new_line = True
                                ever.add(ln)
                            if len(st) >= l1_assoc:
                                del st[0]
                            st.append(ln)
                    worst = l1_lat if hit else 0.0
                    if miss and l2_lat > worst:
                        worst = l2_lat
                    # the sharers issue this same copy on the same lines: the one that gets there first
                    # is the first toucher of all of them and waits new_lat, the others `worst`
                    rec[w].append((ti, new_line, worst, seen_evicted if evicted else seen_held))
                    if new_line:
                        for i in active:
                            q = qs[i][ti]
                            accs[i][w] += q * new_lat + (1.0 - q) * worst
                    else:  # q = 0: 0 * new_lat + 1 * worst, exactly
                        for i in active:
                            accs[i][w] += worst
        for i in active:
            out[i].append(rec)
    for i in apart:
        out[i] = _walk(tiles, threads, ws, ext, bk, kts, line, l1_sets, l1_assoc, new_lat, l2_lat, l1_lat,
                       (qs[i],))[0]
    return out


def _critical(rec: Rec, sharers: tuple[int, int], near: tuple[int, int], new_lat: float, exact: bool = False
              ) -> tuple[float, ...]:
    """The critical warp's per-copy latencies of one K tile, averaged over which sharer leads.
    ``exact``: every latency is a whole number (far below 2**53), so sums do not depend on their order."""
    W = len(rec)
    # Which CTA of the sharers leads is one event per operand and K tile (its warps run together).
    # Per operand three outcomes: this CTA is the first of all `sharers` (p = 1 / sharers: new_lat),
    # the first of the `near` sharers on its own core but not of all (1 / near - 1 / sharers: the L2,
    # [l2.hit_latency]), or a sharer on its own core was there first (1 - 1 / near: that core's L1,
    # [l1.hit_latency]). Each outcome's barrier waits for its slowest warp; the copy latencies of
    # that warp are averaged over the outcomes.
    outcomes = []
    for ti in range(2):
        s_, n_ = max(1, sharers[ti]), max(1, min(near[ti], sharers[ti]))
        outcomes.append([(0, 1.0 / s_), (1, 1.0 / n_ - 1.0 / s_), (2, 1.0 - 1.0 / n_)])
    per_copy = [0.0] * max(len(r) for r in rec)
    if exact:
        # a warp's total under an outcome: its old lines' latencies plus, per operand, its new lines'
        # under that outcome (whole numbers: the same sum as the list's, in any order)
        fixed, alt_a, alt_b = [], [], []
        for r in rec:
            f, n, sw, sh = 0.0, [0, 0], [0.0, 0.0], [0.0, 0.0]
            for ti, nl, worst, l1_hit in r:
                if nl:
                    n[ti] += 1
                    sw[ti] += worst
                    sh[ti] += l1_hit
                else:
                    f += worst
            fixed.append(f)
            alt_a.append((n[0] * new_lat, sw[0], sh[0]))
            alt_b.append((n[1] * new_lat, sw[1], sh[1]))
    for oa, pa in outcomes[0]:
        for ob, pb in outcomes[1]:
            pr = pa * pb
            if pr <= 1e-12:
                continue
            first = (oa, ob)
            if exact:
                sums = [f + xa[oa] + xb[ob] for f, xa, xb in zip(fixed, alt_a, alt_b)]
                top = max(sums)
                crit = sums.index(top)  # the first warp of the largest sum, as max over (sum, -w)
                lat_c = [(new_lat, worst, l1_hit)[first[ti]] if nl else worst for ti, nl, worst, l1_hit in rec[crit]]
            else:
                lat_w = [[(new_lat, worst, l1_hit)[first[ti]] if nl else worst for ti, nl, worst, l1_hit in r]
                         for r in rec]
                crit = max(range(W), key=lambda w: (sum(lat_w[w]), -w))
                lat_c = lat_w[crit]
            for i, x in enumerate(lat_c):
                per_copy[i] += pr * x
    return tuple(per_copy)


@lru_cache(maxsize=4096)
def copy_line_latencies(tiles: tuple, threads: int, ws: int, ext: tuple, bk: int, ktiles: int, line: int,
                        l1_sets: int, l1_assoc: int, new_lat: float, l2_lat: float, l1_lat: float,
                        settings: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (((1, 1), (1, 1)),)
                        ) -> tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]:
    """Per-copy latencies of the critical warp of CTA 0 in its first and later K tiles (white-box, from
    the copy addresses the emitter uses: tiling.chunk_coords, bounds-predicated lanes skipped).

    sim.timing tags a cache line at its first access, so a warp whose copy touches a line no earlier
    access of the CTA touched waits `new_lat` ([dram.latency], cold), one whose lines are all held by
    the L1 ([l1.size] / ([l1.line] x [l1.assoc]) sets of [l1.assoc] ways, LRU, set = line modulo sets)
    waits [l1.hit_latency], else (evicted) [l2.hit_latency]. A and B are assumed allocated back to back,
    256-byte aligned (B starts where A's bytes end, rounded up to 256; any further gap a multiple of
    sets x line). Copies run in order in every warp; within a copy the warps that are ahead (shorter
    latency so far) reach their load first. The barrier waits for the warp with the largest sum.

    `settings`: (sharers, near) pairs, one result each. `sharers` (per operand A, B: CTAs of the launch
    copying the same lines at once; `near` of them on CTA 0's core, same L1): which sharer reaches a
    copy first is one event per operand and K tile; the first pays `new_lat`, one that is first on its
    core `l2_lat`, the others `l1_lat` (sim.timing tags a line at its first access). Per setting, the
    first K tile and the mean of the next line / (TILE_K x element) K tiles (the period with which a
    K-contiguous row's lines come new) are returned."""
    # a line of [l1.line] bytes holds line / (TILE_K x element) K tiles of a K-contiguous row: the later
    # K tiles alternate between touching new lines and hitting the L1 with that period
    period = max([1] + [line // max(1, bk * g[4]) for g in tiles if g[5]])
    kts = min(1 + min(period, 8), ktiles)
    qs = tuple((1.0 / sharers[0], 1.0 / sharers[1]) for sharers, _ in settings)
    exact = all(float(x).is_integer() and abs(x) < 1 << 40 for x in (new_lat, l2_lat, l1_lat))
    walks = _walk(tiles, threads, ws, ext, bk, kts, line, l1_sets, l1_assoc, new_lat, l2_lat, l1_lat, qs)
    results = []
    for (sharers, near), recs in zip(settings, walks):
        out = [_critical(rec, sharers, near, new_lat, exact) for rec in recs]
        if len(out) == 1:
            out.append(out[0])
        later = tuple(sum(x) / len(out[1:]) for x in zip(*out[1:]))
        results.append((out[0], later))
    return tuple(results)
