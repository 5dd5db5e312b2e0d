"""`worldsample store info|verify RUN`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from services.cli.common import RUN, console, err_console, friendly_errors, progress

app = typer.Typer(help="Inspect and check a run's episode store.", no_args_is_help=True)

RunArg = Annotated[Path, typer.Argument(help=f"Run directory (holds {RUN.store.name}/).")]


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def info_table(run: Path) -> Table:
    from worldsample.store.verify import store_info

    t = Table(title=f"episode store: {run}")
    numeric = ("episodes", "steps", "success", "interventions", "on disk")
    for col in ("group", "episodes", "steps", "success", "interventions", "cameras", "on disk", "writer"):
        t.add_column(col, justify="right" if col in numeric else "left")
    for g in store_info(run):
        t.add_row(
            g.name,
            str(g.episodes),
            str(g.steps),
            f"{100 * g.success_rate:.0f}%" if g.episodes else "-",
            str(g.interventions),
            ", ".join(g.cameras) or "-",
            human_bytes(g.bytes_on_disk),
            "active" if g.writer_active else "-",
        )
    return t


@app.command()
@friendly_errors
def info(run: RunArg) -> None:
    """Groups, episode counts, steps, success rate and size on disk."""
    console.print(info_table(run))


@app.command()
@friendly_errors
def verify(run: RunArg) -> None:
    """Read every committed episode and check data, lengths, checksums and metadata.

    Exits 1 and lists each inconsistency when anything is wrong."""
    from worldsample.store.verify import store_info, verify_store

    total = sum(g.episodes for g in store_info(run))
    with progress() as bar:
        task = bar.add_task("verifying", total=total, status="")
        rep = verify_store(run, progress=lambda n: bar.advance(task, n))
    if rep.ok:
        console.print(f"[green]ok[/]: {rep.episodes} committed episodes, {rep.steps} steps, all consistent")
        return
    for p in rep.problems:
        err_console.print(f"[red]FAIL[/] {p}", highlight=False)
    err_console.print(f"{len(rep.problems)} problem(s) in {run}")
    raise typer.Exit(1)
