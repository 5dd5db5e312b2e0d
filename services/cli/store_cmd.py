"""`worldsample store info|verify RUN`, `store export-foxglove RUN OUT.mcap`, `store episode-mp4 RUN EPISODE OUT.mp4`,
`store export-lerobot RUN OUT` and `store import-lerobot DATASET RUN`."""

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


class LazyBar:
    """A progress bar that appears with the first step of work, so an input refused at once
    prints its one-line error alone."""

    def __init__(self):
        self.bar = self.job = None

    def advance(self, phase: str, n: int, total: int, absolute: bool = False) -> None:
        if self.bar is None:
            self.bar = progress()
            self.bar.start()
            self.job = self.bar.add_task(phase, total=total, status="")
        if absolute:
            self.bar.update(self.job, description=phase, completed=n, total=total)
        else:
            self.bar.update(self.job, description=phase, advance=n, total=total)

    def __enter__(self) -> LazyBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


CodecOpt = Annotated[
    str, typer.Option("--codec", help="av1 (LeRobot's default), h264 or lossless (exact pixels, larger).")
]
FpsOpt = Annotated[
    int | None, typer.Option("--fps", min=1, help="Frames per second (default: the records' control rate, else 10).")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")]


@app.command("episode-mp4")
@friendly_errors
def episode_mp4(
    run: RunArg,
    episode: Annotated[int, typer.Argument(min=0, help="Episode id in the group.")],
    out: Annotated[Path, typer.Argument(help="The .mp4 file to write (written whole, or not at all).")],
    group: Annotated[str, typer.Option("--group", "-g", help="Store group: demo, real, sim or synthetic.")] = "real",
    camera: Annotated[str | None, typer.Option("--camera", help="One camera (default: all, side by side).")] = None,
    fps: FpsOpt = None,
    codec: Annotated[str, typer.Option("--codec", help="h264 (plays everywhere), av1 or lossless.")] = "h264",
    force: ForceOpt = False,
) -> None:
    """Write one stored episode's camera frames as an mp4 video."""
    from worldsample.export.video import export_episode_mp4

    s = export_episode_mp4(run, group, episode, out, camera=camera, fps=fps, codec_name=codec, overwrite=force)
    console.print(
        f"wrote {s.path}: {group}/{s.episode}, {s.frames} frames of {s.size[0]}x{s.size[1]} ({', '.join(s.cameras)}) "
        f"at {s.fps} fps, {s.codec}, {human_bytes(s.bytes)}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("export-lerobot")
@friendly_errors
def export_lerobot(
    run: RunArg,
    out: Annotated[Path, typer.Argument(help="The dataset directory to write (written whole, or not at all).")],
    group: Annotated[str, typer.Option("--group", "-g", help="Store group: demo, real, sim or synthetic.")] = "demo",
    fps: FpsOpt = None,
    codec: CodecOpt = "av1",
    task: Annotated[
        str | None, typer.Option("--task", help="Task text of every episode (default: the record's, else the group).")
    ] = None,
    robot_type: Annotated[str | None, typer.Option("--robot-type", help="info.json's robot_type.")] = None,
    force: ForceOpt = False,
) -> None:
    """Write a group's committed episodes as a LeRobotDataset v3.0 (parquet and mp4)."""
    from worldsample.export.lerobot_write import export_lerobot as export
    from worldsample.store import EpisodeStore

    total = EpisodeStore(run).reader(group, cache=False).num_episodes
    with LazyBar() as bar:
        s = export(run, out, group, fps=fps, codec_name=codec, task=task, robot_type=robot_type, overwrite=force,
                   progress=lambda n: bar.advance("exporting", n, total))
    console.print(
        f"wrote {s.path}: LeRobotDataset v3.0, {s.episodes} episodes, {s.frames} frames at {s.fps} fps "
        f"(fps from {s.fps_source}), {human_bytes(s.bytes)}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("import-lerobot")
@friendly_errors
def import_lerobot(
    dataset: Annotated[Path, typer.Argument(help="A LeRobotDataset v3.0 directory (holds meta/info.json).")],
    run: Annotated[Path, typer.Argument(help="Run directory; the episodes go into its `demo` group.")],
) -> None:
    """Bring a LeRobotDataset v3.0's episodes into a run as demonstrations (group `demo`), all or nothing."""
    from worldsample.export.lerobot_import import import_lerobot as load

    with LazyBar() as bar:
        s = load(dataset, run, progress=lambda phase, done, total: bar.advance(phase, done, total, absolute=True))
    console.print(
        f"imported {s.episodes} episodes, {s.frames} frames into {s.run}/{s.group} (ids {s.ids[0]}..{s.ids[-1]})",
        highlight=False,
        soft_wrap=True,
    )
    if s.skipped:
        console.print(f"not imported (no store key for them): {', '.join(s.skipped)}", highlight=False)
    if s.defaulted:
        console.print(f"not in the dataset, so reward 0 and flags false: {', '.join(s.defaulted)}", highlight=False)
