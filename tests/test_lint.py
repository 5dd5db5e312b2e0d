"""The tree passes `ruff check` with the rules in pyproject.toml, so a lint finding fails the suite."""

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff_command() -> list[str]:
    beside = Path(sys.executable).parent / "ruff"
    if beside.is_file():
        return [str(beside)]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    pytest.fail("ruff is not installed; install the test extra: pip install -e '.[test]'")


def test_ruff_check_is_clean():
    # --no-cache: a test run must not write into the checkout
    res = subprocess.run(
        [*ruff_command(), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, f"`ruff check .` found problems (exit {res.returncode}):\n{res.stdout}{res.stderr}"


@pytest.mark.parametrize("package", ["worldsample.sim", "worldsample.world_model"])
def test_lazy_exports_are_spelled_out_in_all(package):
    # the linters read __all__ statically, so every lazily imported name must be listed there by hand
    mod = importlib.import_module(package)
    assert set(mod._LAZY) <= set(mod.__all__), f"{package}: add {sorted(set(mod._LAZY) - set(mod.__all__))} to __all__"
    eager = set(mod.__all__) - set(mod._LAZY)
    assert eager <= set(vars(mod)), f"{package}: __all__ names {sorted(eager - set(vars(mod)))} that it does not define"
