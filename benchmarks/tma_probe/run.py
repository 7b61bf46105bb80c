"""On the H200: TMA 2-D tile loads (tests/fixtures/hopper_cuda/tma_tile.ptx) with every swizzle mode and
an out-of-bounds edge (global strides must be multiples of 16 bytes, so the edge is 248 x 29), the tensor
map encoded by the driver (cuTensorMapEncodeTiled through cuda-python) and passed as the kernel's 128-byte
__grid_constant__ parameter (pycuda, else cuda-python cuLaunchKernel). Writes the inputs, the
shared-memory bytes each CTA received and the tensor maps' bytes under $OUT (tma_probe.npz), so the
simulator's coming TMA model can be checked against what the hardware wrote.

    source .devwheels/install.sh && python3 benchmarks/tma_probe/run.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validation.tensormap import encode_tiled, launch_cuda_python, launch_format  # noqa: E402

PTX = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_tile.ptx"
CASES = [  # (name, cols, rows, swizzle bytes, box inner elements): a swizzled box row spans at most the swizzle
    ("sw128", 256, 32, 128, 64), ("sw64", 256, 32, 64, 32), ("sw32", 256, 32, 32, 16), ("none", 256, 32, 0, 64),
    ("sw128_edge", 248, 29, 128, 64),
]
BOX_ROWS = 8


def main() -> int:
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda

    out_dir = Path(os.environ.get("OUT", "/tmp"))
    mod = cuda.module_from_buffer(PTX.read_bytes())
    fn = mod.get_function("tma_tile")
    fmt = launch_format([("u64", 8, 8), ("tmap", 128, 128), ("u32", 4, 4), ("u32", 4, 4), ("u32", 4, 4)])
    fn.prepare(fmt)
    launcher = {"how": "pycuda prepared_call"}

    def launch(grid, dout, tmap, ints, smem):
        if launcher["how"] == "pycuda prepared_call":
            try:
                fn.prepared_call(grid, (128, 1, 1), int(dout), tmap, *map(np.int32, ints), shared_size=smem)
                cuda.Context.synchronize()
                return
            except cuda.Error as e:
                print("pycuda prepared_call failed:", e, "; trying cuda-python cuLaunchKernel", file=sys.stderr)
                launcher["how"] = "cuda-python cuLaunchKernel"
        launch_cuda_python(PTX.read_bytes(), "tma_tile", grid, (128, 1, 1), smem,
                           [("u64", int(dout)), ("tmap", tmap), *(("u32", v) for v in ints)])
        cuda.Context.synchronize()
    rng = np.random.default_rng(7)
    saved: dict[str, np.ndarray] = {}
    meta = {"cases": [], "format": fmt, "device": cuda.Device(0).name()}
    for name, cols, rows, swz, bx in CASES:
        box = (bx, BOX_ROWS)
        host = rng.integers(1, 65535, size=(rows, cols), dtype=np.uint16)  # bf16 bit patterns, none zero
        dev = cuda.to_device(host)
        tmap = encode_tiled("bf16", int(dev), (cols, rows), (cols * 2,), box, (1, 1), swz)
        gx, gy = -(-cols // box[0]), -(-rows // box[1])
        box_bytes = box[0] * box[1] * 2
        out = np.full(gx * gy * box_bytes // 2, 0xDEAD, dtype=np.uint16)  # poisoned
        dout = cuda.to_device(out)
        launch((gx, gy, 1), dout, tmap, (box_bytes, *box), box_bytes + 1024)
        saved[f"{name}_in"] = host
        saved[f"{name}_out"] = cuda.from_device(dout, out.shape, out.dtype)
        saved[f"{name}_tmap"] = np.frombuffer(tmap, dtype=np.uint8)
        meta["cases"].append({"name": name, "cols": cols, "rows": rows, "swizzle": swz, "box": list(box),
                              "grid": [gx, gy]})
        print(name, "ok", file=sys.stderr)
    meta["launch"] = launcher["how"]
    np.savez(out_dir / "tma_probe.npz", **saved)
    (out_dir / "tma_probe.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
