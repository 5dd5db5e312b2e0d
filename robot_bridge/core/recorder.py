"""Records steps into the episode store on its own thread, so chunk compression and disk writes
never delay the control loop. Owns the group's single writer for the life of the bridge.

An episode is committed only by `end(commit=True)`; a step the store rejects spoils the episode,
which is then discarded at its end: nothing partial or invalid ever becomes visible. A process
killed mid-episode leaves only uncommitted chunks, which the next writer deletes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from worldsample.errors import EpisodeRejected, StoreError
from worldsample.store import EpisodeRecord, EpisodeStore, GroupSchema

log = logging.getLogger(__name__)


@dataclass
class RecorderStats:
    committed: int = 0
    discarded: int = 0
    spoiled: int = 0  # episodes dropped because the store rejected a step or fell behind
    overruns: int = 0  # episodes spoiled because more than max_backlog steps were waiting
    steps: int = 0
    last_episode: int | None = None
    latency_ms: list[float] = field(default_factory=list)  # newest obs receive -> step accepted by the store
    write_ms: list[float] = field(default_factory=list)  # step handed over by the loop -> accepted by the store


class Recorder:
    def __init__(self, run_dir: Path, group: str, schema: GroupSchema,
                 on_result: Callable[[str, EpisodeRecord | None], None] | None = None, max_backlog: int = 200):
        store = EpisodeStore(run_dir, create=True)
        store.ensure_group(group, schema)
        self._writer = store.writer(group)
        self.stats = RecorderStats()
        # committed steps of the whole group, earlier runs' included (the run's real-step budget counts them)
        self.group_steps = sum(r.length for r in self._writer.records)
        self._ends_asked = self._ends_done = 0
        self._on_result = on_result
        self._q: queue.Queue = queue.Queue()
        self.backlog_max = 0  # most steps ever waiting: > a few means the store cannot keep up
        self._max_backlog = max_backlog
        self._overrun = False
        self._ep = None
        self._spoiled = False
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    @property
    def backlog(self) -> int:
        return self._q.qsize()

    @property
    def next_episode_id(self) -> int:
        return self._writer.next_episode_id

    # -- called from the control loop (never blocks) ------------------------------------------
    def begin(self) -> None:
        self._overrun = False
        self._q.put(("begin", None))

    def step(self, step: dict, obs_recv_ns: int) -> None:
        """Queue a step; if the store has fallen `max_backlog` steps behind, the episode is spoiled
        instead (a gap would corrupt it) and memory stays bounded."""
        if self._overrun:
            return
        if self._q.qsize() >= self._max_backlog:
            self._overrun = True
            self._q.put(("spoil", "recorder overrun: the store cannot keep up with this robot"))
            return
        self._q.put(("step", (step, obs_recv_ns, time.time_ns())))
        self.backlog_max = max(self.backlog_max, self._q.qsize())

    def end(self, commit: bool, meta: dict) -> None:
        self._ends_asked += 1
        self._q.put(("end", (commit, meta)))

    @property
    def settled(self) -> bool:
        """Every episode handed over has been committed or discarded: `group_steps` is exact."""
        return self._ends_done == self._ends_asked

    def close(self, timeout: float = 30.0) -> None:
        """Finish queued work; an episode still open is discarded."""
        self._q.put(("close", None))
        self._thread.join(timeout)
        self._writer.close()

    # -- recorder thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            op, arg = self._q.get()
            try:
                if op == "close":
                    if self._ep is not None:
                        self._ep.discard()
                        self._ep = None
                    return
                getattr(self, f"_do_{op}")(arg)
            except Exception:  # the recorder must outlive one bad episode
                log.exception("recorder failed on %s", op)
                self._spoiled = True
            finally:
                if op == "end":
                    self._ends_done += 1

    def _do_begin(self, _) -> None:
        if self._ep is not None:
            self._ep.discard()
        self._ep, self._spoiled = self._writer.begin_episode(), False

    def _do_spoil(self, why: str) -> None:
        log.error("%s; the episode will be discarded", why)
        self._spoiled = True
        self.stats.overruns += 1

    def _do_step(self, arg) -> None:
        step, recv_ns, handed_ns = arg
        if self._ep is None or self._spoiled:
            return
        try:
            self._ep.add_step(step)
        except EpisodeRejected as e:
            log.error("store rejected a step, the episode will be discarded: %s", e)
            self._spoiled = True
            return
        self.stats.steps += 1
        if len(self.stats.latency_ms) < 100_000:
            now = time.time_ns()
            self.stats.latency_ms.append((now - recv_ns) / 1e6)
            self.stats.write_ms.append((now - handed_ns) / 1e6)

    def _do_end(self, arg) -> None:
        commit, meta = arg
        ep, self._ep = self._ep, None
        if ep is None:
            return
        rec = None
        if commit and not self._spoiled and ep.length > 0:
            try:
                rec = ep.commit(**meta)
            except (EpisodeRejected, StoreError) as e:
                log.error("episode not committed: %s", e)
                ep.discard()
        else:
            ep.discard()
        if rec is not None:
            self.group_steps += rec.length
            self.stats.committed += 1
            self.stats.last_episode = rec.episode
        elif self._spoiled:
            self.stats.spoiled += 1
        else:
            self.stats.discarded += 1
        if self._on_result is not None:
            self._on_result("committed" if rec else "discarded", rec)
