"""`validation calibrate --write-hw`: a detuned hwconfig is pulled back to the measurements."""

from __future__ import annotations

import re

from sim.hw import load_hw, resolve_hw_path
from validation.calibrate import compare, fit, load_measured, write_fitted_yaml


def test_fit_recovers_detuned_latencies(tmp_path):
    text = resolve_hw_path("h200").read_text()
    detuned = re.sub(r"^(  latency:) 23 ", r"\1 40 ", text, count=1, flags=re.M)
    assert detuned != text
    src = tmp_path / "detuned.yaml"
    src.write_text(detuned)
    hw = load_hw(str(src))
    assert hw.shared.latency == 40
    measured = load_measured()
    names = ["shared_latency", "mma_latency"]
    before = compare(hw, measured, names)
    assert not before[0]["ok"]  # 17 cycles too slow: the comparison can fail
    out = tmp_path / "fitted.yaml"
    write_fitted_yaml(src, fit(hw, before), out, "test fit")
    fitted = load_hw(str(out))
    after = compare(fitted, measured, names)
    assert all(r["ok"] for r in after), after
    assert abs(after[0]["simulated"] - after[0]["measured"]) <= 1
    assert "# source: test fit" in out.read_text()
