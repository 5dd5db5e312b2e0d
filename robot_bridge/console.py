"""A one-line live status for the long-running processes (bridge, sim-robot)."""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.text import Text


class StatusLine:
    """`with StatusLine() as line: line.update("...")`; refreshes twice a second on a terminal,
    prints only the final line when output is not a terminal (logs, tests)."""

    def __init__(self, enabled: bool = True):
        if enabled:
            self._live = Live(Text(""), console=Console(stderr=True), refresh_per_second=2, transient=False)
        else:
            self._live = None

    def update(self, text: str) -> None:
        if self._live is not None:
            self._live.update(Text.from_markup(text, emoji=False))  # "stale:x:" is not an emoji

    def __enter__(self) -> StatusLine:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
