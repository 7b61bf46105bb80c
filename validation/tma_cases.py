"""TMA fixtures beyond the tiled box (issue 12): the im2col load (tests/fixtures/hopper_cuda/tma_im2col.cu) and
the CTA-to-CTA / shared -> global bulk copies and reductions of a 2-CTA cluster
(tests/fixtures/cluster/bulk_peer.cu), as launches with numpy references written independently of the
simulator: what tests/test_tma_bulk.py runs in the simulator and ``python -m validation.gpu_tma_cases`` on the
H200 (the same Case interface as validation/cluster_cases.py, so validation/gpu_cluster.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.launch import Arg, Launch
from sim.tensormap import TensorMapSpec
from validation.cluster_cases import ROOT, Case

HOPPER = ROOT / "tests" / "fixtures" / "hopper_cuda"
CLUSTER = ROOT / "tests" / "fixtures" / "cluster"

# im2col: an NHWC f32 tensor (innermost first: C, W, H, N), a 3x3 filter with padding 1
IM_C, IM_W, IM_H, IM_N = 16, 6, 5, 2
IM_LOWER, IM_UPPER = (-1, -1), (-1, -1)  # (w, h): padding 1, upper = padding - (filter - 1)
IM_CHANNELS, IM_PIXELS = 8, 16
# (c, w, h, n) where each column starts: the corner, a row wrap, an image wrap, channels and images past the end
IM_STARTS = ((0, -1, -1, 0), (8, 3, 2, 0), (0, 2, 3, 0), (12, 0, 2, 1))
PEER_ELEMS = 256  # bulk_peer: u32 per CTA
GOLDEN = 0x9E3779B9


def im2col_spec() -> TensorMapSpec:
    return TensorMapSpec("in", "f32", 4, (IM_C, IM_W, IM_H, IM_N), (IM_C * 4, IM_C * IM_W * 4, IM_C * IM_W * IM_H * 4),
                         (), 0, (), IM_LOWER, IM_UPPER, IM_CHANNELS, IM_PIXELS)


def im2col_reference(t: np.ndarray, start: tuple[int, int, int, int], off: tuple[int, int],
                     extra: int = 0) -> np.ndarray:
    """One im2col column of t (numpy order N, H, W, C), pixel by pixel: the traversal walks the bounding box
    (w from lower to W - 1 + upper, then h, then n) from the start pixel; each pixel plus the filter
    offsets is read, channels c .. c + IM_CHANNELS; anything outside the tensor is 0. ``extra`` widens the
    box by that many pixels per dim (an alternative reading the GPU check reports on)."""
    c0, w0, h0, n0 = start
    bw = IM_W + IM_UPPER[0] - IM_LOWER[0] + extra
    bh = IM_H + IM_UPPER[1] - IM_LOWER[1] + extra
    w, h, n = w0, h0, n0
    col = np.zeros((IM_PIXELS, IM_CHANNELS), np.float32)
    for p in range(IM_PIXELS):
        x, y = w + off[0], h + off[1]
        for j in range(IM_CHANNELS):
            c = c0 + j
            if 0 <= x < IM_W and 0 <= y < IM_H and 0 <= n < IM_N and 0 <= c < IM_C:
                col[p, j] = t[n, y, x, c]
        w += 1
        if w - IM_LOWER[0] >= bw:
            w = IM_LOWER[0]
            h += 1
            if h - IM_LOWER[1] >= bh:
                h = IM_LOWER[1]
                n += 1
    return col


@dataclass
class TmaCase(Case):
    def launch(self, seed: int = 0) -> Launch:
        rng = np.random.default_rng(seed)
        nb = self.nblocks
        if self.kernel == "tma_im2col":
            tensor = rng.standard_normal((IM_N, IM_H, IM_W, IM_C)).astype(np.float32)
            col = IM_CHANNELS * IM_PIXELS * 4
            args = [Arg("buffer", "f32", array=np.full(nb * col // 4, np.nan, np.float32), name="out"),
                    Arg("tensormap", "f32", name="tmap", tmap=im2col_spec()),
                    Arg("buffer", "s32", array=np.array(IM_STARTS, np.int32).ravel(), name="starts"),
                    Arg("scalar", "u32", value=col, name="col_bytes"),
                    Arg("buffer", "f32", array=tensor.ravel(), name="in", hidden=True)]
            return Launch(self.kernel, self.grid, self.block, args, self.shared)
        # bulk_peer
        args = [Arg("buffer", "u32", array=rng.integers(0, 1 << 32, nb * PEER_ELEMS, dtype=np.uint32), name="in"),
                Arg("buffer", "u32", array=np.full(nb * 2 * PEER_ELEMS, 0xDEADBEEF, np.uint32), name="out"),
                Arg("buffer", "u32", array=rng.integers(0, 1 << 32, nb // 2 * PEER_ELEMS, dtype=np.uint32),
                    name="gsum"),
                Arg("buffer", "f32", array=rng.standard_normal(nb * PEER_ELEMS).astype(np.float32) * 1000, name="gf"),
                Arg("buffer", "u32", array=np.full(nb * PEER_ELEMS, 0xDEADBEEF, np.uint32), name="copy")]
        return Launch(self.kernel, self.grid, self.block, args, self.shared)

    def expected(self, launch: Launch) -> dict[int, np.ndarray]:
        if self.kernel == "tma_im2col":
            t = launch.args[4].array.reshape(IM_N, IM_H, IM_W, IM_C)  # type: ignore[union-attr]
            cols = [im2col_reference(t, IM_STARTS[by], (bx % 3, bx // 3))
                    for by in range(self.grid[1]) for bx in range(self.grid[0])]
            return {0: np.stack(cols).ravel()}
        a = [x.array for x in launch.args]
        src = a[0].reshape(-1, PEER_ELEMS)  # type: ignore[union-attr]
        nb = src.shape[0]
        out = np.empty((nb, 2, PEER_ELEMS), np.uint32)
        for b in range(nb):
            rank, peer = b % 2, b ^ 1
            out[b, 0] = src[peer]
            out[b, 1] = (src[b] ^ np.uint32(rank * GOLDEN & 0xFFFFFFFF)) + src[peer]
        gsum = a[2].reshape(-1, PEER_ELEMS) + src[0::2] + src[1::2]  # type: ignore[union-attr]
        half = (src & 0xFFFF).astype(np.float32) * np.float32(0.5)
        gf = a[3].reshape(-1, PEER_ELEMS) + half  # type: ignore[union-attr]
        return {1: out.ravel(), 2: gsum.ravel(), 3: gf.ravel().astype(np.float32), 4: src.ravel().copy()}

    def compared(self, index: int, arr: np.ndarray) -> np.ndarray:
        return arr

    def measured(self, outputs: dict[int, np.ndarray]) -> dict[str, float] | None:
        return None


CASES = [
    TmaCase("im2col_4d", HOPPER / "tma_im2col.ptx", "tma_im2col", (9, len(IM_STARTS), 1), (128, 1, 1), (1, 1, 1),
            2048),
    TmaCase("bulk_peer_2", CLUSTER / "bulk_peer.ptx", "bulk_peer", (4, 1, 1), (128, 1, 1), (2, 1, 1), 0),
]

__all__ = ["CASES", "TmaCase", "im2col_reference", "im2col_spec"]
