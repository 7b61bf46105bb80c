"""PTX parser for the subset documented in docs/ptx-subset.md: tokens -> Program.

Reads what ``nvcc -O3 -ptx -arch=sm_90a`` writes, unchanged. Anything outside the subset is an
error naming file:line and the statement.
"""

from __future__ import annotations

import struct
from pathlib import Path

from sim.errors import PtxError
from sim.ptx.check import REG_DECL_MAX, check_reg_count
from sim.ptx.inline import inline_calls
from sim.ptx.ir import Instruction, Kernel, Operand, Param, Program, Variable
from sim.ptx.lexer import Token, decode_float, decode_int, tokenize
from sim.ptx.types import TYPES

TYPE_SIZES = {name: t.size for name, t in TYPES.items()}  # bytes

SPECIAL_REGS = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%clock", "%clock64",
    "%clock_hi", "%smid", "%nsmid", "%gridid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt",
    "%lanemask_ge", "%lanemask_gt", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
    "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size", "%cluster_ctarank",
    "%cluster_nctarank", "%is_explicit_cluster", "%clusterid", "%nclusterid", "%cluster_ctaid",
    "%cluster_nctaid", "%reserved_smem_offset_begin", "%reserved_smem_offset_end",
    "%reserved_smem_offset_cap", "%reserved_smem_offset_0", "%reserved_smem_offset_1",
}
_DEBUG = {".loc", ".file", ".section"}
_PERF = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".noreturn",
         ".pragma", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank"}


def _sreg_base(name: str) -> str:
    return name.split(".")[0]


class _Parser:
    def __init__(self, text: str, file: str):
        self.file = file
        self.toks: list[Token] = tokenize(text, file)
        self.i = 0
        self.text = text
        self.lines = text.splitlines()
        self.files: dict[int, str] = {}  # .file number -> source path
        self.loc: tuple[int, int] | None = None  # the last .loc (file number, line)
        self.located: list[tuple[Instruction, int, int]] = []  # resolved once every .file is read
        self.declared: set[str] = set()  # functions declared without a body (.extern .func)
        self.scopes: list[dict[str, str]] = []  # names declared inside nested { } of a body -> unique names
        self.scope_serial = 0

    # -- token helpers -------------------------------------------------------------------------
    def err(self, msg: str, tok: Token | None = None) -> PtxError:
        tok = tok or self.peek()
        line = tok.line if tok else (self.toks[-1].line if self.toks else 1)
        return PtxError(msg, self.file, line)

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.err("unexpected end of file: a '}' or ';' is missing")
        self.i += 1
        return t

    def expect(self, text: str) -> Token:
        t = self.next()
        if t.text != text:
            raise self.err(f"expected {text!r}, found {t.text!r}", t)
        return t

    def accept(self, text: str) -> bool:
        t = self.peek()
        if t is not None and t.text == text:
            self.i += 1
            return True
        return False

    def skip_line(self, line: int) -> None:
        while self.peek() is not None and self.peek().line == line:  # type: ignore[union-attr]
            self.i += 1

    def skip_to_semicolon(self) -> None:
        while self.next().text != ";":
            pass

    def skip_braces(self) -> None:
        """Skip a balanced ``{ ... }`` whose ``{`` is the next token."""
        self.expect("{")
        depth = 1
        while depth:
            s = self.next().text
            depth += (s == "{") - (s == "}")

    def debug_directive(self, t: Token) -> None:
        """``.file N "path"``, ``.loc F L C`` (kept as source positions) and ``.section NAME {...}``."""
        if t.text == ".section":
            while (nxt := self.peek()) is not None and nxt.line == t.line and nxt.text != "{":
                self.next()
            if (nxt := self.peek()) is not None and nxt.text == "{":
                self.skip_braces()
            return
        a, b = self.peek(), self.peek(1)
        if a is not None and b is not None and a.kind == "int":
            if t.text == ".file" and b.kind == "str":
                self.files[decode_int(a.text)] = b.text[1:-1]
            elif t.text == ".loc" and b.kind == "int":
                self.loc = (decode_int(a.text), decode_int(b.text))
        self.skip_line(t.line)

    # -- module level --------------------------------------------------------------------------
    def parse(self) -> Program:
        version, target, asize = "", "", 64
        kernels: dict[str, Kernel] = {}
        functions: dict[str, Kernel] = {}
        variables: dict[str, Variable] = {}
        while self.peek() is not None:
            t = self.next()
            s = t.text
            if s == ".version":
                version = self.next().text
            elif s == ".target":
                parts = [self.next().text]
                while self.accept(","):
                    parts.append(self.next().text)
                target = ",".join(parts)
            elif s == ".address_size":
                asize = decode_int(self.next().text)
            elif s in _DEBUG:
                self.debug_directive(t)
            elif s in (".visible", ".extern", ".weak", ".common"):
                nxt = self.peek()
                if nxt is not None and nxt.text in (".entry", ".func"):
                    continue
                if nxt is not None and nxt.text in (".global", ".const", ".shared"):
                    self.next()
                    v = self.parse_variable(nxt.text[1:], nxt.line, extern=(s == ".extern"))
                    variables[v.name] = v
                    continue
                raise self.err(f"unsupported directive sequence {s} {nxt.text if nxt else ''}", t)
            elif s == ".entry":
                k = self.parse_entry(t)
                if k is not None and k.name in kernels:
                    raise self.err(f"duplicate definition of entry {k.name}: rename or remove one", t)
                if k is not None:
                    kernels[k.name] = k
            elif s == ".func":
                f = self.parse_entry(t)
                if f is not None:
                    functions[f.name] = f
            elif s in (".global", ".const", ".shared"):
                v = self.parse_variable(s[1:], t.line)
                variables[v.name] = v
            else:
                raise self.err(f"unexpected {s!r} at module scope: expected a directive such as .entry", t)
        if not version:
            raise PtxError("missing .version directive: add '.version 8.0' (or later) at the top", self.file, 1)
        for ins, fnum, fline in self.located:
            ins.src = (self.files.get(fnum, f"file {fnum}"), fline)
        prog = Program(self.file, version, target, asize, kernels, variables, self.text, functions,
                       self.declared - set(functions), entries=list(kernels))
        for k in kernels.values():
            inline_calls(k, prog)
            _resolve_names(k, prog)
        return prog

    def parse_variable(self, space: str, line: int, extern: bool = False) -> Variable:
        align = 0
        vtype = ""
        while True:
            t = self.next()
            if t.text == ".align":
                align = decode_int(self.next().text)
            elif t.text.startswith(".") and t.text[1:] in TYPE_SIZES:
                vtype = t.text[1:]
            elif t.text.startswith(".") and t.text[1:] in ("v2", "v4"):
                raise self.err("vector-typed variables are not supported: declare a .b8 array", t)
            else:
                name_tok = t
                break
        if not vtype:
            raise self.err(f"variable {name_tok.text!r} has no type (.b8, .u32, ...)", name_tok)
        elem = TYPE_SIZES[vtype]
        count = 1
        if self.accept("["):
            if self.accept("]"):
                count = 0
            else:
                count = decode_int(self.next().text)
                self.expect("]")
        init = None
        if self.accept("="):
            init = self.parse_initializer(vtype)
        self.expect(";")
        return Variable(name_tok.text, space, vtype, elem, count, align or elem, init, line, extern)

    def parse_initializer(self, vtype: str) -> bytes:
        vals: list[int | float] = []
        braced = self.accept("{")
        while True:
            neg = self.accept("-")
            t = self.next()
            v: int | float = decode_float(t.text) if t.kind == "float" else decode_int(t.text)
            vals.append(-v if neg else v)
            if not braced or not self.accept(","):
                break
        if braced:
            self.expect("}")
        fmt = {"f32": "f", "f64": "d", 1: "B", 2: "H", 4: "I", 8: "Q"}
        code = fmt.get(vtype) or fmt[TYPE_SIZES[vtype]]
        mask = (1 << (8 * TYPE_SIZES[vtype])) - 1
        out = b""
        for v in vals:
            out += struct.pack("<" + code, v if isinstance(code, str) and code in "fd" else int(v) & mask)
        return out

    def parse_params(self) -> list[Param]:
        """``( .param ..., .param ... )`` when the next token is ``(``, else no parameters."""
        params: list[Param] = []
        if self.accept("(") and not self.accept(")"):
            while True:
                params.append(self.parse_param())
                if self.accept(")"):
                    break
                self.expect(",")
        return params

    def parse_entry(self, start: Token) -> Kernel | None:
        """An ``.entry`` or a ``.func`` (whose return parameters come before its name); None for a
        declaration without a body (the name is then remembered as declared)."""
        self.loc = None
        returns = self.parse_params() if start.text == ".func" else []
        name = self.next().text
        params = self.parse_params()
        off = 0
        for p in params:
            off = (off + p.align - 1) // p.align * p.align
            p.offset = off
            off += p.size
        directives: dict = {}
        while True:
            t = self.peek()
            if t is None:
                raise self.err(f"kernel {name} has no body")
            if t.text == ";":
                self.next()
                self.declared.add(name)
                return None
            if t.text == "{":
                break
            self.next()
            if t.text in _PERF:
                vals = []
                while self.peek() is not None and self.peek().kind == "int":  # type: ignore[union-attr]
                    vals.append(decode_int(self.next().text))
                    self.accept(",")
                directives[t.text[1:]] = vals
            else:
                raise self.err(f"unexpected {t.text!r} after the parameters of {name}", t)
        self.expect("{")
        kernel = Kernel(name, params, {}, {}, [], {}, self.file, start.line, directives, returns)
        self.parse_body(kernel)
        return kernel

    def parse_param(self) -> Param:
        self.expect(".param")
        align = 0
        ptype = ""
        pointee = False  # after .ptr, the space and .align describe what the pointer points to
        while True:
            t = self.next()
            if t.text == ".align":
                n = decode_int(self.next().text)
                if not pointee:
                    align = n
            elif t.text == ".ptr":
                pointee = True
            elif t.text in (".global", ".shared", ".const", ".local"):
                continue
            elif t.text.startswith(".") and t.text[1:] in TYPE_SIZES:
                ptype = t.text[1:]
            else:
                name = t.text
                break
        if not ptype:
            raise self.err(f"parameter {name!r} has no type", t)
        size = TYPE_SIZES[ptype]
        if self.accept("["):
            size *= decode_int(self.next().text)
            self.expect("]")
        return Param(name, ptype, size, align or TYPE_SIZES[ptype])

    # -- kernel body ---------------------------------------------------------------------------
    def declare(self, name: str) -> str:
        """The name a declaration gets: itself in the body's outer scope, a unique one in a nested
        ``{ }`` (inline asm and call sequences reuse names such as ``p`` or ``param0``)."""
        if not self.scopes:
            return name
        self.scope_serial += 1
        unique = f"{name}{{{self.scope_serial}}}"
        self.scopes[-1][name] = unique
        return unique

    def scoped(self, name: str) -> str:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name

    def parse_body(self, k: Kernel) -> None:
        self.scopes = []
        while True:
            t = self.next()
            s = t.text
            if s == "}":
                if not self.scopes:
                    return
                self.scopes.pop()
                continue
            if s == "{":
                self.scopes.append({})
                continue
            if s in _DEBUG:
                self.debug_directive(t)
                continue
            if s == ".pragma":
                self.skip_to_semicolon()
                continue
            if s == ".reg":
                self.parse_reg_decl(k)
                continue
            if s in (".shared", ".local", ".global", ".const"):
                v = self.parse_variable(s[1:], t.line)
                v.name = self.declare(v.name)
                k.variables[v.name] = v
                continue
            if s == ".param":  # a call sequence's argument: per-thread storage, as .local
                v = self.parse_variable("local", t.line)
                v.name = self.declare(v.name)
                k.variables[v.name] = v
                continue
            if t.kind == "id" and self.peek() is not None and self.peek().text == ":":  # type: ignore[union-attr]
                self.next()
                if s in k.labels:
                    raise self.err(f"label {s} defined twice", t)
                k.labels[s] = len(k.body)
                continue
            if s == "@":
                self.i -= 1
            elif t.kind != "id" or s.startswith("."):
                raise self.err(f"unexpected {s!r} in the body of {k.name}: expected an instruction", t)
            else:
                self.i -= 1
            k.body.append(self.parse_instruction(k, len(k.body)))

    def parse_reg_decl(self, k: Kernel) -> None:
        t = self.next()
        vec = ""
        if t.text in (".v2", ".v4"):
            vec = t.text
            t = self.next()
        rtype = t.text[1:]
        if not t.text.startswith(".") or rtype not in TYPE_SIZES:
            raise self.err(f"unknown register type {t.text!r}: use .pred, .b32, .f32, .b64, ...", t)
        if vec:
            raise self.err("vector registers (.reg .v4) are not supported: declare scalars", t)
        if TYPES[rtype].np is None:
            raise self.err(f"registers of type {t.text} are not supported by the simulator: declare .b64 pairs "
                           "(see docs/ptx-subset.md)", t)
        while True:
            n = self.next()
            if self.accept("<"):
                count = check_reg_count(self.next().text, self.file, n.line, REG_DECL_MAX - len(k.regs))
                self.expect(">")
                for j in range(count):
                    k.regs[self.declare(f"{n.text}{j}")] = rtype
            else:
                k.regs[self.declare(n.text)] = rtype
            if self.accept(";"):
                return
            self.expect(",")

    def parse_instruction(self, k: Kernel, index: int) -> Instruction:
        guard = None
        neg = False
        first = self.peek()
        assert first is not None
        if self.accept("@"):
            neg = self.accept("!")
            g = self.next()
            guard = self.scoped(g.text)
        op_tok = self.next()
        if op_tok.kind != "id":
            raise self.err(f"expected an opcode, found {op_tok.text!r}", op_tok)
        parts = ["shared" if p == "shared::cta" else p for p in op_tok.text.split(".")]
        opcode, mods = parts[0], tuple(parts[1:])
        operands: list[Operand] = []
        if not self.accept(";"):
            while True:
                operands.append(self.parse_operand(k))
                if self.accept(";"):
                    break
                t = self.next()
                if t.text != ",":
                    raise self.err(f"expected ',' or ';' after an operand of {op_tok.text}, found {t.text!r}", t)
        text = self._stmt_text(first.line, self.toks[self.i - 1].line)
        ins = Instruction(opcode, mods, operands, first.line, text, guard, neg, index)
        if self.loc is not None:
            self.located.append((ins, *self.loc))
        return ins

    def _stmt_text(self, line: int, last: int) -> str:
        """The statement's source text; one written over several lines is joined into one."""
        return " ".join(x.strip() for x in self.lines[line - 1: max(line, last)]).replace("( ", "(")

    def parse_operand(self, k: Kernel) -> Operand:
        t = self.next()
        s = t.text
        if s in ("{", "("):  # a vector, or the return/argument list of a call
            close = "}" if s == "{" else ")"
            items = []
            if not self.accept(close):
                while True:
                    items.append(self.parse_operand(k))
                    if self.accept(close):
                        break
                    self.expect(",")
            return Operand("vec", items=tuple(items))
        if s == "[":
            return self.parse_address(k)
        if s == "!":
            op = self.parse_operand(k)
            op.neg = True
            return op
        if s == "-":
            n = self.next()
            if n.kind == "int":
                return Operand("imm", value=-decode_int(n.text))
            if n.kind == "float":
                return Operand("fimm", value=-decode_float(n.text))
            raise self.err(f"expected a number after '-', found {n.text!r}", n)
        if t.kind == "int":
            return Operand("imm", value=decode_int(s))
        if t.kind == "float":
            return Operand("fimm", value=decode_float(s))
        if t.kind != "id":
            raise self.err(f"unexpected {s!r} in an operand", t)
        op = self.name_operand(k, t)
        if self.peek() is not None and self.peek().text == "|":  # type: ignore[union-attr]
            self.next()
            other = self.name_operand(k, self.next())
            return Operand("pair", items=(op, other))
        return op

    def name_operand(self, k: Kernel, t: Token) -> Operand:
        s = self.scoped(t.text)
        if s == "_":
            return Operand("sink", name="_")
        if s in k.regs:
            return Operand("reg", name=s)
        if s.startswith("%"):
            if _sreg_base(s) in SPECIAL_REGS or s.startswith("%envreg"):
                return Operand("sreg", name=s)
            raise PtxError(f"register {s} is used but not declared: add it to a .reg directive",
                           self.file, t.line)
        if s == "WARP_SZ":
            return Operand("imm", value=32)
        return Operand("sym", name=s)  # label or variable, resolved after the body

    def parse_address(self, k: Kernel) -> Operand:
        t = self.next()
        base: Operand | None
        offset = 0
        if t.kind == "int":
            base, offset = None, decode_int(t.text)
        else:
            base = self.name_operand(k, t)
        while self.peek() is not None and self.peek().text in ("+", "-"):  # type: ignore[union-attr]
            sign = -1 if self.next().text == "-" else 1
            if self.accept("-"):
                sign = -sign
            n = self.next()
            if n.kind != "int":
                raise self.err(f"address offsets must be integers, found {n.text!r}", n)
            offset += sign * decode_int(n.text)
        coords: tuple[Operand, ...] = ()
        if self.accept(","):  # [tensor-map, {c0, c1, ...}] (cp.async.bulk.tensor)
            brace = self.peek()
            vec = self.parse_operand(k)
            if vec.kind != "vec" or not 1 <= len(vec.items) <= 5:
                raise self.err("a tensor operand is [tensor-map, {c0, ..., cN}] with 1..5 coordinates", brace)
            coords = vec.items
        self.expect("]")
        return Operand("addr", value=offset, base=base, items=coords)


def _resolve_names(k: Kernel, prog: Program) -> None:
    """Symbols become labels, variables or parameters; unknown names are errors."""
    known = set(k.variables) | set(prog.variables) | {p.name for p in k.params} | prog.externs

    def fix(op: Operand, ins: Instruction) -> Operand:
        if op.kind == "sym":
            if op.name in k.labels:
                return Operand("label", name=op.name)
            if op.name not in known:
                raise PtxError(f"'{op.name}' is not a declared label, variable or parameter: declare it",
                               k.file, ins.line)
        elif op.kind == "vec" or op.kind == "pair":
            op.items = tuple(fix(x, ins) for x in op.items)
        elif op.kind == "addr":
            op.base = fix(op.base, ins) if op.base is not None else None
            op.items = tuple(fix(x, ins) for x in op.items)
        return op

    for ins in k.body:
        ins.operands = [fix(op, ins) for op in ins.operands]


def parse_ptx(text: str, file: str = "<ptx>", strict: bool = True) -> Program:
    """Parse PTX text into a Program, decoding every instruction against the ISA table (an entry
    that fails keeps its error in ``prog.errors``: sim.isa.decode_program)."""
    from sim.isa import decode_program

    parser = _Parser(text, file)
    try:
        prog = parser.parse()
    except (ValueError, OverflowError, struct.error) as e:  # int()/float()/struct on a malformed token
        raise parser.err(f"malformed number or size ({e}); write a decimal, 0x hex or 0f float literal",
                         parser.toks[max(parser.i - 1, 0)] if parser.toks else None) from None
    decode_program(prog, strict)
    return prog


def parse_file(path: str | Path, strict: bool = True) -> Program:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise PtxError(f"cannot read PTX file: {e.strerror}", str(p)) from None
    except UnicodeDecodeError:
        raise PtxError("not a text file: expected PTX", str(p)) from None
    return parse_ptx(text, str(p), strict)
