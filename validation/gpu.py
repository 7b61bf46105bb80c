"""Run the same PTX on a real NVIDIA GPU through pycuda and measure it.

``pycuda`` is imported lazily: this module imports (and ``gpu_available()`` answers) without it.

Flow of :func:`run_on_gpu`: JIT-load the PTX with ``module_from_buffer`` (the JIT info/error log
is captured; a failure raises :class:`sim.errors.PtxError` carrying the log on one line), allocate
one device buffer per buffer argument and copy the host data (outputs arrive poisoned or zeroed as
the launch says), run once and read every buffer back (that first run is the checked one), then
``warmup`` untimed runs, then ``repeats`` runs each timed with a pair of CUDA events; the median
is reported. Per-CTA cycles come from a parameter with role ``profile`` (see :func:`_per_cta_cycles`).

``python -m validation gpu KERNEL.ptx`` is :func:`cli_main`.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim import atomic
from sim.errors import ExecutionError, PtxError, UsageError, WorkbenchError
from sim.launch import Launch, normalize_dtype

#: Dynamic shared memory above this needs the opt-in function attribute.
DEFAULT_SHARED_LIMIT = 48 * 1024

_SCALAR_NP: dict[str, type[np.generic]] = {
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
    "f32": np.float32, "f64": np.float64, "f16": np.float16,
}


@dataclass
class Measured:
    wall_ms_median: float
    wall_ms_all: list[float]
    outputs: dict[int, np.ndarray]
    check: dict | None
    jit_log: str
    per_cta_cycles: list[int] | None
    device: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, kernel: str) -> dict:
        d: dict[str, Any] = {
            "device": self.device,
            "kernel": kernel,
            "time_ms": self.wall_ms_median,
            "time_ms_all": self.wall_ms_all,
            "check": self.check,
        }
        if self.per_cta_cycles is not None:
            d["per_cta_cycles"] = self.per_cta_cycles
        d.update(self.extra)
        return d


# --------------------------------------------------------------------------------------------
# availability


def _import_driver():
    import pycuda.driver as cuda  # noqa: PLC0415 - lazy on purpose

    return cuda


def gpu_available() -> tuple[bool, str]:
    """(True, device name) when pycuda imports and a CUDA device answers, else (False, reason)."""
    try:
        cuda = _import_driver()
    except Exception as e:  # noqa: BLE001
        return False, f"pycuda is not importable ({type(e).__name__}: {e})"
    try:
        cuda.init()
        n = cuda.Device.count()
    except Exception as e:  # noqa: BLE001
        return False, f"CUDA driver unavailable ({type(e).__name__}: {e})"
    if n < 1:
        return False, "no CUDA device found"
    try:
        return True, cuda.Device(0).name()
    except Exception as e:  # noqa: BLE001
        return False, f"CUDA device 0 unusable ({e})"


# --------------------------------------------------------------------------------------------
# JIT log helpers


def _clean_log(s: Any) -> str:
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    return str(s or "").replace("\0", "").strip()


_LOG_LINE_RE = re.compile(r"line (\d+)")


def _log_line_number(log: str) -> int | None:
    m = _LOG_LINE_RE.search(log)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------------------------
# profile


def _per_cta_cycles(arr: np.ndarray, slots: int | None) -> list[int]:
    """The profile buffer holds ``slots`` clock64 values per CTA (u64). With 2+ slots the result
    per CTA is last - first; with one slot (or unknown) the raw values are returned."""
    vals = np.asarray(arr).view(np.uint64) if arr.dtype.itemsize == 8 else np.asarray(arr).astype(np.uint64)
    if slots and slots >= 2 and vals.size % slots == 0:
        v = _written(vals.reshape(-1, slots).astype(np.int64))
        return [int(x) for x in (v[:, -1] - v[:, 0])]
    return [int(x) for x in vals]


def _phase_means(arr: np.ndarray, slots: int | None) -> list[float]:
    """Mean over the CTAs of slot[k+1] - slot[k] (thread 0's clock64 between consecutive profile slots:
    a kernelgen kernel's prologue, K loop and epilogue); empty without 3+ slots."""
    vals = np.asarray(arr).view(np.uint64) if arr.dtype.itemsize == 8 else np.asarray(arr).astype(np.uint64)
    if not slots or slots < 3 or vals.size % slots:
        return []
    v = _written(vals.reshape(-1, slots).astype(np.int64))
    return [float(x) for x in np.diff(v, axis=1).mean(axis=0)] if len(v) else []


def _written(v: np.ndarray) -> np.ndarray:
    """The records a CTA wrote: a persistent kernel (wgmma_tma --profile) has one per CTA of its grid, fewer than
    the buffer's (sized for one per tile, zero-initialised), so the all-zero records are no CTA's."""
    return v[(v != 0).any(axis=1)]


# --------------------------------------------------------------------------------------------
# the runner


def run_on_gpu(
    ptx_text: str,
    launch: Launch,
    warmup: int = 3,
    repeats: int = 20,
    check: dict | None = None,
    roles: list[str] | None = None,
    profile_slots: int | None = None,
    flush_l2_bytes: int = 0,
    read_after: tuple[str, ...] = (),
) -> Measured:
    """JIT the PTX, run ``launch`` once (checked), ``warmup`` times, then ``repeats`` timed times.

    The checked run follows the upload of the inputs, which leaves them in the L2 when they fit;
    ``flush_l2_bytes`` > 0 writes a scratch buffer of that size between the upload and that run, so
    it starts with the inputs evicted (what a cold simulation assumes). The buffers whose role is in
    ``read_after`` are read back once more after the timed runs (the last launch's values, e.g. a profile
    taken with the clock settled): ``extra["after"][arg index]``.

    ``launch.args`` are not modified: the check compares against their host arrays (the inputs
    before the run). ``roles`` default to each ``Arg.role``. Raises :class:`PtxError` when the JIT
    rejects the PTX (message: the JIT error log), :class:`ExecutionError` on a launch failure.
    """
    from sim.launch import read_metadata
    from sim.reference import check_gemm
    from validation.gpu_tma import tensormap_params

    meta = read_metadata(ptx_text)
    maps = tensormap_params(meta) if meta is not None and meta.get("kernel") == launch.kernel else []
    ok, why = gpu_available()
    if not ok:
        raise ExecutionError(f"no GPU to run on: {why}")
    cuda = _import_driver()
    dev = cuda.Device(0)
    device_name = dev.name()
    ctx = dev.retain_primary_context()  # kept alive by the driver: no teardown order to get wrong
    ctx.push()
    try:
        return _run_in_context(cuda, device_name, ptx_text, launch, warmup, max(1, repeats),
                               check, roles, profile_slots, check_gemm, flush_l2_bytes, maps, read_after)
    finally:
        cuda.Context.pop()


def _run_in_context(cuda, device_name, ptx_text, launch: Launch, warmup, repeats, check, roles,
                    profile_slots, check_gemm, flush_l2_bytes: int = 0, maps: list | None = None,
                    read_after: tuple[str, ...] = ()) -> Measured:
    logs: dict[str, Any] = {}

    def handler(success, info, error):
        logs["success"] = bool(success)
        logs["info"] = _clean_log(info)
        logs["error"] = _clean_log(error)

    options = []
    try:
        options = [(cuda.jit_option.LOG_VERBOSE, 1)]
    except AttributeError:
        pass
    data = ptx_text.encode("utf-8") + b"\0"
    try:
        module = cuda.module_from_buffer(data, options, handler)
    except Exception as e:  # noqa: BLE001 - pycuda raises its own Error subclasses
        err_log = logs.get("error") or _clean_log(str(e))
        msg = "; ".join(x.strip() for x in err_log.splitlines() if x.strip())
        raise PtxError(f"CUDA JIT rejected the PTX: {msg}; fix the PTX (or run ptxas -arch=sm_90a on it)",
                       line=_log_line_number(err_log)) from None
    jit_log = "\n".join(x for x in (logs.get("info", ""), logs.get("error", "")) if x)

    try:
        func = module.get_function(launch.kernel)
    except Exception:  # noqa: BLE001
        raise UsageError(
            f"kernel '{launch.kernel}' is not an entry of the PTX; pick one with --kernel"
        ) from None

    extra: dict[str, Any] = {}
    for key, attr in (("num_regs", "NUM_REGS"), ("local_bytes", "LOCAL_SIZE_BYTES"),
                      ("static_shared_bytes", "SHARED_SIZE_BYTES")):
        try:
            extra[key] = int(func.get_attribute(getattr(cuda.function_attribute, attr)))
        except Exception:  # noqa: BLE001 - informative only
            pass
    if extra:
        jit_log = "\n".join(x for x in (jit_log, " ".join(f"{k}={v}" for k, v in extra.items())) if x)

    _fill_symbols(cuda, module, launch)
    dyn = int(launch.dynamic_shared or 0)
    if dyn > DEFAULT_SHARED_LIMIT:
        try:
            func.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn)
        except Exception as e:  # noqa: BLE001
            raise ExecutionError(f"cannot opt in to {dyn} B of dynamic shared memory ({e})") from None

    # device buffers and the packed argument list
    allocs: dict[int, Any] = {}
    arg_types: list[Any] = []
    call_args: list[Any] = []
    try:
        for i, a in enumerate(launch.args):
            if a.kind == "buffer":
                assert a.array is not None
                alloc = cuda.mem_alloc(max(1, a.array.nbytes))
                allocs[i] = alloc
                arg_types.append("P")
                call_args.append(int(alloc))
            else:
                t = normalize_dtype(a.dtype)
                if t not in _SCALAR_NP:
                    raise UsageError(f"argument {i}: scalar type .{t} cannot be passed; use a 8..64-bit type")
                np_t = _SCALAR_NP[t]
                arg_types.append(np_t)
                call_args.append(np_t(a.value))

        def upload():
            for i, alloc in allocs.items():
                arr = launch.args[i].array
                if arr is not None and arr.nbytes:
                    cuda.memcpy_htod(alloc, np.ascontiguousarray(arr))

        grid = tuple(int(v) for v in launch.grid)
        block = tuple(int(v) for v in launch.block)

        if maps:
            # tensor maps (64-byte aligned params pycuda cannot pass): encoded from the buffers' device
            # pointers, launched through cuda-python in this context
            from validation.gpu_tma import assemble_args
            from validation.tensormap import encode_tiled, prepare_cuda_python

            targs = assemble_args(ptx_entries(ptx_text)[launch.kernel], maps, launch.args,
                                  {i: int(a) for i, a in allocs.items()}, encode_tiled)
            g3, b3 = launch.grid, launch.block
            # a cluster shape (the header's "cluster"): cuLaunchKernelEx with the cluster-dimension attribute
            cl = {"cluster": tuple(int(v) for v in launch.cluster)} if launch.cluster else {}
            call = prepare_cuda_python(ptx_text.encode("utf-8"), launch.kernel, (int(g3[0]), int(g3[1]), int(g3[2])),
                                       (int(b3[0]), int(b3[1]), int(b3[2])), dyn, targs, **cl)  # type: ignore[arg-type]
        elif launch.cluster and tuple(launch.cluster) != (1, 1, 1):
            raise UsageError("cluster launches go through cuda-python's cuLaunchKernelEx, which this runner uses for "
                             "kernels with tensor maps only; run the kernel with python -m validation.gpu_cluster")
        else:
            func.prepare(arg_types)

            def call():
                func.prepared_call(grid, block, *call_args, shared_size=dyn)

        # 1. the checked run, from the host data (outputs poisoned / zeroed as given)
        upload()
        if flush_l2_bytes > 0:
            scratch = cuda.mem_alloc(int(flush_l2_bytes))
            cuda.memset_d8(scratch, 0x5A, int(flush_l2_bytes))
            cuda.Context.synchronize()
            scratch.free()
        call()
        cuda.Context.synchronize()
        outputs: dict[int, np.ndarray] = {}
        for i, alloc in allocs.items():
            host = np.empty_like(launch.args[i].array)
            if host.nbytes:
                cuda.memcpy_dtoh(host, alloc)
            outputs[i] = host

        # 2. warm-up, 3. timed runs (one event pair per launch; median reported)
        for _ in range(max(0, warmup)):
            call()
        cuda.Context.synchronize()
        events = [(cuda.Event(), cuda.Event()) for _ in range(repeats)]
        for start, end in events:
            start.record()
            call()
            end.record()
        events[-1][1].synchronize()
        times = [float(start.time_till(end)) for start, end in events]
        # 4. the same number of launches back to back between one event pair: the per-launch
        # overhead of the event pairs is amortised (what a kernel costs inside a stream)
        b0, b1 = cuda.Event(), cuda.Event()
        b0.record()
        for _ in range(repeats):
            call()
        b1.record()
        b1.synchronize()
        extra["time_ms_batched"] = float(b0.time_till(b1)) / repeats
        after = {}
        for i, alloc in allocs.items():
            if launch.args[i].role in read_after:
                host = np.empty_like(launch.args[i].array)
                cuda.memcpy_dtoh(host, alloc)
                after[i] = host
        if after:
            extra["after"] = after
    except WorkbenchError:
        raise
    except Exception as e:  # noqa: BLE001 - launch failures, illegal addresses, ...
        raise ExecutionError(f"GPU run of '{launch.kernel}' failed: {type(e).__name__}: {e}") from None
    finally:
        for alloc in allocs.values():
            try:
                alloc.free()
            except Exception:  # noqa: BLE001
                pass

    roles = list(roles) if roles is not None else launch.roles
    result = None
    if check:
        if check.get("op", "gemm") != "gemm":
            raise UsageError(f"unknown check op {check.get('op')!r} (known: gemm)")
        result = check_gemm(check, launch.args, outputs, roles)
    per_cta = None
    for i, r in enumerate(roles):
        if r == "profile" and i in outputs:
            per_cta = _per_cta_cycles(outputs[i], profile_slots)
            phases = _phase_means(outputs[i], profile_slots)
            if phases:
                extra["profile_phase_cycles"] = phases
            break
    return Measured(
        wall_ms_median=float(statistics.median(times)),
        wall_ms_all=times,
        outputs=outputs,
        check=result,
        jit_log=jit_log,
        per_cta_cycles=per_cta,
        device=device_name,
        extra=extra,
    )


def _fill_symbols(cuda, module, launch: Launch) -> None:
    """Copy each ``--symbol`` fill into its module variable (``.global``/``.const``) before the runs."""
    for name, data in launch.symbols.items():
        try:
            ptr, size = module.get_global(name)
        except Exception:  # noqa: BLE001 - pycuda raises its own Error subclasses
            raise UsageError(f"--symbol {name}: the loaded module has no global or constant named '{name}'") \
                from None
        if len(data) > size:
            raise UsageError(f"--symbol {name}: {len(data)} bytes do not fit its {size} bytes")
        cuda.memcpy_htod(ptr, np.frombuffer(data, dtype=np.uint8))


# --------------------------------------------------------------------------------------------
# PTX entry parameters and module variables (small regexes; the full parser is sim.ptx)

_VAR_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(global|const)\s+(?:\.align\s+\d+\s+)?"
                     r"\.(\w+)\s+([A-Za-z_$%][\w$]*)\s*(?:\[(\d*)\])?", re.M)


def ptx_variables(ptx_text: str) -> dict[str, tuple[str, int]]:
    """Module ``.global``/``.const`` variable name -> (element type, size in bytes)."""
    from sim.ptx.types import TYPES

    out: dict[str, tuple[str, int]] = {}
    for m in _VAR_RE.finditer(ptx_text):
        vtype, name, count = m.group(2), m.group(3), m.group(4)
        if vtype in TYPES:
            out[name] = (vtype, TYPES[vtype].size * (int(count) if count else 1))
    return out

_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)\s*\(([^)]*)\)", re.S)


def ptx_entries(ptx_text: str) -> dict[str, list[tuple[str, str]]]:
    """entry name -> [(param type, param name), ...] from the ``.entry NAME ( .param .T n, ... )`` lists.

    An array parameter (``.param .align 8 .b8 s[16]``) gets the type ``"array"``.
    """
    text = re.sub(r"//[^\n]*", "", ptx_text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out: dict[str, list[tuple[str, str]]] = {}
    for m in _ENTRY_RE.finditer(text):
        params = []
        for chunk in m.group(2).split(","):
            chunk = chunk.strip()
            if not chunk:
                continue
            toks = chunk.split()
            name = toks[-1]
            is_array = "[" in chunk
            if is_array:
                name = chunk.split("[")[0].split()[-1]
            types = [t[1:] for t in toks[1:-1] if t.startswith(".") and t[1:] in _SCALAR_NP]
            ptype = "array" if is_array else (types[0] if types else "?")
            params.append((ptype, name))
        out[m.group(1)] = params
    return out


# --------------------------------------------------------------------------------------------
# command line


def add_arguments(p) -> None:
    """The ``gpu`` subcommand's arguments (called by validation.__main__)."""
    p.add_argument("ptx", metavar="KERNEL.ptx", help="PTX file (a kernelgen header supplies the launch)")
    p.add_argument("--kernel", help="entry name (default: the header's, or the only entry)")
    p.add_argument("--grid", help="X,Y,Z (overrides the header)")
    p.add_argument("--block", help="X,Y,Z (overrides the header)")
    p.add_argument("--shared", type=int, default=None,
                   help="dynamic shared memory bytes (overrides the header)")
    p.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="bind a parameter in order or NAME=SPEC: literal, @file.npy, zeros:DTYPE:COUNT")
    p.add_argument("--symbol", action="append", default=[], metavar="NAME=SPEC",
                   help="fill a module .global/.const variable before the runs: NAME=@file.npy or NAME=LITERAL")
    p.add_argument("--repeats", type=int, default=20, help="timed runs (median reported; default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--out", help="directory: write every buffer after the checked run as arg<index>.npy")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def build_launch(ptx_text: str, path: str, args) -> tuple[Launch, dict | None, dict | None]:
    """(launch, meta, check) from the header and the command-line overrides."""
    from sim.launch import bind_launch, read_metadata
    from validation.gpu_tma import launch_params, tensormap_params, without_tensormaps

    meta = read_metadata(ptx_text, file=path)
    entries = ptx_entries(ptx_text)
    if not entries:
        raise PtxError("no .entry found; give a PTX file with a kernel entry", file=path)
    kernel = args.kernel or (meta or {}).get("kernel")
    if kernel is None:
        if len(entries) > 1:
            raise UsageError(f"several entries ({', '.join(entries)}); pick one with --kernel", file=path)
        kernel = next(iter(entries))
    if kernel not in entries:
        raise UsageError(f"no entry named '{kernel}' (entries: {', '.join(entries)}); fix --kernel",
                         file=path)
    params = entries[kernel]
    used_meta = meta if meta is not None and meta.get("kernel", kernel) == kernel else None
    maps = {m.get("name") for m in tensormap_params(used_meta)}
    for i, (ptype, pname) in enumerate(params):
        if ptype in ("array", "?") and pname not in maps:
            raise UsageError(f"parameter {i} ({pname}) of '{kernel}' has an unsupported type; "
                             "use scalar or pointer parameters", file=path)

    bound = [(n, t) for t, n in params]
    if maps and used_meta is not None:  # the maps are assembled at launch; the header's buffers are bound
        used_meta = without_tensormaps(used_meta)
        bound = launch_params(used_meta)
    launch = bind_launch(kernel, bound, used_meta, args.arg, args.grid, args.block,
                         args.shared, np.random.default_rng(args.seed), path, args.symbol,
                         ptx_variables(ptx_text))
    check = used_meta.get("check") if used_meta is not None else None
    return launch, used_meta, check


def _save_npy(arr: np.ndarray, path: Path) -> None:
    np.save(path, arr)


def cli_main(args) -> int:
    """``python -m validation gpu``: 0 passed (or no check), 1 check failed; errors raise (-> 2)."""
    try:
        return _cli(args)
    except WorkbenchError as e:
        if e.file is None:  # name the PTX file in the one-line message
            e.file = args.ptx
            e.args = (e.one_line(),)
        raise


def _cli(args) -> int:
    path = args.ptx
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read the PTX file ({e.strerror}); give an existing .ptx path",
                         file=path) from None
    except UnicodeDecodeError as e:
        raise UsageError(f"not a UTF-8 text file (byte {e.object[e.start]:#04x} at offset {e.start}): expected PTX",
                         file=path) from None
    if args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    launch, meta, check = build_launch(text, path, args)
    profile_slots = None
    if meta and isinstance(meta.get("profile"), dict):
        profile_slots = meta["profile"].get("slots")
    m = run_on_gpu(text, launch, warmup=args.warmup, repeats=args.repeats, check=check,
                   roles=launch.roles, profile_slots=profile_slots)
    if args.out:
        import os

        os.makedirs(args.out, exist_ok=True)
        for i, arr in m.outputs.items():
            atomic.write_with(os.path.join(args.out, f"arg{i}.npy"), functools.partial(_save_npy, arr))
    if args.json:
        d = m.to_json(launch.kernel)
        d["grid"] = list(launch.grid)
        d["block"] = list(launch.block)
        print(json.dumps(d))
    else:
        print(f"device:  {m.device}")
        print(f"kernel:  {launch.kernel}  grid {launch.grid}  block {launch.block}"
              + (f"  dynamic shared {launch.dynamic_shared} B" if launch.dynamic_shared else ""))
        print(f"time:    {m.wall_ms_median * 1e3:.2f} us median of {len(m.wall_ms_all)} "
              f"(min {min(m.wall_ms_all) * 1e3:.2f} us)")
        if m.check is None:
            print("check:   none (no check in the header)")
        else:
            verdict = "PASS" if m.check["passed"] else "FAIL"
            print(f"check:   {verdict}  rel. Frobenius error {m.check['max_rel_err']:.3e} "
                  f"(rtol {m.check['rtol']:g})")
        if m.per_cta_cycles:
            pc = m.per_cta_cycles
            print(f"per-CTA cycles: median {statistics.median(pc):.0f}  min {min(pc)}  max {max(pc)} "
                  f"({len(pc)} CTAs)")
    sys.stdout.flush()
    if m.check is not None and not m.check["passed"]:
        return 1
    return 0
