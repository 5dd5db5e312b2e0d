"""The dashboard's controls act, end to end against a real uvicorn server and a real store: the
trainer's status (written by the loop) is what /api/run reports, with `trainer.running` false when
no trainer runs; a success/failure mark sent with the token becomes a label in the store that the
learner's sampled reward follows."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.conftest import TOKEN
from tests.loop.test_loop import Learner, Recorder
from tests.store.helpers import make_episode, new_store
from worldsample.loop.calls import Local
from worldsample.loop.config import LoopConfig
from worldsample.loop.loop import ASYNC, Loop, Parts
from worldsample.runlog import ServiceState, StatusFile
from worldsample.store import EpisodeStore, GroupSampler

L = 8
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("controls") / "run"
    store = new_store(run, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        w.append_episode(make_episode(0, L))
    with store.writer("real") as w:
        w.append_episode(make_episode(1, L, terminal=True))  # 0: recorded a success (the detector fired)
        w.append_episode(make_episode(2, L))  # 1: recorded a failure (cut at the time limit)
    return run


@pytest.fixture(scope="module")
def client(run):
    settings = DashboardSettings(token=TOKEN, refresh_interval_s=0.2, store_refresh_min_s=0.0)
    with BackgroundServer(create_app(run, settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield c


def a_loop(run) -> Loop:
    cfg = LoopConfig(robot="bridge", real_steps=100 * L, eval_episodes=0, tensorboard=False)
    return Loop(run, cfg, Parts(learner=Local(Learner(Recorder()))), ASYNC, idle_s=0, status_every_s=0.1)


def trainer(client) -> dict:
    return client.get("/api/run").json()["trainer"]


def set_trainer(run, **fields):
    def change(st):
        st.services["trainer"] = st.services["trainer"].model_copy(update=fields)

    StatusFile(run).update(change)


def test_the_overview_reports_the_loops_status_and_when_no_trainer_runs(client, run):
    (run / "status.json").unlink(missing_ok=True)
    t = trainer(client)
    assert t["running"] is False and t["state"] is None
    assert "no trainer has written status.json" in t["reason"] and "nothing will act" in t["reason"]

    loop = a_loop(run)
    loop.status.start()
    try:
        loop.start()
        ov = client.get("/api/run").json()
        assert ov["trainer"] == {**ov["trainer"], "running": True, "state": "running", "reason": "",
                                 "pid": os.getpid(), "host": os.uname().nodename}
        assert ov["status_source"] == "status.json" and ov["phase"] == "training" and ov["learner_step"] == 0
        assert ov["real_steps"] == 2 * L and ov["paused"] is False
        # no round meanwhile: the heartbeat thread keeps it fresh (every 0.1 s here): wait for it to
        # renew the heartbeat twice, then the dashboard still says the trainer runs
        seen = [StatusFile(run).read().services["trainer"].heartbeat]
        deadline = time.monotonic() + 30
        while len(seen) < 3:
            assert time.monotonic() < deadline, f"the heartbeat was not renewed twice in 30 s: {seen}"
            beat = StatusFile(run).read().services["trainer"].heartbeat
            if beat > seen[-1]:
                seen.append(beat)
            time.sleep(0.02)
        ov = client.get("/api/run").json()
        assert ov["trainer"]["running"] is True and ov["trainer"]["state"] == "running", ov["trainer"]
        assert ov["learner_step"] == 0 and ov["real_steps"] == 2 * L  # the heartbeats came without a round
    finally:
        loop.status.stop("stopped", "finished", detail="trained on 16 real steps")
        loop.metrics.close()
    t = trainer(client)
    assert t["running"] is False and t["state"] == "stopped"
    assert t["reason"].startswith("the trainer stopped (trained on 16 real steps)")


def test_a_stale_heartbeat_or_a_gone_process_is_no_trainer(client, run):
    StatusFile(run).heartbeat("trainer")  # alive: this process, just now
    assert trainer(client)["running"] is True

    set_trainer(run, heartbeat=time.time() - 60)
    t = trainer(client)
    assert t["running"] is False and "last heartbeat was 60 s ago" in t["reason"]

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    set_trainer(run, heartbeat=time.time(), pid=int(gone.stdout))
    t = trainer(client)
    assert t["running"] is False and f"process {int(gone.stdout)} is gone" in t["reason"]

    set_trainer(run, pid=os.getpid(), state="error", detail="RuntimeError: boom")
    t = trainer(client)
    assert t["running"] is False and "ended with an error (RuntimeError: boom)" in t["reason"]
    # another host's process is not looked up here: fresh and not stopped is running
    StatusFile(run).update(lambda st: st.services.update(trainer=ServiceState(pid=1 << 22, host="elsewhere")))
    assert trainer(client)["running"] is True


def test_a_mark_from_the_dashboard_becomes_the_learners_reward(client, run):
    sampler = GroupSampler(EpisodeStore(run).reader("real"), obs_keys=["proprio"], reward_key="success")

    def reward_at_the_end() -> dict[int, float | None]:
        """Each episode's sampled reward at its last step (None: that step is never sampled)."""
        sampler.refresh()
        batch = sampler.transitions(np.random.default_rng(0), 2000)
        c = sampler.reader.cache
        out = {}
        for i, e in enumerate(c.episode_ids):
            start, end = c.ep_start[i], c.ep_start[i] + c.ep_len[i]
            last = batch["index"] == end - 1
            out[e] = float(batch["reward"][last][0]) if last.any() else None
            earlier = (batch["index"] >= start) & (batch["index"] < end - 1)
            assert earlier.any() and batch["reward"][earlier].sum() == 0  # sparse: nothing before the end
        return out

    assert reward_at_the_end() == {0: 1.0, 1: None}
    sent = {}
    for episode, success in ((0, False), (1, True)):
        body = {"group": "real", "episode": episode, "success": success, "reason": "seen in the player"}
        assert client.post("/api/control/label", json=body).status_code == 401  # no token: nothing sent
        r = client.post("/api/control/label", json=body, headers=AUTH)
        assert r.status_code == 202, r.text
        sent[episode] = r.json()["id"]
    assert reward_at_the_end() == {0: 1.0, 1: None}  # a request is not a label until the trainer stores it

    loop = a_loop(run)
    loop.follow_control()
    loop.metrics.close()
    assert reward_at_the_end() == {0: None, 1: 1.0}

    history = {h["id"]: h for h in client.get("/api/control/history").json()}
    for episode, verdict in ((0, "failure"), (1, "success")):
        acks = history[sent[episode]]["acks"]
        assert [(a["consumer"], a["result"]) for a in acks] == [("trainer", "done")]
        assert f"real/episode {episode} labelled {verdict}" in acks[0]["note"]
    items = {e["episode"]: e for e in client.get("/api/episodes", params={"group": "real"}).json()["items"]}
    assert (items[0]["success"], items[0]["label"]) == (True, False)  # as recorded, and the operator's verdict
    assert (items[1]["success"], items[1]["label"]) == (False, True)
    assert client.get("/api/episodes/real/1").json()["label"] is True
    assert client.get("/api/episodes/demo/0").json()["label"] is None
