"""load_hw keeps each validated config (sim/hw.py HW_CACHE notes): a second load of the same text is the same
HwConfig without PyYAML; another text, a damaged entry, a seed-schema file or WORKBENCH_HW_CACHE=0 take the
full path (whose errors are unchanged: tests/test_hw.py, test_hw_fast_yaml.py)."""

from __future__ import annotations

import pathlib

import pytest

from sim import hw

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("WORKBENCH_HW_CACHE", raising=False)
    return tmp_path / "xdg" / "gemm-workbench" / "hw"


def _no_yaml(monkeypatch):
    def fail():
        raise AssertionError("PyYAML used for a kept config")

    monkeypatch.setattr(hw, "_yaml", fail)


def test_a_second_load_is_the_same_config_without_yaml(cache, tmp_path, monkeypatch):
    first = hw.load_hw("h200")
    assert len(list(cache.glob("*.pickle"))) == 1
    f = tmp_path / "mine.yaml"
    f.write_text((ROOT / "hwconfigs" / "h200.yaml").read_text())
    with monkeypatch.context() as m:
        _no_yaml(m)
        again = hw.load_hw("h200")
        other_path = hw.load_hw(f)  # the same text elsewhere: the same entry, its own path
    assert again == first and again.path == first.path
    assert other_path.path == str(f) and other_path == hw.hw_from_text(f.read_text(), str(f))
    f.write_text(f.read_text().replace("\nname: h200\n", "\nname: h200-mine\n", 1))
    with monkeypatch.context() as m:
        _no_yaml(m)
        with pytest.raises(AssertionError, match="PyYAML"):
            hw.load_hw(f)  # another text: validated again
    assert hw.load_hw(f).name == "h200-mine" and len(list(cache.glob("*.pickle"))) == 2


def test_a_damaged_entry_or_no_cache_loads_the_text(cache, monkeypatch):
    first = hw.load_hw("npu7nm")
    (entry,) = cache.glob("*.pickle")
    entry.write_bytes(b"not a pickle")
    assert hw.load_hw("npu7nm") == first
    entry.write_bytes(__import__("pickle").dumps({"not": "a config"}))
    assert hw.load_hw("npu7nm") == first
    entry.unlink()
    monkeypatch.setenv("WORKBENCH_HW_CACHE", "0")
    assert hw.load_hw("npu7nm") == first and not list(cache.glob("*.pickle"))


def test_errors_are_never_kept_and_seed_files_are_not_kept(cache, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "hwconfigs" / "h200.yaml").read_text().replace("warp_size: 32", "warp_size: 33", 1))
    for _ in range(2):
        with pytest.raises(hw.HwConfigError, match="warp_size"):
            hw.load_hw(bad)
    assert not list(cache.glob("*.pickle")) if cache.exists() else True
    seed = tmp_path / "hardware.yaml"
    seed.write_text("compute:\n  alu_latency: 7\n")
    assert hw.load_hw(seed).pipe_for("alu").latency == 7
    assert not cache.exists() or not list(cache.glob("*.pickle"))
