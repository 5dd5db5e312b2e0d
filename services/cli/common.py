"""Pieces shared by the subcommands: config options, error reporting, progress bars."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from worldsample.errors import WorldSampleError

console = Console()
err_console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file (see configs/).", exists=False)]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override a config field, e.g. --set env.image_size=96 (repeatable).")
]

F = TypeVar("F", bound=Callable)


def friendly_errors(fn: F) -> F:
    """Turn WorldSample's own errors into a one-paragraph message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WorldSampleError as e:
            err_console.print(f"[bold red]error:[/] {e}", highlight=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


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
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
