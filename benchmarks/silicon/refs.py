"""numpy references of the silicon suite's kernels (the ``check`` names of suite.py).

Each reference takes the launch arguments *before* the run (``args``: list of sim.launch.Arg), the
buffers read back after it (``outputs``: parameter index -> array) and the CTAs that ran (``ran``:
linear CTA indices, None = all) and returns the relative Frobenius error of the checked outputs
(sim.reference.relative_error: inf on NaN, 0 on an exact match).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from sim.launch import Arg, buffer_to_float64
from sim.reference import relative_error

Ref = Callable[[list[Arg], dict[int, np.ndarray], "set[int] | None"], float]
REFS: dict[str, Ref] = {}


def ref(fn: Ref) -> Ref:
    REFS[fn.__name__] = fn
    return fn


def _in(args: list[Arg], i: int) -> np.ndarray:
    a = args[i]
    assert a.array is not None
    return buffer_to_float64(a.array, a.dtype)


def _raw(args: list[Arg], i: int) -> np.ndarray:
    a = args[i]
    assert a.array is not None
    return a.array


def _sv(args: list[Arg], i: int) -> int | float:
    v = args[i].value
    assert v is not None
    return v


def _err(got: np.ndarray, want: np.ndarray) -> float:
    return relative_error(np.asarray(got, dtype=np.float64).ravel(), np.asarray(want, dtype=np.float64).ravel())


def _per_thread(outputs: dict[int, np.ndarray], i: int, want_per_block: np.ndarray, ran: set[int] | None,
                block: int) -> float:
    got = outputs[i].astype(np.float64).reshape(-1, block)
    rows = sorted(ran) if ran is not None else range(got.shape[0])
    rows = [r for r in rows if r < got.shape[0]]
    want = np.broadcast_to(want_per_block.reshape(-1, block) if want_per_block.size > block
                           else want_per_block.reshape(1, block), got.shape)
    return _err(got[rows], want[rows])


@ref
def lds_indep(args, outputs, ran):
    s = _raw(args, 0).astype(np.float64)
    iters = int(_sv(args, 2))
    S = sum(s[(np.arange(1024) + 128 * j) & 1023] for j in range(8))
    t = np.arange(256)
    acc = sum(S[(t + k) & 1023] for k in range(iters))
    return _per_thread(outputs, 1, acc, ran, 256)


@ref
def lds_dep(args, outputs, ran):
    j = np.arange(256, dtype=np.int64) & 1023
    for _ in range(int(_sv(args, 2))):
        j = (33 * j + 1) & 1023
    return _per_thread(outputs, 1, j, ran, 256)


@ref
def ldsm_x4(args, outputs, ran):
    W = _raw(args, 0).astype(np.uint64)
    lane = np.arange(256) & 31
    acc = np.zeros(256, dtype=np.uint64)
    for k in range(int(_sv(args, 2))):
        for i in range(4):
            acc += W[((8 * i + lane // 4 + 32 * k) & 511) * 4 + (lane % 4)]
    return _per_thread(outputs, 1, acc & 0xFFFFFFFF, ran, 256)


@ref
def ldgsts_x4(args, outputs, ran):
    x = _raw(args, 0).astype(np.float64)
    t = np.arange(256)
    acc = np.zeros(256)
    for k in range(int(_sv(args, 2))):
        for j in range(4):
            base = ((4 * k + j) * 1024 + 4 * t) & 16383
            acc += sum(x[base + q] for q in range(4))
    return _per_thread(outputs, 1, acc, ran, 256)


def _fma_chains(a0: np.ndarray, x: np.ndarray, y: float, steps: int) -> np.ndarray:
    a = np.broadcast_to(a0, np.broadcast_shapes(a0.shape, x.shape)).astype(np.float64)
    for _ in range(steps):
        a = a * x + y
    return a


def _x_of(args: list[Arg]) -> np.ndarray:
    x32 = _raw(args, 0).astype(np.float32)
    return (np.float32(0.9) + np.float32(1e-3) * x32[np.arange(256) & 31]).astype(np.float64)


@ref
def ffma_indep(args, outputs, ran):
    a0 = _raw(args, 0).astype(np.float64)[:8]
    a = _fma_chains(a0[None, :], _x_of(args)[:, None], 0.01, int(_sv(args, 2)))
    return _per_thread(outputs, 1, a.sum(axis=1), ran, 256)


@ref
def ffma_dep(args, outputs, ran):
    a = _fma_chains(np.float64(_raw(args, 0)[0]) * np.ones(256), _x_of(args), 0.01, 8 * int(_sv(args, 2)))
    return _per_thread(outputs, 1, a, ran, 256)


@ref
def imad_indep(args, outputs, ran):
    w = _raw(args, 0).astype(np.uint64)
    t = np.arange(256, dtype=np.uint64)
    m = (w[t.astype(np.int64) & 31] | 1)[:, None]
    a = np.broadcast_to(w[:8][None, :], (256, 8)).copy()
    for _ in range(int(_sv(args, 2))):
        a = (a * m + t[:, None]) & 0xFFFFFFFF
    r = ((a[:, 0] ^ a[:, 1]) + (a[:, 2] ^ a[:, 3]) + (a[:, 4] ^ a[:, 5]) + (a[:, 6] ^ a[:, 7])) & 0xFFFFFFFF
    return _per_thread(outputs, 1, r, ran, 256)


@ref
def diverge_halves(args, outputs, ran):
    a0 = _raw(args, 0).astype(np.float64)[:4]
    iters = int(_sv(args, 2))
    hi = _fma_chains(a0, np.float64(0.75), 0.5, iters).sum()
    lo = _fma_chains(a0, np.float64(0.5), 0.25, iters).sum()
    want = np.where(np.arange(256) & 16, hi, lo)
    return _per_thread(outputs, 1, want, ran, 256)


@ref
def hmma_indep(args, outputs, ran):
    h = _raw(args, 0).astype(np.float64)  # f16 values; word w holds halves 2w (low) and 2w + 1
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i, (r, c) in enumerate(((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))):
            A[r, c], A[r, c + 1] = h[2 * (4 * lane + i)], h[2 * (4 * lane + i) + 1]
        for i, k in enumerate((2 * t, 2 * t + 8)):
            B[k, g], B[k + 1, g] = h[2 * (128 + 2 * lane + i)], h[2 * (128 + 2 * lane + i) + 1]
    D = int(_sv(args, 2)) * (A @ B)
    want = np.zeros((256, 32))
    for th in range(256):
        g, t = (th & 31) // 4, th % 4
        frag = [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]
        want[th] = np.tile(frag, 8)
    return _per_thread(outputs, 1, want.ravel(), ran, 256 * 32)


@ref
def bar_loop(args, outputs, ran):
    s = _raw(args, 0).astype(np.float64)
    block = outputs[1].size // 4  # the suite launches G = 4 CTAs of the microbenchmarks
    t = np.arange(block)
    acc = sum(s[(t + k) & (block - 1)] for k in range(int(_sv(args, 2))))
    return _per_thread(outputs, 1, acc, ran, block)


@ref
def atom_shared(args, outputs, ran):
    t = np.arange(256)
    h = np.zeros(256)
    for k in range(int(_sv(args, 2))):
        np.add.at(h, (7 * t + k) & 255, 1)
    return _per_thread(outputs, 1, h, ran, 256)


@ref
def atom_global(args, outputs, ran):
    n = outputs[1].size
    h = np.zeros(n)
    ctas = sorted(ran) if ran is not None else range(4)
    g = np.concatenate([np.arange(256) + 256 * c for c in ctas])
    for k in range(int(_sv(args, 2))):
        np.add.at(h, (7 * g + 32 * k) & 4095, 1)
    return _err(outputs[1], h)


@ref
def stream_read(args, outputs, ran):
    x = _raw(args, 0)
    got = outputs[1].astype(np.float64).reshape(-1, 256)
    G = got.shape[0]
    per = x.size // 4 // G
    rows = sorted(ran) if ran is not None else list(range(G))
    want = np.stack([x[4 * per * b:4 * per * (b + 1)].astype(np.float64).reshape(-1, 256, 4).sum(axis=(0, 2))
                     for b in rows])
    return _err(got[rows], want)


@ref
def block_reduce(args, outputs, ran):
    x = _in(args, 0)
    G = outputs[1].size
    idx = np.arange(x.size)
    want = np.array([x[(idx % (G * 128)) // 128 == b].sum() for b in range(G)])
    return _err(outputs[1], want)


@ref
def clock64(args, outputs, ran):
    x = _in(args, 2)
    acc = np.zeros_like(x)
    for k in range(int(_sv(args, 3))):
        acc = acc * 0.5 + (x + k)
    return _err(outputs[1], acc)


def _cp_async(args: list[Arg], outputs: dict[int, np.ndarray], tile: int) -> float:
    x = _in(args, 0)
    n = int(_sv(args, 2))
    i = np.arange(n)
    nbi = (i // tile) * tile + ((i % tile) + 1) % tile
    nb = np.where(nbi < n, x[np.minimum(nbi, n - 1)], 0.0)
    return _err(outputs[1][:n], 2 * x[:n] + nb)


@ref
def cp_async_f32(args, outputs, ran):
    return _cp_async(args, outputs, 64)


@ref
def cp_async_v4(args, outputs, ran):
    return _cp_async(args, outputs, 256)


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@ref
def divergent_loop(args, outputs, ran):
    vals, seeds, counts = (_raw(args, i).astype(np.int64) for i in range(3))
    n = int(_sv(args, 5))
    res, ust = np.zeros(n), np.zeros(n)
    for i in range(n):
        x, u, acc = int(vals[i]), int(seeds[i]) & 0xFFFFFFFF, 0
        for j in range(int(counts[i])):
            if u & 1:
                u = (3 * u + 1) & 0xFFFFFFFF
                acc = _s32(acc + (_cdiv(x, j + 1) ^ _s32(u % (j + 7))))
            else:
                u >>= 1
                rem = x - _cdiv(x, j + 3) * (j + 3)
                acc = _s32(acc - (rem + ((u // (j + 5)) & 0xFFFF)))
            x = _s32((x >> 1) + (u & 0xFF) - 100)
        res[i], ust[i] = acc, u
    return max(_err(outputs[3][:n], res), _err(outputs[4][:n], ust))


@ref
def saxpy64(args, outputs, ran):
    n, a = int(_sv(args, 0)), float(_sv(args, 1))
    return _err(outputs[3][:n], a * _in(args, 2)[:n] + _in(args, 3)[:n])


def _mma_batches(args: list[Arg], outputs: dict[int, np.ndarray], bt: bool) -> float:
    A, Bm, C = _in(args, 0), _in(args, 1), _in(args, 2)
    G = C.size // 128
    want = []
    for b in range(G):
        a = A[256 * b:256 * (b + 1)].reshape(16, 16)
        bb = Bm[128 * b:128 * (b + 1)]
        bmat = bb.reshape(8, 16).T if bt else bb.reshape(16, 8)
        want.append(a @ bmat + C[128 * b:128 * (b + 1)].reshape(16, 8))
    return _err(outputs[3], np.concatenate([w.ravel() for w in want]))


@ref
def mma_f16(args, outputs, ran):
    return _mma_batches(args, outputs, False)


@ref
def mma_bf16(args, outputs, ran):
    return _mma_batches(args, outputs, True)


@ref
def vector_add(args, outputs, ran):
    n = int(_sv(args, 3))
    return _err(outputs[2][:n], _in(args, 0)[:n] + _in(args, 1)[:n])


@ref
def reduce_chunks(args, outputs, ran):
    x = _in(args, 0)
    G = outputs[1].size
    return _err(outputs[1], x.reshape(G, -1).sum(axis=1))


@ref
def reduce6(args, outputs, ran):
    x = _in(args, 0)
    G = outputs[1].size
    idx = np.arange(x.size)
    return _err(outputs[1], np.array([x[(idx % (G * 512)) // 512 == b].sum() for b in range(G)]))


@ref
def transpose(args, outputs, ran):
    w, h = int(_sv(args, 2)), int(_sv(args, 3))
    return _err(outputs[0], _in(args, 1).reshape(h, w).T.ravel())


@ref
def shfl_scan(args, outputs, ran):
    x = _raw(args, 0).astype(np.int64).reshape(-1, 256)
    scan = np.cumsum(x, axis=1)
    return max(_err(outputs[0], scan.ravel()), _err(outputs[2], scan[:, -1]))


@ref
def histogram256(args, outputs, ran):
    d = _raw(args, 1).astype(np.uint64)
    G = outputs[0].size // 256
    pos = np.arange(d.size)
    want = np.zeros((G, 256))
    for b in range(G):
        words = d[(pos % (192 * G)) // 192 == b]
        for sh in (0, 8, 16, 24):
            np.add.at(want[b], ((words >> np.uint64(sh)) & np.uint64(0xFF)).astype(np.int64), 1)
    return _err(outputs[0], want.ravel())


@ref
def merge_histogram(args, outputs, ran):
    p = _raw(args, 1).astype(np.float64).reshape(-1, 256)
    return _err(outputs[0], p.sum(axis=0))


@ref
def scalar_prod(args, outputs, ran):
    V, E = int(_sv(args, 3)), int(_sv(args, 4))
    return _err(outputs[0], (_in(args, 1) * _in(args, 2)).reshape(V, E).sum(axis=1))


@ref
def gelu(args, outputs, ran):
    x = _in(args, 1)
    want = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return _err(outputs[0], want)


@ref
def residual(args, outputs, ran):
    return _err(outputs[0], _in(args, 1) + _in(args, 2))


@ref
def encoder(args, outputs, ran):
    B, T, C = (int(_sv(args, i)) for i in (4, 5, 6))
    ix = _raw(args, 1).astype(np.int64).reshape(B, T)
    wte, wpe = _in(args, 2).reshape(-1, C), _in(args, 3).reshape(T, C)
    return _err(outputs[0], (wte[ix] + wpe[None, :, :]).ravel())


@ref
def layernorm(args, outputs, ran):
    N, C = int(_sv(args, 6)), int(_sv(args, 7))
    x = _in(args, 3).reshape(N, C)
    m = x.mean(axis=1)
    s = 1.0 / np.sqrt(((x - m[:, None]) ** 2).mean(axis=1) + 1e-5)
    o = (x - m[:, None]) * s[:, None] * _in(args, 4)[None, :] + _in(args, 5)[None, :]
    return max(_err(outputs[0], o), _err(outputs[1], m), _err(outputs[2], s))


@ref
def softmax(args, outputs, ran):
    N, C = int(_sv(args, 2)), int(_sv(args, 3))
    x = _in(args, 1).reshape(N, C)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return _err(outputs[0], e / e.sum(axis=1, keepdims=True))
