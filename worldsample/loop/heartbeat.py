"""The trainer's part of `RUN/status.json` (worldsample.runlog.status), kept fresh while it runs.

A daemon thread rewrites it every `every_s` seconds (so a long round, a pause or a long pretraining
never look like a dead trainer), and the loop writes it at once when something changes (a round
logged, paused, resumed, finished). What it writes:

    services.trainer   state (starting, running, paused, stopped, error), heartbeat, pid, host, detail
    phase              starting, training, paused, finished, error
    paused, learner_step (the learner's update count), real_steps, policy_version, wm_version
    extra.trainer      round, schedule, started (unix time), updated (unix time)

A failed write (a full disk) is logged and counted, never raised: status is for people.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from worldsample.runlog.status import RunStatus, ServiceState, StatusFile

log = logging.getLogger(__name__)

SERVICE = "trainer"
FIELDS = ("phase", "paused", "learner_step", "real_steps", "policy_version", "wm_version")


class TrainerHeartbeat:
    def __init__(self, run_dir: Path | str, every_s: float = 2.0, schedule: str = ""):
        self.file = StatusFile(run_dir)
        self.every_s = every_s
        self.state, self.detail = "starting", ""
        self.fields: dict[str, Any] = {"phase": "starting", "paused": False}
        self.info: dict[str, Any] = {"schedule": schedule, "started": time.time(), "round": None}
        self.writes = self.failures = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set(self, state: str | None = None, detail: str | None = None, write: bool = False, round: int | None = None,
            **fields: Any) -> None:
        """Change what the next write says; `write` writes now. Fields left None keep their value."""
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"not trainer status fields: {sorted(unknown)}")
        with self._lock:
            if state is not None:
                self.state = state
            if detail is not None:
                self.detail = detail[:2000]
            if round is not None:
                self.info["round"] = round
            self.fields.update({k: v for k, v in fields.items() if v is not None})
        if write:
            self.write()

    def write(self) -> None:
        with self._lock:
            state, detail, fields, info = self.state, self.detail, dict(self.fields), dict(self.info)
        info["updated"] = time.time()

        def change(st: RunStatus) -> RunStatus:
            st.services[SERVICE] = ServiceState(state=state, pid=os.getpid(), host=os.uname().nodename, detail=detail)
            return st.model_copy(update={**fields, "extra": {**st.extra, SERVICE: info}})

        try:
            self.file.update(change)
            self.writes += 1
        except OSError as e:
            self.failures += 1
            if self.failures == 1 or self.failures % 100 == 0:
                log.warning("trainer status not written (%d failures): %s", self.failures, e)

    def start(self) -> None:
        self.write()
        self._thread = threading.Thread(target=self._beat, name="trainer-status", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.write()

    def stop(self, state: str, phase: str, detail: str = "") -> None:
        """The last write: the thread ends first, so nothing overwrites it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.set(state=state, detail=detail, phase=phase, write=True)
