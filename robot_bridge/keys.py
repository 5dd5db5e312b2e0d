"""Single-key episode control from the bridge's terminal (the `operator` reset strategy).

The operator resets the scene by hand, then presses a key; keys enter the controller like the
command topic and the dashboard do, so the same refusals apply (e.g. start while e-stopped).
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading

log = logging.getLogger(__name__)

KEYS = {
    "s": "start",
    "y": "success",
    "n": "failure",
    "x": "stop",
    "r": "rerecord",
    "c": "clear_fault",
    "e": "estop",
    " ": "estop",
    "u": "release_estop",
}
HELP = "keys: s start | y success | n failure | x stop | r rerecord | e/space e-stop | u release e-stop | c clear fault"


def handle_key(controller, key: str) -> str | None:
    """Apply one key press to `controller`; returns what it did, or None for an unbound key."""
    what = KEYS.get(key.lower() if key != " " else key)
    if what is None:
        return None
    if what == "estop":
        controller.trigger_estop()
    elif what == "release_estop":
        controller.release_estop()
    else:
        controller.submit({"cmd": what})
    log.info("key %r: %s", key, what)
    return what


class KeyReader:
    """Reads keys from a terminal without Enter (cbreak mode) until `stop`; restores the terminal."""

    def __init__(self, controller, stream=None):
        self.ctl = controller
        self.stream = stream if stream is not None else sys.stdin
        self._thread: threading.Thread | None = None

    @staticmethod
    def available(stream=None) -> bool:
        stream = stream if stream is not None else sys.stdin
        try:
            return stream.isatty() and os.name == "posix"
        except (AttributeError, ValueError):
            return False

    def start(self, stop: threading.Event) -> None:
        import termios
        import tty

        fd = self.stream.fileno()
        saved = termios.tcgetattr(fd)

        def loop() -> None:
            try:
                tty.setcbreak(fd)
                while not stop.is_set():
                    ready, _, _ = select.select([fd], [], [], 0.2)
                    if ready:
                        ch = os.read(fd, 1).decode(errors="ignore")
                        if ch:
                            handle_key(self.ctl, ch)
            finally:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)

        self._thread = threading.Thread(target=loop, name="keys", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 1.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
