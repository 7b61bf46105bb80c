"""Calls to a module's ``.func`` are inlined into the calling kernel's body at parse time.

Every later stage (functional model, timing, verifier) then sees one flat body, as ptxas's own
inlining of small device functions leaves it. A call's arguments and results live in the ``.param``
variables that the call sequence declares; those are per-thread storage (parsed as ``.local``), so
the caller's ``st.param``/``ld.param`` on them and the callee's accesses to its parameters become
``.local`` accesses. The callee's registers, variables and labels get names unique to the call; its
``ret`` becomes a branch to the end of the inlined copy. A call to a function declared without a
body stays a ``call`` instruction (only ``__assertfail`` is provided, see ``b_call``); any other
is an error at the call's line.
"""

from __future__ import annotations

from dataclasses import replace

from sim.errors import PtxError, at_instruction
from sim.isa import is_call, is_return
from sim.ptx.ir import Instruction, Kernel, Operand, Program

#: Extern functions the simulator provides.
PROVIDED = ("__assertfail",)


class _Inliner:
    def __init__(self, k: Kernel, prog: Program):
        self.k = k
        self.prog = prog
        self.serial = 0

    def err(self, ins: Instruction, msg: str) -> PtxError:
        return at_instruction(PtxError, f"{msg} ({ins.text})", self.k.file, ins)

    def expand(self, body: list[Instruction], labels: dict[str, int], rename: dict[str, str],
                 stack: tuple[str, ...]) -> tuple[list[Instruction], dict[str, int]]:
        """``body`` with every call expanded and every name passed through ``rename``; returns the
        new instructions and the labels (renamed) at their new positions."""
        at_index: dict[int, list[str]] = {}
        for name, i in labels.items():
            at_index.setdefault(i, []).append(rename.get(name, name))
        out: list[Instruction] = []
        new_labels: dict[str, int] = {}
        for i in range(len(body) + 1):
            for name in at_index.get(i, []):
                new_labels[name] = len(out)
            if i == len(body):
                break
            copy = _renamed(body[i], rename)
            if is_call(copy):
                sub, sub_labels = self.call(copy, stack)
                for name, j in sub_labels.items():
                    new_labels[name] = len(out) + j
                out.extend(sub)
            else:
                out.append(copy)
        return out, new_labels

    def call(self, ins: Instruction, stack: tuple[str, ...]) -> tuple[list[Instruction], dict[str, int]]:
        if ins.operands and ins.operands[0].kind != "vec":  # no results: `call name, (arguments)`
            ins.operands.insert(0, Operand("vec"))
        ins.operands += [Operand("vec")] * (3 - len(ins.operands))
        rets, target, args = ins.operands[:3]
        if len(ins.operands) != 3 or target.kind != "sym" or rets.kind != "vec" or args.kind != "vec":
            raise self.err(ins, "only direct calls 'call (results), name, (arguments)' are supported")
        name = target.name
        f = self.prog.functions.get(name)
        if f is None:
            if name in self.prog.externs and name in PROVIDED:
                return [ins], {}
            known = ", ".join(sorted(self.prog.functions)) or "none"
            raise self.err(ins, f"call to '{name}', which is not a .func defined in this module "
                                f"(defined: {known}; provided externs: {', '.join(PROVIDED)}); "
                                "add its definition to the PTX")
        if name in stack:
            raise self.err(ins, f"recursive call to '{name}' ({' -> '.join(stack + (name,))}): "
                                "the simulator inlines calls and cannot recurse")
        if len(rets.items) != len(f.returns) or len(args.items) != len(f.params):
            raise self.err(ins, f"'{name}' takes {len(f.params)} arguments and returns {len(f.returns)} "
                                f"values; the call passes {len(args.items)} and {len(rets.items)}")
        if ins.guard is not None:
            raise self.err(ins, "a predicated call is not supported: branch around it instead")
        self.serial += 1
        tag = f"@{name}.{self.serial}"
        rename = {p.name: a.name for p, a in zip(f.returns + f.params, rets.items + args.items)}
        for reg, rtype in f.regs.items():
            self.k.regs[reg + tag] = rtype
            rename[reg] = reg + tag
        for vname, v in f.variables.items():
            rename[vname] = vname + tag
            self.k.variables[vname + tag] = replace(v, name=vname + tag)
        end = "$L__return" + tag
        for label in f.labels:
            rename[label] = label + tag
        body = list(f.body)
        if body and is_return(body[-1]) and body[-1].guard is None:
            body.pop()
        body = [_as_branch(x, end) if is_return(x) else x for x in body]
        labels = dict(f.labels)
        labels[end] = len(body)
        return self.expand(body, labels, rename, stack + (name,))


def _rename_op(op: Operand, rename: dict[str, str]) -> Operand:
    if op.kind in ("reg", "sym", "label"):
        return Operand(op.kind, rename.get(op.name, op.name), op.value, neg=op.neg)
    if op.kind in ("vec", "pair"):
        return Operand(op.kind, op.name, op.value, tuple(_rename_op(x, rename) for x in op.items), neg=op.neg)
    if op.kind == "addr":
        base = _rename_op(op.base, rename) if op.base is not None else None
        return Operand("addr", op.name, op.value, tuple(_rename_op(x, rename) for x in op.items), base)
    return op


def _renamed(ins: Instruction, rename: dict[str, str]) -> Instruction:
    ops = [_rename_op(op, rename) for op in ins.operands]
    guard = rename.get(ins.guard, ins.guard) if ins.guard is not None else None
    return Instruction(ins.opcode, ins.mods, ops, ins.line, ins.text, guard, ins.guard_neg, src=ins.src)


def _as_branch(ret: Instruction, label: str) -> Instruction:
    return Instruction("bra", ("uni",) if ret.guard is None else (), [Operand("sym", label)], ret.line,
                       ret.text, ret.guard, ret.guard_neg, src=ret.src)


def _param_to_local(ins: Instruction, k: Kernel) -> None:
    """``ld.param``/``st.param`` on a call sequence's ``.param`` variable (a kernel variable, unlike
    the entry's own parameters) access per-thread storage."""
    if "param" not in ins.mods:
        return
    for op in ins.operands:
        if op.kind == "addr" and op.base is not None and op.base.kind == "sym" and op.base.name in k.variables:
            ins.mods = tuple("local" if m == "param" else m for m in ins.mods)
            return


def inline_calls(k: Kernel, prog: Program) -> None:
    """Expand every call in ``k`` (see the module docstring); re-index the body and its labels."""
    body, labels = _Inliner(k, prog).expand(k.body, k.labels, {}, (k.name,))
    for i, ins in enumerate(body):
        ins.index = i
        _param_to_local(ins, k)
    k.body = body
    k.labels = labels
