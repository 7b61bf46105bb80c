"""Hostile input, property-based: mutated PTX, hardware YAML and --arg specs give exit 0 (1: a failed
numeric check) or one line with exit 2; no traceback, no 'internal error', bounded time. The corpus
in tests/fixtures/fuzz/ (``python -m tests.fuzzing`` wrote it) is replayed too; benchmarks/fuzz_replay.py
runs thousands more through cold subprocesses."""

from __future__ import annotations

import contextlib
import io
import random
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cli import main as sim_main
from sim.errors import run_cli
from tests.fuzzing import ARG_PIECES, FUZZ_DIR, PTX_SEEDS, SEED_LOOP, mutate_ptx, mutate_yaml

FAST = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
RUN = ["--functional", "--max-instructions", "3000"]


def _contract(call, *argv: str) -> tuple[int, str]:
    """Run one command in process; assert the one-line contract; return (status, stderr)."""
    err, out = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = run_cli(call, list(argv))
    text = err.getvalue()
    assert time.monotonic() - t0 < 20, argv
    assert "Traceback" not in text and "internal error" not in text, text
    assert rc in (0, 1, 2), (rc, text)
    if rc == 2:
        assert text.count("\n") == 1, text
    return rc, text


def _sim(ptx: str, *argv: str, hw: str = "npu7nm.yaml") -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.ptx"
        f.write_bytes(ptx.encode("utf-8", "surrogateescape"))
        return _contract(sim_main, "run", str(f), "--hw", hw, *argv)


@settings(FAST, max_examples=150)
@given(seed=st.sampled_from(sorted(PTX_SEEDS)), rnd=st.randoms(use_true_random=False))
def test_mutated_ptx_one_line_or_runs(seed: str, rnd: random.Random):
    text = mutate_ptx(PTX_SEEDS[seed], rnd)
    _sim(text, *RUN) if seed == "loop" else _sim(text, "--check-all")


@FAST
@given(rnd=st.randoms(use_true_random=False))
def test_mutated_hw_yaml_one_line(rnd: random.Random):
    from sim.hw import load_hw

    text = mutate_yaml((Path(__file__).parent.parent / "hwconfigs" / "npu7nm.yaml").read_text(), rnd)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "hw.yaml"
        f.write_text(text)
        _contract(lambda a: load_hw(a[0]) and 0, str(f))


@FAST
@given(spec=st.one_of(st.text(max_size=40), st.lists(st.sampled_from(ARG_PIECES), max_size=6).map("".join)),
       n=st.sampled_from(["5", "-1", "4294967296", "1.5", "zeros:u32:4", "k_n=0x10"]))
def test_arg_specs_one_line(spec: str, n: str):
    from sim.launch import bind_args

    params = [("k_out", "u64"), ("k_n", "u32")]
    _contract(lambda a: bind_args("k", params, a, [None, None]) and 0, spec, n)


@pytest.mark.parametrize("path", sorted(FUZZ_DIR.glob("*.ptx")), ids=lambda p: p.name)
def test_corpus_ptx(path: Path):
    if "_loop" in path.name:
        _sim(path.read_text(), *RUN)
    else:
        _sim(path.read_text(), "--check-all")


def test_corpus_yaml_and_args():
    loop = SEED_LOOP.replace('"block":[64,1,1]', '"block":[32,1,1]')
    for path in sorted(FUZZ_DIR.glob("*.yaml")):
        _sim(loop, "--max-instructions", "3000", hw=str(path))
    for spec in (FUZZ_DIR / "args.txt").read_text().splitlines():
        _sim(loop, *RUN, "--arg", spec, "--arg", "5")


def test_corpus_is_there():
    assert len(list(FUZZ_DIR.glob("*.ptx"))) >= 200 and len(list(FUZZ_DIR.glob("*.yaml"))) >= 40


SPEC_SEEDS = sorted((Path(__file__).parent.parent / "examples").glob("gemm_*.yaml"))


def _mutated_spec(rnd: random.Random, d: str) -> str:
    seed = SPEC_SEEDS[rnd.randrange(len(SPEC_SEEDS))]
    f = Path(d) / "spec.yaml"
    f.write_text(mutate_yaml(seed.read_text(), rnd))
    return str(f)


@settings(FAST, max_examples=120)
@given(rnd=st.randoms(use_true_random=False))
def test_mutated_spec_loads_or_one_line(rnd: random.Random):
    from kernelgen.spec import load_spec

    with tempfile.TemporaryDirectory() as d:
        _contract(lambda a: load_spec(a[0]) and 0, _mutated_spec(rnd, d))


@settings(FAST, max_examples=25)
@given(rnd=st.randoms(use_true_random=False))
def test_mutated_spec_compiles_or_one_line(rnd: random.Random):
    from kernelgen.cli import main as kernelgen_main

    with tempfile.TemporaryDirectory() as d:
        rc, _ = _contract(kernelgen_main, "compile", "--hw", "npu7nm.yaml", "--op", _mutated_spec(rnd, d),
                          "-o", str(Path(d) / "out"))
        assert (Path(d) / "out").exists() == (rc == 0)
