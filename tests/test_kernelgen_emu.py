"""A tiny lockstep emulator of the PTX subset kernelgen emits, for the kernelgen tests only.

All threads of a CTA execute each instruction together (registers are numpy arrays over threads);
branches must be uniform; cp.async copies complete at once. It checks the index math of the
emitters (fragment layouts, predicated edges, epilogue) without the workbench simulator.
"""

from __future__ import annotations

import json
import re

import numpy as np

DT = {"%rd": np.uint64, "%r": np.uint32, "%f": np.float32, "%h": np.uint16, "%p": np.bool_}


def f2bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def bf16_to_f32(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f):
    u = np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def f16_to_f32(h):
    return h.view(np.float16).astype(np.float32)


def f32_to_f16(f):
    return np.asarray(f, np.float32).astype(np.float16).view(np.uint16)


def parse_imm(tok):
    if tok.startswith("0f"):
        return np.uint32(int(tok[2:], 16)).view(np.float32)
    return int(tok, 0)


def split_ops(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Emu:
    def __init__(self, ptx: str):
        self.meta = json.loads(ptx.splitlines()[0].split("@workbench", 1)[1])
        self.shared_syms, off = {}, 0
        for m in re.finditer(r"\.shared \.align 16 \.b8 (\w+)\[(\d+)\];", ptx):
            self.shared_syms[m.group(1)] = off
            off += (int(m.group(2)) + 15) // 16 * 16
        self.shared_size = off
        self.params = re.findall(r"\.param \.(\w+) (\w+)", ptx)
        body = ptx.split(".entry", 1)[1].split("{", 1)[1]
        self.code, self.labels = [], {}
        for line in body.splitlines():
            line = line.split("//")[0].strip()
            if not line or line.startswith(".reg") or line == "}":
                continue
            if line.endswith(":"):
                self.labels[line[:-1]] = len(self.code)
                continue
            self.code.append(line.rstrip(";"))

    # ---- memory ----
    def load(self, space, addr, n, mask):
        mem = self.gmem if space == "global" else self.smem
        a = addr.astype(np.int64)[mask]
        if space == "global":
            a = a - self.gbase
        if len(a) and (a.min() < 0 or a.max() + n > len(mem)):
            raise IndexError(f"{space} load out of bounds: {a.min()}..{a.max() + n} of {len(mem)}")
        out = np.zeros((len(addr), n), np.uint8)
        out[mask] = mem[a[:, None] + np.arange(n)]
        return out

    def store(self, space, addr, data, mask):
        mem = self.gmem if space == "global" else self.smem
        a = addr.astype(np.int64)[mask]
        if space == "global":
            a = a - self.gbase
        n = data.shape[1]
        if len(a) and (a.min() < 0 or a.max() + n > len(mem)):
            raise IndexError(f"{space} store out of bounds: {a.min()}..{a.max() + n} of {len(mem)}")
        mem[a[:, None] + np.arange(n)] = data[mask]

    def run(self, args: dict[str, object]):
        """args: PTX param name -> numpy array (buffer) or scalar. Returns the buffers after the run."""
        bufs, off, scal = {}, 0, {}
        for _ty, name in self.params:
            v = args[name]
            if isinstance(v, np.ndarray):
                bufs[name] = (off, v)
                off += (v.nbytes + 255) // 256 * 256 + 256
        self.gbase = 1 << 20
        self.gmem = np.zeros(off, np.uint8)
        for name, (o, v) in bufs.items():
            self.gmem[o:o + v.nbytes] = np.frombuffer(v.tobytes(), np.uint8)
            scal[name] = self.gbase + o
        for _ty, name in self.params:
            if name not in scal:
                scal[name] = args[name]
        self.pvals = scal
        gx, gy, _ = self.meta["grid"]
        T = self.meta["block"][0]
        for by in range(gy):
            for bx in range(gx):
                self.run_cta(bx, by, T)
        out = {}
        for name, (o, v) in bufs.items():
            out[name] = np.frombuffer(self.gmem[o:o + v.nbytes].tobytes(), v.dtype).copy()
        return out

    def run_cta(self, bx, by, T):
        self.T = T
        self.smem = np.zeros(self.shared_size, np.uint8)
        self.regs = {}
        self.special = {"%tid.x": np.arange(T, dtype=np.uint32), "%ctaid.x": np.full(T, bx, np.uint32),
                        "%ctaid.y": np.full(T, by, np.uint32)}
        pc, steps = 0, 0
        while pc < len(self.code):
            steps += 1
            if steps > 5_000_000:
                raise RuntimeError("runaway")
            line = self.code[pc]
            pc += 1
            mask = np.ones(T, bool)
            if line.startswith("@"):
                g, line = line.split(None, 1)
                neg = g.startswith("@!")
                mask = self.regs[g[2:] if neg else g[1:]].copy()
                if neg:
                    mask = ~mask
            op, _, rest = line.partition(" ")
            ops = split_ops(rest)
            if op == "ret":
                return
            if op == "bra":
                if mask.all():
                    pc = self.labels[ops[0]]
                elif mask.any():
                    raise RuntimeError(f"divergent branch at {line}")
                continue
            self.exec(op, ops, mask)

    # ---- operands ----
    def val(self, tok, dtype=None):
        if tok in self.regs:
            return self.regs[tok]
        if tok in self.special:
            return self.special[tok]
        if tok in self.shared_syms:
            return np.full(self.T, self.shared_syms[tok], np.uint32)
        v = parse_imm(tok)
        return np.full(self.T, v, dtype or (np.float32 if isinstance(v, np.floating) else np.int64))

    def set(self, reg, v, mask):
        dt = next(d for p, d in sorted(DT.items(), key=lambda x: -len(x[0])) if reg.startswith(p))
        if np.dtype(dt) == np.float32:
            v = np.asarray(v, np.float32)
        else:
            v = np.asarray(v).astype(np.int64) if not np.asarray(v).dtype == np.bool_ else np.asarray(v)
            v = v.astype(dt) if dt is not np.bool_ else v.astype(bool)
        old = self.regs.get(reg)
        if old is None:
            old = np.zeros(self.T, dt)
        self.regs[reg] = np.where(mask, np.broadcast_to(v, (self.T,)), old).astype(dt)

    def addr(self, tok):
        inner = tok.strip("[]")
        m = re.match(r"^([%\w.]+)(?:\+(-?\d+))?$", inner)
        base, imm = m.group(1), int(m.group(2) or 0)
        if base in self.pvals and base not in self.regs:
            return base, imm
        return self.val(base).astype(np.int64) + imm

    def exec(self, op, ops, mask):
        parts = op.split(".")
        name = parts[0]
        u = lambda t: self.val(t).astype(np.int64)  # noqa: E731
        M32 = 0xFFFFFFFF
        if name == "ld" and parts[1] == "param":
            key, _ = self.addr(ops[1])
            self.set(ops[0], np.full(self.T, self.pvals[key]), mask)
        elif name == "cvta":
            self.set(ops[0], self.val(ops[1]), mask)
        elif name == "mov":
            if parts[1] == "f32":
                self.set(ops[0], self.val(ops[1], np.float32), mask)
            else:
                self.set(ops[0], u(ops[1]), mask)
        elif name in ("shr", "shl", "and", "add", "mul", "mad", "sub") and parts[-1] in ("u32", "b32", "u64"):
            a, b = u(ops[1]), u(ops[2])
            if name == "shr":
                r = a >> b
            elif name == "shl":
                r = (a << b) & M32
            elif name == "and":
                r = a & b
            elif name == "add":
                r = a + b
            elif name == "sub":
                r = a - b
            elif name == "mul" and parts[1] == "wide":
                r = a * b
            elif name == "mul":
                r = (a * b) & M32
            else:
                r = (a * b + u(ops[3])) & M32
            if parts[-1] in ("u32", "b32") and not (name == "mul" and parts[1] == "wide"):
                r = r & M32
            self.set(ops[0], r, mask)
        elif name == "setp":
            a, b = u(ops[1]), u(ops[2])
            r = a < b if parts[1] == "lt" else a == b
            self.set(ops[0], r, mask)
        elif name == "and" and parts[1] == "pred":
            self.set(ops[0], self.val(ops[1]) & self.val(ops[2]), mask)
        elif name == "selp":
            self.set(ops[0], np.where(self.val(ops[3]), u(ops[1]), u(ops[2])), mask)
        elif name in ("fma", "mul", "add", "max") and parts[-1] == "f32":
            f = lambda t: self.val(t, np.float32).astype(np.float32)  # noqa: E731
            if name == "fma":
                r = (f(ops[1]).astype(np.float64) * f(ops[2]) + f(ops[3])).astype(np.float32)
            elif name == "mul":
                r = f(ops[1]) * f(ops[2])
            elif name == "add":
                r = f(ops[1]) + f(ops[2])
            else:
                r = np.maximum(f(ops[1]), f(ops[2]))
            self.set(ops[0], r, mask)
        elif name == "tanh":
            self.set(ops[0], np.tanh(self.val(ops[1])), mask)
        elif name == "cvt":
            if op == "cvt.f32.f16":
                self.set(ops[0], f16_to_f32(self.val(ops[1]).astype(np.uint16)), mask)
            elif op == "cvt.f32.bf16":
                self.set(ops[0], bf16_to_f32(self.val(ops[1]).astype(np.uint16)), mask)
            elif op == "cvt.rn.f16.f32":
                self.set(ops[0], f32_to_f16(self.val(ops[1])), mask)
            elif op == "cvt.rn.bf16.f32":
                self.set(ops[0], f32_to_bf16(self.val(ops[1])), mask)
            else:
                raise NotImplementedError(op)
        elif name == "ld" and parts[1] in ("global", "shared"):
            space = parts[1]
            a = self.addr(ops[1])
            vec = int(parts[2][1:]) if parts[2].startswith("v") else 1
            ty = parts[-1]
            n = 4 if ty == "f32" else 2
            raw = self.load(space, a, n * vec, mask)
            dsts = [x.strip() for x in ops[0].strip("{}").split(",")]
            for j, d in enumerate(dsts):
                chunk = raw[:, j * n:(j + 1) * n].copy()
                v = chunk.view(np.float32)[:, 0] if ty == "f32" else chunk.view(np.uint16)[:, 0]
                self.set(d, v, mask)
        elif name == "st":
            space, ty = parts[1], parts[-1]
            a = self.addr(ops[0])
            v = self.val(ops[1])
            data = (v.astype(np.float32).view(np.uint8).reshape(-1, 4) if ty == "f32"
                    else v.astype(np.uint16).view(np.uint8).reshape(-1, 2))
            self.store(space, a, data, mask)
        elif name == "bar":
            pass
        elif name == "cp":
            if parts[2] in ("commit_group", "wait_group"):
                return
            dst, src = self.addr(ops[0]), self.addr(ops[1])
            size = int(ops[2])
            ss = u(ops[3])
            raw = self.load("global", src, size, mask & (ss > 0))
            raw[ss == 0] = 0
            self.store("shared", dst, raw, mask)
        elif name == "ldmatrix":
            x = int(parts[4][1:])
            trans = "trans" in parts
            a = self.addr(ops[1])
            rows = self.load("shared", a, 16, np.ones(self.T, bool)).view(np.uint16)  # T x 8
            dsts = [d.strip() for d in ops[0].strip("{}").split(",")]
            out = np.zeros((self.T, x), np.uint32)
            for w in range(self.T // 32):
                for j in range(x):
                    mat = rows[w * 32 + 8 * j: w * 32 + 8 * j + 8]  # 8 x 8
                    if trans:
                        mat = mat.T
                    for t in range(32):
                        lo, hi = mat[t // 4, 2 * (t % 4)], mat[t // 4, 2 * (t % 4) + 1]
                        out[w * 32 + t, j] = int(lo) | (int(hi) << 16)
            for j, d in enumerate(dsts):
                self.set(d, out[:, j], mask)
        elif name == "mma":
            ab = parts[-3]
            conv = f16_to_f32 if ab == "f16" else bf16_to_f32
            groups = [[x.strip() for x in g.strip("{}").split(",")] for g in ops]
            d, ar, br, cr = groups
            A = [self.val(r).astype(np.uint32) for r in ar]
            B = [self.val(r).astype(np.uint32) for r in br]
            C = [self.val(r).astype(np.float32) for r in cr]
            D = [np.zeros(self.T, np.float32) for _ in range(4)]
            for w in range(self.T // 32):
                Am = np.zeros((16, 16), np.float64)
                Bm = np.zeros((16, 8), np.float64)
                Cm = np.zeros((16, 8), np.float64)
                for lane in range(32):
                    th, g, t = w * 32 + lane, lane >> 2, lane & 3
                    for i in range(8):
                        h = (A[i // 2][th] >> (16 * (i & 1))) & 0xFFFF
                        row = g if i in (0, 1, 4, 5) else g + 8
                        col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
                        Am[row, col] = conv(np.array([h], np.uint16))[0]
                    for i in range(4):
                        h = (B[i // 2][th] >> (16 * (i & 1))) & 0xFFFF
                        Bm[t * 2 + (i & 1) + (8 if i >= 2 else 0), g] = conv(np.array([h], np.uint16))[0]
                    for i in range(4):
                        Cm[g + (8 if i >= 2 else 0), t * 2 + (i & 1)] = C[i][th]
                Dm = Am @ Bm + Cm
                for lane in range(32):
                    th, g, t = w * 32 + lane, lane >> 2, lane & 3
                    for i in range(4):
                        D[i][th] = Dm[g + (8 if i >= 2 else 0), t * 2 + (i & 1)]
            for r, v in zip(d, D):
                self.set(r, v, mask)
        else:
            raise NotImplementedError(op)


# ---------------------------------------------------------------- numeric tests through the emulator

import pytest  # noqa: E402

from kernelgen.planner import enumerate_tilings  # noqa: E402
from kernelgen.spec import parse_spec  # noqa: E402
from kernelgen.tiling import Tiling  # noqa: E402
from kernelgen.variants import get  # noqa: E402


def _make(dt, n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    if dt == "f32":
        return x, x
    if dt == "f16":
        h = x.astype(np.float16)
        return h, h.astype(np.float32)
    b = f32_to_bf16(x)
    return b, bf16_to_f32(b)


def emulate_error(spec, t: Tiling) -> float:
    """Relative Frobenius error of the emitted kernel against a float64 numpy reference."""
    ptx = get(t.variant).emit(spec, t, {})
    emu = Emu(ptx)
    M, N, K = spec.nominal()
    rng = np.random.default_rng(0)
    name = emu.meta["kernel"]
    A, Af = _make(spec.dtype_a, M * K, rng)
    B, Bf = _make(spec.dtype_b, K * N, rng)
    Am = Af.reshape(M, K) if spec.layout_a == "row" else Af.reshape(K, M).T
    Bm = Bf.reshape(K, N) if spec.layout_b == "row" else Bf.reshape(N, K).T
    ref = spec.alpha * (Am.astype(np.float64) @ Bm)
    args = {f"{name}_A": A, f"{name}_B": B, f"{name}_M": M, f"{name}_N": N, f"{name}_K": K,
            f"{name}_alpha": spec.alpha}
    if spec.has_c:
        C, Cf = _make(spec.dtype_out, M * N, rng)
        Cm = Cf.reshape(M, N) if spec.layout_c == "row" else Cf.reshape(N, M).T
        ref = ref + spec.beta * Cm
        args[f"{name}_C"], args[f"{name}_beta"] = C, spec.beta
    if spec.has_bias:
        bias = rng.standard_normal(N).astype(np.float32)
        args[f"{name}_bias"] = bias
        ref = ref + bias[None, :]
    if spec.activation == "relu":
        ref = np.maximum(ref, 0)
    elif spec.activation == "gelu":
        ref = 0.5 * ref * (1 + np.tanh(0.7978845608 * (ref + 0.044715 * ref**3)))
    if spec.dtype_out == "f32":
        args[f"{name}_D"] = np.full(M * N, np.nan, np.float32)
    else:
        args[f"{name}_D"] = np.full(M * N, 0x7FFF, np.uint16)  # NaN poison
    out = emu.run(args)[f"{name}_D"]
    if spec.dtype_out == "f16":
        D = out.view(np.float16).astype(np.float32)
    elif spec.dtype_out == "bf16":
        D = bf16_to_f32(out.view(np.uint16))
    else:
        D = out
    Dm = D.reshape(M, N) if spec.layout_c == "row" else D.reshape(N, M).T
    return float(np.linalg.norm(Dm - ref) / np.linalg.norm(ref))


FULL = {"beta": 0.5, "alpha": 0.75, "epilogue": ["bias", "gelu"]}
CASES = [
    # (shape, dtype, extra spec keys)
    ((16, 16, 16), "f16", {}),
    ((33, 17, 40), "f16", {}),
    ((33, 17, 40), "bf16", {**FULL, "layout": {"a": "col", "b": "row", "c": "col"}}),
    ((33, 17, 40), {"a": "bf16", "out": "f16"}, {"beta": -1.0, "epilogue": ["bias", "relu"],
                                                 "layout": {"a": "row", "b": "row", "c": "row"}}),
    ((20, 24, 33), {"a": "f16", "out": "bf16"}, {**FULL, "layout": {"a": "col", "b": "col", "c": "col"}}),
]


def _small(tilings, variant, limit=2):
    sel = [t for t in tilings if t.bm <= 32 and t.bn <= 32 and t.threads <= 64]
    # vary warp/thread shapes and stages
    seen, out = set(), []
    for t in sel:
        k = (t.tm, t.tn, t.stages, t.pad_a)
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out[:: max(1, len(out) // limit)][:limit]


@pytest.mark.parametrize("variant", ["simt", "mma"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_emulated_kernel_matches_numpy(variant, case):
    (M, N, K), dt, extra = CASES[case]
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": dt, **extra})
    for t in _small(enumerate_tilings(spec, variant), variant):
        err = emulate_error(spec, t)
        tol = 1e-5 if spec.dtype_out == "f32" else 1e-2
        assert err < tol, f"{t.key()}: rel err {err}"


def test_emulated_f32_simt_and_multi_cta():
    spec = parse_spec({"M": 70, "N": 45, "K": 50, "dtype": "f32", **FULL})
    t = Tiling("simt", 32, 16, 8, 2, 2, 1, 4, 4, 1, 1)
    assert emulate_error(spec, t) < 1e-5


def test_emulated_mma_pipeline_multi_tile():
    spec = parse_spec({"M": 40, "N": 40, "K": 100, "dtype": "f16"})
    for stages in (2, 3, 4):
        t = Tiling("mma", 32, 32, 16, 16, 16, stages, 8, 8, 4, 4)
        assert emulate_error(spec, t) < 1e-2
