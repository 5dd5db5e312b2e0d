"""The robot side's commands: `sim-robot`, `bridge`, `teleop`, `bag import|export`, `check` (`worldsample robot check`).

One implementation for both command lines: `python -m robot_bridge` (the robot-PC image, no
learner installed) and `worldsample` (services/cli registers these same functions). The heavy
modules (cyclonedds, MuJoCo, zarr) load inside the commands only, so `--help` stays fast.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from worldsample.errors import WorldSampleError
from worldsample.lifetime import ProcessRef, watch
from worldsample.paths import RunFiles

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable)


def friendly_errors(fn: F) -> F:
    """Turn WorldSample's own errors (the bridge's included) into a one-paragraph message and exit code 2;
    so too a path the OS refuses (a file where a directory belongs, no permission, ...)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WorldSampleError as e:
            err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except OSError as e:
            if e.filename is None:
                raise
            what = e.strerror or type(e).__name__
            err_console.print(f"[bold red]error:[/] {escape(str(e.filename))}: {what}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


ProfileOpt = Annotated[Path, typer.Option("--profile", "-p", help="Robot profile YAML (see configs/robot_profiles/).",
                                          dir_okay=False)]
DomainOpt = Annotated[
    int, typer.Option("--domain-id", envvar="ROS_DOMAIN_ID", min=0, max=232, help="DDS domain (ROS_DOMAIN_ID).")
]
LoopbackOpt = Annotated[
    bool, typer.Option("--loopback/--no-loopback", help="Discover peers on 127.0.0.1 only, no multicast.")
]
DurationOpt = Annotated[float | None, typer.Option("--duration", min=0.1, help="Stop after this many seconds.")]
StatsOpt = Annotated[Path | None, typer.Option("--stats-out", help="Write counters and timings as JSON at exit.")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override a profile field, e.g. --set control_rate_hz=50.")
]
SupervisorOpt = Annotated[
    int | None,
    typer.Option("--supervisor-pid", min=1, help="Stop as on SIGTERM once this process (the one that started this "
                 "one, e.g. `worldsample run`) is gone. Without it the process runs on its own."),
]

_RUN = RunFiles.of("RUN")  # the run-directory layout as help texts show it
_RUN_HELP = f"Run directory: {_RUN.store.name}/ is written, {_RUN.policies.name}/ is read."


def _stop_on_signals(name: str, supervisor_pid: int | None = None, stopping: str = "stopping") -> threading.Event:
    """An event set on SIGINT or SIGTERM, or when the supervisor process has gone."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if supervisor_pid is not None:
        def gone() -> None:
            console.print(f"{name}: supervisor pid {supervisor_pid} is gone; {stopping}", highlight=False)
            stop.set()

        watch(ProcessRef.supervisor(supervisor_pid), gone)
    return stop


def _human_settings(text: str | None, intervene: bool):
    """`--human` as an InterventionConfig (None: the defaults); refused without --intervene or when invalid."""
    if text is None:
        return None
    if not intervene:
        raise typer.BadParameter("--human sets the simulated human, which only watches with --intervene")
    from pydantic import ValidationError

    from worldsample.sim.config import InterventionConfig

    try:
        return InterventionConfig.model_validate_json(text)
    except ValidationError as e:
        raise typer.BadParameter(f"--human: {e}") from None


@friendly_errors
def sim_robot(
    profile: ProfileOpt,
    domain_id: DomainOpt = 0,
    loopback: LoopbackOpt = False,
    duration: DurationOpt = None,
    intervene: Annotated[bool, typer.Option(help="A simulated human takes over when the policy strays.")] = False,
    human: Annotated[str | None, typer.Option(
        help='The simulated human\'s settings as JSON (InterventionConfig), e.g. \'{"trigger": "stall"}\'; '
        "needs --intervene.")] = None,
    seed: Annotated[int | None, typer.Option(help="Episode i starts from seed + i (default: the profile's).")] = None,
    wait_subscribers: Annotated[
        float, typer.Option(help="Wait up to this long for subscribers before publishing.")
    ] = 0.0,
    stats_out: StatsOpt = None,
    set_: SetOpt = None,
    supervisor_pid: SupervisorOpt = None,
) -> None:
    """Run the simulated arm as a ROS 2 robot over DDS (cameras, joint states, actions, resets)."""
    from robot_bridge.profile import load_profile
    from robot_bridge.sim_robot import run_sim_robot
    from robot_bridge.transport import make_transport

    prof = load_profile(profile, set_)
    settings = _human_settings(human, intervene)
    stop = _stop_on_signals("sim-robot", supervisor_pid)
    stats = run_sim_robot(prof, make_transport("dds", domain_id, loopback, prof.msg_types), stop,
                          duration=duration, intervene=intervene, seed=seed, wait_subscribers=wait_subscribers,
                          stats_out=stats_out, human=settings)
    console.print(f"sim-robot: {stats['resets']} resets, {stats['actions_received']} actions received, "
                  f"{stats['physics_steps']} physics steps ({stats['physics']}): {stats['held_steps']} held the last "
                  f"action, {stats['superseded']} actions superseded before a step applied them")


@friendly_errors
def bridge(
    profile: ProfileOpt,
    run: Annotated[Path, typer.Option("--run", "-r", help=_RUN_HELP, file_okay=False)],
    transport: Annotated[str, typer.Option(help="dds (cyclonedds, no ROS needed) or rclpy (inside ROS 2).")] = "dds",
    domain_id: DomainOpt = 0,
    loopback: LoopbackOpt = False,
    duration: DurationOpt = None,
    stats_out: StatsOpt = None,
    set_: SetOpt = None,
    supervisor_pid: SupervisorOpt = None,
) -> None:
    """Run the robot bridge: record episodes into RUN's store, drive the arm with RUN's latest policy."""
    from robot_bridge.bridge import run_bridge
    from robot_bridge.profile import load_profile
    from robot_bridge.transport import make_transport

    prof = load_profile(profile, set_)
    run.mkdir(parents=True, exist_ok=True)
    stop = _stop_on_signals("bridge", supervisor_pid, "ending the episode, holding the arm, releasing the store")
    stats = run_bridge(prof, run, make_transport(transport, domain_id, loopback, prof.msg_types), stop,
                       duration=duration, stats_out=stats_out)
    ep = stats["episodes"]
    console.print(f"bridge: {ep['committed']} episodes committed, {ep['discarded']} discarded, {ep['steps']} steps")


bag_app = typer.Typer(help="rosbag2 (MCAP, sqlite3) import into and export from the episode store.",
                      no_args_is_help=True)


@bag_app.command("import")
@friendly_errors
def bag_import(
    bag: Annotated[Path, typer.Argument(help="rosbag2 directory (MCAP or sqlite3) or a single .mcap file.")],
    run: Annotated[Path, typer.Argument(help="Run directory to import into.", file_okay=False)],
    profile: ProfileOpt,
    group: Annotated[str | None, typer.Option(help="Store group (default: the profile's episode.group).")] = None,
    strict: Annotated[bool, typer.Option(help="Fail (and keep nothing) on the first rejected message instead of "
                                         "dropping and counting it.")] = False,
    allow_duplicate: Annotated[bool, typer.Option(help="Import a bag whose content hash the group already "
                                                  "has.")] = False,
    action_limits: Annotated[str, typer.Option(help="Actions outside the profile's limits: clip (counted) or "
                                               "reject (the step is dropped, counted).")] = "clip",
    split_long: Annotated[bool, typer.Option(help="Past episode.max_steps start a new episode instead of dropping "
                                             "the rest of the episode.")] = False,
    report_out: Annotated[Path | None, typer.Option(help="Write the per-topic counts as JSON.")] = None,
    set_: SetOpt = None,
) -> None:
    """Import a bag: streams are mapped by the profile's topics and aligned at its control rate.

    Prints per-topic received / accepted / rejected counts; exits 2, writing nothing, when no
    episode could be imported (the message says why)."""
    import json

    from robot_bridge.bag import ImportOptions, import_bag
    from robot_bridge.errors import BagError
    from robot_bridge.profile import load_profile

    if action_limits not in ("clip", "reject"):
        raise BagError(f"--action-limits {action_limits!r}: use clip or reject")
    opts = ImportOptions(strict=strict, allow_duplicate=allow_duplicate, action_limits=action_limits,
                         split_long=split_long)
    rep = import_bag(bag, run, load_profile(profile, set_), group=group, options=opts)
    for line in rep.lines():
        console.print(line, highlight=False, markup=False)
    if report_out is not None:
        report_out.write_text(json.dumps(rep.as_dict(), indent=1))
    console.print(f"imported {len(rep.episodes)} episode(s), {sum(r.length for r in rep.episodes)} steps, into {run}",
                  highlight=False)


@bag_app.command("export")
@friendly_errors
def bag_export(
    run: Annotated[Path, typer.Argument(help="Run directory to export from.", file_okay=False)],
    out: Annotated[Path, typer.Argument(help="New rosbag2 directory to write.")],
    profile: ProfileOpt,
    episodes: Annotated[str | None, typer.Option(help="Episode ids, e.g. 0,3-5 (default: all).")] = None,
    group: Annotated[str | None, typer.Option(help="Store group (default: the profile's episode.group).")] = None,
    storage: Annotated[str, typer.Option(help="mcap or sqlite3.")] = "mcap",
    distro: Annotated[str, typer.Option(help="Message definitions: jazzy or humble.")] = "jazzy",
    set_: SetOpt = None,
) -> None:
    """Export stored episodes as a rosbag2 with the profile's topics and message types.

    The profile is checked against the store's schema first; the bag is written to a temporary
    directory and renamed to OUT at the end."""
    from robot_bridge.bag import export_bag, parse_episodes
    from robot_bridge.profile import load_profile

    n = export_bag(run, out, load_profile(profile, set_), parse_episodes(episodes), group=group, storage=storage,
                   distro=distro)
    console.print(f"exported {n} episode(s) to {out}")


@friendly_errors
def check(
    profile: ProfileOpt,
    seconds: Annotated[float, typer.Option("--seconds", min=0.5, help="Listen this long.")] = 5.0,
    bag: Annotated[Path | None, typer.Option("--bag", help="Check a rosbag2 (directory or .mcap) instead of "
                                             "listening.")] = None,
    transport: Annotated[str, typer.Option(help="dds (cyclonedds, no ROS needed) or rclpy (inside ROS 2).")] = "dds",
    domain_id: DomainOpt = 0,
    loopback: LoopbackOpt = False,
    set_: SetOpt = None,
) -> None:
    """Listen to every stream of the profile (or read a bag) and report, per stream, what the bridge
    would make of it: seen, type, QoS, rate, sizes and encodings, stamps, rejections.

    Exit code 0 when everything matches the profile, 1 on any mismatch, 2 on a usage error."""
    from robot_bridge.check import check_bag, check_live, render
    from robot_bridge.profile import load_profile
    from robot_bridge.transport import make_transport

    prof = load_profile(profile, set_)
    if bag is not None:
        report = check_bag(prof, bag)
    else:
        t = make_transport(transport, domain_id, loopback, prof.msg_types)
        try:
            report = check_live(prof, t, seconds, _stop_on_signals("check"))
        finally:
            t.close()
    render(report, console)
    if not report.ok:
        raise typer.Exit(1)


SpeedOpt = Annotated[float, typer.Option(min=0.01, max=1.0, help="A motion key's delta as a fraction of the "
                                         "action range (from the hold to its end), in the policy's units.")]
ReleaseOpt = Annotated[float, typer.Option(min=0.05, help="A terminal sends no key releases: a key counts as "
                                           "released this long after its last auto-repeat.")]


@friendly_errors
def teleop(
    profile: ProfileOpt,
    transport: Annotated[str, typer.Option(help="dds (cyclonedds, no ROS needed) or rclpy (inside ROS 2).")] = "dds",
    domain_id: DomainOpt = 0,
    loopback: LoopbackOpt = False,
    speed: SpeedOpt = 0.5,
    release_after: ReleaseOpt = 0.6,
    set_: SetOpt = None,
) -> None:
    """Drive the arm from the keyboard beside a running bridge (docs/teleop.md): hold a motion key or
    space to take over, release to hand back to the policy; enter, y, n, x, backspace start, label,
    stop or redo episodes."""
    from robot_bridge.profile import load_profile
    from robot_bridge.teleop.keyboard import HELP, KeyboardDevice
    from robot_bridge.teleop.keys import TerminalKeys
    from robot_bridge.teleop.node import policy_hold
    from robot_bridge.teleop.record import run_teleop
    from robot_bridge.transport import make_transport

    prof = load_profile(profile, set_)
    t = make_transport(transport, domain_id, loopback, prof.msg_types)
    device = KeyboardDevice(TerminalKeys(release_after_s=release_after), policy_hold(prof), speed=speed)
    console.print(f"teleop: {HELP}", highlight=False, markup=False)
    try:
        stats = run_teleop(prof, t, device, _stop_on_signals("teleop"))
    finally:
        t.close()
    console.print(f"teleop: {stats['takeover_messages']} takeover messages, commands {stats['commands']}",
                  highlight=False)


robot_app = typer.Typer(help="Look at a robot before recording from it.", no_args_is_help=True)
robot_app.command("check")(check)


def register(app: typer.Typer) -> None:
    """Add the robot side's commands to `app` (this module's own app, and `worldsample`'s)."""
    app.command("sim-robot")(sim_robot)
    app.command("bridge")(bridge)
    app.command("teleop")(teleop)
    app.add_typer(bag_app, name="bag")


app = typer.Typer(help="WorldSample's robot side: the bridge, the simulated arm, rosbag2 import/export, check.",
                  no_args_is_help=True, pretty_exceptions_show_locals=False)
register(app)
app.command("check")(check)
