"""Calibration microbenchmarks: the PTX in this folder (nvcc -O3 -ptx -arch=sm_90a of the .cu next
to it), how to launch each entry, its inputs and a numpy reference.

Pure numpy, package data of ``validation``: ``validation.calibrate`` runs these on the GPU and in the
simulator; ``tests/fixtures/cases.py`` adds them to its fixture table (`MICRO_CASES`), where the
cycle outputs are only checked >= 0. :class:`Case` is that table's record: see cases.py for the
meaning of each field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MICRO_DIR = Path(__file__).resolve().parent

POISON_U32 = 0xDEADBEEF
POISON_U64 = 0xDEADBEEFDEADBEEF

Sizes = dict[str, int]
Dim3 = tuple[int, int, int]


def poison_f32(n: int) -> np.ndarray:
    return np.full(n, np.nan, dtype=np.float32)


def poison_f64(n: int) -> np.ndarray:
    return np.full(n, np.nan, dtype=np.float64)


def poison_i32(n: int) -> np.ndarray:
    return np.full(n, POISON_U32, dtype=np.uint32).view(np.int32)


def poison_u32(n: int) -> np.ndarray:
    return np.full(n, POISON_U32, dtype=np.uint32)


def poison_i64(n: int) -> np.ndarray:
    return np.full(n, POISON_U64, dtype=np.uint64).view(np.int64)


def scalar_value(a: Any) -> Any:
    """The value of a scalar argument: ``(value, dtype)`` tuples as make_args writes them, or a bare value."""
    return a[0] if isinstance(a, tuple) else a


@dataclass(frozen=True)
class Case:
    """One kernel entry of one PTX file: launch, inputs, numpy reference (fields: tests/fixtures/cases.py)."""

    name: str                                   # unique id, e.g. "pchase_shared"
    file: str                                   # path of the .ptx relative to root
    kernel: str                                 # entry name in the PTX
    sizes: Sizes                                # default problem sizes
    grid: Callable[[Sizes], Dim3]
    block: Callable[[Sizes], Dim3]
    make_args: Callable[[np.random.Generator, Sizes], list]
    outputs: tuple[int, ...]                    # indices of buffers the kernel writes
    reference: Callable[[list], dict[int, np.ndarray]]
    rtol: float                                 # rel_err bound; 0 = exact equality
    nonneg_outputs: tuple[int, ...] = ()        # only checked to be >= 0
    notes: str = ""
    features: tuple[str, ...] = field(default=())  # PTX features exercised (informational)
    root: Path = MICRO_DIR                      # the folder `file` is relative to

    @property
    def ptx_path(self) -> Path:
        return self.root / self.file

    @property
    def cu_path(self) -> Path:
        return (self.root / self.file).with_suffix(".cu")

    def launch(self, sizes: Sizes | None = None) -> tuple[Dim3, Dim3]:
        s = self.sizes if sizes is None else sizes
        return self.grid(s), self.block(s)


def make_chain(rng: np.random.Generator, n: int, stride: int | None = None) -> np.ndarray:
    """u32 next-index array forming ONE cycle through all n elements.

    stride=None: random order (defeats prefetching); else next[i] = (i + stride) % n, which is a single
    cycle when gcd(stride, n) == 1 (otherwise the cycle from 0 has n / gcd elements)."""
    if stride is None:
        order = rng.permutation(n)
        nxt = np.empty(n, dtype=np.uint32)
        nxt[order] = np.roll(order, -1)
        return nxt
    return ((np.arange(n, dtype=np.int64) + stride) % n).astype(np.uint32)


def follow_chain(nxt: np.ndarray, steps: int, start: int = 0) -> int:
    p = start
    for _ in range(steps):
        p = int(nxt[p])
    return p


def _pchase_shared_args(rng: np.random.Generator, s: Sizes) -> list:
    n = s["n"]
    assert n <= 4096, "pchase_shared holds at most 4096 words"
    return [make_chain(rng, n), (n, "s32"), (s["steps"], "s32"), poison_i64(2), poison_u32(1)]


def _pchase_shared_ref(args: list) -> dict[int, np.ndarray]:
    return {4: np.array([follow_chain(args[0], scalar_value(args[2]))], dtype=np.uint32)}


def _pchase_global_args(rng: np.random.Generator, s: Sizes) -> list:
    return [make_chain(rng, s["n"]), (s["steps"], "s32"), poison_i64(2), poison_u32(1)]


def _pchase_global_ref(args: list) -> dict[int, np.ndarray]:
    return {3: np.array([follow_chain(args[0], scalar_value(args[1]))], dtype=np.uint32)}


def _bank_args(rng: np.random.Generator, s: Sizes) -> list:
    return [poison_u32(32), poison_i64(32), (s["stride"], "s32"), (s["iters"], "s32")]


def _bank_ref(args: list) -> dict[int, np.ndarray]:
    stride, iters = scalar_value(args[2]), scalar_value(args[3])
    w = (np.arange(32, dtype=np.int64) * stride) & 4095
    return {0: ((w * iters) & 0xFFFFFFFF).astype(np.uint32)}


def bank_conflict_degree(stride: int) -> int:
    """Expected conflict degree (max distinct words per bank over the warp) for bank_conflict."""
    words = {(lane * stride) & 4095 for lane in range(32)}
    per_bank: dict[int, int] = {}
    for w in words:
        per_bank[w % 32] = per_bank.get(w % 32, 0) + 1
    return max(per_bank.values())


def _mma_chain_args(rng: np.random.Generator, s: Sizes) -> list:
    A = rng.standard_normal(256).astype(np.float16)
    Bt = rng.standard_normal(128).astype(np.float16)
    C = rng.standard_normal(128).astype(np.float32)
    return [A, Bt, C, poison_f32(128), poison_i64(32), (s["iters"], "s32")]


def _mma_chain_ref_factory(chains: int) -> Callable[[list], dict[int, np.ndarray]]:
    def ref(args: list) -> dict[int, np.ndarray]:
        A = np.asarray(args[0], np.float64).reshape(16, 16)
        B = np.asarray(args[1], np.float64).reshape(8, 16).T
        C = np.asarray(args[2], np.float64).reshape(16, 8)
        iters = scalar_value(args[5])
        return {3: (chains * C + chains * iters * (A @ B)).ravel()}
    return ref


MICRO_CASES: list[Case] = [
    Case(
        name="pchase_shared", file="pchase.ptx", kernel="pchase_shared",
        sizes={"n": 1000, "steps": 64},
        grid=lambda s: (1, 1, 1), block=lambda s: (32, 1, 1),
        make_args=_pchase_shared_args, outputs=(3, 4), reference=_pchase_shared_ref, rtol=0.0,
        nonneg_outputs=(3,),
        notes="shared-memory load-to-use latency: result[1] = cycles/step of `ld.shared.u32 p,[p]`",
        features=("ld.shared via inline asm", "mov.u64 %clock64", "div.s64"),
    ),
    Case(
        name="pchase_global_ca", file="pchase.ptx", kernel="pchase_global_ca",
        sizes={"n": 4096, "steps": 64},
        grid=lambda s: (1, 1, 1), block=lambda s: (1, 1, 1),
        make_args=_pchase_global_args, outputs=(2, 3), reference=_pchase_global_ref, rtol=0.0,
        nonneg_outputs=(2,),
        notes="L1 (ld.global.ca) dependent-load latency incl. mul.wide.u32 + add.s64 per step",
        features=("ld.global.ca.u32", "mov.u64 %clock64"),
    ),
    Case(
        name="pchase_global_cg", file="pchase.ptx", kernel="pchase_global_cg",
        sizes={"n": 4096, "steps": 64},
        grid=lambda s: (1, 1, 1), block=lambda s: (1, 1, 1),
        make_args=_pchase_global_args, outputs=(2, 3), reference=_pchase_global_ref, rtol=0.0,
        nonneg_outputs=(2,),
        notes="L2 / DRAM (ld.global.cg) dependent-load latency incl. mul.wide.u32 + add.s64 per step",
        features=("ld.global.cg.u32", "mov.u64 %clock64"),
    ),
    Case(
        name="bank_conflict", file="bank_conflict.ptx", kernel="bank_conflict",
        sizes={"stride": 4, "iters": 16},
        grid=lambda s: (1, 1, 1), block=lambda s: (32, 1, 1),
        make_args=_bank_args, outputs=(0, 1), reference=_bank_ref, rtol=0.0,
        nonneg_outputs=(1,),
        notes="lane l reads word (l*stride)&4095 iters times (ld.volatile.shared.u32); "
              "conflict degree = bank_conflict_degree(stride)",
        features=("ld.volatile.shared.u32", "bar.warp.sync", "mov.u64 %clock64"),
    ),
    Case(
        name="mma_chain", file="mma_chain.ptx", kernel="mma_chain",
        sizes={"iters": 16},
        grid=lambda s: (1, 1, 1), block=lambda s: (32, 1, 1),
        make_args=_mma_chain_args, outputs=(3, 4), reference=_mma_chain_ref_factory(1), rtol=1e-4,
        nonneg_outputs=(4,),
        notes="dependent mma.sync m16n8k16 f16->f32 chain: D = C + iters*A@B; A row-major 16x16, "
              "Bt = B^T 8x16 (f16), C/D row-major 16x8 f32",
        features=("mma.sync m16n8k16 f16 (accumulator in = out)", "bar.warp.sync", "mov.u64 %clock64"),
    ),
    Case(
        name="mma_indep4", file="mma_chain.ptx", kernel="mma_indep4",
        sizes={"iters": 16},
        grid=lambda s: (1, 1, 1), block=lambda s: (32, 1, 1),
        make_args=_mma_chain_args, outputs=(3, 4), reference=_mma_chain_ref_factory(4), rtol=1e-4,
        nonneg_outputs=(4,),
        notes="4 independent mma chains (issue interval): D = 4*C + 4*iters*A@B",
        features=("mma.sync m16n8k16 f16", "mov.u64 %clock64"),
    ),
]


_BY_NAME = {c.name: c for c in MICRO_CASES}


def by_name(name: str) -> Case:
    return _BY_NAME[name]


__all__ = [
    "Case", "MICRO_CASES", "MICRO_DIR", "POISON_U32", "POISON_U64", "Sizes", "Dim3", "by_name", "make_chain",
    "follow_chain", "bank_conflict_degree", "scalar_value", "poison_f32", "poison_f64", "poison_i32",
    "poison_u32", "poison_i64",
]
