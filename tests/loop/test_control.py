"""Operator requests reach the loop: a pause holds the learner until a resume (also across a
restart), the loop's status in RUN/status.json, and label requests written into the store.
In-process stand-ins for the parts (as in test_loop.py), a real store and real request files."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from worldsample.loop.calls import Local
from worldsample.loop.config import LoopConfig
from worldsample.loop.loop import ASYNC, Loop, Parts
from worldsample.runlog import ControlChannel, StatusFile
from worldsample.store import EpisodeStore

from ..store.helpers import make_episode
from .test_loop import LENGTH, Learner, Recorder, WorldModel, run_dir


class PausingWorldModel(WorldModel):
    """A world model whose first training round is when the operator presses Pause: the request
    arrives in the middle of a round, before the learner's step."""

    def __init__(self, rec, run):
        super().__init__(rec)
        self.control = ControlChannel(run)
        self.pause = None

    def train(self):
        if self.pause is None:
            self.pause = self.control.send("pause", reason="look at the arm")
        return super().train()


def wait_for(cond, what: str, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def started(run):
    """Wait until the loop has started (its status says training): what is committed from now on is new."""
    wait_for(lambda: (s := StatusFile(run).read()) and s.phase == "training", "the loop to start")


def trainer_ack(run, cmd):
    path = run / "control" / "acks" / "trainer" / f"{cmd.id}.json"
    return json.loads(path.read_text()) if path.exists() else None


def events(run) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def bridge_loop(tmp_path, rec, real_steps, world_model=None, **kw):
    cfg = LoopConfig(robot="bridge", real_steps=real_steps, eval_episodes=0, wm_every_episodes=100,
                     tensorboard=False)
    parts = Parts(learner=Local(Learner(rec)), world_model=Local(world_model) if world_model else None)
    return Loop(tmp_path, cfg, parts, ASYNC, idle_s=0.01, status_every_s=0.1, pause_poll_s=0.01, **kw)


class Running:
    """The loop's `run()` in a thread; its exception, if any, is raised at `join`."""

    def __init__(self, loop):
        self.loop, self.error = loop, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.loop.run()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            self.error = e

    def join(self):
        self.thread.join(20)
        assert not self.thread.is_alive(), "the loop did not finish"
        if self.error:
            raise self.error


def test_a_pause_in_the_middle_of_a_round_stops_learner_updates_until_resume(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    wm = PausingWorldModel(rec, tmp_path)
    loop = bridge_loop(tmp_path, rec, 4 * LENGTH, world_model=wm)
    learner, ctl, status = loop.parts.learner.obj, ControlChannel(tmp_path), StatusFile(tmp_path)
    writer = store.writer("real")
    running = Running(loop)
    started(tmp_path)
    writer.append_episode(make_episode(1, LENGTH))  # committed after the start: the first round learns on it

    wait_for(lambda: wm.pause and trainer_ack(tmp_path, wm.pause), "the pause to be acknowledged")
    assert trainer_ack(tmp_path, wm.pause)["result"] == "done"
    st = wait_for(lambda: (s := status.read()) and s.paused and s, "status.json to say paused")
    assert st.phase == "paused" and st.services["trainer"].state == "paused"
    # the robot goes on committing while training is paused: no learner update happens
    writer.append_episode(make_episode(2, LENGTH))
    writer.append_episode(make_episode(3, LENGTH))
    time.sleep(0.5)  # 50 polls of the control channel
    assert ("learner", "learn") not in rec.calls and learner.updates == 0
    assert status.read().services["trainer"].heartbeat > time.time() - 1.0  # paused, not dead

    resume = ctl.send("resume", reason="go on")
    wait_for(lambda: learner.updates >= LENGTH, "the round's learner step after resume")
    wait_for(lambda: learner.updates == 3 * LENGTH, "updates for the steps committed while paused")
    assert trainer_ack(tmp_path, resume)["result"] == "done"
    assert not status.read().paused and status.read().phase == "training"
    writer.append_episode(make_episode(4, LENGTH))
    running.join()
    writer.close()

    kinds = [(e["kind"], e["data"].get("request")) for e in events(tmp_path) if e["kind"] in ("pause", "resume")]
    assert kinds == [("pause", wm.pause.id), ("resume", resume.id)]
    st = status.read()
    assert st.services["trainer"].state == "stopped" and st.phase == "finished" and not st.paused
    assert st.learner_step == 4 * LENGTH and st.real_steps == 4 * LENGTH


def test_status_is_written_each_round(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    seen = []
    writer = store.writer("real")
    committed = iter(range(1, 100))

    def on_round(row):
        seen.append(StatusFile(tmp_path).read())
        writer.append_episode(make_episode(next(committed), LENGTH))

    loop = bridge_loop(tmp_path, rec, 3 * LENGTH, world_model=WorldModel(rec), on_round=on_round)
    assert StatusFile(tmp_path).read() is None
    running = Running(loop)
    started(tmp_path)
    writer.append_episode(make_episode(0, LENGTH))
    running.join()
    writer.close()

    assert [s.learner_step for s in seen] == [10, 20, 30] and [s.real_steps for s in seen] == [10, 20, 30]
    assert [s.policy_version for s in seen] == [1, 2, 3] and [s.wm_version for s in seen] == [1, 1, 1]
    assert [s.extra["trainer"]["round"] for s in seen] == [0, 1, 2]
    for s in seen:
        t = s.services["trainer"]
        assert t.state == "running" and t.pid == os.getpid() and s.phase == "training" and not s.paused
        assert abs(t.heartbeat - s.updated) < 1.0 and s.extra["trainer"]["schedule"] == "async"
    final = StatusFile(tmp_path).read()
    assert final.services["trainer"].state == "stopped" and final.phase == "finished"


def test_a_restarted_trainer_stays_paused_until_resume(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    ctl = ControlChannel(tmp_path)
    with store.writer("real") as w:
        w.append_episode(make_episode(1, LENGTH))
    first = bridge_loop(tmp_path, rec, 10 * LENGTH)
    pause = ctl.send("pause")
    assert first.follow_control() is True and trainer_ack(tmp_path, pause)["result"] == "done"
    first.metrics.close()

    # a new trainer process on the same run: the acknowledged pause still stands
    again = bridge_loop(tmp_path, rec, LENGTH)
    running = Running(again)
    wait_for(lambda: (s := StatusFile(tmp_path).read()) and s.paused and s.services["trainer"].state == "paused",
             "the restarted trainer to report paused")
    time.sleep(0.3)
    assert ("learner", "pretrain") not in rec.calls  # held before any learner update, pretraining included
    ctl.send("resume")
    running.join()
    assert ("learner", "pretrain") in rec.calls and not StatusFile(tmp_path).read().paused
    kept = [e for e in events(tmp_path) if e["kind"] == "pause" and e["data"].get("request") == pause.id]
    assert len(kept) == 2 and kept[1]["message"].startswith("still paused")


def test_an_estop_holds_the_learner_like_a_pause(tmp_path):
    run_dir(tmp_path)
    loop = bridge_loop(tmp_path, Recorder(), LENGTH)
    ctl = ControlChannel(tmp_path)
    estop = ctl.send("estop", reason="arm hit the table")
    assert loop.follow_control() is True and trainer_ack(tmp_path, estop)["result"] == "done"
    assert StatusFile(tmp_path).read().paused
    ctl.send("resume")
    assert loop.follow_control() is False and not StatusFile(tmp_path).read().paused
    loop.metrics.close()
    assert [e["kind"] for e in events(tmp_path)] == ["estop", "resume"]


def test_label_requests_are_stored_beside_the_episode(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    with store.writer("real") as w:
        w.append_episode(make_episode(1, LENGTH, terminal=True))
    loop = bridge_loop(tmp_path, rec, LENGTH)
    ctl = ControlChannel(tmp_path)
    good = ctl.send("label", group="real", episode=0, success=False, reason="it dropped the block")
    unknown = ctl.send("label", group="real", episode=7, success=True)
    no_group = ctl.send("label", group="sim", episode=0, success=True)
    other = ctl.send("start_episode")
    assert loop.follow_control() is False
    loop.metrics.close()

    assert trainer_ack(tmp_path, good)["result"] == "done"
    assert "real/episode 0 labelled failure" in trainer_ack(tmp_path, good)["note"]
    assert trainer_ack(tmp_path, unknown)["result"] == "rejected"
    assert "no committed episode 7" in trainer_ack(tmp_path, unknown)["note"]
    assert trainer_ack(tmp_path, no_group)["result"] == "rejected" and "sim" in trainer_ack(tmp_path, no_group)["note"]
    assert trainer_ack(tmp_path, other)["result"] == "ignored" and trainer_ack(tmp_path, other)["note"] == ""
    labels = EpisodeStore(tmp_path).labels("real").current()
    assert set(labels) == {0} and labels[0].success is False and labels[0].request == good.id
    assert labels[0].reason == "it dropped the block" and labels[0].source == "dashboard"
    ev = [e for e in events(tmp_path) if e["kind"].startswith(("episode_labelled", "label_rejected"))]
    assert [(e["kind"], e["data"]["episode"]) for e in ev] == [
        ("episode_labelled", 0), ("label_rejected", 7), ("label_rejected", 0)]


@pytest.mark.parametrize("paused", [False, True], ids=["idle", "paused"])
def test_the_watch_stops_an_idle_and_a_paused_loop(tmp_path, paused):
    """A robot process that dies commits nothing: the caller's watch must still be asked while the loop
    waits for new steps (and while it is paused), so the job ends instead of waiting for ever."""
    from worldsample.errors import RobotProcessError

    run_dir(tmp_path)
    alive, calls = threading.Event(), []
    alive.set()

    def watch():
        calls.append(time.monotonic())
        if not alive.is_set():
            raise RobotProcessError("sim-robot exited with -9")

    running = Running(bridge_loop(tmp_path, Recorder(), 4 * LENGTH, watch=watch))
    started(tmp_path)
    if paused:
        ControlChannel(tmp_path).send("pause", reason="look at the arm")
        wait_for(lambda: (s := StatusFile(tmp_path).read()) and s.paused, "the pause")
    n = len(calls)
    wait_for(lambda: len(calls) > n + 3, "the watch to be asked while nothing is committed")
    alive.clear()  # the robot's process dies; nothing more is committed
    with pytest.raises(RobotProcessError, match="sim-robot exited"):
        running.join()
    assert StatusFile(tmp_path).read().services["trainer"].state == "error"
