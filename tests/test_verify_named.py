"""validation.formal on named barriers (bar.sync id, count / bar.arrive / bar.red with a thread count):
which threads meet at an instance (validation/formal/barriers.py). Tiny kernels of 2-4 warps: two groups of
64 threads, each with its own barrier id, exchange words through shared memory; each planted bug is one
edit, reported with its witness; the kernelgen wgmma_tma kernels with the TMA-store epilogue (named
barriers per consumer warpgroup) are in tests/test_verify_async.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402
from validation.formal.properties import NAMES  # noqa: E402


def _kernel(sync: str, read: str = "(%r0 + 1) % 64 + group * 64", block: int = 128, head: str = "",
            after: str = "") -> str:
    """Each thread writes word[tid], runs `sync` (its group is tid / 64, %r2 the group's barrier id 1 + group),
    then reads word[`read`] (%r0 = tid % 64, %r1 = group * 64): a neighbour of its own group."""
    idx = {"(%r0 + 1) % 64 + group * 64": ["add.u32 %r5, %r0, 1;", "and.b32 %r5, %r5, 63;", "add.u32 %r5, %r5, %r1;"],
           "(%r0 + 1) % 64 + (1 - group) * 64": ["add.u32 %r5, %r0, 1;", "and.b32 %r5, %r5, 63;",
                                                 "xor.b32 %r6, %r1, 64;", "add.u32 %r5, %r5, %r6;"],
           "tid": ["mov.u32 %r5, %r4;"]}[read]
    text = [
        ".version 8.0", ".target sm_90a", ".address_size 64", ".visible .entry named()", "{",
        "    .reg .b32 %r<16>;", "    .reg .pred %p<4>;", f"    .shared .align 4 .b32 word[{block}];",
        "    mov.u32 %r4, %tid.x;", "    and.b32 %r0, %r4, 63;", "    and.b32 %r1, %r4, 64;",
        "    shr.u32 %r2, %r4, 6;", "    add.u32 %r2, %r2, 1;", "    mov.u32 %r3, word;", head,
        "    shl.b32 %r7, %r4, 2;", "    add.u32 %r7, %r7, %r3;", "    st.shared.u32 [%r7], %r4;", sync,
        *("    " + x for x in idx), "    shl.b32 %r5, %r5, 2;", "    add.u32 %r5, %r5, %r3;",
        "    ld.shared.u32 %r8, [%r5];", after, "    ret;", "}", ""]
    return "\n".join(text)


def verify(text: str, block: int = 128) -> dict:
    args = SimpleNamespace(kernel=None, grid="1,1,1", block=f"{block},1,1", param=[], extent=[],
                           dynamic_shared=None, timeout=60.0)
    return verify_text(text, "named.ptx", args)


def statuses(rep: dict) -> dict:
    return {p["name"]: p["status"] for p in rep["properties"]}


def the(rep: dict, name: str) -> dict:
    return next(p for p in rep["properties"] if p["name"] == name)


def test_two_groups_each_with_its_own_named_barrier_proved():
    for sync in ("    bar.sync %r2, 64;", "    barrier.sync.aligned %r2, 64;",
                 "    bar.red.popc.u32 %r9, %r2, 64, %p0;"):
        rep = verify(_kernel(sync))
        assert statuses(rep) == {n: "proved" for n in NAMES}, (sync, json.dumps(rep)[:2000])


def test_missing_named_barrier_is_a_race_with_witness():
    rep = verify(_kernel("    // (no barrier)"))
    p = the(rep, "shared_race")
    assert p["status"] == "violated", p
    w = p["witness"]
    assert w["thread"][0] // 64 == w["other_thread"][0] // 64  # a neighbour of the same group
    assert statuses(rep)["barrier_divergence"] == "proved"


def test_named_barrier_does_not_order_the_other_group():
    # reading the other group's word: barrier 1 and barrier 2 are separate instances
    p = the(verify(_kernel("    bar.sync %r2, 64;", read="(%r0 + 1) % 64 + (1 - group) * 64")), "shared_race")
    assert p["status"] == "violated" and p["witness"]["thread"][0] // 64 != p["witness"]["other_thread"][0] // 64, p


def test_wrong_count_too_few_is_reported_and_races():
    # 64 threads arrive on each id, the barrier completes at 32: one warp may pass before the other wrote
    rep = verify(_kernel("    bar.sync %r2, 32;"))
    p = the(rep, "barrier_divergence")
    assert p["status"] == "violated" and "completes at 32 threads" in p["detail"], p
    assert p["witness"]["arriving_threads"] == 64 and p["witness"]["count"] == 32
    assert the(rep, "shared_race")["status"] == "violated"


def test_wrong_count_too_many_is_a_deadlock():
    p = the(verify(_kernel("    bar.sync %r2, 96;")), "barrier_divergence")
    assert p["status"] == "violated" and p["detail"].startswith("deadlock") and p["witness"]["count"] == 96, p


def test_whole_cta_count_is_the_cta_barrier():
    # bar.sync 1, 128 with 128 threads is a barrier of every thread: the other group's word is ordered too
    rep = verify(_kernel("    bar.sync 1, 128;", read="(%r0 + 1) % 64 + (1 - group) * 64"))
    assert statuses(rep) == {n: "proved" for n in NAMES}, json.dumps(rep)[:2000]


def test_producer_arrives_consumer_waits():
    # warp 0 writes and arrives (bar.arrive 1, 64); warp 1 waits (bar.sync 1, 64) and reads warp 0's words
    head = "    setp.lt.u32 %p1, %r4, 32;"
    sync = "    @%p1 bar.arrive 1, 64;\n    @!%p1 bar.sync 1, 64;"
    text = _kernel(sync, read="tid", block=64, head=head)
    text = text.replace("    mov.u32 %r5, %r4;", "    xor.b32 %r5, %r4, 32;")  # the other warp's word
    text = text.replace("    ld.shared.u32 %r8, [%r5];", "    @!%p1 ld.shared.u32 %r8, [%r5];")
    assert statuses(verify(text, block=64)) == {n: "proved" for n in NAMES}
    # the producer reads what the consumer wrote: it never waited, a race
    bad = text.replace("    @!%p1 ld.shared.u32 %r8, [%r5];", "    ld.shared.u32 %r8, [%r5];")
    p = the(verify(bad, block=64), "shared_race")
    assert p["status"] == "violated", p


def test_named_barrier_in_a_warp_divergent_branch():
    # lanes 0..15 skip the (aligned) bar.sync: a warp must execute it together
    head = "    and.b32 %r9, %r4, 31;\n    setp.lt.u32 %p2, %r9, 16;"
    rep = verify(_kernel("    @%p2 bra $SKIP;\n    bar.sync %r2, 64;\n$SKIP:", head=head))
    p = the(rep, "barrier_divergence")
    assert p["status"] == "violated" and "splits the warp" in p["detail"], p
    assert p["witness"]["thread"][0] // 32 == p["witness"]["other_thread"][0] // 32


def test_two_ids_in_one_thread_is_unknown():
    rep = verify(_kernel("    bar.sync %r2, 64;\n    bar.sync 3, 128;".replace("128", "64")))
    assert statuses(rep)["shared_race"] == "unknown" and "two named barrier ids" in the(rep, "shared_race")["detail"]


# ---------------------------------------------------------------- --timeout on the new analyses
@pytest.mark.slow
@pytest.mark.parametrize("case", ["tma_store_epilogue", "wmma_smem", "carried_copies"])
def test_timeout_holds_on_named_barriers_wmma_and_divisions(tmp_path, case):
    """No run exceeds its --timeout by more than 5 s (plus the Python start, which precedes the limit)
    on a kernel whose work lies in the new analyses: kernelgen's TMA-store epilogue (named barriers),
    nvcc's wmma_smem (tile footprints), a 64-thread carried copy of 64 x 6 chunks (division ties, integer
    proofs)."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if case == "tma_store_epilogue":
        (tmp_path / "spec.yaml").write_text(json.dumps({"M": 136, "N": 136, "K": 136, "dtype": "bf16"}))
        subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--op",
                        str(tmp_path / "spec.yaml"), "--variant", "wgmma_tma", "-o", str(tmp_path / "k")], cwd=root,
                       check=True, capture_output=True, timeout=300)
        f, flags, limit = tmp_path / "k" / "kernel.ptx", [], 15.0
    elif case == "wmma_smem":
        f = root / "tests" / "fixtures" / "cuda" / "wmma_gemm.ptx"
        flags = ["--kernel", "wmma_smem", "--block", "32", "--grid", "1", "--param", "p3=16..4096",
                 "--extent", "p0=p3*32", "--extent", "p1=p3*32", "--extent", "p2=512"]
        limit = 2.0
    else:
        from test_verify_copies import carried_copy
        f = tmp_path / "carried.ptx"
        f.write_text(carried_copy(64))
        flags, limit = ["--block", "64", "--grid", "1"], 2.0
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", "import validation.formal.cli"], cwd=root, check=True, timeout=120)
    start = time.monotonic() - t
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "validation", "verify", str(f), *flags, "--timeout", str(limit),
                        "--json"], cwd=root, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t
    rep = json.loads(r.stdout)
    assert rep["seconds"] <= limit + 5 and wall <= limit + 5 + 2 * start, (rep["seconds"], wall, start)
    assert r.returncode in (0, 3), r.stdout[-2000:] + r.stderr  # proved or unknown, never a false violation


def test_barrier_id_loaded_from_memory_is_unknown():
    head = "    ld.shared.u32 %r2, [%r3];"  # the id comes from shared memory: not known to be one per thread
    rep = verify(_kernel("    bar.sync %r2, 64;", head=head))
    p = the(rep, "barrier_divergence")
    assert p["status"] == "unknown" and "loaded" in p["detail"], p
    assert the(rep, "shared_race")["status"] == "unknown"
