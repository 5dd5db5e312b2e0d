"""`worldsample run`: the main job on the embedded default, in one command.

1. demonstrations from the scripted expert on the simulated arm, into a new run directory;
2. the dashboard, served on 127.0.0.1 (its own process, lower CPU priority);
3. online RL with world-model augmentation and PPL (`worldsample train`, local Ray). With
   `--robot bridge` (the default) the simulated arm runs as a ROS 2 robot in its own process and
   `worldsample bridge` records it over DDS on loopback, as with a physical arm; `--robot sim`
   steps the arm in lock-step inside a Ray actor instead (reproducible, used by the benchmarks);
4. a summary: real steps, success before and after, synthetic share, world-model version.
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

from services.cli.common import ConfigOpt, SetOpt, console, friendly_errors
from services.cli.dds_robot import SimRobotOverDds
from worldsample.errors import RunDirectoryError
from worldsample.paths import RunFiles


def start_dashboard(run: Path, port: int) -> subprocess.Popen | None:
    """The dashboard in its own session (so the scheduler weighs it apart from training)."""
    files = RunFiles.of(run)
    cmd = [sys.executable, "-m", "services.cli.main", "dashboard", str(run), "--port", str(port), "--nice", "10"]
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


@friendly_errors
def run(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="New run directory (default runs/<timestamp>).")
    ] = None,
    train: Annotated[bool, typer.Option(help="Run online RL after the demonstrations.")] = True,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard while the job runs.")] = True,
    port: Annotated[int, typer.Option(help="Dashboard port on 127.0.0.1.")] = 8765,
    robot: Annotated[
        str, typer.Option(help="bridge: the simulated arm over DDS + the bridge; sim: lock-step in a Ray actor.")
    ] = "bridge",
    profile: Annotated[
        Path, typer.Option(help="Robot profile for --robot bridge.")
    ] = Path("configs/robot_profiles/sim_arm.yaml"),
    keep_dashboard: Annotated[
        bool, typer.Option(help="Keep serving the dashboard after training (Ctrl-C to stop).")
    ] = False,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """The main job: demonstrations, dashboard, online RL with world-model data, summary."""
    from services.cli.demos_cmd import run_collection
    from services.cli.store_cmd import info_table
    from services.cli.train_cmd import print_summary
    from worldsample.config import dump_config, load_config

    if robot not in ("sim", "bridge"):
        raise typer.BadParameter("--robot must be sim or bridge")
    cfg = load_config(config, [*(set_ or []), f"loop.robot={robot}"])
    out = out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    if out.exists() and any(out.iterdir()):
        raise RunDirectoryError(f"{out} already exists and is not empty; choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    RunFiles.of(out).config.write_text(dump_config(cfg))
    console.rule(f"[bold]WorldSample run[/] {out}")
    run_collection(out, cfg, cfg.demos.episodes)
    dash = start_dashboard(out, port) if dashboard else None
    try:
        if train:
            from services.trainer.driver import train as run_train

            robot_procs = SimRobotOverDds(out, cfg, profile) if robot == "bridge" else nullcontext()
            with robot_procs as link, console.status("training...") as status:
                if link is not None:
                    console.print(f"simulated arm over DDS (domain {link.domain_id}, loopback) + bridge; logs in {out}")

                def on_round(row: dict) -> None:
                    if link is not None:
                        link.check()
                    sr = row.get("eval/success_rate")
                    status.update(f"real steps {int(row['real_steps'])}/{cfg.loop.real_steps}  "
                                  f"updates {int(row.get('learner/updates', 0))}  "
                                  f"synthetic {100 * row.get('batch/synthetic_share', 0):.0f}%"
                                  + (f"  eval success {100 * sr:.0f}%" if sr is not None else ""))

                print_summary(run_train(out, cfg, on_round=on_round))
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
