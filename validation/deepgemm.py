"""The ``deepgemm`` command of the seeds: ``deepgemm compile ...`` (kernelgen), ``deepgemm probe ...``
(validation probe: the live GPU's hardware YAML), ``deepgemm analyze --profile DIR`` (validation
analyze: stage cycles and register pressure) and the flags ``--detect-gpu``, ``--list-targets`` and
``--version``. It lives in validation because probe reads the GPU; kernelgen never imports validation."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

TOP_FLAGS = ("--detect-gpu", "--list-targets", "--version")


def targets() -> list[str]:
    """One line per bundled hardware config: its file, the machine it describes, its arch (sm_90a, or
    PTX-level when it names none), SM count and clock."""
    from sim.hw import load_hw

    lines = []
    for path in sorted((Path(__file__).resolve().parents[1] / "hwconfigs").glob("*.yaml")):
        hw = load_hw(path)
        arch = hw.arch or "PTX-level (no arch)"
        lines.append(f"{path.name}: {hw.name}, {arch}, {hw.core.count} cores at {hw.clock_mhz:g} MHz")
    return lines


def detect_gpu() -> tuple[bool, str]:
    from validation.gpu import gpu_available

    ok, what = gpu_available()
    if not ok:
        return False, f"no CUDA GPU: {what}"
    from validation.probe import arch_of, read_device

    dev = read_device(0)
    a = dev["attributes"]
    return True, (f"{dev['name']}: {arch_of(a)}, {a['MULTIPROCESSOR_COUNT']} SMs at {a['CLOCK_RATE'] // 1000} MHz, "
                  f"{dev['total_memory'] / 2**30:.0f} GiB; `deepgemm probe -o gpu.yaml` writes its hardware YAML")


def version() -> str:
    from sim.sass.tools import find_tool, tool_version

    try:
        mine = metadata.version("gemm-workbench")
    except metadata.PackageNotFoundError:
        mine = "not installed (source tree)"
    ptxas = find_tool("ptxas")
    tools = f"ptxas {tool_version(ptxas)}" if ptxas else "ptxas not found (pip install nvidia-cuda-nvcc)"
    return f"deepgemm (GEMM micro-kernel workbench) {mine}; {tools}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("probe", "analyze"):
        from validation.__main__ import main as validation_main

        return validation_main(argv)
    flag = next((a for a in argv if a in TOP_FLAGS), None)
    if flag is None:
        from kernelgen.cli import main as kernelgen_main

        return kernelgen_main(argv)
    if len(argv) > 1:
        print(f"deepgemm: {flag} takes no other arguments (got {' '.join(a for a in argv if a != flag)})",
              file=sys.stderr)
        return 2
    if flag == "--list-targets":
        print("\n".join(targets()))
        return 0
    if flag == "--version":
        print(version())
        return 0
    ok, line = detect_gpu()
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
