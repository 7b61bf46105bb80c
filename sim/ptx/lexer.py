"""PTX lexer: text -> tokens with line numbers (comments dropped, lines kept), and numeric literal decoding."""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

from sim.errors import PtxError


class Token(NamedTuple):
    """One lexical token of PTX text: its kind, text and line (a named tuple: made ~2,300 times for a 450-line
    file, 2.5x cheaper than the frozen dataclass it was, the same fields, read-only)."""

    kind: str  # "id", "int", "float", "str", "punct"
    text: str
    line: int


# Blanks before a token are part of its match (one step per token, not two); a run of blanks that no token
# follows (the end of the text, or a character that is not PTX) is a match of its own, `ws`.
_TOKEN = re.compile(
    r"""
    [ \t\r\f\v]*
    (?:
    (?P<nl>\n)
  | (?P<lc>//[^\n]*)
  | (?P<bc>/\*.*?\*/)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<hexf>0[fF][0-9a-fA-F]{8}(?![0-9a-zA-Z_])|0[dD][0-9a-fA-F]{16}(?![0-9a-zA-Z_]))
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|0[0-7]*U?|[1-9][0-9]*U?)
  | (?P<id>[%$A-Za-z_.][A-Za-z0-9_$.]*(?:::[A-Za-z0-9_$.]+)*)
  | (?P<punct>[,;:\[\]{}()<>+\-@!=|*])
    )
  | (?P<ws>[ \t\r\f\v]+)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str, file: str = "<ptx>") -> list[Token]:
    tokens: list[Token] = []
    append = tokens.append
    line = 1
    pos = 0
    n = len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:  # (pos is at the character: blanks before it were a `ws` match)
            bad = text[pos : pos + 20].split("\n")[0]
            raise PtxError(f"unexpected character {text[pos]!r} in {bad!r}: not PTX syntax", file, line)
        kind = m.lastgroup
        pos = m.end()
        if kind == "nl":
            line += 1
        elif kind == "id" or kind == "punct" or kind == "int":
            append(Token(kind, m.group(kind), line))
        elif kind == "bc":
            line += m.group(kind).count("\n")
        elif kind == "ws" or kind == "lc":
            pass
        elif kind == "hexf":
            append(Token("float", m.group(kind), line))
        else:
            append(Token(kind or "punct", m.group(kind or 0), line))
    return tokens


def decode_float(text: str) -> float:
    if text[:2] in ("0f", "0F"):
        return struct.unpack(">f", bytes.fromhex(text[2:]))[0]
    if text[:2] in ("0d", "0D"):
        return struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    return float(text)


def decode_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0":
        return int(t, 8)
    return int(t)
