"""The loop's parts as named Ray actors: placement, restarts, threads and errors; no learning
logic here (that is in worldsample/loop/).

Errors reach the driver as the one-line errors the command line prints: a WorldSampleError raised
in an actor (its constructor included) is raised again as itself, not wrapped in Ray's remote
traceback; any other exception (a bug) and an actor whose process died or cannot be reached
become a PartFailedError naming the part and what to do (the remote traceback is logged at debug
level: `worldsample -v`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from typing import Any

from worldsample.errors import WorldSampleError

log = logging.getLogger(__name__)
NAMESPACE = "worldsample"
# parts that run torch: one intra-op thread each, so that on a small machine they share the cores
TORCH_PARTS = ("learner", "world_model", "synth")


class PartFailedError(WorldSampleError):
    """A part of the loop (a Ray actor) died, failed to start or cannot be reached."""


class RayPending:
    def __init__(self, ray, ref, part: str, logs: str):
        self.ray, self.ref, self.part, self.logs = ray, ref, part, logs

    def done(self) -> bool:
        return bool(self.ray.wait([self.ref], timeout=0)[0])

    def result(self) -> Any:
        errors = self.ray.exceptions
        try:
            return self.ray.get(self.ref)
        except errors.RayTaskError as e:
            if isinstance(e.cause, WorldSampleError):
                raise e.cause.with_traceback(None) from None
            # a bug in a part: one line for the user, the remote traceback for whoever runs with -v
            log.debug("remote traceback of the %s part:\n%s", self.part, e)
            cause = e.cause if e.cause is not None else e
            first = (str(cause).strip().splitlines() or [""])[0]
            raise PartFailedError(f"the {self.part} part of the trainer failed: {type(cause).__name__}: {first}; "
                                  "run with -v for its traceback, then resume the run with --resume") from None
        except errors.RayActorError as e:  # ActorDiedError, ActorUnavailableError
            raise PartFailedError(_failure(self.part, e, self.logs)) from None


def _failure(part: str, e, logs: str) -> str:
    pid = re.search(r"\bpid[:=] ?(\d+)", str(e))
    process = f" (pid {pid.group(1)})" if pid else ""
    if getattr(e, "actor_init_failed", False):
        what = "failed to start"
    elif type(e).__name__ == "ActorUnavailableError":
        what = "cannot be reached (its process died or is restarting)"
    else:
        what = "died"
    return (f"the {part} part of the trainer{process} {what}; look at its log in {logs} (worker-*.err), "
            "then resume the run with --resume")


class RayPart:
    """A Ray actor handle as a loop part (`call(method, *args) -> pending result`)."""

    def __init__(self, ray, handle, name: str = "part", logs: str = "Ray's session logs"):
        self.ray, self.handle, self.name, self.logs = ray, handle, name, logs

    def call(self, method: str, *args: Any) -> RayPending:
        return RayPending(self.ray, getattr(self.handle, method).remote(*args), self.name, self.logs)


def _guarded(fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if self._init_error is not None:
            raise self._init_error.with_traceback(None)
        return fn(self, *args, **kwargs)

    return method


def actor_class(cls: type, one_thread: bool) -> type:
    """`cls` for a Ray actor: with one torch thread if asked; a WorldSampleError from its
    constructor is kept and raised by every call instead (Ray turns a failed constructor into an
    ActorDiedError that has only the remote traceback as text, the error itself is lost)."""

    def __init__(self, *args, **kwargs):
        if one_thread:
            import torch

            torch.set_num_threads(1)
        try:
            cls.__init__(self, *args, **kwargs)
        except WorldSampleError as e:
            self._init_error = e

    body: dict[str, Any] = {"__init__": __init__, "_init_error": None}
    for klass in reversed(cls.__mro__[:-1]):  # plain functions only: static and class methods need no instance
        for name, fn in vars(klass).items():
            if inspect.isfunction(fn) and not name.startswith("_"):
                body[name] = _guarded(fn)
    return type(cls.__name__, (cls,), body)  # Ray names the worker process after the class


def ray_maker(ray, logs: str = "Ray's session logs"):
    """`make(name, cls, args)` for worldsample.loop.parts.build_parts: a named actor that Ray restarts
    if its process dies (state comes back from the trainer's checkpoints). `logs` says where the
    actors' output is, for error messages."""

    def make(name: str, cls: type, args: tuple) -> RayPart:
        actor_cls = actor_class(cls, one_thread=name in TORCH_PARTS)
        options = {"name": name, "namespace": NAMESPACE, "num_cpus": 0}
        handle = ray.remote(max_restarts=2, max_task_retries=0)(actor_cls).options(**options).remote(*args)
        return RayPart(ray, handle, name, logs)

    return make
