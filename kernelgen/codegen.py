"""``kernelgen codegen`` (seed 003's ``deepgemm-codegen``): one kernel at a tiling the user fixes
(``--tile-m/--tile-n/--tile-k``), an epilogue written as an expression, PTX out. The planner still
checks the tiling against the hardware (shared memory, registers) and predicts it; it only searches
what the given tile sizes leave open (threads per tile, stages, padding, variant).

Epilogue expressions (``--epilogue``): a sum of terms around the product, optionally inside one
activation: ``acc`` (also ``A*B``, ``AB``) is the product, ``C`` the input matrix; ``alpha * acc``,
``beta * C``, ``+ bias``, ``relu(...)`` / ``gelu(...)``. The seed's own spelling ``alpha * C + beta * D``
(C the product, D the existing output) is read the same way as ``alpha * acc + beta * C``."""

from __future__ import annotations

import re
from typing import Any

from sim.errors import UsageError

_TERM = re.compile(r"^(?:(alpha|beta|[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*\*\s*)?(acc|AB|A\*B|A@B|C|D|bias)$")


def parse_epilogue(expr: str) -> dict[str, Any]:
    """-> spec keys {alpha, beta, epilogue}; a UsageError naming the term that cannot be read."""
    text = expr.strip()
    act = None
    m = re.fullmatch(r"(relu|gelu)\s*\((.*)\)", text)
    if m:
        act, text = m.group(1), m.group(2).strip()
    if not text:
        raise UsageError(f"--epilogue {expr!r}: empty; e.g. 'alpha * acc + beta * C + bias'")
    terms = [t.replace(" ", "") for t in text.split("+")]
    seed_form = any(re.search(r"\bD$", t) for t in terms)  # 'alpha * C + beta * D': C is the product
    product = {"acc", "AB", "A*B", "A@B"} | ({"C"} if seed_form else set())
    other = "D" if seed_form else "C"
    alpha, beta, bias = None, 0.0, False
    for t in terms:
        tm = _TERM.match(t)
        if not tm:
            raise UsageError(f"--epilogue {expr!r}: cannot read term {t!r} (terms: alpha * acc, beta * C, bias; "
                             "inside relu(...) or gelu(...))")
        coef, name = tm.group(1), tm.group(2)
        value = 1.0 if coef in (None, "alpha", "beta") else float(coef)
        if name in product:
            if alpha is not None:
                raise UsageError(f"--epilogue {expr!r}: the product appears twice")
            alpha = value
        elif name == other:
            beta = value
        elif name == "bias" and coef is None:
            bias = True
        else:
            why = "the seed form names the product C and the input D" if seed_form else "D is the output"
            raise UsageError(f"--epilogue {expr!r}: cannot read term {t!r} (bias takes no coefficient; {why})")
    if alpha is None:
        raise UsageError(f"--epilogue {expr!r}: no product term (acc, A*B or the seed's C)")
    epi = (["bias"] if bias else []) + ([act] if act else [])
    return {"alpha": alpha, "beta": beta, "epilogue": epi}


def codegen_spec(gemm: str, dtype: str, out_dtype: str, tiles: dict[str, int], epilogue: str | None) -> Any:
    """The GemmSpec of ``codegen``: the shorthand GEMM with the tile sizes fixed and the epilogue read."""
    from kernelgen.spec import DTYPE_ALIASES, parse_spec, shorthand

    base = shorthand(gemm, DTYPE_ALIASES.get(dtype, dtype), DTYPE_ALIASES.get(out_dtype, out_dtype)).to_json()
    for name, v in tiles.items():
        if v < 1:
            raise UsageError(f"--{name.lower().replace('_', '-')} {v}: give a positive tile size")
    base["tiling"] = [f"{name} in [{v}, {v}]" for name, v in tiles.items()]
    if epilogue:
        ep = parse_epilogue(epilogue)
        base.update(alpha=ep["alpha"], beta=ep["beta"], epilogue=ep["epilogue"])
    return parse_spec(base, "codegen")
