"""`worldsample dashboard RUN`: serve the dashboard for one run directory with uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import typer

from services.cli.common import RUN, console, friendly_errors
from worldsample.errors import ConfigError
from worldsample.lifetime import ProcessRef, watch


@friendly_errors
def dashboard(
    run: Annotated[Path, typer.Argument(help=f"Run directory (holds {RUN.store.name}/, {RUN.metrics.name}, ...).",
                                        file_okay=False)],
    host: Annotated[
        str, typer.Option(help="Address to bind. Anything but loopback exposes the run: use a token read policy.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            help=f"Bearer token for controls (default: {RUN.dashboard_token}, created if missing).", show_default=False
        ),
    ] = None,
    read_policy: Annotated[
        str, typer.Option(help="Who may read: open, loopback (no token from this machine) or token.")
    ] = "loopback",
    allow_host: Annotated[
        list[str] | None, typer.Option(help="Extra Host header name to answer to (repeatable).")
    ] = None,
    nice: Annotated[
        int, typer.Option(min=0, max=19, help="Lower this process's CPU priority so training keeps the CPU.")
    ] = 0,
    supervisor_pid: Annotated[
        int | None,
        typer.Option(min=1, help="Shut down as on SIGTERM once this process (the one that started the dashboard, "
                     "e.g. `worldsample run`) is gone."),
    ] = None,
) -> None:
    """Serve the dashboard: run status, live curves, episode replay, policies and controls."""
    import uvicorn
    from pydantic import ValidationError

    from services.dashboard import DashboardSettings, create_app
    from services.dashboard.server import uvicorn_config

    if read_policy not in ("open", "loopback", "token"):
        raise ConfigError(f"--read-policy must be open, loopback or token, got {read_policy!r}")
    policy: Literal["open", "loopback", "token"] = read_policy  # type: ignore[assignment]
    try:
        settings = DashboardSettings(
            host=host, port=port, token=token, read_policy=policy, allowed_hosts=allow_host or []
        )
    except ValidationError as e:
        raise ConfigError(f"bad dashboard option: {e.errors()[0]['msg']}") from e
    if not settings.binds_loopback and settings.read_policy != "token":
        console.print(
            f"[yellow]warning[/]: binding {host} with read policy {read_policy!r}: reads are open to that network"
        )
    from services.dashboard.wm_imagine import WorldModelImagination
    from services.dashboard.wm_play import WorldModelPlay

    imagination = WorldModelImagination(run)  # one model in memory for both views
    app = create_app(run, settings, imagine=imagination, play=WorldModelPlay(imagination))
    if nice:
        os.nice(nice)
    shown = f"[{host}]" if ":" in host else host
    where = str(RUN.dashboard_token) if token is None else "--token"
    console.print(f"dashboard for [bold]{run}[/] on [bold]http://{shown}:{port}/[/]  (control token: {where})")
    server = uvicorn.Server(uvicorn_config(app, host, port, log_level="info"))
    if supervisor_pid is not None:
        def gone() -> None:
            console.print(f"dashboard: supervisor pid {supervisor_pid} is gone; shutting down", highlight=False)
            server.should_exit = True  # what uvicorn's own SIGTERM handler does

        watch(ProcessRef.supervisor(supervisor_pid), gone)
    server.run()
