"""Mutators for hostile-input testing: PTX token/line/literal mutations, hardware-YAML value
mutations and ``--arg`` specs. Used by tests/test_fuzz.py (hypothesis, in process), by the corpus in
tests/fixtures/fuzz/ (``python -m tests.fuzzing`` writes it) and by benchmarks/fuzz_replay.py (cold
subprocesses through the real command line).

The contract every input must meet: exit 0 (or 1: a failed numeric check), or exactly one stderr
line with exit 2; never a traceback, never ``internal error``, never a hang.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ_DIR = ROOT / "tests" / "fixtures" / "fuzz"

# Small seeds with a @workbench header, so that a mutant that still parses also runs.
_HEADER = json.dumps({"version": 1, "kernel": "k", "grid": [2, 1, 1], "block": [64, 1, 1], "params": [
    {"name": "k_out", "kind": "buffer", "dtype": "u32", "count": 128, "init": "zeros"},
    {"name": "k_n", "kind": "scalar", "dtype": "u32", "value": 5}]}, separators=(",", ":"))
SEED_LOOP = "// @workbench " + _HEADER + """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out, .param .u32 k_n)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    .shared .align 4 .b8 buf[256];
    ld.param.u64 %rd1, [k_out];
    ld.param.u32 %r2, [k_n];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, 0;
$L_top:
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, %r2;
    @%p1 bra $L_top;
    shl.b32 %r4, %r1, 2;
    mov.u32 %r5, buf;
    add.s32 %r5, %r5, %r4;
    st.shared.u32 [%r5], %r3;
    bar.sync 0;
    ld.shared.u32 %r6, [%r5];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r6;
    ret;
}
"""

PTX_SEEDS = {"loop": SEED_LOOP}
for _name in ("cuda/clock64.ptx", "cuda/block_reduce.ptx", "bugs/loop_bugs.ptx"):
    PTX_SEEDS[Path(_name).stem] = (ROOT / "tests" / "fixtures" / _name).read_text()

INTERESTING_TOKENS = [
    "18446744073709551617", "4294967296", "99999999999999999999999", "-1", "0", "08", "0x", "017", "1.5",
    "0f7FC00000", "0d7FF0000000000000", "%p1", "%rd1", "%r1", "%f1", "%tid.x", ".pred", ".b128", ".u64",
    ".f64", ".s32", ".shared", ".approx", ".sync", "{", "}", ";", ",", "[", "]", "<", ">", "-", "+", "@", "!",
    "|", "bra", "ret", "exit", "trap", "bar.sync", "add.s32.approx", "rem.f64", "mov.u32", ".entry",
    ".reg", ".address_size", "sm_1234", "%r<4294967296>", "$L_top", "_", "x" * 300, "\u00e9", "\x00",
]
INTERESTING_NUMBERS = ["18446744073709551617", "18446744073709551616", "4294967296", "-9223372036854775809",
                       "2147483648", "65536", "0", "-1", "08", "0xFFFFFFFFFFFFFFFFF", "1", "1024", "1025",
                       "99999999999999999999999", "0b2", "1.0", "0f3F800000"]

_TOKEN = re.compile(r"[%$\w.:]+|\s+|[^\s%$\w.:]")
_NUMBER = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$")


def mutate_ptx(text: str, rnd: random.Random) -> str:
    """1-3 of: token deletion / duplication / replacement, literal swap, line deletion / duplication."""
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.choice(("del", "dup", "replace", "literal", "literal", "line_del", "line_dup"))
        if kind.startswith("line"):
            lines = text.split("\n")
            i = rnd.randrange(len(lines))
            lines[i:i + 1] = [] if kind == "line_del" else [lines[i], lines[i]]
            text = "\n".join(lines)
            continue
        toks = _TOKEN.findall(text)
        spots = [i for i, t in enumerate(toks) if not t.isspace()]
        if kind == "literal":
            nums = [i for i in spots if _NUMBER.match(toks[i])]
            if nums:
                toks[rnd.choice(nums)] = rnd.choice(INTERESTING_NUMBERS)
        else:
            i = rnd.choice(spots)
            if kind == "del":
                toks[i] = ""
            elif kind == "dup":
                toks[i] = toks[i] + " " + toks[i]
            else:
                toks[i] = rnd.choice(INTERESTING_TOKENS + [toks[rnd.choice(spots)]])
        text = "".join(toks)
    return text


YAML_VALUES = ["-1", "0", "1e309", ".nan", ".inf", "-.inf", "1000000", "99999999999999999999", "1:30", "0o17",
               "017", "0x10", "yes", "no", "null", "~", "[]", "{}", "'x'", "1_000", "2.5", "[1, 2", "&a 1",
               "*a", "!!binary aGk=", "!!python/object:os.system x", "\"\\u0000\""]
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def mutate_yaml(text: str, rnd: random.Random) -> str:
    """1-3 of: a value replaced by a YAML surprise, a line deleted / duplicated (duplicate key) /
    re-indented, a key misspelt; sometimes an alias bomb appended."""
    lines = text.split("\n")
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(lines))
        kind = rnd.choice(("value", "value", "value", "del", "dup", "indent", "key"))
        if kind == "value" and ":" in lines[i]:
            key, _, rest = lines[i].partition(":")
            comment = rest[rest.index("#"):] if "#" in rest else ""
            lines[i] = f"{key}: {rnd.choice(YAML_VALUES)} {comment}".rstrip()
        elif kind == "del":
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "indent":
            lines[i] = "   " + lines[i]
        elif kind == "key" and ":" in lines[i]:
            lines[i] = lines[i].replace(":", "x:", 1)
    out = "\n".join(lines)
    return out + "\n" + ALIAS_BOMB if rnd.random() < 0.05 else out


ARG_PIECES = ["zeros", "u32", "f32", "bf16", "i8", "q7", ":", "*", "@", "=", "k_out", "k_n", "p0", "p7", "-",
              "0x", "1e309", "nan", "inf", "4294967296", "18446744073709551616", "99999999999999999999", "1.5",
              "0", "-1", "64", "x.npy", "/dev/null", "/tmp", " ", ""]


def random_arg_spec(rnd: random.Random) -> str:
    return "".join(rnd.choice(ARG_PIECES) for _ in range(rnd.randint(1, 6)))


def write_corpus(n_ptx: int = 240, n_yaml: int = 50, n_args: int = 100, seed: int = 13) -> None:
    """The committed corpus: mutants of the seeds, regenerated only on purpose."""
    rnd = random.Random(seed)
    FUZZ_DIR.mkdir(parents=True, exist_ok=True)
    names = sorted(PTX_SEEDS)
    for i in range(n_ptx):
        name = names[i % len(names)]
        (FUZZ_DIR / f"ptx_{i:03d}_{name}.ptx").write_text(mutate_ptx(PTX_SEEDS[name], rnd))
    hw = (ROOT / "hwconfigs" / "npu7nm.yaml").read_text()
    for i in range(n_yaml):
        (FUZZ_DIR / f"hw_{i:03d}.yaml").write_text(mutate_yaml(hw, rnd))
    (FUZZ_DIR / "args.txt").write_text("".join(random_arg_spec(rnd) + "\n" for _ in range(n_args)))


if __name__ == "__main__":
    write_corpus()
    sys.exit(0)
