"""The thread block cluster fixtures (tests/fixtures/cluster/) as launches with numpy references: what
tests/test_cluster.py runs in the simulator and validation/gpu_cluster.py runs on the H200.

Each case: a kernel, grid, block, cluster shape, inputs (seeded), the outputs numpy expects. Every
output buffer starts filled with a sentinel so that an element nobody wrote shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.launch import Arg, Launch
from sim.tensormap import TensorMapSpec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "cluster"
SENTINEL = 0xDEADBEEF
ROUNDS = 6
LINKS, BARRIERS = 256, 32  # cluster_latency: chain links followed, cluster barrier rounds timed


@dataclass
class Case:
    name: str
    ptx: Path
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    shared: int  # dynamic shared memory bytes

    @property
    def size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @property
    def nblocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def launch(self, seed: int = 0) -> Launch:
        """The launch with its host data (fresh arrays each call)."""
        rng = np.random.default_rng(seed)
        nb = self.nblocks
        if self.kernel == "dsmem_ring":
            args = [Arg("buffer", "u32", array=rng.integers(0, 1 << 31, nb * 64, dtype=np.uint32), name="in"),
                    Arg("buffer", "u32", array=np.full(nb * 64, SENTINEL, np.uint32), name="out"),
                    Arg("buffer", "u32", array=np.full(nb * 16, SENTINEL, np.uint32), name="info")]
        elif self.kernel == "cluster_rounds":
            args = [Arg("buffer", "u32", array=np.full(nb * 128, SENTINEL, np.uint32), name="out"),
                    Arg("scalar", "u32", value=ROUNDS, name="rounds")]
        elif self.kernel == "cluster_latency":
            args = [Arg("buffer", "u64", array=np.full(8, SENTINEL, np.uint64), name="out"),
                    Arg("scalar", "u32", value=LINKS, name="n"), Arg("scalar", "u32", value=BARRIERS, name="m")]
        else:  # tma_multicast: a 32-column f32 tensor of 32 rows per cluster
            rows = 32 * (nb // self.size)
            tensor = rng.standard_normal((rows, 32)).astype(np.float32)
            spec = TensorMapSpec("in", "f32", 4, (32, rows), (128,), (32, 8), 0)
            args = [Arg("buffer", "f32", array=np.full(nb * 1024, np.nan, np.float32), name="out"),
                    Arg("tensormap", "f32", name="tmap", tmap=spec),
                    Arg("buffer", "f32", array=tensor.ravel().copy(), name="in", hidden=True)]
        launch = Launch(self.kernel, self.grid, self.block, args, self.shared)
        launch.cluster = self.cluster  # set after construction: the GPU run also works on a tree without it
        return launch

    def expected(self, launch: Launch) -> dict[int, np.ndarray]:
        """Argument index -> the buffer numpy expects after the launch."""
        gx, gy, _ = self.grid
        sx, sy, _ = self.cluster
        n = self.size
        if self.kernel == "dsmem_ring":
            src = launch.args[0].array.reshape(gy, gx, 64)  # type: ignore[union-attr]
            out = np.empty_like(src)
            info = np.zeros((gy, gx, 16), np.uint32)
            for by in range(gy):
                for bx in range(gx):
                    rx, ry = bx % sx, by % sy
                    rank = rx + ry * sx
                    nxt = (rank + 1) % n
                    nx, ny = bx - rx + nxt % sx, by - ry + nxt // sx
                    out[by, bx] = src[ny, nx]
                    total = 64 * n * (n + 1) // 2
                    lin = by * gx + bx
                    info[by, bx] = [rank, n, rx, ry, bx // sx, by // sy, gx // sx, gy // sy, sx, sy, 0,
                                    total if rank == 0 else 0, bx, by, lin, 0]
            info[..., 15] = 0  # the atomic's old value depends on the order: not compared (mask below)
            return {1: out.ravel(), 2: info.ravel()}
        if self.kernel == "cluster_rounds":
            out = np.zeros((gx, 128), np.uint32)
            t = np.arange(128, dtype=np.uint32)
            for bx in range(gx):
                prev = (bx % n - 1) % n
                acc = np.zeros(128, np.uint32)
                for k in range(ROUNDS):
                    acc = acc * np.uint32(3) + np.uint32(prev * 1000 + k * 16) + t
                out[bx] = acc
            return {0: out.ravel()}
        if self.kernel == "cluster_latency":
            i = 0
            for _ in range(LINKS):
                i = (7 * i + 1) % 256
            return {0: np.array([0, 0, 4 * i, 4 * i, 0, LINKS, BARRIERS, 0], np.uint64)}
        tensor = launch.args[2].array.reshape(-1, 32)  # type: ignore[union-attr]
        out = np.stack([tensor[32 * (bx // n): 32 * (bx // n) + 32].ravel() for bx in range(gx)])
        return {0: out.ravel()}

    def compared(self, index: int, arr: np.ndarray) -> np.ndarray:
        """The part of an output that is deterministic (dsmem_ring's info drops the atomic's old value)."""
        if self.kernel == "dsmem_ring" and index == 2:
            return arr.reshape(-1, 16)[:, :15].ravel()
        if self.kernel == "cluster_latency":
            return arr[[2, 3, 5, 6, 7]]  # the cycle counts are measured, not compared (measured())
        return arr

    def measured(self, outputs: dict[int, np.ndarray]) -> dict[str, float] | None:
        """cluster_latency's clock64 readings per link / per barrier round (None for the other cases)."""
        if self.kernel != "cluster_latency":
            return None
        o = outputs[0].astype(np.int64)
        return {"smem_cycles_per_link": float(o[0]) / LINKS, "dsmem_cycles_per_link": float(o[1]) / LINKS,
                "cluster_barrier_cycles_per_round": float(o[4]) / BARRIERS}


CASES = [
    Case("ring_2", FIXTURES / "dsmem_ring.ptx", "dsmem_ring", (8, 1, 1), (64, 1, 1), (2, 1, 1), 0),
    Case("ring_4", FIXTURES / "dsmem_ring.ptx", "dsmem_ring", (8, 2, 1), (64, 1, 1), (4, 1, 1), 0),
    Case("ring_2x2", FIXTURES / "dsmem_ring.ptx", "dsmem_ring", (4, 4, 1), (64, 1, 1), (2, 2, 1), 0),
    Case("rounds_2", FIXTURES / "cluster_rounds.ptx", "cluster_rounds", (4, 1, 1), (128, 1, 1), (2, 1, 1), 0),
    Case("rounds_4", FIXTURES / "cluster_rounds.ptx", "cluster_rounds", (8, 1, 1), (128, 1, 1), (4, 1, 1), 0),
    Case("multicast_2", FIXTURES / "tma_multicast.ptx", "tma_multicast", (4, 1, 1), (128, 1, 1), (2, 1, 1), 4096),
    Case("multicast_4", FIXTURES / "tma_multicast.ptx", "tma_multicast", (8, 1, 1), (128, 1, 1), (4, 1, 1), 4096),
    Case("latency_2", FIXTURES / "cluster_latency.ptx", "cluster_latency", (2, 1, 1), (32, 1, 1), (2, 1, 1), 0),
]

__all__ = ["BARRIERS", "CASES", "Case", "FIXTURES", "LINKS", "ROUNDS", "SENTINEL"]
