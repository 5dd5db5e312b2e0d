"""`worldsample demos collect`: scripted-expert demonstrations on the simulated arm;
`worldsample demos record`: a person's demonstrations on a robot through the bridge (docs/teleop.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import ConfigOpt, SetOpt, console, friendly_errors, progress

app = typer.Typer(help="Demonstrations: the scripted expert on the simulated arm (collect), a person on a robot "
                  "through the bridge (record).", no_args_is_help=True)


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


@app.command()
@friendly_errors
def record(
    profile: Annotated[Path, typer.Option("--profile", "-p", help="Robot profile YAML (see configs/robot_profiles/).",
                                          dir_okay=False)],
    run: Annotated[Path, typer.Option("--run", "-r", help="Run directory: demonstrations go to its store's group "
                                      "`demo`; created if new, appended to if it exists.", file_okay=False)],
    episodes: Annotated[
        int | None, typer.Option("--episodes", "-n", min=1, help="Stop once this many are kept (default: until q or "
                                 "Ctrl-C).")
    ] = None,
    transport: Annotated[str, typer.Option(help="dds (cyclonedds, no ROS needed) or rclpy (inside ROS 2).")] = "dds",
    domain_id: Annotated[int, typer.Option("--domain-id", envvar="ROS_DOMAIN_ID", min=0, max=232,
                                           help="DDS domain (ROS_DOMAIN_ID).")] = 0,
    loopback: Annotated[bool, typer.Option("--loopback/--no-loopback", help="Discover peers on 127.0.0.1 only, no "
                                           "multicast.")] = False,
    speed: Annotated[float, typer.Option(min=0.01, max=1.0, help="A motion key's delta as a fraction of the action "
                                         "range (from the hold to its end).")] = 0.5,
    release_after: Annotated[float, typer.Option(min=0.05, help="A terminal sends no key releases: a key counts as "
                                                 "released this long after its last auto-repeat.")] = 0.6,
    set_: Annotated[list[str] | None, typer.Option("--set", "-s", help="Override a profile field, e.g. --set "
                                                   "episode.max_steps=300.")] = None,
) -> None:
    """Record a person's demonstrations from the keyboard through the bridge into RUN's `demo` group.

    enter starts an episode (after the profile's reset), hold w/s a/d r/f to move and g for the
    gripper, y ends it as a success and n as a failure (reaching episode.max_steps is a failure;
    the robot's success signal ends it as a success); backspace discards the attempt and resets,
    q quits (an open attempt is dropped). Every step is stored as the person's (intervention)."""
    from robot_bridge.cli import _stop_on_signals
    from robot_bridge.teleop.keyboard import HELP, KeyboardDevice, KeyMap
    from robot_bridge.teleop.keys import TerminalKeys
    from robot_bridge.teleop.node import policy_hold
    from robot_bridge.teleop.record import demo_profile, record_demos
    from robot_bridge.transport import make_transport

    prof = demo_profile(profile, set_)
    run.mkdir(parents=True, exist_ok=True)
    t = make_transport(transport, domain_id, loopback, prof.msg_types)
    keys = KeyMap().without("stop")  # a demonstration ends labelled: success, failure or max_steps
    device = KeyboardDevice(TerminalKeys(release_after_s=release_after), policy_hold(prof), keys, speed, always=True)
    stop = _stop_on_signals("demos record", stopping="dropping an open attempt, releasing the store")
    try:
        stats = record_demos(prof, run, t, device, stop, episodes, help_text=HELP.replace(" | x stop", ""))
    finally:
        t.close()
    ep = stats["episodes"]
    console.print(f"demos record: {ep['committed']} demonstrations kept in {run} (group demo), "
                  f"{ep['discarded']} discarded; next: `worldsample bridge --profile {profile} --run {run}` beside "
                  f"`worldsample train {run} --robot bridge --config configs/real_arm.yaml` (docs/teleop.md)",
                  highlight=False)
