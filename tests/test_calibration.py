"""The simulated side of the H200 calibration table against the committed measurements
(validation/micro/h200_micro.json): every figure within 10% (validation/calibrate.py, tiny step counts)."""

from __future__ import annotations

import pytest

from sim.hw import load_hw
from validation import calibrate

MEASURED = calibrate.load_measured()
HW = load_hw("h200")


def test_measurements_are_committed_with_date_and_device():
    assert MEASURED["date"] == "2026-11-29"
    assert "H200" in MEASURED["device"]
    assert set(MEASURED["figures"]) == set(calibrate.BY_NAME)


@pytest.mark.parametrize("name", list(calibrate.BY_NAME))
def test_simulated_within_10_percent(name):
    measured = MEASURED["figures"][name]["value"]
    simulated = calibrate.simulate_figure(name, HW)
    assert abs(simulated - measured) <= calibrate.TOLERANCE * measured, (name, measured, simulated)
