"""The access log of a lock-step batch (sim/functional/lockstep.py) and its check: whether two warps
touched one 4-byte word, one of them writing it, with no barrier between them, so that the order in
which they ran could change the result."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sim.functional.memory import reduce_any

SHARED_DOMAIN = 0  # log domains: a batch's shared memory (each CTA at its own base), global memory
GLOBAL_DOMAIN = 1
EMPTY = np.zeros(0, dtype=np.int64)
# one logged access: domain, barrier epoch, byte addresses, bytes per lane, the lanes' warps, whether a write
Access = tuple[int, int, np.ndarray, int, np.ndarray, bool]


def words(entries: Sequence[Access]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(word, owner, epoch) of every 4-byte word the entries touch."""
    words, owners, epochs = [], [], []
    for _, ep, addrs, size, own, _w in entries:
        a = addrs.astype(np.int64)
        first = a >> 2
        last = (a + size - 1) >> 2
        k = int((last - first).max()) + 1 if a.size else 1
        if k == 1:
            words.append(first)
            owners.append(own)
        elif int((last - first).min()) == k - 1:  # every lane k words (aligned vectors): no mask
            words.append((first[:, None] + np.arange(k)).ravel())
            owners.append(np.repeat(own, k))
        else:
            w = first[:, None] + np.arange(k)
            keep = w <= last[:, None]
            words.append(w[keep])
            owners.append(np.broadcast_to(own[:, None], w.shape)[keep])
        epochs.append(np.full(words[-1].size, ep, dtype=np.int64))
    if not words:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e
    return np.concatenate(words), np.concatenate(owners).astype(np.int64), np.concatenate(epochs)


def conflict(entries: Sequence[Access], wpc: int) -> str:
    """Whether two warps touch one word, at least one writing it, with no barrier ordering them: "warps"
    (in the same epoch of one CTA), else "ctas" (from two CTAs of the batch, any epochs), else ""."""
    writes = [e for e in entries if e[5]]
    if not writes:
        return ""
    ww, wo, we = words(writes)
    lo, hi = int(ww.min()), int(ww.max())
    wc = wo // wpc
    order = np.lexsort((wo, we, wc, ww))
    ww, wo, we, wc = ww[order], wo[order], we[order], wc[order]
    same = ww[1:] == ww[:-1]
    same_cta = same & (wc[1:] == wc[:-1])
    if reduce_any(same_cta & (we[1:] == we[:-1]) & (wo[1:] != wo[:-1])):
        return "warps"  # two writers in one epoch of a CTA
    ctas = bool(reduce_any(same & (wc[1:] != wc[:-1])))  # two CTAs write one word
    reads = []
    for e in entries:
        if e[5] or not e[2].size:
            continue
        a = e[2].astype(np.int64)
        near = (((a + e[3] - 1) >> 2) >= lo) & ((a >> 2) <= hi)
        if reduce_any(near):
            reads.append((e[0], e[1], e[2][near], e[3], e[4][near], False))
    if not reads:
        return "ctas" if ctas else ""
    rw, ro, re_ = words(reads)
    rc = ro // wpc
    n_cta = int(max(wc.max(), rc.max())) + 1
    n_ep = int(max(we.max(), re_.max())) + 1
    if (hi - lo + 1) * n_cta * n_ep >= 1 << 62:
        return "warps"  # too wide to key: refuse rather than miss a conflict
    keys = ((ww - lo) * n_cta + wc) * n_ep + we  # (word, CTA, epoch): one writer each (checked above)
    uk, kfirst = np.unique(keys, return_index=True)
    rk = ((rw - lo) * n_cta + rc) * n_ep + re_
    j = np.minimum(np.searchsorted(uk, rk), uk.size - 1)
    if reduce_any((uk[j] == rk) & (wo[kfirst][j] != ro)):
        return "warps"  # a word another warp of the CTA writes in the same epoch
    if ctas:
        return "ctas"
    uw, first = np.unique(ww, return_index=True)  # each word written by one CTA (else `ctas` above)
    i = np.minimum(np.searchsorted(uw, rw), uw.size - 1)
    return "ctas" if reduce_any((uw[i] == rw) & (wc[first][i] != rc)) else ""


Intervals = tuple[np.ndarray, np.ndarray]  # sorted, disjoint, non-adjacent [start, end] word intervals


def merged(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The union of word intervals [starts[i], ends[i]] as sorted disjoint intervals (adjacent ones joined)."""
    if not starts.size:
        e = np.zeros(0, dtype=np.int64)
        return e, e
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > e[:-1] + 1
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], e[last]


def meets(a: Intervals, b: Intervals) -> bool:
    """Whether two interval sets share a word."""
    if not a[0].size or not b[0].size:
        return False
    j = np.searchsorted(a[0], b[1], side="right") - 1  # a's last interval starting at or before b's end
    ok = j >= 0
    return bool(np.any(a[1][np.maximum(j, 0)][ok] >= b[0][ok]))


def union(a: Intervals, b: Intervals) -> Intervals:
    return merged(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def touched(log: Iterable[Access], write: bool, wpc: int) -> dict[int, Intervals]:
    """Per CTA (owner // wpc): the global words the log's reads (write=False) or writes and atomics
    (write=True) touch."""
    starts, ends, ctas = [], [], []
    for dom, _ep, addrs, size, own, w in log:
        if dom == GLOBAL_DOMAIN and w == write and addrs.size:
            a = addrs.astype(np.int64)
            starts.append(a >> 2)
            ends.append((a + size - 1) >> 2)
            ctas.append(np.asarray(own, dtype=np.int64) // wpc)
    if not starts:
        return {}
    s, e, c = np.concatenate(starts), np.concatenate(ends), np.concatenate(ctas)
    return {k: merged(s[c == k], e[c == k]) for k in np.unique(c).tolist()}
