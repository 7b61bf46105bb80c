"""The example notebooks run top to bottom (code cells executed in order; IPython's display stubbed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run_notebook(path: Path) -> dict:
    nb = json.loads(path.read_text())
    shown: list = []
    env: dict = {}
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            src = src.replace("from IPython.display import Image, display", "")
            env.update({"display": shown.append, "Image": lambda filename: filename})
            exec(compile(src, f"{path.name}", "exec"), env)  # noqa: S102 - our own notebook
    finally:
        os.chdir(cwd)
    env["_shown"] = shown
    return env


@pytest.mark.slow
def test_sweep_notebook_runs():
    env = _run_notebook(EXAMPLES / "sweep.ipynb")
    assert len(env["rows"]) == 8 and all("time_us" in r for r in env["rows"])
    assert [Path(p).name for p in env["_shown"]] == ["sensitivity.png", "pareto.png"]
