"""`worldsample run`: the main job on the embedded default (simulated arm, local store).

Today it collects the demonstration set into a new run directory and summarises the store;
the loop issues extend it into the whole service (bridge, trainer on Ray, dashboard)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from worldsample.cli.common import ConfigOpt, SetOpt, console, friendly_errors
from worldsample.errors import RunDirectoryError


@friendly_errors
def run(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="New run directory (default runs/<timestamp>).")] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run the main job: demonstrations on the simulated arm into a new run, then a summary."""
    from worldsample.cli.demos_cmd import run_collection
    from worldsample.cli.store_cmd import info_table
    from worldsample.config import dump_config, load_config

    cfg = load_config(config, set_ or [])
    out = out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    if out.exists() and any(out.iterdir()):
        raise RunDirectoryError(f"{out} already exists and is not empty; choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(dump_config(cfg))
    console.rule(f"[bold]WorldSample run[/] {out}")
    run_collection(out, cfg, cfg.demos.episodes)
    console.print(info_table(out))
    console.print(f"next: [bold]worldsample store verify {out}[/]")
