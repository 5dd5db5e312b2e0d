"""`RUN/status.json`: what the run is doing now, for people and the dashboard.

Several services share the file: each updates its own entry under `services` (and the fields
it owns) with `StatusFile.update`, which holds an flock on `RUN/.status.lock` across the
read-modify-write and replaces the file atomically. Readers never lock: they see the old file
or the new one. A service whose heartbeat is older than a few seconds should be shown as stale.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time as _time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsample.atomic import atomic_write_json
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)


class ServiceState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    state: Literal["starting", "running", "paused", "stopping", "stopped", "error"] = "running"
    heartbeat: float = Field(default_factory=_time.time, description="unix time of the last update")
    pid: int | None = None
    host: str | None = None
    detail: str = Field("", max_length=2000)


class RobotState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    connected: bool = False
    estop: bool = False
    mode: str | None = Field(None, description="idle, episode, intervention, estop, ...")
    episode: int | None = None
    control_hz: float | None = Field(None, description="the control loop's measured rate (recent ticks)")
    obs_age_s: float | None = Field(None, description="age of the stalest required stream's newest sample")
    jitter_p99_ms: float | None = Field(None, description="99th percentile of |period - nominal| of the control loop")
    policy_version: int | None = Field(None, description="the policy version the robot acts with")
    policy_lag_steps: int | None = Field(None, description="committed real steps the robot's policy was not "
                                         "trained on (the policy's age at the robot); None: not known")
    learner_wait_s: float | None = Field(None, description="seconds unattended episodes waited for the learner "
                                         "(episode.max_policy_lag_steps)")
    fault: str | None = Field(None, max_length=2000, description="why the bridge holds the arm, in words")
    stale_causes: dict[str, str] = Field({}, description="per stale required stream: why it has no usable sample")
    transport: str | None = Field(None, description="dds, rclpy or local")


class RunStatus(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: Literal[1] = 1
    phase: str = Field("idle", max_length=64, description="idle, collecting, training, paused, estopped, finished, ...")
    updated: float = Field(default_factory=_time.time)
    paused: bool = False
    learner_step: int | None = None
    real_steps: int | None = None
    policy_version: int | None = None
    wm_version: int | None = None
    robot: RobotState | None = None
    services: dict[str, ServiceState] = {}
    extra: dict[str, Any] = {}


class StatusFile:
    def __init__(self, run_dir: Path | str):
        files = RunFiles.of(run_dir)
        self.path = files.status
        self._lock_path = files.run_dir / ".status.lock"

    def read(self) -> RunStatus | None:
        """The current status, or None when there is none (or it is unreadable: logged)."""
        try:
            return RunStatus.model_validate(json.loads(self.path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError, RecursionError) as e:
            log.warning("unreadable %s: %s", self.path, str(e)[:300])
            return None

    def update(self, change: Callable[[RunStatus], RunStatus | None]) -> RunStatus:
        """Read, apply `change` (which may edit in place or return a new status), write back."""
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            cur = self.read() or RunStatus()
            new = change(cur) or cur
            new.updated = _time.time()
            atomic_write_json(self.path, new.model_dump(mode="json"))
            return new
        finally:
            os.close(fd)  # closing releases the flock

    def heartbeat(self, service: str, state: str = "running", detail: str = "", **fields: Any) -> RunStatus:
        """Update one service's entry (and any top-level fields it owns, e.g. learner_step)."""

        def change(st: RunStatus) -> RunStatus:
            st.services[service] = ServiceState(state=state, pid=os.getpid(), host=os.uname().nodename, detail=detail)
            return st.model_copy(update=fields) if fields else st

        return self.update(change)
