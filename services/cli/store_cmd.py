"""`worldsample store info|verify RUN` and `store export-foxglove RUN OUT.mcap`."""

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


@app.command("export-foxglove")
@friendly_errors
def export_foxglove(
    run: RunArg,
    out: Annotated[Path, typer.Argument(help="The .mcap file to write (written whole, or not at all).")],
    episode: Annotated[int, typer.Option("--episode", "-e", min=0, help="Episode id in the group.")],
    group: Annotated[str, typer.Option("--group", "-g", help="Store group: demo, real, sim or synthetic.")] = "real",
    raw: Annotated[bool, typer.Option("--raw", help="foxglove.RawImage (exact pixels, larger), not JPEG.")] = False,
    jpeg_quality: Annotated[int, typer.Option("--jpeg-quality", min=1, max=100)] = 90,
    period_ms: Annotated[
        float | None,
        typer.Option("--period-ms", min=0.001, help="Log the steps this far apart (default: the record's own times)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
) -> None:
    """Write one stored episode as an MCAP file for Foxglove: cameras, vectors, the episode record."""
    from worldsample.export.foxglove import export_episode

    s = export_episode(
        run, group, episode, out, images="raw" if raw else "jpeg", jpeg_quality=jpeg_quality,
        period_s=period_ms / 1e3 if period_ms is not None else None, overwrite=force,
    )
    console.print(
        f"wrote {s.path}: {group}/{s.episode}, {s.steps} steps on {len(s.messages)} topics, "
        f"{human_bytes(s.bytes)}; log times from {s.time_source}",
        highlight=False,
        soft_wrap=True,
    )
