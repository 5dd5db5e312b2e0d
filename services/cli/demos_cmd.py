"""`worldsample demos collect`: scripted-expert demonstrations on the simulated arm."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import ConfigOpt, SetOpt, console, friendly_errors, progress

app = typer.Typer(help="Demonstrations from the scripted expert.", no_args_is_help=True)


def run_collection(out: Path, cfg, episodes: int) -> None:
    from worldsample.demos import collect_demos

    with progress() as bar:
        task = bar.add_task(f"demos ({cfg.env.domain})", total=episodes, status="")
        wins = 0

        def tick(i: int, success: bool, length: int) -> None:
            nonlocal wins
            wins += int(success)
            bar.update(task, advance=1, status=f"success {wins}/{i + 1}, last {length} steps")

        s = collect_demos(out, cfg, episodes, on_episode=tick)
    console.print(
        f"collected [bold]{s.episodes}[/] episodes into [bold]{s.group}[/]: success {100 * s.success_rate:.0f}%, "
        f"{s.steps} steps stored, {s.steps_per_second:.1f} steps/s"
    )


def sim_config(cfg):
    """The run config with the arm in the randomised sim domain (its episodes go to group `sim`)."""
    return cfg.model_copy(update={"env": cfg.env.model_copy(update={"domain": "sim"})})


def sim_episodes_wanted(cfg) -> int:
    """demos.sim_episodes for a run in the deployment domain; none when the demos are sim already."""
    return cfg.demos.sim_episodes if cfg.env.domain == "real" else 0


def collect_with_sim(out: Path, cfg, demos: int, sim: int) -> None:
    """`demos` deployment-domain demonstrations, then `sim` randomised-domain expert episodes."""
    if demos:
        run_collection(out, cfg, demos)
    if sim:
        run_collection(out, sim_config(cfg), sim)


@app.command()
@friendly_errors
def collect(
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory; created if new, appended to if it exists.",
                                      file_okay=False)],
    episodes: Annotated[
        int | None,
        typer.Option("--episodes", "-n", min=1, help="Episodes to record (default: the config's demos.episodes)."),
    ] = None,
    domain: Annotated[
        str, typer.Option(help="real (deployment domain, group demo; then demos.sim_episodes in group sim) or "
                          "sim (randomised, group sim).")
    ] = "real",
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Record scripted-expert episodes on the simulated arm into RUN's store."""
    from worldsample.config import load_config
    from worldsample.errors import ConfigError

    if domain not in ("real", "sim"):
        raise ConfigError(f"--domain must be real or sim, got {domain!r}")
    cfg = load_config(config, [*(set_ or []), f"env.domain={domain}"])
    out.mkdir(parents=True, exist_ok=True)
    collect_with_sim(out, cfg, episodes or cfg.demos.episodes, sim_episodes_wanted(cfg))
