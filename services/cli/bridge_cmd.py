"""`worldsample sim-robot`, `worldsample bridge`, `worldsample bag import|export`, `worldsample robot check`.

The commands are the robot side's own (robot_bridge/cli.py, also `python -m robot_bridge`); this
module only adds them to the `worldsample` app.
"""

from __future__ import annotations

import typer

from robot_bridge import cli as robot_cli


def register(app: typer.Typer) -> None:
    robot_cli.register(app)
    app.add_typer(robot_cli.robot_app, name="robot")
