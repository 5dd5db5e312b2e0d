"""Check that a command line a deploy file names is one its program accepts: the command exists and
click parses its options and arguments (`make_context`, which runs nothing). The programs are the
real command-line apps: `worldsample` (services/cli), the bridge image's `python3 -m robot_bridge`
and `ray` (typer's apps through the copy of click that typer ships, Ray's through click). A shell
entry script is run for real under /bin/sh with recording stand-ins for `ray` and `worldsample` on
PATH, and each command line it ran is checked the same way.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import typer


def program(name: str):
    if name == "worldsample":
        from services.cli.main import app

        return typer.main.get_command(app)
    if name == "robot_bridge":
        from robot_bridge.cli import app

        return typer.main.get_command(app)
    if name == "ray":
        from ray.scripts.scripts import cli

        return cli
    raise AssertionError(f"unknown program {name!r}")


def check_command(argv: list[str]) -> str:
    """Parse `argv` (program first) with its program's command tree; the command path it names.
    Fails the test with click's own message when the command or an option does not exist."""
    name, args = argv[0], list(argv[1:])
    cmd = program(name)
    path = [name]
    while is_group(cmd) and args and not args[0].startswith("-"):
        sub = cmd.commands.get(args[0])
        assert sub is not None, f"`{' '.join(path)}` has no command {args[0]!r} (in {argv})"
        path.append(args.pop(0))
        cmd = sub
    assert not is_group(cmd), f"{argv} names a command group, not a command"
    try:
        cmd.make_context(" ".join(path), args)
    except Exception as e:  # click's UsageError and BadParameter (typer ships its own copy of click)
        if not hasattr(e, "format_message"):
            raise
        raise AssertionError(f"{argv}: {e.format_message()}") from None
    return " ".join(path)


def is_group(cmd) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


STUB = """#!{python}
import json, os, sys
with open(os.environ["WS_STUB_LOG"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


def run_script(script: Path, env: dict[str, str]) -> list[list[str]]:
    """Run `script` under /bin/sh with `env`; the command lines it ran of `ray` and `worldsample`."""
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir, log = Path(tmp) / "bin", Path(tmp) / "calls.jsonl"
        bin_dir.mkdir()
        for name in ("ray", "worldsample"):
            stub = bin_dir / name
            stub.write_text(STUB.format(python=sys.executable))
            stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
        full = {"PATH": f"{bin_dir}:/usr/bin:/bin", "WS_STUB_LOG": str(log), **env}
        res = subprocess.run(["/bin/sh", str(script)], env=full, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def check_script_commands(script: Path, env: dict[str, str]) -> list[list[str]]:
    """Run the script (a fresh run directory, then one with demos and a trainer) and check every
    command line it ran; both runs' command lines."""
    calls = []
    with tempfile.TemporaryDirectory() as run:
        for prepare in (None, "resume"):
            if prepare == "resume":
                (Path(run) / "store" / "demo").mkdir(parents=True)
                (Path(run) / "store" / "demo" / "zarr.json").write_text("{}")
                (Path(run) / "trainer").mkdir()
            ran = run_script(script, {**env, "WS_RUN": run, "HOME": os.environ.get("HOME", "/root")})
            for argv in ran:
                check_command(argv)
            calls.append(ran)
    return calls
