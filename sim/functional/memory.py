"""Memories of the functional model: global allocations with bounds, per-CTA shared memory,
per-thread local memory, and the generic address windows that map back to them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GLOBAL_BASE = 0x7F00_0000_0000  # first global allocation (generic address)
ALLOC_GAP = 0x1_0000  # unmapped bytes between allocations, so an overrun does not land in a neighbour
SHARED_WINDOW = 0x7E00_0000_0000  # generic address of shared byte 0
LOCAL_WINDOW = 0x7D00_0000_0000  # generic address of local byte 0
PARAM_WINDOW = 0x7C00_0000_0000  # generic address of kernel-parameter byte 0 (cvta.param)
WINDOW_SIZE = 1 << 32
# ufunc reductions called directly: ndarray.any() / all() / min() / max() each go through a Python
# wrapper (numpy/_core/_methods.py), a cost the per-instruction path of a 32-lane warp feels
reduce_any, reduce_all = np.logical_or.reduce, np.logical_and.reduce
reduce_min, reduce_max, reduce_or = np.minimum.reduce, np.maximum.reduce, np.bitwise_or.reduce
_U64 = np.dtype(np.uint64)


class Fault(Exception):
    """A bad access; the warp turns it into an ExecutionError with the thread and the PTX line."""

    def __init__(self, lane: int, addr: int, message: str):
        super().__init__(message)
        self.lane = lane
        self.addr = addr
        self.message = message


@dataclass
class Allocation:
    """One buffer of a flat memory: where it starts, its bytes and its name."""

    base: int
    size: int
    data: np.ndarray  # uint8, padded to a multiple of 16
    name: str
    views: dict = field(default_factory=dict)

    def view(self, dt: np.dtype) -> np.ndarray:
        v = self.views.get(dt)
        if v is None:
            v = self.views[dt] = self.data.view(dt)
        return v


def _padded(nbytes: int) -> np.ndarray:
    return np.zeros(max(16, (nbytes + 15) // 16 * 16), dtype=np.uint8)


class GlobalMemory:
    def __init__(self) -> None:
        self.allocs: list[Allocation] = []
        self._next = GLOBAL_BASE
        self._bases = np.zeros(0, dtype=np.uint64)

    def alloc(self, nbytes: int, name: str = "", init: bytes | np.ndarray | None = None) -> int:
        base = self._next
        data = _padded(nbytes)
        if init is not None:
            raw = np.frombuffer(bytes(init), dtype=np.uint8) if not isinstance(init, np.ndarray) else \
                np.ascontiguousarray(init).view(np.uint8).ravel()
            data[: raw.size] = raw
        self.allocs.append(Allocation(base, nbytes, data, name))
        self._next = base + (data.size + ALLOC_GAP + 255) // 256 * 256
        self._bases = np.array([a.base for a in self.allocs], dtype=np.uint64)
        return base

    def read_back(self, base: int) -> np.ndarray:
        for a in self.allocs:
            if a.base == base:
                return a.data[: a.size].copy()
        raise KeyError(hex(base))

    def _spans(self, addrs: np.ndarray, nbytes: int) -> list[tuple[Allocation, np.ndarray | None, np.ndarray]]:
        """[(allocation, lanes or None for all, byte offsets)] covering every address; a Fault names
        the first lane whose access is not wholly inside one allocation."""
        i = np.searchsorted(self._bases, addrs, side="right").astype(np.int64) - 1
        first = int(i[0])
        if reduce_all(i == first):  # the common case: one buffer
            groups: list[tuple[int, np.ndarray | None]] = [(first, None)]
        else:
            groups = [(int(k), i == k) for k in np.unique(i)]
        out = []
        for k, lanes in groups:
            sel = addrs if lanes is None else addrs[lanes]
            if k < 0:
                j = int(np.argmax(i < 0))
                raise Fault(j, int(addrs[j]), "not inside any global buffer")
            al = self.allocs[k]
            off = sel - np.uint64(al.base)
            bad = off > np.uint64(max(al.size - nbytes, 0))
            if al.size < nbytes or reduce_any(bad):
                lane_ids = np.arange(addrs.size) if lanes is None else np.flatnonzero(lanes)
                j = int(lane_ids[int(np.argmax(bad)) if bad.any() else 0])
                raise Fault(j, int(addrs[j]), f"outside buffer {al.name or hex(al.base)} "
                            f"[{al.base:#x}, {al.base + al.size:#x}) of {al.size} bytes")
            out.append((al, lanes, off))
        return out

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        """Load n consecutive elements of dt at each address -> array (lanes, n)."""
        nbytes = dt.itemsize * n
        spans = self._spans(addrs, nbytes)
        _check_align(addrs, nbytes, dt.itemsize)
        if len(spans) == 1:
            al, _, off = spans[0]
            return _gather(al.view(dt), off, dt, n)
        out = np.empty((addrs.size, n), dtype=dt)
        for al, lanes, off in spans:
            out[lanes] = _gather(al.view(dt), off, dt, n)
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        """values: (lanes, n) of dt; later lanes win on equal addresses."""
        nbytes = dt.itemsize * values.shape[1]
        spans = self._spans(addrs, nbytes)
        _check_align(addrs, nbytes, dt.itemsize)
        for al, lanes, off in spans:
            _scatter(al.view(dt), off, dt, values if lanes is None else values[lanes])


def _gather(v: np.ndarray, off: np.ndarray, dt: np.dtype, n: int) -> np.ndarray:
    """(lanes, n) elements of the typed view v starting at byte offsets off."""
    idx = (off // dt.itemsize).astype(np.int64)
    if n == 1:
        return v[idx][:, None]
    return v[idx[:, None] + np.arange(n)]


def _scatter(v: np.ndarray, off: np.ndarray, dt: np.dtype, values: np.ndarray) -> None:
    idx = (off // dt.itemsize).astype(np.int64)
    if values.shape[1] == 1:
        v[idx] = values[:, 0]
    else:
        v[idx[:, None] + np.arange(values.shape[1])] = values


def _check_align(addrs: np.ndarray, nbytes: int, elem: int) -> None:
    align = nbytes if nbytes & (nbytes - 1) == 0 else elem
    mis = (addrs % np.uint64(align)) != 0
    if reduce_any(mis):
        j = int(np.argmax(mis))
        raise Fault(j, int(addrs[j]), f"misaligned {nbytes}-byte access (needs {align}-byte alignment)")


class FlatMemory:
    """Shared (per CTA) or const memory: one byte array addressed from 0."""

    def __init__(self, size: int, name: str):
        self.size = size
        self.data = _padded(size)
        self.name = name
        self.views: dict[np.dtype, np.ndarray] = {}

    def view(self, dt: np.dtype) -> np.ndarray:
        v = self.views.get(dt)
        if v is None:
            v = self.views[dt] = self.data.view(dt)
        return v

    def _offsets(self, addrs: np.ndarray, nbytes: int, dt: np.dtype) -> np.ndarray:
        if addrs.dtype == _U64:  # the usual case: the largest address in bounds, the or of all aligned
            align = nbytes if nbytes & (nbytes - 1) == 0 else dt.itemsize
            if self.size >= nbytes and int(reduce_max(addrs)) <= self.size - nbytes and \
                    not int(reduce_or(addrs)) & (align - 1):
                return addrs
        a = addrs.astype(np.int64)
        if reduce_min(a) < 0 or reduce_max(a) > self.size - nbytes:
            bad = (a < 0) | (a > self.size - nbytes)
            j = int(np.argmax(bad))
            raise Fault(j, int(a[j]), f"outside {self.name} memory of {self.size} bytes")
        align = nbytes if nbytes & (nbytes - 1) == 0 else dt.itemsize
        if reduce_or(a & (align - 1)):
            _check_align(addrs.astype(np.uint64), nbytes, dt.itemsize)
        return a

    def load(self, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        return _gather(self.view(dt), self._offsets(addrs, dt.itemsize * n, dt), dt, n)

    def store(self, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        _scatter(self.view(dt), self._offsets(addrs, dt.itemsize * values.shape[1], dt), dt, values)


class LocalMemory:
    """Per-thread local memory (stack frames): a row per thread of the CTA."""

    def __init__(self, size: int, nthreads: int):
        self.size = size
        self.rows = [FlatMemory(size, "local") for _ in range(nthreads)]

    def load(self, threads: np.ndarray, addrs: np.ndarray, dt: np.dtype, n: int = 1) -> np.ndarray:
        out = np.zeros((len(addrs), n), dtype=dt)
        for j, (t, a) in enumerate(zip(threads, addrs)):
            out[j] = self.rows[int(t)].load(np.array([a]), dt, n)[0]
        return out

    def store(self, threads: np.ndarray, addrs: np.ndarray, values: np.ndarray, dt: np.dtype) -> None:
        for j, (t, a) in enumerate(zip(threads, addrs)):
            self.rows[int(t)].store(np.array([a]), values[j : j + 1], dt)
