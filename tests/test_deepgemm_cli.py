"""The ``deepgemm`` command's own flags and its dispatch to kernelgen (compile) and validation (probe)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from validation.deepgemm import main, targets


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "validation.deepgemm", *args], capture_output=True, text=True,
                          timeout=120)


def test_list_targets_names_every_bundled_config():
    lines = targets()
    assert any(x.startswith("h200.yaml: h200, sm_90a, 132 cores") for x in lines)
    assert any(x.startswith("npu7nm.yaml: npu7nm, PTX-level") for x in lines)


def test_version_and_flag_misuse(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("deepgemm (GEMM micro-kernel workbench) ")
    assert main(["--list-targets", "extra"]) == 2
    assert capsys.readouterr().err == "deepgemm: --list-targets takes no other arguments (got extra)\n"


def test_detect_gpu_without_one_says_why():
    from validation.gpu import gpu_available

    if gpu_available()[0]:
        pytest.skip("a GPU is present")
    r = _run("--detect-gpu")
    assert r.returncode == 1 and r.stdout.startswith("no CUDA GPU: ") and r.stdout.count("\n") == 1


@pytest.mark.slow
def test_probe_and_compile_dispatch(tmp_path):
    from validation.gpu import gpu_available

    if not gpu_available()[0]:
        r = _run("probe", "-o", str(tmp_path / "p.yaml"))
        assert r.returncode == 2 and r.stderr.startswith("probe needs a CUDA GPU") and r.stderr.count("\n") == 1
        assert not (tmp_path / "p.yaml").exists()
    r = _run("compile", "--hardware", "npu7nm.yaml", "--gemm", "32x32x32", "-o", str(tmp_path / "k"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k" / "kernel.ptx").read_text().startswith("// @workbench")
