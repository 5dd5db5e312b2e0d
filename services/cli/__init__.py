"""The `worldsample` command line (typer). Each subcommand lives in its own module."""
