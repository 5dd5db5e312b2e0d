"""`worldsample wm train|eval`: the action-conditioned world model of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import RUN, SetOpt, console, friendly_errors, progress

app = typer.Typer(help="The action-conditioned world model: train and evaluate.", no_args_is_help=True)

RunArg = Annotated[Path, typer.Argument(help="Run directory with an episode store.", exists=True, file_okay=False)]
WmConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="World-model YAML (see configs/world_model/).", dir_okay=False)
]


@app.command(help=f"Train the world model on RUN's store; checkpoints go to {RUN.world_model}/.")
@friendly_errors
def train(
    run: RunArg,
    mode: Annotated[
        str,
        typer.Option(
            help="demo: post-train on demos; loop: keep refining on real rollouts; cotrain: mix in the sim group."
        ),
    ] = "demo",
    generator: Annotated[str | None, typer.Option(help="regression, diffusion, consistency or drift.")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="loop mode: rounds (one checkpoint each).")] = 1,
    init: Annotated[Path | None, typer.Option(help="Start from this checkpoint (file or directory).")] = None,
    config: WmConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    from worldsample.errors import ConfigError
    from worldsample.store import EpisodeStore
    from worldsample.world_model.loading import load_wm_config
    from worldsample.world_model.modes import fit_to_store, train_run

    if mode not in ("demo", "loop", "cotrain"):
        raise ConfigError(f"--mode must be demo, loop or cotrain, got {mode!r}")
    overrides = [*(set_ or []), *([f"generator.kind={generator}"] if generator else [])]
    cfg = load_wm_config(config, overrides)
    store = EpisodeStore(run)
    first = next((g for g in cfg.train.groups if g in store.groups), None)
    if first is None:
        raise ConfigError(f"none of the groups {list(cfg.train.groups)} is in {run}; it has {store.groups}")
    cfg = fit_to_store(cfg, store, first)
    steps = cfg.train.ae_steps + cfg.train.dyn_steps
    with progress() as bar:
        task = bar.add_task(
            f"world model ({mode}, {cfg.generator.kind})", total=steps * (rounds if mode == "loop" else 1), status=""
        )

        def tick(stage: str, i: int, loss: float) -> None:
            bar.update(task, advance=1, status=f"{stage} loss {loss:.4f}")

        def saved(r: int, path: Path) -> None:
            bar.console.print(f"round {r + 1}: saved [bold]{path}[/]")

        train_run(run, cfg, mode, init=init, rounds=rounds, on_step=tick, on_round=saved)


@app.command("eval")
@friendly_errors
def eval_(
    run: RunArg,
    checkpoint: Annotated[
        Path | None, typer.Option(help=f"Checkpoint file or directory (default {RUN.world_model}).")
    ] = None,
    group: Annotated[
        list[str] | None, typer.Option(help="Groups whose held-out episodes are scored (repeatable).")
    ] = None,
    horizons: Annotated[str, typer.Option(help="Comma-separated open-loop horizons.")] = "1,8,32",
    per_episode: Annotated[int, typer.Option(min=1, help="Start points per held-out episode.")] = 4,
    out: Annotated[Path | None, typer.Option(help=f"Report directory (default {RUN.world_model}/eval).")] = None,
) -> None:
    """PSNR/SSIM per horizon on held-out episodes; writes report.json and strip.png."""
    from rich.table import Table

    from worldsample.errors import ConfigError
    from worldsample.store import EpisodeStore
    from worldsample.world_model import checkpoint as ckpt
    from worldsample.world_model.data import WindowSource
    from worldsample.world_model.evaluate import evaluate, write_report
    from worldsample.world_model.modes import checkpoint_dir
    from worldsample.world_model.train import cache_keys

    try:
        hs = sorted({int(h) for h in horizons.split(",") if h.strip()})
    except ValueError:
        raise ConfigError(f"--horizons must be comma-separated integers, got {horizons!r}") from None
    if not hs or hs[0] < 1:
        raise ConfigError("--horizons must be positive integers")
    model, doc = ckpt.load(checkpoint or checkpoint_dir(run))
    store = EpisodeStore(run)
    groups = group or [g for g in ("demo", "real") if g in store.groups]
    source = WindowSource(
        store, {g: 1.0 for g in groups}, cache_keys(model.cfg), model.cfg.train.holdout_every, split="heldout"
    )
    out = out or checkpoint_dir(run) / "eval"
    with progress() as bar:
        task = bar.add_task("held-out windows", total=None, status="")
        report = evaluate(
            model,
            source,
            hs,
            per_episode,
            strip_path=out / "strip.png",
            on_batch=lambda done, total: bar.update(task, completed=done, total=total),
        )
    report["checkpoint"] = {"version": doc["version"], "meta": doc.get("meta", {})}
    write_report(out / "report.json", report)
    table = Table(title=f"world model v{doc['version']} ({report['generator']}), {report['windows']} held-out windows")
    for col in ("horizon", "PSNR", "SSIM", "copy PSNR", "copy SSIM", "AE PSNR"):
        table.add_column(col, justify="right")
    for h, r in report["horizons"].items():
        table.add_row(
            h,
            f"{r['psnr']:.2f}",
            f"{r['ssim']:.3f}",
            f"{r['copy_psnr']:.2f}",
            f"{r['copy_ssim']:.3f}",
            f"{r['recon_psnr']:.2f}",
        )
    console.print(table)
    console.print(f"report: [bold]{out / 'report.json'}[/], strip: [bold]{out / 'strip.png'}[/]")
