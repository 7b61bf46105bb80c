"""Load a ``.ko`` module (kernelgen.module), bind tensors by name, launch asynchronously, sync.

    from runtime import load
    k = load("gemm.ko", device="sim:npu7nm")      # or "sim:h200", or "cuda" (pycuda)
    k.bind_input("A", a); k.bind_input("B", b); k.bind_output("D", d)
    k.launch(); k.sync()                           # d now holds the result; k.last_variant says who ran

A top-level package, not part of kernelgen: its simulator backend runs sim.functional and sim.timing,
which kernelgen may not import (kernelgen reads sim.hw and sim.ptx only); runtime reads kernelgen.module
(the container) and sim, and nothing reads runtime, so the package graph stays acyclic.
"""

from runtime.kernel import Kernel, RuntimeFailure, load

__all__ = ["Kernel", "RuntimeFailure", "load"]
