"""HwConfig loader: bundled configs by name, load by path, and errors naming file:line key.path."""

from __future__ import annotations

import pathlib
import re

import pytest

from sim.errors import HwConfigError
from sim.hw import PIPE_CLASSES, SCHEMA_VERSION, HwConfig, load_hw, resolve_hw_path, schema

ROOT = pathlib.Path(__file__).resolve().parent.parent
NPU = ROOT / "hwconfigs" / "npu7nm.yaml"
H200 = ROOT / "hwconfigs" / "h200.yaml"


# ---- loading ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["npu7nm.yaml", "npu7nm", "h200", "h200.yaml"])
def test_bundled_by_bare_name_from_other_cwd(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_hw(name)
    assert isinstance(cfg, HwConfig)
    assert cfg.name == name.removesuffix(".yaml")
    assert pathlib.Path(cfg.path).is_absolute() and pathlib.Path(cfg.path).is_file()
    assert cfg.version == SCHEMA_VERSION
    for c in PIPE_CLASSES:
        cfg.pipe_for(c)  # every class is served


def test_load_by_path_and_values():
    npu = load_hw(str(NPU))
    assert npu.path == str(NPU)
    assert isinstance(npu.clock_mhz, float) and npu.clock_mhz == 1000.0  # int accepted where float expected
    assert npu.l1 is None
    mac = npu.pipe_for("tensor")
    assert mac is npu.pipe_for("fma") and mac.lanes == 128
    assert 16 * 8 * 16 // (mac.lanes * mac.count) == 16  # an m16n8k16 mma takes 16 cycles on the MAC array
    assert npu.pipe_for("alu").lanes == 16
    assert (npu.shared.size, npu.shared.ports, npu.shared.latency) == (131072, 8, 2)
    assert (npu.l2.size, npu.l2.assoc, npu.l2.policy) == (4096 * 1024, 16, "lru")
    assert (npu.dram.bandwidth_gbps, npu.dram.banks, npu.dram.burst) == (1024.0, 64, 32)
    assert npu.dram_bytes_per_cycle == pytest.approx(1024.0)

    h = load_hw(H200)  # a pathlib.Path works too
    assert (h.core.count, h.clock_mhz, h.core.schedulers, h.core.policy) == (132, 1980.0, 4, "gto")
    assert (h.shared.size, h.limits.smem_per_block, h.shared.pass_cycles) == (233472, 232448, 2)
    assert h.l1 is not None and h.l2.size == 62914560
    assert h.l2.size % (h.l2.line * h.l2.assoc) == 0
    tensor = h.pipe_for("tensor")
    tflops = 2 * tensor.lanes * tensor.count * h.core.count * h.clock_mhz * 1e6 / 1e12
    assert tflops == pytest.approx(623, rel=0.02)  # measured mma.sync throughput


def test_existing_file_wins_over_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h200.yaml").write_text(H200.read_text().replace("name: h200", "name: mine", 1))
    assert resolve_hw_path("h200.yaml") == pathlib.Path("h200.yaml")
    assert load_hw("h200.yaml").name == "mine"
    assert load_hw("h200").name == "h200"  # no file called "h200": the bundled one


def test_unknown_name_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HwConfigError) as e:
        load_hw("npu9nm")
    assert "npu9nm" in str(e.value) and "npu7nm.yaml" in str(e.value)
    with pytest.raises(HwConfigError):
        load_hw("somewhere/npu7nm.yaml")  # a path with a directory is never a bundled name


# ---- errors name file:line key.path ------------------------------------------------------------


def _variant(tmp_path: pathlib.Path, old: str, new: str, src: pathlib.Path = NPU) -> tuple[str, str]:
    """Write src with the first line matching regex `old` replaced by `new`; return (path, new text)."""
    text = src.read_text()
    lines = text.splitlines(keepends=True)
    hits = [i for i, ln in enumerate(lines) if re.search(old, ln)]
    assert hits, f"{old!r} not in {src}"
    lines[hits[0]] = new
    out = tmp_path / "broken.yaml"
    out.write_text("".join(lines))
    return str(out), "".join(lines)


def _line_of(text: str, pattern: str, nth: int = 0) -> int:
    hits = [i + 1 for i, ln in enumerate(text.splitlines()) if re.search(pattern, ln)]
    return hits[nth]


def _error(path: str) -> str:
    with pytest.raises(HwConfigError) as e:
        load_hw(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == e.value.one_line()
    return msg


def _expect(path: str, line: int, key: str, what: str) -> None:
    """Load path and assert the one-line error starts with `path:line key: what`."""
    msg = _error(path)
    assert msg.startswith(f"{path}:{line} {key}: {what}"), msg


def test_unknown_key(tmp_path):
    path, text = _variant(tmp_path, r"^shared:", "shared:\n  colour: red\n")
    _expect(path, _line_of(text, "^  colour:"), "shared.colour", "unknown key (got 'colour'); ")


def test_unknown_key_suggests(tmp_path):
    path, text = _variant(tmp_path, r"^  pass_cycles:", "  pass_cycle: 1\n")
    _expect(path, _line_of(text, "^  pass_cycle:"), "shared.pass_cycle", "unknown key")
    assert "did you mean 'pass_cycles'?" in _error(path)


def test_missing_key(tmp_path):
    path, text = _variant(tmp_path, r"^  latency: 2 ", "")
    _expect(path, _line_of(text, "^shared:"), "shared.latency", "missing key (got nothing); add 'latency:'")


def test_wrong_type(tmp_path):
    path, text = _variant(tmp_path, r"^  size: 131072", "  size: 128 KB\n")
    _expect(path, _line_of(text, "^  size: 128 KB"), "shared.size", "must be integer (got '128 KB'); ")


def test_bool_is_not_an_int(tmp_path):
    path, text = _variant(tmp_path, r"^  read_ports:", "  read_ports: true\n")
    _expect(path, _line_of(text, "read_ports: true"), "registers.read_ports", "must be integer (got true)")


def test_float_is_not_an_int(tmp_path):
    path, text = _variant(tmp_path, r"^  per_thread: 256", "  per_thread: 256.0\n")
    _expect(path, _line_of(text, "per_thread: 256.0"), "registers.per_thread", "must be integer (got 256.0)")


def test_banks_not_power_of_two(tmp_path):
    path, text = _variant(tmp_path, r"^  banks: 64 ", "  banks: 48\n")
    line = _line_of(text, "^  banks: 48")
    _expect(path, line, "dram.banks", "must be a power of two (got 48); use 32 or 64")


def test_ports_zero(tmp_path):
    path, text = _variant(tmp_path, r"^  ports: 8 ", "  ports: 0\n")
    _expect(path, _line_of(text, "^  ports: 0"), "shared.ports", "must be >= 1 (got 0); ")


def test_negative_latency(tmp_path):
    path, text = _variant(tmp_path, r"^  hit_latency:", "  hit_latency: -3\n")
    _expect(path, _line_of(text, "hit_latency: -3"), "l2.hit_latency", "must be >= 0 (got -3); ")


def test_pipe_field_in_list(tmp_path):
    # second pipe (alu): lanes 16 -> 0
    path, text = _variant(tmp_path, r"^    lanes: 16 ", "    lanes: 0\n")
    _expect(path, _line_of(text, "lanes: 0"), "pipes[1].lanes", "must be >= 1 (got 0)")


def test_bad_yaml_syntax(tmp_path):
    path, text = _variant(tmp_path, r"^warp_size:", "warp_size: 32: 5\n")
    _expect(path, _line_of(text, "^warp_size: 32: 5"), "<yaml>", "malformed YAML: ")
    assert _error(path).endswith("; fix the YAML syntax")


def test_duplicate_key(tmp_path):
    path, text = _variant(tmp_path, r"^  pass_cycles:", "  pass_cycles: 1\n  latency: 3\n")
    first, second = _line_of(text, r"^  latency: 2 "), _line_of(text, "^  latency: 3")
    _expect(path, second, "shared.latency", f"duplicate key (first at line {first}) (got 'latency'); ")


@pytest.mark.parametrize(
    "old, new, key, what",
    [
        (r"^version:", "version: 2\n", "version", "unsupported schema version"),
        (r"^  policy: lrr", "  policy: fifo\n", "core.policy", "must be one of lrr, gto"),
        (r"^  policy: lru", "  policy: fifo\n", "l2.policy", "must be one of lru"),
        (r"^  predictor:", "  predictor: always\n", "branch.predictor", "must be one of none, not_taken"),
        (r"^  assoc: 16", "  assoc: 3\n", "l2.size", "must be a multiple of line * assoc (64 * 3)"),
        (r"^    classes: \[sfu, fp64\]", "    classes: [sfu]\n", "pipes", "no pipe serves class(es) fp64"),
        (r"^    classes: \[sync\]", "    classes: [barrier]\n", "pipes[5].classes[0]", "unknown pipe class"),
        (r"^    classes: \[sync\]", "    classes: [sync, alu]\n", "pipes[5].classes[1]",
         "pipe class already served by pipes[1]"),
        (r"^  smem_per_block:", "  smem_per_block: 262144\n", "limits.smem_per_block", "exceeds shared.size"),
        (r"^clock_mhz:", "clock_mhz: 0\n", "clock_mhz", "must be > 0"),
        (r"^clock_mhz:", "clock_mhz: 1e9\n", "clock_mhz", "must be number"),
        (r"^l1: null", "l1: 5\n", "l1", "must be a mapping (Cache)"),
    ],
)
def test_impossible_values(tmp_path, old, new, key, what):
    path, text = _variant(tmp_path, old, new)
    where = {"pipes": "^pipes:", "l2.size": "^  size: 4194304"}.get(key, "^" + re.escape(new.rstrip()))
    _expect(path, _line_of(text, where), key, what)


def test_h200_variant_errors_too(tmp_path):
    path, text = _variant(tmp_path, r"^  bank_width: 4", "  bank_width: 3\n", src=H200)
    _expect(path, _line_of(text, "bank_width: 3"), "shared.bank_width", "must be a power of two (got 3)")


# ---- the bundled files and the docs ----------------------------------------------------------


@pytest.mark.parametrize("src", [NPU, H200])
def test_every_number_cites_a_source(src):
    for n, ln in enumerate(src.read_text().splitlines(), 1):
        body = ln.split("#", 1)[0]
        if re.search(r":\s*-?\d", body):
            assert "# source:" in ln or "# assumption:" in ln, f"{src.name}:{n} has no source: {ln!r}"


def test_docs_cover_the_schema():
    doc = (ROOT / "docs" / "hwconfig.md").read_text()
    for key, _type, _required in schema():
        assert f"`{key}`" in doc, f"docs/hwconfig.md does not describe {key}"


def test_arch_names_a_real_architecture(tmp_path):
    assert load_hw("h200").arch == "sm_90a" and load_hw("npu7nm").arch is None
    text = pathlib.Path(load_hw("h200").path).read_text().replace("arch: sm_90a", "arch: hopper")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(HwConfigError) as e:
        load_hw(str(bad))
    assert "arch" in e.value.one_line() and "sm_90a" in e.value.one_line()


# ---- hostile input: every bad file ends in one line, quickly ---------------------------------


@pytest.mark.parametrize(
    "old, new, key, what",
    [
        (r"^  schedulers:", "  schedulers: 1000000\n", "core.schedulers", "must be <= 64"),
        (r"^  count:", "  count: 2147483648\n", "core.count", "must be <= 65,536"),
        (r"^clock_mhz:", "clock_mhz: .inf\n", "clock_mhz", "must be a finite number"),
        (r"^clock_mhz:", "clock_mhz: .nan\n", "clock_mhz", "must be a finite number"),
        (r"^  latency:", "  latency: 1:30\n", "dram.latency", "ambiguous scalar: a base-60 number"),
        (r"^  latency:", "  latency: 010\n", "dram.latency", "ambiguous scalar: an octal number"),
        (r"^  latency:", "  latency: 1_000\n", "dram.latency", "ambiguous scalar: a number with underscores"),
    ],
)
def test_hostile_values(tmp_path, old, new, key, what):
    src = NPU.read_text()
    # the dram block's latency is the last "  latency:" at two spaces of indent
    lines = src.splitlines(keepends=True)
    hits = [i for i, ln in enumerate(lines) if re.search(old, ln)]
    i = hits[-1] if key == "dram.latency" else hits[0]
    lines[i] = new
    out = tmp_path / "hostile.yaml"
    out.write_text("".join(lines))
    msg = _error(str(out))
    assert msg.startswith(f"{out}:{i + 1} {key}: {what}"), msg


def test_alias_bomb_and_recursive_alias_are_one_line(tmp_path):
    bomb = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
             f"*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(bomb) + "\n")
    import time

    t = time.monotonic()
    assert "alias expansion" in _error(str(p)) and time.monotonic() - t < 5
    p.write_text("version: 1\ncore: &c\n  inner: *c\n")
    assert "recursive alias" in _error(str(p))


@pytest.mark.parametrize("name", ["npu7nm.yaml", "h200.yaml"])
def test_register_bank_rule_is_one_rule(name):
    """sim.timing's RegBanks and the planner's bank_extra charge RegisterFile.conflict_cycles: the
    same cycles for the same registers, and the rule itself on a hand-counted case."""
    import random

    from kernelgen.models.schedule import bank_extra
    from sim.timing.units import RegBanks

    hw = load_hw(name)
    rf = hw.registers
    rng = random.Random(7)
    for _ in range(200):
        regs = [rng.randrange(64) for _ in range(rng.randrange(1, 5))]
        sim_cost = RegBanks(rf).extra_cycles(tuple(f"%f{r}" for r in regs))
        assert sim_cost == bank_extra(regs, hw) == rf.conflict_cycles(set(regs))
    # banks registers apart share a bank: read_ports + 1 of them cost one extra cycle
    same_bank = [i * rf.banks for i in range(rf.read_ports + 1)]
    assert rf.conflict_cycles(same_bank) == 1
    assert rf.conflict_cycles(range(rf.banks)) == 0
