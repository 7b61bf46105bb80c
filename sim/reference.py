"""numpy references for the automatic result check (``check`` in the @workbench header).

The GEMM check follows ``docs/kernel-metadata.md``:

    D = epilogue(alpha * A @ B + beta * C [+ bias per column])

computed in float64 and compared with the kernel's D by the relative Frobenius norm
``||D - ref|| / ||ref|| <= rtol``. Layouts: a row-major R x C matrix has element (i, j) at
``i*C + j``, a col-major one at ``j*R + i`` (leading dimensions equal the extents); ``blocked-PxQ`` and
``striped-N`` as sim/layouts.py defines them.
A is M x K (``layout_a``), B is K x N (``layout_b``), C and D are M x N (``layout_c``; a
``layout_d`` key, if present, overrides it for D). The epilogue steps apply in list order; ``scale``
multiplies column j by ``scale[j]``, ``bias`` adds ``bias[j]`` to column j, ``relu`` is max(x, 0)
and ``gelu`` is the *tanh approximation* ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``
(``gelu_erf`` gives the exact erf form).
``block_scale: G`` (block-scaled fp8, DeepGEMM's form) replaces ``A @ B`` by
``sum_kb (A[:, kb] @ B[kb, :]) * scale_a[m, kb] * scale_b[n // G, kb]`` over the K blocks kb of G elements,
the f32 buffers of roles ``scale_a`` (M x ceil(K/G), row-major; with ``scale_a_layout: mn4`` MN-major,
``[ceil(K/G)][ceil(M/4)*4]``, DeepGEMM's TMA-aligned form) and ``scale_b`` (ceil(N/G) x ceil(K/G), row-major;
with ``scale_b_layout: k4`` rows of ceil(K/G) rounded up to 4).
The reference is not cast to ``out_dtype``; the tolerance absorbs the rounding.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.errors import HeaderError, UsageError
from sim.launch import Arg, Launch, buffer_to_float64
from sim.layouts import NAMES, parse_layout

DEFAULT_RTOL = 1e-2


def _bad(msg: str) -> UsageError:
    return HeaderError(f"gemm check: {msg}; fix the @workbench header")


def _find(roles: list[str], role: str) -> int | None:
    for i, r in enumerate(roles):
        if r == role:
            return i
    return None


def _matrix(flat: np.ndarray, rows: int, cols: int, layout: str, what: str) -> np.ndarray:
    try:
        lay = parse_layout(layout)
    except ValueError:
        raise _bad(f"layout of {what} must be 'row' or 'col' (or {NAMES}), not {layout!r}") from None
    need = lay.size(rows, cols)
    if flat.size < need:
        pad = "" if lay.kind in ("row", "col") else f" stored {lay.name}"
        raise _bad(f"{what} holds {flat.size} elements, needs {rows}x{cols}{pad} = {need}")
    if lay.kind == "row":
        return flat[:need].reshape(rows, cols)
    if lay.kind == "col":
        return flat[:need].reshape(cols, rows).T
    return lay.gather(flat, rows, cols)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _scalar_from(check: dict, key: str, args: list[Arg], roles: list[str], default: Any) -> Any:
    if key in check and check[key] is not None:
        return check[key]
    i = _find(roles, key)
    if i is not None and args[i].kind == "scalar":
        return args[i].value
    return default


def _number(check: dict, key: str, args: list[Arg], roles: list[str], default: Any, kind: type) -> Any:
    """_scalar_from as an int or float; a value that is not one is a header error, not a crash."""
    v = _scalar_from(check, key, args, roles, default)
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or (
            kind is int and not float(v).is_integer()):
        raise _bad(f"{key} must be {'an integer' if kind is int else 'a number'}, not {v!r}")
    return kind(v)


def _buffer(args: list[Arg], i: int, what: str) -> np.ndarray:
    a = args[i]
    if a.kind != "buffer" or a.array is None:
        raise _bad(f"the {what} parameter (index {i}) is not a buffer")
    return buffer_to_float64(a.array, a.dtype)


def _block_scaled(A: np.ndarray, B: np.ndarray, G: int, args: list[Arg], roles: list[str],
                  layouts: tuple[str, str] = ("row", "row")) -> np.ndarray:
    """sum over K blocks of G of (A_kb @ B_kb) * scale_a[m, kb] * scale_b[n // G, kb], in float64. scale_a is
    stored [M][KB] ("row") or [KB][M rounded up to 4] ("mn4": MN-major with 16-byte rows, DeepGEMM's TMA-aligned
    form); scale_b [NB][KB] ("row") or [NB][KB rounded up to 4] ("k4": 16-byte rows)."""
    sa_layout, sb_layout = layouts
    (M, K), N = A.shape, B.shape[1]
    kb, nb = -(-K // G), -(-N // G)
    found = [_find(roles, r) for r in ("scale_a", "scale_b")]
    if found[0] is None or found[1] is None:
        raise _bad("block_scale needs parameters of roles 'scale_a' and 'scale_b'")
    if sa_layout == "mn4":
        mp = -(-M // 4) * 4
        sa = _matrix(_buffer(args, found[0], "scale_a"), mp, kb, "col", "scale_a")[:M]
    elif sa_layout == "row":
        sa = _matrix(_buffer(args, found[0], "scale_a"), M, kb, "row", "scale_a")
    else:
        raise _bad(f"scale_a_layout must be 'row' or 'mn4', not {sa_layout!r}")
    if sb_layout not in ("row", "k4"):
        raise _bad(f"scale_b_layout must be 'row' or 'k4', not {sb_layout!r}")
    kp = -(-kb // 4) * 4 if sb_layout == "k4" else kb
    sb = _matrix(_buffer(args, found[1], "scale_b"), nb, kp, "row", "scale_b")[:, :kb]
    out = np.zeros((M, N))
    for k in range(kb):
        blk = A[:, k * G:(k + 1) * G] @ B[k * G:(k + 1) * G, :]
        out += blk * sa[:, k][:, None] * sb[np.arange(N) // G, k][None, :]
    return out


def gemm_reference(check: dict, args: list[Arg], roles: list[str]) -> np.ndarray:
    """The float64 M x N reference D from the *input* host arrays of ``args``."""
    M, N, K = (_number(check, k, args, roles, 0, int) for k in ("M", "N", "K"))
    if M < 1 or N < 1 or K < 0:
        raise _bad(f"M, N, K must be positive (got {M}, {N}, {K})")
    alpha = _number(check, "alpha", args, roles, 1.0, float)
    beta = _number(check, "beta", args, roles, 0.0, float)
    ia, ib = _find(roles, "A"), _find(roles, "B")
    if ia is None or ib is None:
        raise _bad("no parameter has role 'A' or 'B'")
    la = check.get("layout_a", "row")
    lb = check.get("layout_b", "row")
    lc = check.get("layout_c", "row")
    A = _matrix(_buffer(args, ia, "A"), M, K, la, "A")
    B = _matrix(_buffer(args, ib, "B"), K, N, lb, "B")
    G = check.get("block_scale", 0) or 0
    if isinstance(G, bool) or not isinstance(G, int) or G < 0:
        raise _bad(f"block_scale must be a positive integer (the K block of the scales, e.g. 128), not {G!r}")
    lays = (str(check.get("scale_a_layout", "row")), str(check.get("scale_b_layout", "row")))
    ref = alpha * (_block_scaled(A, B, G, args, roles, lays) if G else A @ B)
    if beta != 0.0:
        ic = _find(roles, "C")
        if ic is None:  # in-place: D holds C before the run
            ic = _find(roles, "D")
        if ic is None:
            raise _bad("beta != 0 but no parameter has role 'C' (or 'D' for in-place C)")
        ref = ref + beta * _matrix(_buffer(args, ic, "C"), M, N, lc, "C")
    epilogue = check.get("epilogue") or []
    if isinstance(epilogue, str):
        epilogue = [epilogue]
    for step in epilogue:
        if step == "scale":
            isc = _find(roles, "scale")
            if isc is None:
                raise _bad("epilogue 'scale' but no parameter has role 'scale'")
            scale = _buffer(args, isc, "scale")
            if scale.size < N:
                raise _bad(f"scale holds {scale.size} elements, needs N = {N}")
            ref = ref * scale[:N][None, :]
        elif step == "bias":
            ibias = _find(roles, "bias")
            if ibias is None:
                raise _bad("epilogue 'bias' but no parameter has role 'bias'")
            bias = _buffer(args, ibias, "bias")
            if bias.size < N:
                raise _bad(f"bias holds {bias.size} elements, needs N = {N}")
            ref = ref + bias[:N][None, :]
        elif step == "relu":
            ref = np.maximum(ref, 0.0)
        elif step == "gelu":
            ref = _gelu_tanh(ref)
        elif step == "gelu_erf":
            ref = _gelu_erf(ref)
        else:
            raise _bad(f"unknown epilogue step {step!r} (known: scale, bias, relu, gelu, gelu_erf)")
    return ref


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """||got - ref||_F / ||ref||_F (the absolute norm when ref is all zeros); inf on NaN/inf."""
    if not np.all(np.isfinite(got)):
        return float("inf")
    diff = float(np.linalg.norm((got - ref).ravel()))
    den = float(np.linalg.norm(ref.ravel()))
    return diff / den if den > 0 else diff


def check_gemm(check: dict, args: list[Arg], outputs: dict[int, np.ndarray], roles: list[str],
               written_only: bool = False) -> dict:
    """Compare the kernel's D with the numpy reference.

    ``args`` hold the inputs as they were *before* the run; ``outputs`` maps a parameter index to
    the buffer read back after it; ``roles`` gives each parameter's role (``A``, ``B``, ``C``,
    ``D``, ``bias``, ``M``, ...). Returns ``{"passed", "max_rel_err", "rtol"}`` where
    ``max_rel_err`` is the relative Frobenius norm error.
    """
    roles = list(roles) + [""] * (len(args) - len(roles))
    rtol = check.get("rtol", DEFAULT_RTOL)
    if isinstance(rtol, bool) or not isinstance(rtol, int | float) or not rtol >= 0:
        raise _bad(f"rtol must be a non-negative number, not {rtol!r}")
    rtol = float(rtol)
    ref = gemm_reference(check, args, roles)
    M, N = ref.shape
    idd = _find(roles, "D")
    if idd is None:
        raise _bad("no parameter has role 'D' (the output)")
    if idd not in outputs:
        raise _bad(f"the output D (parameter {idd}) was not read back")
    got_flat = buffer_to_float64(outputs[idd], args[idd].dtype)
    layout_d = check.get("layout_d", check.get("layout_c", "row"))
    got = _matrix(got_flat, M, N, layout_d, "D")
    if not written_only:
        err = relative_error(got, ref)
        return {"passed": bool(err <= rtol), "max_rel_err": float(err), "rtol": rtol}
    before = _matrix(_buffer(args, idd, "D"), M, N, layout_d, "D")
    written = ~((got == before) | (np.isnan(got) & np.isnan(before)))
    n = int(written.sum())
    err = relative_error(got[written], ref[written]) if n else float("inf")
    return {"passed": bool(n > 0 and err <= rtol), "max_rel_err": float(err), "rtol": rtol,
            "covered": "the D elements the sampled CTAs wrote", "elements": n, "of": M * N}


def check_from_metadata(
    meta: dict | None, launch_before_inputs: Launch, outputs: dict[int, np.ndarray], written_only: bool = False
) -> dict | None:
    """Run the check that ``meta["check"]`` names, or return None when there is none. written_only: compare
    only the output elements the run changed (a sampled run, where only the sampled CTAs write).

    Roles come from the launch's own ``Arg.role`` (falling back to the metadata params' when it has none).
    """
    if not meta or not meta.get("check"):
        return None
    check = meta["check"]
    if not isinstance(check, dict):
        raise UsageError("@workbench metadata: 'check' must be an object; fix the header")
    roles = launch_before_inputs.roles  # the launch's own order (bind_launch puts hidden buffers last)
    if not any(roles):
        roles = [str(p.get("role", "") or "") for p in meta.get("params", []) if isinstance(p, dict)]
    op = check.get("op")
    if op == "gemm":
        return check_gemm(check, launch_before_inputs.args, outputs, roles, written_only)
    raise UsageError(f"@workbench metadata: unknown check op {op!r} (known: gemm); fix the header")
