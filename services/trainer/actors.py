"""The loop's parts as named Ray actors: placement, restarts, lost nodes, threads and errors; no
learning logic here (that is in worldsample/loop/).

Errors reach the driver as the one-line errors the command line prints: a WorldSampleError raised
in an actor (its constructor included) is raised again as itself, not wrapped in Ray's remote
traceback; any other exception (a bug) and an actor whose process died or cannot be reached
become a PartFailedError naming the part and what to do (the remote traceback is logged at debug
level: `worldsample -v`).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.trainer.placement import RESTARTABLE, Placement, Plan
from worldsample.errors import WorldSampleError
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)
NAMESPACE = "worldsample"
# parts that run torch: one intra-op thread each, so that on a small machine they share the cores
TORCH_PARTS = ("learner", "world_model", "synth")


class PartFailedError(WorldSampleError):
    """A part of the loop (a Ray actor) died, failed to start or cannot be reached."""


class RayPending:
    """One call of a part. For a part whose state survives a restart (world model, synthesis) the
    wait also watches the part's node, and a call whose actor was started again elsewhere (node lost,
    `--on-node-loss continue`) is sent again to the new one."""

    def __init__(self, part: RayPart, method: str, args: tuple):
        self.ray, self.part, self.method, self.args = part.ray, part, method, args
        self.ref, self.generation = part.submit(method, args)
        self.logs = part.logs

    def _follow(self) -> None:
        self.part.supervise()
        if self.generation != self.part.generation:
            self.ref, self.generation = self.part.submit(self.method, self.args)

    def done(self) -> bool:
        if self.part.restartable:
            self._follow()
        return bool(self.ray.wait([self.ref], timeout=0)[0])

    def result(self) -> Any:
        if not self.part.restartable:
            return self._get()
        while True:
            if self.ray.wait([self.ref], timeout=1.0)[0]:
                try:
                    value = self._get()
                    if self.part.lost_since is not None:  # back after a lost node: say so now
                        self.part.supervise(every_s=0.0)
                    return value
                except PartFailedError:
                    if self.generation == self.part.generation:
                        raise
                    # the actor was replaced while this call waited (its old actor killed): send it again
            self._follow()

    def _get(self) -> Any:
        errors = self.ray.exceptions
        part = self.part.name
        try:
            return self.ray.get(self.ref)
        except errors.RayTaskError as e:
            if isinstance(e.cause, WorldSampleError):
                raise e.cause.with_traceback(None) from None
            # a bug in a part: one line for the user, the remote traceback for whoever runs with -v
            log.debug("remote traceback of the %s part:\n%s", part, e)
            cause = e.cause if e.cause is not None else e
            first = (str(cause).strip().splitlines() or [""])[0]
            raise PartFailedError(f"the {part} part of the trainer failed: {type(cause).__name__}: {first}; "
                                  "run with -v for its traceback, then resume the run with --resume") from None
        except errors.RayActorError as e:  # ActorDiedError, ActorUnavailableError
            raise PartFailedError(_failure(part, e, self.logs)) from None


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
    """A Ray actor as a loop part (`call(method, *args) -> pending result`). `create(moved)` makes
    its actor; a restartable part whose node is lost waits for it or is made again elsewhere, as
    its placement says (services/trainer/placement.py)."""

    def __init__(self, ray, create: Callable[[bool], Any], name: str = "part", logs: str = "Ray's session logs",
                 restartable: bool = False, on_node_loss: str = "wait", node_wait_s: float = 600.0,
                 where: str = "", report: Callable[..., None] | None = None):
        self.ray, self._create, self.name, self.logs = ray, create, name, logs
        self.restartable, self.on_node_loss, self.node_wait_s = restartable, on_node_loss, node_wait_s
        self.where, self.report = where, report or (lambda *a, **k: None)
        self.lock = threading.Lock()
        self.handle = create(False)
        self.generation = 0
        self.node: str | None = None  # the node its actor was last seen alive on
        self.lost_since: float | None = None
        self._checked = 0.0

    def call(self, method: str, *args: Any) -> RayPending:
        return RayPending(self, method, args)

    def submit(self, method: str, args: tuple) -> tuple[Any, int]:
        with self.lock:
            return getattr(self.handle, method).remote(*args), self.generation

    def info(self) -> dict | None:
        """Ray's record of the part's actor: state, node, pid, restarts (None if Ray cannot tell)."""
        return actor_info(self.ray, self.handle)

    def supervise(self, every_s: float = 1.0) -> None:
        """Notice that the node of the part is gone and act on it (at most once every `every_s`)."""
        now = time.monotonic()
        if now - self._checked < every_s:
            return
        self._checked = now
        info, alive = self.info(), alive_nodes(self.ray)
        if info is None or alive is None:
            return
        node = info.get("node_id")
        if info["state"] == "ALIVE" and node in alive:
            if self.lost_since is not None:
                self.report("part_back", f"the {self.name} part runs again, on node {node[:8]} "
                            f"({now - self.lost_since:.0f} s after its node was lost)", node_id=node, part=self.name)
            self.node, self.lost_since = node, None
            return
        if self.node is None or self.node in alive:
            return  # starting, or restarting on a live node: Ray's own business
        if self.lost_since is None:
            self.lost_since = now
            if self.on_node_loss == "continue":
                what = "starting it again on another node (--on-node-loss continue)"
            else:
                what = f"waiting up to {self.node_wait_s:.0f} s for a node with {self.where} (--on-node-loss wait)"
            self.report("part_node_lost", f"node {self.node[:8]} of the {self.name} part is gone; {what}",
                        level="warning", node_id=self.node, part=self.name)
        if self.on_node_loss == "continue":
            self.replace()
        elif now - self.lost_since > self.node_wait_s:
            raise PartFailedError(
                f"the node of the {self.name} part is gone and no node with {self.where} joined within "
                f"{self.node_wait_s:.0f} s; start one (ray start --address HEAD:PORT ...) and resume the run "
                "with --resume")

    def replace(self) -> None:
        """Kill the part's actor and make it again without its custom resource (its state comes back
        from the trainer's checkpoint); calls in flight are sent again by their RayPending."""
        with self.lock:
            old = self.handle
            try:
                self.ray.kill(old, no_restart=True)
            except Exception as e:  # already dead: nothing to stop
                log.debug("killing the %s part's old actor: %s", self.name, e)
            self.handle = self._create(True)
            self.generation += 1
            self.node = None
        self.report("part_moved", f"the {self.name} part was started again without its custom resource",
                    part=self.name, generation=self.generation)


def actor_info(ray, handle) -> dict | None:
    """State, node, pid and restarts of an actor from Ray's control store (no dashboard needed)."""
    try:
        from ray._private import state

        raw = state.actors(actor_id=handle._actor_id.hex())
    except Exception as e:  # an internal API: if it moves, nodes are just not shown
        log.debug("actor info: %s", e)
        return None
    if not raw:
        return None
    addr = raw.get("Address") or {}
    return {"state": raw.get("State"), "node_id": addr.get("NodeID") or None, "node_ip": addr.get("IPAddress"),
            "pid": raw.get("Pid"), "restarts": int(raw.get("NumRestarts") or 0), "actor": raw.get("Name")}


def alive_nodes(ray) -> set[str] | None:
    try:
        return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    except Exception as e:
        log.debug("node list: %s", e)
        return None


def _guarded(fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if self._init_error is not None:
            raise self._init_error.with_traceback(None)
        return fn(self, *args, **kwargs)

    return method


def actor_class(cls: type, one_thread: bool, restore: tuple[str, str] | None = None) -> type:
    """`cls` for a Ray actor: with one torch thread if asked; a WorldSampleError from its
    constructor is kept and raised by every call instead (Ray turns a failed constructor into an
    ActorDiedError that has only the remote traceback as text, the error itself is lost).

    `restore` = (trainer checkpoint root, part name): an actor that Ray started again after its
    process died, or that is given `restore_now=True`, loads the part's state from the latest
    trainer checkpoint (when the class has `load_state` and the checkpoint holds that part)."""

    def __init__(self, *args, restore_now: bool = False, **kwargs):
        if one_thread:
            import torch

            torch.set_num_threads(1)
        try:
            cls.__init__(self, *args, **kwargs)
            if restore is not None and hasattr(self, "load_state"):
                import ray

                if restore_now or ray.get_runtime_context().was_current_actor_reconstructed:
                    _restore(self, *restore)
        except WorldSampleError as e:
            self._init_error = e

    body: dict[str, Any] = {"__init__": __init__, "_init_error": None}
    for klass in reversed(cls.__mro__[:-1]):  # plain functions only: static and class methods need no instance
        for name, fn in vars(klass).items():
            if inspect.isfunction(fn) and not name.startswith("_"):
                body[name] = _guarded(fn)
    return type(cls.__name__, (cls,), body)  # Ray names the worker process after the class


def _restore(obj: Any, root: str, part: str) -> None:
    from worldsample.loop.checkpoint import load_checkpoint

    restored = load_checkpoint(Path(root))
    if restored is not None and part in restored[0]:
        obj.load_state(restored[0][part])
        log.warning("the %s part was started again: state from trainer checkpoint round %s", part,
                    restored[1].get("round"))


def ray_maker(ray, logs: str = "Ray's session logs", plan: Plan | None = None, run_dir: Path | None = None,
              report: Callable[..., None] | None = None):
    """`make(name, cls, args)` for worldsample.loop.parts.build_parts: a named actor that Ray restarts
    if its process dies (state comes back from the trainer's checkpoints in `run_dir`), placed as
    `plan` says (services/trainer/placement.py; default: anywhere, CPU). `logs` says where the
    actors' output is, for error messages; `report(kind, message, level=..., **data)` hears of lost
    nodes and moved parts. `make.parts` holds the parts made so far, by name."""
    plan = plan or Plan(Placement(), 0.0, ())
    run_key = hashlib.sha1(str(run_dir).encode()).hexdigest()[:8] if run_dir is not None else ""
    parts: dict[str, RayPart] = {}

    def make(name: str, cls: type, args: tuple) -> RayPart:
        restore = (str(RunFiles.of(run_dir).trainer), name) if run_dir is not None else None
        actor_cls = ray.remote(actor_class(cls, one_thread=name in TORCH_PARTS, restore=restore))
        made = [0]

        def create(moved: bool) -> Any:
            # one name per run and start, so that runs can share a cluster and a part can start again
            actor = "-".join(x for x in (name, run_key, str(made[0]) if made[0] else "") if x)
            made[0] += 1
            options = {"name": actor, "namespace": NAMESPACE, **plan.options(name, moved=moved)}
            return actor_cls.options(**options).remote(*args, restore_now=moved)

        part = RayPart(ray, create, name, logs, restartable=name in RESTARTABLE,
                       on_node_loss=plan.placement.on_node_loss, node_wait_s=plan.placement.node_wait_s,
                       where=plan.where(name), report=report)
        parts[name] = part
        return part

    make.parts = parts  # type: ignore[attr-defined]
    return make
