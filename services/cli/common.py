"""Pieces shared by the subcommands: config options, error reporting, progress bars."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

# one console and one error report for both command lines; robot_bridge holds them because it must not import services
from robot_bridge.cli import console, err_console, friendly_errors
from worldsample.paths import RunFiles

__all__ = [
    "RUN",
    "ConfigOpt",
    "SetOpt",
    "as_command",
    "console",
    "err_console",
    "friendly_errors",
    "overrides_text",
    "progress",
    "setup_logging",
]

RUN = RunFiles.of("RUN")  # the run-directory layout as help texts show it: RUN/store, RUN/dashboard_token, ...

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (see configs/).", exists=False, dir_okay=False)
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a config field, e.g. --set env.image_size=96 (repeatable)."),
]


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def as_command(name: str, *args: object, **options: object) -> list[str]:
    """A `worldsample` command line that does what this call did (for the run's config history):
    None and False options are left out, True ones are flags, lists repeat their option."""
    cmd = ["worldsample", name, *map(str, args)]
    for key, value in options.items():
        flag = "--" + key.rstrip("_").replace("_", "-")
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is True:
                cmd.append(flag)
            elif v is not None and v is not False:
                cmd += [flag, str(v)]
    return cmd


def overrides_text(config: Path | None, overrides: list[str]) -> str:
    """`--config` and `--set` as one line: "--config extra.yaml, loop.real_steps=3000"."""
    return ", ".join([*([f"--config {config}"] if config is not None else []), *overrides])
