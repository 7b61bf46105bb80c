"""Where a launch runs: the simulator (functional or timed) or a CUDA GPU (runtime.cuda)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kernelgen.module import Module
from runtime.devarray import DeviceArray
from sim.errors import UsageError
from sim.launch import Arg, Launch


@dataclass
class Job:
    """One launch in flight: the variant, its arguments and the backend's handle."""
    variant: int
    args: list[Arg]
    handle: Any = field(default=None)


class Backend(Protocol):
    device: str  # as load() was given it ("sim:npu7nm", "cuda")
    device_arrays: bool  # binds device arrays (runtime.devarray) in place
    copies_at_submit: bool  # has read every host input by the time submit returns (may get views of them)

    def submit(self, variant: int, args: list[Arg], grid: tuple[int, int, int],
               device: dict[int, DeviceArray]) -> Job:
        """Start variant ``variant``; ``device`` maps argument indices to bound device arrays (their Arg
        has no host array). A host input's Arg array holds its storage in C order: flat, or (where the backend
        copies at submit) a 2-D view such as arr.T for a column-major tensor."""
        ...

    def wait(self, job: Job) -> tuple[dict[int, np.ndarray], int | None]: ...


def make_backend(module: Module, device: str, timed: bool) -> Backend:
    if device.startswith("sim:"):
        return SimBackend(module, device[4:], timed)
    if device == "cuda":
        from runtime.cuda import CudaBackend

        return CudaBackend(module)
    raise UsageError(f"device {device!r}: use 'sim:HW' (e.g. sim:{module.manifest['hw']['name']}) or 'cuda'",
                     module.path)


class SimBackend:
    """The module's kernels on the simulator (sim.functional, or sim.timing when timed), on a worker thread
    so that launch() returns at once. The hardware is the module's own profile (hw.yaml inside it). It runs
    on host memory: binding a device array is refused at bind time (Kernel._device_binding)."""

    device_arrays = False
    copies_at_submit = False  # its worker thread reads the inputs after launch() returns

    def __init__(self, module: Module, hw_name: str, timed: bool):
        from sim.hw import hw_from_text

        built = module.manifest["hw"]
        if hw_name != built["name"]:
            arch = f" ({built['arch']})" if built.get("arch") else ""
            raise UsageError(f"module built for hardware {built['name']!r}{arch}, device sim:{hw_name} is "
                             f"{hw_name!r}: load it with device='sim:{built['name']}' or rebuild with "
                             f"--hardware {hw_name}", module.path)
        from sim.hw_seed import convert_text, is_seed_text

        self.module = module
        self.device = f"sim:{hw_name}"
        where = f"{module.path}:{built['file']}"
        text = module.text(built["file"])
        self.hw = hw_from_text(convert_text(text, where) if is_seed_text(text) else text, where)
        self.timed = timed
        self.programs: dict[int, Any] = {}
        self.pool = ThreadPoolExecutor(max_workers=1)

    def program(self, v: int) -> Any:
        if v not in self.programs:
            from sim.ptx.parser import parse_ptx

            name = self.module.variants[v]["ptx"]
            self.programs[v] = parse_ptx(self.module.text(name), f"{self.module.path}:{name}")
        return self.programs[v]

    def submit(self, variant: int, args: list[Arg], grid: tuple[int, int, int],
               device: dict[int, DeviceArray]) -> Job:
        if device:
            raise UsageError(f"{self.device} runs on host memory: bind numpy arrays", self.module.path)
        var = self.module.variants[variant]
        bx, by, bz = var["block"]
        launch = Launch(var["kernel"], grid, (bx, by, bz), args, int(var["dynamic_shared"]))
        prog = self.program(variant)
        return Job(variant, args, self.pool.submit(self._run, prog, launch))

    def _run(self, prog: Any, launch: Launch) -> tuple[dict[int, np.ndarray], int | None]:
        if self.timed:
            from sim.timing import simulate

            r = simulate(prog, launch, self.hw)
            return r.outputs, r.cycles
        from sim.functional.runner import run_functional

        return run_functional(prog, launch).outputs, None

    def wait(self, job: Job) -> tuple[dict[int, np.ndarray], int | None]:
        fut: Future = job.handle
        result: tuple[dict[int, np.ndarray], int | None] = fut.result()
        return result
