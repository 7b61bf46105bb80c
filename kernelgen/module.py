"""The ``.ko`` module: a zip holding the variants of a K range, an O(1) dispatch table and what they
were built from (docs/module.md). Written here, read by ``runtime`` (load, bind, launch, sync).

Members: ``module.json`` (the manifest, ABI ``ABI_VERSION``), ``hw.yaml`` (the hardware profile text),
``variants/vI.ptx`` and, when the hardware names an arch and ptxas is found, ``variants/vI.cubin``
(``ptxas -arch=ARCH``), and the source spec file when there was one (``source/NAME``).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgen.emit_common import kernel_params
from kernelgen.krange import Partition, describe, spec_for
from kernelgen.planner import plan, prediction_dict, tiling_json
from kernelgen.spec import GemmSpec
from kernelgen.variants import get
from sim.errors import UsageError, WorkbenchError
from sim.hw import HwConfig

ABI_VERSION = 1
FORMAT = "deepgemm-module"
MANIFEST = "module.json"
HEADER = "// @workbench"


class ModuleError(WorkbenchError):
    """A module that cannot be read or does not match this reader."""


def tensors(spec: GemmSpec) -> list[dict[str, Any]]:
    """The module's named tensors: role, dtype, logical shape (in M, N, K) and storage layout."""
    shapes = {"A": ["M", "K"], "B": ["K", "N"], "C": ["M", "N"], "bias": ["N"], "D": ["M", "N"]}
    layouts = {"A": spec.layout_a, "B": spec.layout_b, "C": spec.layout_c, "bias": "row", "D": spec.layout_c}
    return [{"name": p.role, "io": "output" if p.role == "D" else "input", "dtype": p.dtype,
             "shape": shapes[p.role], "layout": layouts[p.role]}
            for p in kernel_params(spec, spec.name) if p.kind == "buffer"]


def _cubin(ptx: str, arch: str) -> bytes | None:
    ptxas = shutil.which("ptxas")  # the PATH only: kernelgen reads no sim.sass (package graph)
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        r = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(out)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            first = next((s for s in r.stderr.splitlines() if s.strip()), "no message")
            raise WorkbenchError(f"ptxas -arch={arch} rejected a variant: {first.strip()}")
        return out.read_bytes()


def _variant(p: Partition, hw: HwConfig, v: int, cubin: bool) -> tuple[dict[str, Any], str, bytes | None]:
    t = p.candidates[p.chosen[v]]
    ivs = [(lo, hi) for lo, hi, w in p.intervals() if w == v]
    spec = spec_for(p.spec, min(lo for lo, _ in ivs), max(hi for _, hi in ivs))
    pl = plan(spec, hw, only=[t])
    pred = prediction_dict(pl)
    name = f"{p.spec.name}_v{v}"
    ptx = get(t.variant).emit(spec, t, pred, name=name)
    params = [{"name": q.ptx_name, "role": q.role, "kind": q.kind, "dtype": q.dtype}
              for q in kernel_params(spec, name)]
    header = json.loads(ptx.split(HEADER, 1)[1].split("\n", 1)[0])  # the line the emitter just wrote
    dyn = int(header.get("dynamic_shared", 0))
    cb = _cubin(ptx, hw.arch) if cubin and hw.arch else None
    entry = {"index": v, "kernel": name, "ptx": f"variants/v{v}.ptx",
             "cubin": f"variants/v{v}.cubin" if cb is not None else None,
             "intervals": [list(iv) for iv in ivs], "tile": [t.bm, t.bn], "block": [t.threads, 1, 1],
             "dynamic_shared": dyn, "params": params, "plan": tiling_json(t, pl.spec), "prediction": pred}
    return entry, ptx, cb


def build(p: Partition, hw: HwConfig, hw_text: str, source: tuple[str, str] | None = None,
          cubin: bool = True) -> bytes:
    """The module's bytes (a zip); ``source`` = (file name, text) of the spec file, when there is one."""
    entries, blobs = [], {}
    for v in range(len(p.chosen)):
        entry, ptx, cb = _variant(p, hw, v, cubin)
        entries.append(entry)
        blobs[entry["ptx"]] = ptx.encode()
        if cb is not None:
            blobs[entry["cubin"]] = cb
    spec = p.spec
    manifest = {"format": FORMAT, "abi": ABI_VERSION, "name": spec.name,
                "hw": {"name": hw.name, "arch": hw.arch, "file": "hw.yaml"},
                "spec": spec.to_json(), "tensors": tensors(spec),
                "scalars": {"alpha": spec.alpha, "beta": spec.beta} if spec.has_c else {"alpha": spec.alpha},
                "dispatch": {"dim": "K", "lo": p.lo, "hi": p.hi, "sub_bits": p.sub, "table": p.table},
                "variants": entries, "partition": p.to_json(), "log": describe(p),
                "source": f"source/{source[0]}" if source else None}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=1) + "\n")
        z.writestr("hw.yaml", hw_text)
        for name, data in blobs.items():
            z.writestr(name, data)
        if source:
            z.writestr(f"source/{source[0]}", source[1])
    return buf.getvalue()


@dataclass
class Module:
    """A read module: its manifest and member bytes, and the dispatch in O(1)."""
    path: str
    manifest: dict[str, Any]
    members: dict[str, bytes]

    def __post_init__(self) -> None:
        d = self.manifest["dispatch"]
        self.lo, self.hi, self.sub = int(d["lo"]), int(d["hi"]), int(d["sub_bits"])
        self.first_octave = 1 << self.sub
        self.table = tuple(int(v) for v in d["table"])

    @property
    def variants(self) -> list[dict[str, Any]]:
        return list(self.manifest["variants"])

    def dispatch(self, k: int) -> int:
        """The variant serving K = k: kernelgen.krange.bucket_of inlined (a subtraction, a bit length, a
        shift, a tuple index)."""
        x = k - self.lo
        if x < 0 or k > self.hi:
            raise UsageError(f"K={k} is outside the module's range [{self.lo}, {self.hi}]; "
                             "rebuild it with a wider K range", file=self.path)
        if x < self.first_octave:
            return self.table[x]
        e = x.bit_length() - self.sub
        return self.table[(e << self.sub) + (x >> (e - 1)) - self.first_octave]

    def text(self, name: str) -> str:
        return self.members[name].decode()


def read(path: str | Path) -> Module:
    """Open a ``.ko``; a file that is no module, or another ABI, is a one-line ModuleError."""
    src = str(path)
    try:
        with zipfile.ZipFile(path) as z:
            members = {n: z.read(n) for n in z.namelist()}
    except (OSError, zipfile.BadZipFile) as e:
        raise ModuleError(f"not a module ({e}); build one with deepgemm compile SPEC -o X.ko", src) from None
    try:
        manifest = json.loads(members[MANIFEST])
    except (KeyError, json.JSONDecodeError):
        raise ModuleError(f"no readable {MANIFEST} in the zip; rebuild it with deepgemm compile", src) from None
    if manifest.get("format") != FORMAT:
        raise ModuleError(f"format {manifest.get('format')!r}, expected {FORMAT!r}; rebuild it", src)
    if manifest.get("abi") != ABI_VERSION:
        raise ModuleError(f"module ABI {manifest.get('abi')!r}, this runtime reads ABI {ABI_VERSION}: rebuild "
                          "the module with this deepgemm, or load it with the matching runtime", src)
    return Module(src, manifest, members)
