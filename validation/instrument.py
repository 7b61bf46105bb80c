"""PTX-to-PTX transform: per-warp clock64 start/end stamps in a trailing profile buffer.

The same instrumented PTX runs on the GPU and in the simulator, so both measure a CTA the same way:

* every ``.entry`` gets a trailing ``.param .u64`` (the profile buffer);
* its first instruction (after the leading declarations) reads ``%clock64`` into a fresh register;
* before every ``ret`` / ``exit`` (a predicated ``@%p ret;`` becomes ``@!%p bra SKIP; ...; ret; SKIP:``)
  ``%clock64`` is read again, then the lowest active lane of the exiting lanes stores the start stamp
  and ``red.max``-es the end stamp into ``prof[2 * (cta_linear * warps_per_cta + warp_in_cta) + {0, 1}]``
  (u64; ``cta_linear = ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)``, ``warp_in_cta`` = the
  linear thread index / 32). Lanes that exit at different points leave the latest exit as the end.

The address arithmetic runs after the end stamp, outside the measured span. Per-CTA span:
:func:`cta_spans` = max(end) - min(start) over the CTA's warps. The ``// @workbench`` header gains the
buffer (role ``profile``, zeros) and ``"profile": {"param", "slots": 2 * warps_per_cta,
"layout": "warp_start_end", "warps_per_cta"}``; validation.gpu's ``_per_cta_cycles`` with those slots
returns last warp's end - first warp's start, so read spans with :func:`cta_spans` instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from sim import atomic
from sim.errors import UsageError
from sim.launch import read_metadata

PREFIX = "%wbp"  # fresh register prefix; checked absent from the input
LAYOUT = "warp_start_end"

_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*(\()?")
_EXIT_RE = re.compile(r"^(\s*)(?:@(!?)(%?[\w$]+)\s+)?(ret|exit)(\.uni)?\s*;\s*(//.*)?$")
_DECL_RE = re.compile(r"^\s*(\.reg|\.shared|\.local|\.const|\.pragma|//|$)")
_META_LINE_RE = re.compile(r"^\s*//\s*@workbench\b")


@dataclass
class Instrumented:
    text: str
    entries: list[str]
    param_index: int | None  # index of the profile parameter of the header's kernel
    warps_per_cta: int | None


def _strip_comments(s: str) -> str:
    s = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), s, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), s)


def _matching(code: str, open_pos: int, op: str, cl: str) -> int:
    depth = 0
    for i in range(open_pos, len(code)):
        if code[i] == op:
            depth += 1
        elif code[i] == cl:
            depth -= 1
            if depth == 0:
                return i
    raise UsageError(f"unbalanced '{op}' at offset {open_pos}; give complete PTX")


def _exit_block(indent: str, buf_param: str) -> list[str]:
    r, d, p = f"{PREFIX}_r", f"{PREFIX}_d", f"{PREFIX}_p"
    i = indent or "\t"
    return [f"{i}mov.u64 {d}1, %clock64;",
            f"{i}activemask.b32 {r}0;",
            f"{i}neg.s32 {r}1, {r}0;",
            f"{i}and.b32 {r}1, {r}1, {r}0;",
            f"{i}mov.u32 {r}2, %laneid;",
            f"{i}shl.b32 {r}2, 1, {r}2;",
            f"{i}setp.eq.b32 {p}0, {r}1, {r}2;",
            f"{i}mov.u32 {r}3, %ntid.x;",
            f"{i}mov.u32 {r}4, %ntid.y;",
            f"{i}mov.u32 {r}5, %tid.z;",
            f"{i}mov.u32 {r}6, %tid.y;",
            f"{i}mad.lo.u32 {r}5, {r}5, {r}4, {r}6;",
            f"{i}mov.u32 {r}6, %tid.x;",
            f"{i}mad.lo.u32 {r}5, {r}5, {r}3, {r}6;",
            f"{i}shr.u32 {r}5, {r}5, 5;",
            f"{i}mul.lo.u32 {r}3, {r}3, {r}4;",
            f"{i}mov.u32 {r}4, %ntid.z;",
            f"{i}mul.lo.u32 {r}3, {r}3, {r}4;",
            f"{i}add.u32 {r}3, {r}3, 31;",
            f"{i}shr.u32 {r}3, {r}3, 5;",
            f"{i}mov.u32 {r}4, %ctaid.z;",
            f"{i}mov.u32 {r}6, %nctaid.y;",
            f"{i}mov.u32 {r}7, %ctaid.y;",
            f"{i}mad.lo.u32 {r}4, {r}4, {r}6, {r}7;",
            f"{i}mov.u32 {r}6, %nctaid.x;",
            f"{i}mov.u32 {r}7, %ctaid.x;",
            f"{i}mad.lo.u32 {r}4, {r}4, {r}6, {r}7;",
            f"{i}mad.lo.u32 {r}4, {r}4, {r}3, {r}5;",
            f"{i}ld.param.u64 {d}2, [{buf_param}];",
            f"{i}cvta.to.global.u64 {d}2, {d}2;",
            f"{i}mul.wide.u32 {d}3, {r}4, 16;",
            f"{i}add.u64 {d}2, {d}2, {d}3;",
            f"{i}@{p}0 st.global.u64 [{d}2], {d}0;",
            f"{i}@{p}0 red.global.max.u64 [{d}2+8], {d}1;"]


def _instrument_body(lines: list[str], buf_param: str, entry_no: int) -> list[str]:
    """``lines``: the body between the entry's braces (exclusive)."""
    out: list[str] = [f"\t.reg .b32 \t{PREFIX}_r<8>;", f"\t.reg .b64 \t{PREFIX}_d<4>;",
                      f"\t.reg .pred \t{PREFIX}_p<1>;"]
    k = 0
    while k < len(lines) and _DECL_RE.match(lines[k]):
        out.append(lines[k])
        k += 1
    out.append(f"\tmov.u64 \t{PREFIX}_d0, %clock64;")
    n = 0
    saw_exit = False
    for line in lines[k:]:
        m = _EXIT_RE.match(line)
        if not m:
            out.append(line)
            continue
        saw_exit = True
        indent, neg, pred, op, uni = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5) or ""
        if pred is None:
            out += _exit_block(indent, buf_param)
            out.append(line)
        else:
            skip = f"$wbp_skip_{entry_no}_{n}"
            out.append(f"{indent}@{'' if neg else '!'}{pred} bra {skip};")
            out += _exit_block(indent, buf_param)
            out.append(f"{indent}{op}{uni};")
            out.append(f"{skip}:")
        n += 1
    if not saw_exit:
        out += _exit_block("\t", buf_param)
        out.append("\tret;")
    return out


def instrument_ptx(text: str, file: str | None = None) -> Instrumented:
    """The instrumented PTX of ``text`` (every entry), with its @workbench header updated (if any)."""
    if re.search(re.escape(PREFIX) + r"_", text) or "$wbp_skip_" in text:
        raise UsageError(f"the PTX already uses the register prefix {PREFIX}_ (instrumented twice?); "
                         "instrument the original PTX", file=file)
    code = _strip_comments(text)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in text offsets
    entries: list[str] = []
    params_of: dict[str, int] = {}
    for no, m in enumerate(_ENTRY_RE.finditer(code)):
        name = m.group(1)
        buf = f"{name}_wbp_prof"
        decl = f".param .u64 {buf}"
        if m.group(2):
            close = _matching(code, m.end() - 1, "(", ")")
            inner = code[m.end():close]
            nparams = inner.count(".param")
            at = m.end() + len(inner.rstrip())  # right after the last parameter
            sep = ",\n\t" if inner.strip() else "\n\t"
            edits.append((at, at, f"{sep}{decl}"))
            after = close + 1
        else:
            nparams = 0
            edits.append((m.end(), m.end(), f"({decl})"))
            after = m.end()
        open_b = code.index("{", after)
        close_b = _matching(code, open_b, "{", "}")
        body = text[open_b + 1:close_b]
        lines = body.split("\n")
        head, tail = lines[0], lines[-1]  # the rest of the '{' line and the text before '}'
        new = _instrument_body(lines[1:-1], buf, no)
        edits.append((open_b + 1, close_b, "\n".join([head, *new, tail])))
        entries.append(name)
        params_of[name] = nparams
    if not entries:
        raise UsageError("no .entry in the PTX; give a kernel", file=file)
    for s, e, rep in sorted(edits, reverse=True):
        text = text[:s] + rep + text[e:]
    meta = read_metadata(text, file)
    if meta is None:
        return Instrumented(text, entries, None, None)
    kernel = meta.get("kernel") or entries[0]
    if kernel not in params_of:
        raise UsageError(f"header kernel {kernel!r} is not an entry ({', '.join(entries)}); fix the header",
                         file=file)
    meta, idx, wpc = _with_profile(meta, f"{kernel}_wbp_prof")
    text = _replace_header(text, meta)
    return Instrumented(text, entries, idx, wpc)


def _with_profile(meta: dict, pname: str) -> tuple[dict, int, int]:
    meta = json.loads(json.dumps(meta))
    grid, block = meta["grid"], meta["block"]
    ctas = int(np.prod([int(v) for v in grid]))
    wpc = -(-int(np.prod([int(v) for v in block])) // 32)
    params = meta.setdefault("params", [])
    for p in params:  # the kernel's own profile buffer (kernelgen --profile) keeps its data, not the role
        if p.get("role") == "profile":
            p["role"] = "profile_own"
    idx = len(params)
    params.append({"name": pname, "kind": "buffer", "dtype": "u64", "role": "profile",
                   "count": 2 * ctas * wpc, "init": "zeros"})
    if isinstance(meta.get("extents"), dict):
        meta["extents"][f"p{idx}"] = str(16 * ctas * wpc)
    meta["profile"] = {"param": idx, "slots": 2 * wpc, "layout": LAYOUT, "warps_per_cta": wpc}
    return meta, idx, wpc


def _replace_header(text: str, meta: dict) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _META_LINE_RE.match(line):
            lines[i] = "// @workbench " + json.dumps(meta, separators=(",", ":"))
            break
    return "\n".join(lines)


def cta_spans(buf: np.ndarray, warps_per_cta: int) -> dict[int, int]:
    """CTA linear index -> max(end) - min(start) over its warps, for the CTAs that wrote stamps
    (a sampled simulation leaves the others zero)."""
    v = np.asarray(buf).view(np.uint64).astype(np.int64).reshape(-1, warps_per_cta, 2)
    out: dict[int, int] = {}
    for c in range(v.shape[0]):
        w = v[c][v[c, :, 1] != 0]
        if w.size:
            out[c] = int(w[:, 1].max() - w[:, 0].min())
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m validation.instrument",
                                 description="add per-warp clock64 stamps to a PTX file")
    ap.add_argument("ptx")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args(argv)
    with open(a.ptx, encoding="utf-8") as f:
        res = instrument_ptx(f.read(), a.ptx)
    atomic.write_text(a.out, res.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
