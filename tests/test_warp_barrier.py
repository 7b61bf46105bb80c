"""A one-warp CTA synchronises with bar.warp.sync (seed 000 §3.4): kernelgen emits a full-mask warp barrier
for a 32-thread CTA; the decoder treats it as the CTA barrier under .reqntid 32, and the verifier does when
the launch has 32 threads; the kernel passes the numpy check, the verifier proves it race-free, and ptxas
allocates no hardware barrier. (kernelgen does not declare .reqntid: ptxas then allocates more registers,
e.g. 44 instead of 40, which the register model is not calibrated for.)"""

import shutil
import subprocess

import pytest

from kernelgen.cli import main as kg
from sim import isa
from sim.ptx.parser import parse_ptx

WARP_PTX = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{req}
{{
    .reg .b32 %r<2>;
    bar.warp.sync {mask};
    ret;
}}
"""


@pytest.mark.parametrize(("req", "mask", "role"), [(".reqntid 32, 1, 1", "-1", "cta"),
                                                   (".reqntid 32, 1, 1", "0xffff", "warp"),
                                                   (".reqntid 64, 1, 1", "-1", "warp"), ("", "-1", "warp")])
def test_warp_barrier_is_the_cta_barrier_only_in_a_one_warp_kernel(req, mask, role):
    k = parse_ptx(WARP_PTX.format(req=req, mask=mask), "t.ptx").kernels["k"]
    bar = next(i for i in k.body if i.opcode == "bar")
    assert isa.barrier_role(bar) == role


# simt: TILE_K 16 over K = 32 (two K tiles: the barrier between one tile's reads and the next tile's writes is what
# shared_race proves; the verifier took 8 s of CPU on the 16x16x32 tile of K = 64, 1 s on this)
@pytest.mark.parametrize("variant,k,extra", [("mma", 64, ""), ("simt", 32, ", 'TILE_K in [16, 16]'")],
                         ids=["mma", "simt"])
def test_one_warp_kernel_uses_bar_warp_sync(tmp_path, capsys, variant, k, extra):
    from sim.cli import main as sim_main
    from sim.launch import read_metadata
    from validation.__main__ import build_parser
    from validation.formal import verify_text

    spec = tmp_path / "one_warp.yaml"
    spec.write_text(f"M: 16\nN: 8\nK: {k}\ntiling: ['THREADS in [32, 32]'{extra}]\n")
    assert kg(["compile", "--hw", "h200", "--op", str(spec), "--variant", variant, "-o", str(tmp_path)]) == 0
    ptx = tmp_path / "kernel.ptx"
    text = ptx.read_text()
    block = read_metadata(text)["block"]
    assert block[0] * block[1] * block[2] == 32, block
    assert "bar.warp.sync -1" in text and "bar.sync" not in text and ".reqntid" not in text
    # in process: the command lines themselves are tested in tests/test_cli_errors.py, tests/test_formal.py
    capsys.readouterr()
    assert sim_main(["run", str(ptx), "--hw", "h200"]) == 0
    assert "PASSED" in capsys.readouterr().out
    args = build_parser(["verify", str(ptx)]).parse_args(["verify", str(ptx)])
    props = {p["name"]: p["status"] for p in verify_text(text, str(ptx), args)["properties"]}
    assert props["shared_race"] == "proved" and props["barrier_divergence"] == "proved", props
    if shutil.which("ptxas"):
        r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(ptx), "-o", str(tmp_path / "k.o")],
                           capture_output=True, text=True, check=True)
        assert "used 0 barriers" in r.stderr
