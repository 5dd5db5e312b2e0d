"""Entry point of the `worldsample` command."""

from __future__ import annotations

from typing import Annotated

import typer

from services.cli import bridge_cmd, dashboard_cmd, demos_cmd, eval_cmd, run_cmd, store_cmd, train_cmd, wm_cmd
from services.cli.common import setup_logging
from worldsample import __version__

app = typer.Typer(
    help="WorldSample: real-robot RL that makes each real rollout count several times.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(store_cmd.app, name="store")
app.add_typer(demos_cmd.app, name="demos")
app.add_typer(wm_cmd.app, name="wm")
app.add_typer(eval_cmd.app, name="eval")
app.command("run")(run_cmd.run)
app.command("train")(train_cmd.train)
app.command("dashboard")(dashboard_cmd.dashboard)
bridge_cmd.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    setup_logging(verbose)


if __name__ == "__main__":
    app()
