"""``python -m validation probe``: describe the live GPU and write a hardware YAML for it.

The driver's device attributes (through pycuda) give the SM count, clock, threads, blocks, registers,
shared memory, L2 size, warp size, memory bus and compute capability; they replace the matching
fields of a base config (``--base``, by default the bundled config of the same architecture), each
rewritten line marked ``# source: probe (ATTRIBUTE = value, device, date)``. Fields the driver does
not report (latencies, pipes, banks) keep the base's numbers and sources; ``--calibrate`` then runs
the calibration microbenchmarks on the GPU and fits the latencies (``validation calibrate --gpu``).
"""

from __future__ import annotations

import datetime
import pathlib
import re
from typing import Any

from sim import atomic
from sim.errors import UsageError
from validation.yamledit import Field, rewrite_fields

#: hardware field -> (driver attribute names, how the field follows from them)
ATTRIBUTES = ("MULTIPROCESSOR_COUNT", "CLOCK_RATE", "WARP_SIZE", "MAX_THREADS_PER_MULTIPROCESSOR",
              "MAX_BLOCKS_PER_MULTIPROCESSOR", "MAX_REGISTERS_PER_MULTIPROCESSOR", "MAX_REGISTERS_PER_BLOCK",
              "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "L2_CACHE_SIZE",
              "MAX_THREADS_PER_BLOCK", "MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH",
              "COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR")


def read_device(ordinal: int = 0) -> dict[str, Any]:
    """The device's name, total memory and :data:`ATTRIBUTES` (raises UsageError without a GPU)."""
    from validation.gpu import gpu_available

    ok, why = gpu_available()
    if not ok:
        raise UsageError(f"probe needs a CUDA GPU: {why}; install the gpu extra (pip install -e \".[gpu]\")")
    import pycuda.driver as cuda  # noqa: PLC0415 - lazy: the gpu extra

    dev = cuda.Device(ordinal)
    attrs = {name: int(dev.get_attribute(getattr(cuda.device_attribute, name))) for name in ATTRIBUTES}
    return {"name": dev.name(), "total_memory": int(dev.total_memory()), "attributes": attrs}


def arch_of(attrs: dict[str, int]) -> str:
    major, minor = attrs["COMPUTE_CAPABILITY_MAJOR"], attrs["COMPUTE_CAPABILITY_MINOR"]
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def changes_for(dev: dict[str, Any], date: str) -> dict[Field, tuple[object, str]]:
    """Hardware fields the driver decides, each with its value and its source note."""
    a = dev["attributes"]

    def src(*names: str) -> str:
        got = ", ".join(f"{n} = {a[n]}" for n in names)
        return f"probe ({got}; {dev['name']}, {date})"

    out: dict[Field, tuple[object, str]] = {
        ("", None, "clock_mhz"): (a["CLOCK_RATE"] // 1000, src("CLOCK_RATE") + " kHz -> MHz"),
        ("", None, "warp_size"): (a["WARP_SIZE"], src("WARP_SIZE")),
        ("", None, "arch"): (arch_of(a), src("COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR")),
        ("core", None, "count"): (a["MULTIPROCESSOR_COUNT"], src("MULTIPROCESSOR_COUNT")),
        ("core", None, "max_threads"): (a["MAX_THREADS_PER_MULTIPROCESSOR"], src("MAX_THREADS_PER_MULTIPROCESSOR")),
        ("core", None, "max_ctas"): (a["MAX_BLOCKS_PER_MULTIPROCESSOR"], src("MAX_BLOCKS_PER_MULTIPROCESSOR")),
        ("core", None, "max_warps"): (a["MAX_THREADS_PER_MULTIPROCESSOR"] // a["WARP_SIZE"],
                                      src("MAX_THREADS_PER_MULTIPROCESSOR", "WARP_SIZE") + " threads / warp size"),
        ("core", None, "registers"): (a["MAX_REGISTERS_PER_MULTIPROCESSOR"], src("MAX_REGISTERS_PER_MULTIPROCESSOR")),
        ("shared", None, "size"): (a["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"],
                                   src("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")),
        ("l2", None, "size"): (a["L2_CACHE_SIZE"], src("L2_CACHE_SIZE")),
        ("limits", None, "threads_per_block"): (a["MAX_THREADS_PER_BLOCK"], src("MAX_THREADS_PER_BLOCK")),
        ("limits", None, "smem_per_block"): (a["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"],
                                             src("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")),
    }
    if a["MEMORY_CLOCK_RATE"] and a["GLOBAL_MEMORY_BUS_WIDTH"]:
        # double data rate: two transfers per memory clock over the bus width
        gbps = round(2 * a["MEMORY_CLOCK_RATE"] * 1e3 * a["GLOBAL_MEMORY_BUS_WIDTH"] / 8 / 1e9)
        out[("dram", None, "bandwidth_gbps")] = (
            gbps, src("MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH") + ": 2 x kHz x bits / 8, the peak")
    return out


def base_for(arch: str) -> pathlib.Path:
    """The bundled config with the same arch (its latencies and pipes are the closest known)."""
    from sim.hw import bundled_configs, load_hw, resolve_hw_path

    for name in bundled_configs():
        path = resolve_hw_path(name)
        if load_hw(path).arch == arch:
            return path
    raise UsageError(f"no bundled hardware config has arch {arch}; give one with --base")


def probe_yaml(dev: dict[str, Any], base: pathlib.Path, date: str) -> str:
    """The base config's text with the probed fields rewritten and a header naming the device."""
    name = re.sub(r"[^a-z0-9]+", "_", dev["name"].lower()).strip("_") or "gpu"
    changes = changes_for(dev, date)
    changes[("", None, "name")] = (f"probe_{name}", f"probe (device name {dev['name']!r})")
    text, done = rewrite_fields(base.read_text(), changes)
    # the base's planner clock is the SM clock measured under load on the base's device: not this one's
    text = re.sub(r"(?m)^planner_clock_mhz:.*\n", "", text)
    missing = sorted(".".join(p for p in f if p) for f in set(changes) - done)
    header = (f"# Written by `python -m validation probe` on {date} for {dev['name']} "
              f"({dev['total_memory'] / 2**30:.0f} GiB): lines marked `# source: probe` come from the driver;\n"
              f"# every other line is {base.name}'s, with its own source.\n")
    if missing:
        header += f"# Not in {base.name}, so not written: {', '.join(missing)}\n"
    return header + text


def add_arguments(p) -> None:
    p.add_argument("-o", "--out", default="probe.yaml", help="the hardware YAML to write (default probe.yaml)")
    p.add_argument("--base", help="config whose unprobed fields are kept (default: the bundled one of the same arch)")
    p.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    p.add_argument("--calibrate", action="store_true",
                   help="also run the calibration microbenchmarks and fit the latencies (about a minute)")


def cli_main(args) -> int:
    from sim.hw import load_hw, resolve_hw_path

    dev = read_device(args.device)
    base = resolve_hw_path(args.base) if args.base else base_for(arch_of(dev["attributes"]))
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    text = probe_yaml(dev, base, date)
    out = pathlib.Path(args.out)
    atomic.write_text(out, text)
    try:
        load_hw(out)  # what probe writes must load
    except Exception:
        out.unlink(missing_ok=True)
        raise
    if args.calibrate:
        from validation.calibrate import compare, fit, measure_gpu

        hw = load_hw(out)
        fitted = fit(hw, compare(hw, measure_gpu(None), None))
        note = f"probe --calibrate (validation calibrate --gpu on {dev['name']}, {date})"
        text, _ = rewrite_fields(out.read_text(), {f: (v, note) for f, v in fitted.items()})
        atomic.write_text(out, text)
        load_hw(out)
    a = dev["attributes"]
    print(f"probe: {dev['name']}, {arch_of(a)}, {a['MULTIPROCESSOR_COUNT']} SMs at {a['CLOCK_RATE'] // 1000} MHz "
          f"-> {out} (base {base.name})")
    return 0
