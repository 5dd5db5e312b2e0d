"""Where key presses come from: a terminal (raw tty, stdlib only) or a scripted stream (tests, scripts).

A source turns input into `KeyEvent(key, down)`: `down=True` when a key goes down, `False` when it
comes up. Key names are lower-case letters and digits, `space`, `enter`, `backspace`, and the
arrows `up`, `down`, `left`, `right`.

A terminal reports no key releases, and while a key is held it repeats only that key (the
keyboard's auto-repeat). `TerminalKeys` therefore counts a key as held from its first character
until no repeat of it has come for `release_after_s`, then reports it up. The default (0.6 s)
lies above the usual auto-repeat delay (250-660 ms before the first repeat), so the first press
does not end before the repeats begin; a release therefore reaches the teleop that much late.
Holding two keys at once is not visible in a terminal (only the last one repeats).
"""

from __future__ import annotations

import os
import queue
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

_SPECIAL = {" ": "space", "\r": "enter", "\n": "enter", "\x7f": "backspace", "\x08": "backspace"}
_ARROWS = {"A": "up", "B": "down", "C": "right", "D": "left"}


@dataclass(frozen=True)
class KeyEvent:
    key: str
    down: bool


class KeySource(Protocol):
    def read(self, timeout: float) -> list[KeyEvent]:
        """The events since the last call; waits up to `timeout` s for the first one."""
        ...

    def close(self) -> None: ...


def parse_keys(text: str) -> list[str]:
    """Characters as a terminal sends them -> key names (arrows arrive as ESC [ A..D; other escape
    sequences and control characters are dropped; capitals are their lower-case key)."""
    keys, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\x1b":
            if text[i + 1 : i + 2] in ("[", "O") and text[i + 2 : i + 3] in _ARROWS:
                keys.append(_ARROWS[text[i + 2]])
                i += 3
                continue
            i += 1  # a lone ESC or a sequence this teleop does not bind: skip its introducer
            while i < len(text) and text[i] in "[O0123456789;":
                i += 1
            if i < len(text) and "@" <= text[i] <= "~":  # the sequence's final character
                i += 1
            continue
        if ch in _SPECIAL:
            keys.append(_SPECIAL[ch])
        elif ch.isprintable():
            keys.append(ch.lower())
        i += 1
    return keys


class TerminalKeys:
    """Keys from a terminal in cbreak mode (no Enter needed, Ctrl-C still interrupts), restored on
    `close`. A stream that is no terminal (a pipe) is read as it is: each character a press, which
    ends like a terminal's after `release_after_s` without a repeat (scripts write a key repeatedly
    to hold it)."""

    def __init__(self, stream=None, release_after_s: float = 0.6, clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stdin
        self.fd = self.stream.fileno()
        self.release_after_s = release_after_s
        self.clock = clock
        self.held: dict[str, float] = {}  # key -> when its last character came
        self.eof = False
        self._saved = None
        if os.name == "posix" and self.stream.isatty():
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)

    @staticmethod
    def available(stream=None) -> bool:
        stream = stream if stream is not None else sys.stdin
        try:
            return os.name == "posix" and stream.isatty()
        except (AttributeError, ValueError):
            return False

    def read(self, timeout: float) -> list[KeyEvent]:
        events: list[KeyEvent] = []
        if self.eof:
            time.sleep(max(0.0, timeout))
        else:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
            if ready:
                data = os.read(self.fd, 256)
                if not data:
                    self.eof = True  # a pipe closed: no more keys; what is held is released below
                now = self.clock()
                for key in parse_keys(data.decode(errors="ignore")):
                    if key not in self.held:
                        events.append(KeyEvent(key, True))
                    self.held[key] = now
        now = self.clock()
        for key, seen in list(self.held.items()):
            if self.eof or now - seen >= self.release_after_s:
                del self.held[key]
                events.append(KeyEvent(key, False))
        return events

    def close(self) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None


class ScriptedKeys:
    """Key events handed in by a program (a test, a script): `press`, `release`, `tap`. Unlike a
    terminal it has real releases and can hold several keys at once."""

    def __init__(self) -> None:
        self._q: queue.Queue[KeyEvent] = queue.Queue()

    def press(self, *keys: str) -> None:
        for k in keys:
            self._q.put(KeyEvent(k, True))

    def release(self, *keys: str) -> None:
        for k in keys:
            self._q.put(KeyEvent(k, False))

    def tap(self, key: str) -> None:
        self.press(key)
        self.release(key)

    def read(self, timeout: float) -> list[KeyEvent]:
        events: list[KeyEvent] = []
        if timeout > 0:
            try:
                events.append(self._q.get(timeout=timeout))
            except queue.Empty:
                return events
        while True:
            try:
                events.append(self._q.get_nowait())
            except queue.Empty:
                return events

    def close(self) -> None:
        pass
