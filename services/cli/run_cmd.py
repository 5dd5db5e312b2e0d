"""`worldsample run`: the main job on the embedded default, in one command.

1. demonstrations from the scripted expert on the simulated arm, into a new run directory;
2. the dashboard, served on 127.0.0.1 (its own process, lower CPU priority);
3. online RL with world-model augmentation and PPL (`worldsample train`, local Ray). With
   `--robot bridge` (the default) the simulated arm runs as a ROS 2 robot in its own process and
   `worldsample bridge` records it over DDS on loopback, as with a physical arm; `--robot sim`
   steps the arm in lock-step inside a Ray actor instead (reproducible, used by the benchmarks);
4. a summary: real steps, success before and after, synthetic share, world-model version.

`worldsample run --resume RUN` continues a stopped run with its own config (RUN/config.yaml):
only missing demonstrations, then the dashboard, the robot and the trainer from its checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import ConfigOpt, SetOpt, as_command, console, friendly_errors, overrides_text
from services.cli.dds_robot import DEFAULT_PROFILE, SimRobotOverDds
from services.cli.progress import TrainingProgress
from worldsample.config import RunConfig, config_history, load_config, load_run_config, record_config
from worldsample.errors import ConfigError, RunDirectoryError
from worldsample.paths import RunFiles


def start_dashboard(run: Path, port: int) -> subprocess.Popen | None:
    """The dashboard in its own session (so the scheduler weighs it apart from training)."""
    files = RunFiles.of(run)
    cmd = [sys.executable, "-m", "services.cli.main", "dashboard", str(run), "--port", str(port), "--nice", "10",
           "--supervisor-pid", str(os.getpid())]  # it shuts down if this process dies without stopping it
    with open(files.log("dashboard"), "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(60):
        if files.dashboard_token.exists() or proc.poll() is not None:
            break
        time.sleep(0.25)
    if proc.poll() is not None:
        console.print(f"[yellow]dashboard did not start[/] (see {files.log('dashboard')}); training goes on without it")
        return None
    console.print(f"dashboard: [bold]http://127.0.0.1:{port}/[/]  (control token in {files.dashboard_token})")
    return proc


def _new_run(
    out: Path | None, robot: str, profile: Path, config: Path | None, set_: list[str] | None
) -> tuple[Path, RunConfig]:
    """A new run directory with its config saved; refuses a directory that holds something."""
    overrides = [*(set_ or []), f"loop.robot={robot}"]
    cfg = load_config(config, overrides)
    out = out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    if out.exists() and any(out.iterdir()):
        raise RunDirectoryError(f"{out} already exists and is not empty; choose a new --out, "
                                f"or continue that run with `worldsample run --resume {out}`")
    out.mkdir(parents=True, exist_ok=True)
    command = as_command("run", out=out, robot=robot, profile=profile if robot == "bridge" else None, config=config,
                         set=set_)
    record_config(out, cfg, "start", command, overlay=config, overrides=overrides, **_robot_entry(cfg, profile))
    return out, cfg


def _resume_run(run: Path, out: Path | None, robot: str | None, profile: Path | None, config: Path | None,
                set_: list[str] | None) -> tuple[RunConfig, Path]:
    """The run's own config with the overrides given now (printed, saved, recorded), and its robot profile."""
    if out is not None:
        raise RunDirectoryError(f"--out {out} and --resume {run} together: --out starts a new run, --resume "
                                "continues an existing one; pass only one of them")
    files = RunFiles.of(run)
    lacks = [name for name, path in (("config.yaml", files.config), ("store", files.store / "zarr.json"))
             if not path.exists()]
    if lacks:
        raise RunDirectoryError(f"{run} is not a run directory (no {' and no '.join(lacks)}); "
                                "start a new run with `worldsample run --out NEW_DIR`")
    overrides = list(set_ or [])
    cfg = load_run_config(run, config, overrides)
    saved = load_run_config(run)
    robot = robot or cfg.loop.robot
    if robot != saved.loop.robot or cfg.loop.robot != saved.loop.robot:
        raise ConfigError(f"{run} was started with --robot {saved.loop.robot}, which its store was recorded with; "
                          f"resume it with the same robot, or start a new run for --robot {robot}")
    console.print(f"resuming {run} with its own config, {files.config}", highlight=False)
    if config is not None or overrides:
        console.print(f"resume with overrides: {overrides_text(config, overrides)}", highlight=False)
    if profile is None:  # the profile the run was last started with
        used = [e["profile"] for e in config_history(run) if e.get("profile")]
        profile = Path(used[-1]) if used else DEFAULT_PROFILE
    command = as_command("run", resume=run, profile=profile if cfg.loop.robot == "bridge" else None,
                         config=config, set=set_)
    record_config(run, cfg, "resume", command, overlay=config, overrides=overrides, **_robot_entry(cfg, profile))
    return cfg, profile


def _robot_entry(cfg: RunConfig, profile: Path) -> dict:
    """What the config history keeps beside the config: the robot profile, which is no config field."""
    return {"profile": str(profile)} if cfg.loop.robot == "bridge" else {}


def _demos_to_collect(run: Path, cfg: RunConfig) -> tuple[int, int]:
    """On resume, the demonstrations and randomised-domain episodes (demos.sim_episodes) still
    missing: the store's committed counts say how far an interrupted collection got. Once training
    has started the collection was complete (with demos.keep_failures=false the expert's failures
    were discarded, so the count alone would ask for more)."""
    from services.cli.demos_cmd import sim_episodes_wanted
    from worldsample.demos import group_for_domain
    from worldsample.store import EpisodeStore

    files, store = RunFiles.of(run), EpisodeStore(run)
    if "real" in store.groups or files.policies.exists() or files.trainer.exists():
        return 0, 0

    def done(group: str) -> int:
        return store.reader(group, cache=False).num_episodes if group in store.groups else 0

    demos = max(0, cfg.demos.episodes - done(group_for_domain(cfg.env.domain)))
    return demos, max(0, sim_episodes_wanted(cfg) - done("sim"))


@friendly_errors
def run(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="New run directory (default runs/<timestamp>).", file_okay=False)
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RUN",
            file_okay=False,
            help="Continue the run in RUN where it stopped, with its own config (RUN/config.yaml; --config and "
            "--set apply on top and are recorded): missing demonstrations only, then the dashboard, the robot "
            "and the trainer from its latest checkpoint.",
        ),
    ] = None,
    train: Annotated[bool, typer.Option(help="Run online RL after the demonstrations.")] = True,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard while the job runs.")] = True,
    port: Annotated[int, typer.Option(help="Dashboard port on 127.0.0.1.")] = 8765,
    robot: Annotated[
        str | None,
        typer.Option(
            help="bridge (default): the simulated arm over DDS + the bridge; sim: lock-step in a Ray actor. "
            "On --resume, the run's own."
        ),
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option(help=f"Robot profile for --robot bridge (default {DEFAULT_PROFILE}; on --resume, the run's)."),
    ] = None,
    keep_dashboard: Annotated[
        bool, typer.Option(help="Keep serving the dashboard after training (Ctrl-C to stop).")
    ] = False,
    progress_every: Annotated[
        float, typer.Option(min=0.5, help="Seconds between the progress lines printed while training.")
    ] = 10.0,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """The main job: demonstrations, dashboard, online RL with world-model data, summary."""
    from services.cli.demos_cmd import collect_with_sim, sim_episodes_wanted
    from services.cli.store_cmd import info_table
    from services.cli.train_cmd import print_summary

    if robot is not None and robot not in ("sim", "bridge"):
        raise typer.BadParameter("--robot must be sim or bridge")
    if resume is None:
        profile = profile or DEFAULT_PROFILE
        out, cfg = _new_run(out, robot or "bridge", profile, config, set_)
        demos, sim = cfg.demos.episodes, sim_episodes_wanted(cfg)
    else:
        cfg, profile = _resume_run(resume, out, robot, profile, config, set_)
        demos, sim = _demos_to_collect(resume, cfg)
        out = resume
        console.print(f"demonstrations: {demos} of {cfg.demos.episodes} still to collect" if demos
                      else "demonstrations: complete, not collected again")
    console.rule(f"[bold]WorldSample run[/] {out}" + (" (resumed)" if resume is not None else ""))
    collect_with_sim(out, cfg, demos, sim)
    dash = start_dashboard(out, port) if dashboard else None
    try:
        if train:
            from services.trainer.driver import train as run_train

            robot_procs = SimRobotOverDds(out, cfg, profile) if cfg.loop.robot == "bridge" else nullcontext()
            url = f"http://127.0.0.1:{port}/" if dash is not None else None
            progress = TrainingProgress(out, cfg.loop.real_steps, console, every_s=progress_every, dashboard=url)
            with robot_procs as link, progress:
                if link is not None:
                    console.print(f"simulated arm over DDS (domain {link.domain_id}, loopback) + bridge; logs in {out}")
                on_round = progress.on_round

                # a robot process that dies ends the job at the loop's next step boundary, also while
                # nothing is being committed (a dead arm commits nothing)
                watch = link.check if link is not None else None
                print_summary(run_train(out, cfg, resume=resume is not None, on_round=on_round, watch=watch))
        console.print(info_table(out))
        if dash is not None and keep_dashboard:
            console.print("dashboard still serving; Ctrl-C to stop")
            dash.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if dash is not None and dash.poll() is None:
            os.killpg(dash.pid, 15)
    console.print(f"next: [bold]worldsample store verify {out}[/], [bold]worldsample dashboard {out}[/]")
