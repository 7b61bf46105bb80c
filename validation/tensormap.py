"""Real TMA tensor maps for the GPU runner: ``cuTensorMapEncodeTiled`` through cuda-python (the image's
``cuda.bindings``), and the pycuda argument format that places a 128-byte tensor map at its aligned
parameter offset. Imported only where a kernel takes a tensor map."""

from __future__ import annotations

from collections.abc import Callable

#: PTX element type -> CUtensorMapDataType name
DTYPES = {"u8": "UINT8", "u16": "UINT16", "u32": "UINT32", "s32": "INT32", "u64": "UINT64", "s64": "INT64",
          "f16": "FLOAT16", "f32": "FLOAT32", "f64": "FLOAT64", "bf16": "BFLOAT16", "tf32": "TFLOAT32",
          "e4m3": "UINT8", "e5m2": "UINT8", "s8": "UINT8"}
SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}


def encode_tiled(dtype: str, address: int, dims: tuple[int, ...], strides: tuple[int, ...], box: tuple[int, ...],
                 element_strides: tuple[int, ...], swizzle: int, oob_nan: bool = False) -> bytes:
    """The 128 bytes of a tiled tensor map. dims and box are innermost first (elements); strides are the
    byte strides of dims[1:]; swizzle is 0, 32, 64 or 128 (bytes)."""
    from cuda.bindings import driver as drv  # noqa: PLC0415 - the GPU image's cuda-python

    rank = len(dims)
    err, tmap = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{DTYPES[dtype]}"), rank, address,
        [drv.cuuint64_t(d) for d in dims], [drv.cuuint64_t(s) for s in strides],
        [drv.cuuint32_t(b) for b in box], [drv.cuuint32_t(e) for e in element_strides],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{SWIZZLES[swizzle]}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA if oob_nan
        else drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeTiled failed ({err.name}) for dims {dims}, strides {strides}, box {box}")
    words = [int(w) for w in tmap.opaque]
    return b"".join(w.to_bytes(8, "little") for w in words)


def encode_im2col(dtype: str, address: int, dims: tuple[int, ...], strides: tuple[int, ...], lower: tuple[int, ...],
                  upper: tuple[int, ...], channels: int, pixels: int, element_strides: tuple[int, ...],
                  swizzle: int) -> bytes:
    """The 128 bytes of an im2col tensor map (cuTensorMapEncodeIm2col). dims innermost first (C, spatial..., N);
    lower / upper the bounding-box corners of the spatial dims (innermost first); channels per pixel and pixels
    per column."""
    from cuda.bindings import driver as drv  # noqa: PLC0415 - the GPU image's cuda-python

    def call(wrap: Callable[[int], object]) -> tuple:
        return drv.cuTensorMapEncodeIm2col(
            getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{DTYPES[dtype]}"), len(dims), address,
            [drv.cuuint64_t(d) for d in dims], [drv.cuuint64_t(s) for s in strides], [int(x) for x in lower],
            [int(x) for x in upper], wrap(channels), wrap(pixels), [drv.cuuint32_t(e) for e in element_strides],
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{SWIZZLES[swizzle]}"),
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)

    try:
        err, tmap = call(int)
    except TypeError:  # bindings that want the cuuint32_t wrappers for the scalar counts
        err, tmap = call(drv.cuuint32_t)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeIm2col failed ({err.name}) for dims {dims}, strides {strides}, "
                         f"corners {lower} {upper}, {channels} channels x {pixels} pixels")
    return b"".join(int(w).to_bytes(8, "little") for w in tmap.opaque)


def encode_spec(spec: object, address: int) -> bytes:
    """A sim.tensormap.TensorMapSpec's map over the buffer at ``address``: im2col or tiled by its fields."""
    from sim.tensormap import TensorMapSpec

    assert isinstance(spec, TensorMapSpec)
    es = spec.element_strides or (1,) * len(spec.dims)
    if spec.im2col:
        return encode_im2col(spec.dtype, address, spec.dims, spec.strides, spec.lower, spec.upper, spec.channels,
                             spec.pixels, es, spec.swizzle)
    return encode_tiled(spec.dtype, address, spec.dims, spec.strides, spec.box, es, spec.swizzle)


def launch_format(params: list[tuple[str, int, int]]) -> str:
    """A struct format for pycuda's prepare(): (kind, size, align) per parameter in order, padding each to
    its alignment; a tensor map ("tmap") is a 128-byte string argument."""
    fmt, off = "", 0
    for kind, size, align in params:
        pad = -off % align
        if pad:
            fmt += f"{pad}x"
        fmt += {"u64": "Q", "s64": "q", "u32": "I", "s32": "i", "f32": "f", "f64": "d"}.get(kind, f"{size}s")
        off += pad + size
    return fmt


_MODULES: dict[bytes, object] = {}


def launch_cuda_python(ptx: bytes, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                       shared: int, args: list[tuple[str, object]]) -> None:
    """Launch through cuda-python in the current context, each argument by pointer (kernelParams), so a
    tensor map travels as its 128 bytes whatever its alignment."""
    prepare_cuda_python(ptx, kernel, grid, block, shared, args)()


def prepare_cuda_python(ptx: bytes, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                        shared: int, args: list[tuple[str, object]],
                        cluster: tuple[int, int, int] | None = None) -> Callable[[], None]:
    """launch_cuda_python's module, function, shared-memory opt-in and packed arguments, done once: the
    returned call is one cuLaunchKernel (what a timed launch should cost on the host), or with ``cluster``
    one cuLaunchKernelEx with the cluster-dimension attribute (a kernel declaring .explicitcluster;
    validation/gpu_cluster.py launches its fixtures the same way)."""
    import ctypes

    from cuda.bindings import driver as drv  # noqa: PLC0415

    if ptx not in _MODULES:
        err, mod = drv.cuModuleLoadData(ptx + b"\0")
        if err != drv.CUresult.CUDA_SUCCESS:
            raise ValueError(f"cuModuleLoadData failed ({err.name})")
        _MODULES[ptx] = mod
    err, fn = drv.cuModuleGetFunction(_MODULES[ptx], kernel.encode())
    if err != drv.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuModuleGetFunction({kernel}) failed ({err.name})")
    if shared > 48 * 1024:
        drv.cuFuncSetAttribute(fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
    store: list[ctypes._CData] = []
    for kind, value in args:
        if kind == "tmap":
            assert isinstance(value, bytes | bytearray) and len(value) == 128
            store.append((ctypes.c_uint8 * 128).from_buffer_copy(value))
        else:
            ctype = {"u64": ctypes.c_uint64, "s64": ctypes.c_int64, "u32": ctypes.c_uint32, "s32": ctypes.c_int32,
                     "f32": ctypes.c_float, "f64": ctypes.c_double}[kind]
            store.append(ctype(value))  # type: ignore[arg-type]
    ptrs = (ctypes.c_void_p * len(store))(*[ctypes.addressof(v) for v in store])
    params = ctypes.addressof(ptrs)

    if cluster is not None and cluster != (1, 1, 1):
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = shared
        cfg.hStream = drv.CUstream(0)
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        cfg.attrs = [attr]
        cfg.numAttrs = 1

        def call_ex(keep: tuple[object, ...] = (store, ptrs, cfg, attr)) -> None:
            (err,) = drv.cuLaunchKernelEx(cfg, fn, params, 0)
            if err != drv.CUresult.CUDA_SUCCESS:
                raise ValueError(f"cuLaunchKernelEx (cluster {cluster}) failed ({err.name})")

        return call_ex

    def call(keep: tuple[object, ...] = (store, ptrs)) -> None:  # keep: the argument memory lives with call
        (err,) = drv.cuLaunchKernel(fn, *grid, *block, shared, 0, params, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise ValueError(f"cuLaunchKernel failed ({err.name})")

    return call
