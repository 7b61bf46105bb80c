"""The hardware loader parses with libyaml where PyYAML has it (sim.hw._FastLoader) and with the pure-Python
loader otherwise: both give the same HwConfig, and every bad file the same one-line error (file:line key.path)."""

from __future__ import annotations

import pathlib

import pytest
import yaml

import sim.hw as hw
from sim.errors import HwConfigError

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED_HW = ROOT / "examples" / "seeds" / "hardware.yaml"


def test_libyaml_is_used_where_present():
    # the speed-up is only real if this machine's PyYAML has libyaml (CI's does: pip wheels ship it)
    assert (hw._FastLoader is not None) == bool(getattr(yaml, "__with_libyaml__", False))
    if hw._FastLoader is None:
        pytest.skip("PyYAML without libyaml: only the pure-Python loader runs")


@pytest.mark.parametrize("name", ["h200", "npu7nm", str(SEED_HW)])
def test_same_config_through_both_loaders(name, monkeypatch):
    fast = hw.load_hw(name)
    monkeypatch.setattr(hw, "_FastLoader", None)
    assert hw.load_hw(name) == fast


BAD = {
    "duplicate key": "version: 1\nname: a\nname: b\n",
    "recursive alias": "version: 1\ncore: &c\n  inner: *c\n",
    "ambiguous yes": "version: 1\nname: yes\n",
    "octal": "version: 1\nclock_mhz: 010\n",
    "sexagesimal": "version: 1\nclock_mhz: 1:30\n",
    "quoted yes is a string": "version: 1\nname: 'yes'\nclock_mhz: '010'\n",
    "block scalar": "version: 1\nname: |\n  h\nclock_mhz: 1.5\n",
    "unclosed flow": "version: 1\npipes: [a, b\nname: x\n",
    "tab indent": "version: 1\ncore:\n\tcount: 2\n",
    "bad indent": "version: 1\ncore:\n  count: 2\n   schedulers: 4\n",
    "two documents": "version: 1\n---\nversion: 2\n",
    "empty": "",
    "comment only": "# nothing\n",
    "not a mapping": "- a\n- b\n",
    "non-string key": "version: 1\n1: x\n",
    "collection key": "version: 1\n? [a]\n: x\n",
    "unknown tag": "version: 1\nname: !!python/name:os.system x\n",
    "bad binary": "version: 1\nname: !!binary 'xx%'\n",
    "unknown key": "version: 1\nnmae: h\n",
    "merge key": "version: 1\nbase: &b {count: 2}\ncore:\n  <<: *b\n",
    "undefined alias": "version: 1\nname: *nope\n",
    "bad escape": 'version: 1\nname: "\\q"\n',
}


def _error(text: str) -> str:
    with pytest.raises(HwConfigError) as e:
        hw.hw_from_text(text, "bad.yaml")
    return e.value.one_line() if hasattr(e.value, "one_line") else str(e.value)


@pytest.mark.parametrize("case", sorted(BAD))
def test_same_error_through_both_loaders(case, monkeypatch):
    text = BAD[case]
    fast = _error(text)
    assert fast.startswith("bad.yaml"), fast
    monkeypatch.setattr(hw, "_FastLoader", None)
    assert _error(text) == fast


@pytest.mark.parametrize("text", [SEED_HW.read_text(), (ROOT / "hwconfigs" / "h200.yaml").read_text(),
                                  "a: [1, 2\n", "x: 1\nx: 2\n", "a: *b\n", ""],
                         ids=["seed", "h200", "unclosed", "duplicate", "alias", "empty"])
def test_safe_load_is_yaml_safe_load(text):
    def load(f):
        try:
            return ("ok", f(text))
        except yaml.YAMLError as e:
            return ("error", str(e))

    assert load(hw.safe_load) == load(yaml.safe_load)
