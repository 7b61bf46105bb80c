"""Seed CLI surface (issue 16 item 5): ``kernelgen codegen`` at fixed tile sizes with an epilogue
expression, ``--dump-ir``, and ``deepgemm analyze --profile`` (stage cycles + register pressure)."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kernelgen.cli import main as kg
from kernelgen.codegen import parse_epilogue
from sim.errors import UsageError
from validation.deepgemm import main as deepgemm


@pytest.mark.parametrize(("expr", "want"), [
    ("alpha * acc + beta * C", {"alpha": 1.0, "beta": 1.0, "epilogue": []}),
    ("alpha * C + beta * D", {"alpha": 1.0, "beta": 1.0, "epilogue": []}),  # the seed's spelling
    ("2.5 * acc + bias", {"alpha": 2.5, "beta": 0.0, "epilogue": ["bias"]}),
    ("relu(acc + 0.5 * C + bias)", {"alpha": 1.0, "beta": 0.5, "epilogue": ["bias", "relu"]}),
    ("gelu(A@B)", {"alpha": 1.0, "beta": 0.0, "epilogue": ["gelu"]}),
])
def test_epilogue_expressions(expr, want):
    assert parse_epilogue(expr) == want


@pytest.mark.parametrize("expr", ["", "beta * C", "acc + acc", "acc * 2 + C", "2 * bias + acc", "sqrt(acc)"])
def test_bad_epilogue_is_one_line(expr):
    with pytest.raises(UsageError) as e:
        parse_epilogue(expr)
    assert "\n" not in str(e.value) and "--epilogue" in str(e.value)


def test_codegen_fixes_the_tiles_and_reads_the_epilogue(tmp_path, capsys):
    out = tmp_path / "k"
    rc = kg(["codegen", "--hw", "h200", "--gemm", "200x136x72", "--tile-m", "64", "--tile-n", "64", "--tile-k", "32",
             "--dtype", "fp16", "--epilogue", "relu(alpha * acc + beta * C + bias)", "--dump-ir", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    plan = json.loads((out / "plan.json").read_text())
    t = plan["tiling"]
    assert (t["TILE_M"], t["TILE_N"], t["TILE_K"]) == (64, 64, 32)
    assert plan["spec"]["epilogue"] == ["bias", "relu"] and plan["spec"]["beta"] == 1.0
    ir = (out / "kernel.ir").read_text()
    ptx_lines = (out / "kernel.ptx").read_text().splitlines()
    # every IR row names a real PTX line holding that instruction
    rows = [r for r in ir.splitlines() if r.startswith("  ") and "|" in r and not r.strip().startswith("idx")]
    assert len(rows) > 50
    for r in rows[:: max(1, len(rows) // 40)]:
        line = int(r.split()[1])
        assert r.split("|", 1)[1].strip() in ptx_lines[line - 1]
    # a .ptx output writes the kernel alone
    ptx = tmp_path / "g.ptx"
    assert kg(["codegen", "--hw", "h200", "--gemm", "64x64x64", "--tile-m", "32", "--tile-n", "32", "--tile-k", "16",
               "-o", str(ptx)]) == 0
    assert ptx.read_text().startswith("// @workbench")


def test_codegen_infeasible_tile_is_one_line(tmp_path, capsys):
    rc = kg(["codegen", "--hw", "h200", "--gemm", "64x64x64", "--tile-m", "1024", "--tile-n", "1024", "--tile-k", "512",
             "-o", str(tmp_path / "x.ptx")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "TILE_M" in err
    assert not (tmp_path / "x.ptx").exists()


def test_analyze_profile_on_the_simulator(tmp_path, capsys):
    out = tmp_path / "k"
    assert kg(["compile", "--hw", "h200", "--gemm", "64x64x128", "--variant", "mma", "--profile", "-o", str(out)]) == 0
    capsys.readouterr()
    js = tmp_path / "a.json"
    assert deepgemm(["analyze", "--profile", str(out), "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "k_loop" in text and "hotspot:" in text and "registers per thread: predicted" in text
    data = json.loads(js.read_text())
    plan = json.loads((out / "plan.json").read_text())
    assert set(data["phases"]) == {"prologue", "k_loop", "epilogue"} == set(plan["prediction"]["phases"])
    for v in data["phases"].values():
        assert 0 < v["min"] <= v["mean"] <= v["max"]
    if shutil.which("ptxas"):
        assert data["ptxas"]["registers"] > 0


def test_analyze_without_profile_is_one_line(tmp_path):
    out = tmp_path / "k"
    assert kg(["compile", "--hw", "h200", "--gemm", "64x64x64", "--variant", "mma", "-o", str(out)]) == 0
    r = subprocess.run([sys.executable, "-m", "validation", "analyze", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--profile" in r.stderr
    r = subprocess.run([sys.executable, "-m", "validation", "analyze", str(tmp_path / "none")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not found" in r.stderr


def test_phases_split_the_profile_slots():
    from validation.analyze import phases

    v = np.array([[10, 30, 130, 140], [12, 30, 150, 170]], dtype=np.uint64).ravel()
    got = phases(v, 4)
    assert got["prologue"] == {"mean": 19.0, "min": 18.0, "max": 20.0}
    assert got["k_loop"]["mean"] == 110.0 and got["epilogue"]["max"] == 20.0
