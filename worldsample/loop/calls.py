"""How the loop calls its parts, wherever they run.

A part is anything with `call(method, *args) -> Pending`: `Local` runs a library object in this
process (tests, single-process use); services/trainer wraps Ray actors the same way. `Job` keeps at
most one call of a kind in flight, which is how the asynchronous schedule runs world-model training
and synthesis beside the learner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Pending(Protocol):
    def done(self) -> bool: ...

    def result(self) -> Any: ...


class Part(Protocol):
    def call(self, method: str, *args: Any) -> Pending: ...


class Done:
    """A call that has already finished."""

    def __init__(self, value: Any):
        self.value = value

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        return self.value


class Local:
    """A library object as a part: calls run at once, in this process."""

    def __init__(self, obj: Any):
        self.obj = obj

    def call(self, method: str, *args: Any) -> Done:
        return Done(getattr(self.obj, method)(*args))


def get(part: Part, method: str, *args: Any) -> Any:
    """Call and wait for the result."""
    return part.call(method, *args).result()


class Job:
    """At most one call of a kind in flight. With `wait=True` a started call is collected at the
    next poll whether or not it has finished (the lock-step schedule)."""

    def __init__(self, wait: bool):
        self.wait = wait
        self.pending: Pending | None = None

    def start(self, call: Callable[[], Pending]) -> None:
        if self.pending is None:
            self.pending = call()

    def poll(self) -> dict:
        if self.pending is None or not (self.wait or self.pending.done()):
            return {}
        return self.finish()

    def finish(self) -> dict:
        """Wait for a call still in flight; its result (or {})."""
        pending, self.pending = self.pending, None
        return pending.result() if pending is not None else {}
