"""The `worldsample` command lives in services/ (which composes both packages); the library and
the robot side import nothing from services/, and the library nothing from robot_bridge/."""

import ast
import importlib
import tomllib
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[2]


def imported_packages(package: str) -> dict[str, set[str]]:
    """Top-level package of every import in `package`'s modules, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_worldsample_imports_neither_services_nor_robot_bridge():
    bad = {p: n & {"services", "robot_bridge"} for p, n in imported_packages("worldsample").items()}
    assert not {p: n for p, n in bad.items() if n}


def test_robot_bridge_does_not_import_services():
    bad = [p for p, n in imported_packages("robot_bridge").items() if "services" in n]
    assert not bad


def test_console_script_is_the_services_app():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, attr = scripts["worldsample"].split(":")
    assert module == "services.cli.main"
    assert isinstance(getattr(importlib.import_module(module), attr), typer.Typer)
