"""validation.compare: per-metric comparison, gap attribution on crafted results, CLI errors, demo specs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from validation.compare import attribute_gap, build_report, metric_rows

ROOT = Path(__file__).resolve().parent.parent

HW = {"name": "npu7nm", "clock_mhz": 1000.0, "cores": 1, "schedulers_per_core": 1, "compute_pipe": "mac",
      "peak_flops": 2.56e11, "dram_bandwidth": 1.024e12, "dram_bytes_per_cycle": 1024.0,
      "predictor": "backward_taken", "flush_penalty": 8, "shared_banks": 32,
      "pipes": ["mac", "alu", "lsu", "branch"], "max_threads": 1024, "warp_size": 32}

FACTS = {
    "text": {"57": "@%p1 bra LOOP_K", "40": "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r9]",
             "44": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {..}", "30": "add.u32 %r5, %r6, 1",
             "70": "@%p2 bra DONE"},
    "branches": {57: {"label": "LOOP_K", "target_line": 20, "backward": True, "guarded": True},
                 70: {"label": "DONE", "target_line": 90, "backward": False, "guarded": True}},
    "pipe": {"57": "branch", "40": "lsu", "44": "mac", "30": "alu", "70": "branch"},
}


def sim_result(**over) -> dict:
    base = {"cycles": 10000, "cycles_per_cta": [10000], "ctas_simulated": 1,
            "occupancy": {"ctas_per_core": 8, "warps_per_core": 4, "limiter": "core.max_ctas"},
            "utilization": {"mac": 0.5, "alu": 0.4}, "dram_bytes": 4096, "cache": {"l2_hit_rate": 0.5},
            "stalls": {}, "stalls_by_line": {}, "bank_conflicts_by_line": {}, "flushes": []}
    base.update(over)
    return base


def test_flush_at_backward_branch_is_the_loop_exit():
    sim = sim_result(stalls={"flush": 310, "scoreboard": 100},
                     stalls_by_line={"57": {"flush": 310}, "30": {"scoreboard": 100}},
                     flushes=[{"line": 57, "count": 412, "text": "@%p1 bra LOOP_K;", "cycles": 3296},
                              {"line": 70, "count": 2, "text": "@%p2 bra DONE;", "cycles": 16}])
    causes, headline, gap = attribute_gap({"cycles": 9000, "bound": "alu"}, sim, FACTS, HW)
    assert [c["reason"] for c in causes] == ["flush", "scoreboard"]
    assert causes[0]["line"] == 57 and causes[0]["count"] == 412
    assert headline.startswith("ALU idle 3.1% of cycles: 412 pipeline flushes at kernel.ptx:57 '@%p1 bra LOOP_K'")
    assert "the loop exit mispredicted" in headline
    assert gap["cycles"] == 1000 and gap["relative"] == pytest.approx(-0.1)
    assert sum(c["share_of_gap"] for c in causes) == pytest.approx(1000)


def test_taken_forward_branch_is_not_called_a_loop_exit():
    sim = sim_result(stalls={"flush": 50}, flushes=[{"line": 70, "count": 5, "text": "@%p2 bra DONE;"}])
    _, headline, _ = attribute_gap({"cycles": 9000}, sim, FACTS, HW)
    assert "kernel.ptx:70" in headline and "taken forward branch" in headline


def test_lsu_saturation_is_traced_to_the_conflicting_line():
    sim = sim_result(stalls={"pipe_busy": 7000, "bank_conflict": 6000, "flush": 8},
                     stalls_by_line={"40": {"pipe_busy": 7000, "bank_conflict": 6000}, "57": {"flush": 8}},
                     bank_conflicts_by_line={"40": 1984, "41": 10},
                     flushes=[{"line": 57, "count": 1, "text": "@%p1 bra LOOP_K;"}])
    causes, headline, _ = attribute_gap({"cycles": 3000, "bound": "mac"}, sim, FACTS, HW)
    assert causes[0]["reason"] == "pipe_busy" and causes[0]["pipe"] == "lsu"
    assert headline.startswith("LSU saturated, issue blocked 70.0% of cycles by bank conflicts: 1,984 extra "
                               "shared-memory passes at kernel.ptx:40 'ldmatrix")


def test_busy_bound_pipe_is_the_prediction_not_the_gap():
    sim = sim_result(stalls={"pipe_busy": 5000, "memory": 300},
                     stalls_by_line={"44": {"pipe_busy": 5000}, "30": {"memory": 300}})
    causes, headline, _ = attribute_gap({"cycles": 9000, "bound": "mac"}, sim, FACTS, HW)
    assert causes[0]["modelled"] and not causes[1]["modelled"]
    assert headline.startswith("MAC idle 3.0% of cycles: 300 cycles waiting on memory at kernel.ptx:30")


def test_metric_rows_same_definitions():
    hw = {**HW, "cores": 4}
    pred = {"cycles": 110, "utilization": {"mac": 0.2}, "bandwidth_utilization": 0.01, "dram_bytes": 2048,
            "l2_hit_rate": 0.5, "registers_per_thread": 64, "occupancy": 0.25}
    sim = sim_result(cycles=100, utilization={"mac": 0.7}, dram_bytes=2048)
    rows = {r["metric"]: r for r in metric_rows(pred, sim, hw, bank_pred=0.0)}
    assert rows["cycles"]["error"] == pytest.approx(0.10)
    # one CTA on one of 4 cores: the planner's all-core utilization is rescaled to the core in use
    assert rows["mac utilization"]["predicted"] == pytest.approx(0.8)
    assert rows["mac utilization"]["error"] == pytest.approx(0.1) and rows["mac utilization"]["error_kind"] == "pp"
    assert rows["DRAM bandwidth utilization"]["simulated"] == pytest.approx(2048 / (100 * 1024))
    assert rows["occupancy"]["simulated"] == pytest.approx(4 * 32 / 1024)
    assert rows["registers per thread"]["simulated"] is None and rows["bank-conflict extra passes"]["error"] == 0


def test_build_report_is_json_and_renders(tmp_path):
    from reports import render

    plan = {"shape": [64, 64, 64], "tiling": {"key": "mma_x"},
            "prediction": {"cycles": 9000, "dram_bytes": 4096, "bound": "alu", "utilization": {"alu": 0.5}}}
    sim = sim_result(stalls={"flush": 310}, stalls_by_line={"57": {"flush": 310}},
                     flushes=[{"line": 57, "count": 412, "text": "@%p1 bra LOOP_K;", "cycles": 3296}],
                     series={"window": 100, "t": [0, 100], "alu": [0.5, 0.6]})
    rep = build_report(plan, sim, HW, FACTS)
    json.dumps(rep)
    assert "412 pipeline flushes" in rep["branch_note"] and rep["line_text"] == {"57": "@%p1 bra LOOP_K"}
    assert {p["label"] for p in rep["roofline_points"]} == {"predicted", "simulated"}
    paths = render(tmp_path, rep)
    assert paths["html"].stat().st_size > 10000


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "validation", "compare", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_cli_errors_exit_2_with_one_line(tmp_path):
    r = _cli(str(tmp_path / "missing"), "--hw", "npu7nm.yaml")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not a directory" in r.stderr
    r = _cli(str(tmp_path), "--hw", "npu7nm.yaml")
    assert r.returncode == 2 and "kernel.ptx missing" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "kernel.ptx").write_text("// nothing\n")
    (tmp_path / "plan.json").write_text("{not json")
    r = _cli(str(tmp_path), "--hw", "npu7nm.yaml")
    assert r.returncode == 2 and "plan.json:1: malformed JSON" in r.stderr


def _compile(spec: str, out: Path) -> None:
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "npu7nm.yaml", "--op",
                    str(ROOT / "examples" / spec), "--variant", "mma", "-o", str(out)], check=True,
                   capture_output=True, cwd=ROOT)


def test_cli_wrong_hw_and_bad_sim_json(tmp_path):
    out = tmp_path / "k"
    _compile("demo_loop_exit.yaml", out)
    r = _cli(str(out), "--hw", "h200")
    assert r.returncode == 2 and "made for npu7nm, not h200" in r.stderr
    (tmp_path / "s.json").write_text(json.dumps({"timing": "functional-only"}))
    r = _cli(str(out), "--sim-json", str(tmp_path / "s.json"))
    assert r.returncode == 2 and "not a timing result" in r.stderr


def _timing_available() -> bool:
    try:
        from sim.timing import simulate  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _timing_available(), reason="sim.timing.simulate not available")
def test_demo_bank_conflict_names_the_ldmatrix_line(tmp_path):
    out = tmp_path / "conflict"
    _compile("demo_bank_conflict.yaml", out)
    r = _cli(str(out), "--json", "--report")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    conf = rep["simulated"]["bank_conflicts_by_line"]
    top = max(conf.values())
    worst = [ln for ln, n in conf.items() if n == top]  # the ldmatrix lines of one k16 step tie
    assert all(rep["line_text"][ln].startswith("ldmatrix") for ln in worst)
    h = rep["headline"]
    assert ("by bank conflicts" in h or "hit the same bank" in h) and "extra shared-memory passes" in h
    assert any(f"kernel.ptx:{ln} 'ldmatrix" in h for ln in worst), h
    assert (out / "report.html").exists() and (out / "stalls.png").exists()


@pytest.mark.slow
@pytest.mark.skipif(not _timing_available(), reason="sim.timing.simulate not available")
def test_demo_loop_exit_every_exit_mispredicts(tmp_path):
    out = tmp_path / "loop"
    _compile("demo_loop_exit.yaml", out)
    r = _cli(str(out), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    plan = json.loads((out / "plan.json").read_text())
    t = plan["tiling"]
    warps = t["threads"] // 32
    k_tiles = -(-plan["shape"][2] // t["TILE_K"])
    by_text = {f["text"]: f for f in rep["simulated"]["flushes"]}
    inner = next(f for txt, f in by_text.items() if "bra $L_kstep" in txt)
    outer = next(f for txt, f in by_text.items() if "bra $L_ktile" in txt)
    assert inner["count"] == warps * k_tiles  # every exit of the rolled k16 loop, in every warp
    assert outer["count"] == warps  # the K loop exits once per warp
    assert f"{inner['count']} pipeline flushes at kernel.ptx:{inner['line']}" in rep["branch_note"]
    assert "the loop exit mispredicted" in rep["branch_note"]
    # the planner bounds this kernel by the ALU; the stall it does not predict is the flushes
    assert rep["headline"].startswith("ALU idle"), rep["headline"]
    assert f"{inner['count']} pipeline flushes at kernel.ptx:{inner['line']}" in rep["headline"]
    assert "the loop exit mispredicted" in rep["headline"]
