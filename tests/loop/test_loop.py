"""The loop without Ray: in-process stand-ins for the parts, a real store on disk. What is
checked: the order of the steps in a round, the cadences, the two schedules, resume. The lock-step
schedule and resume on the real parts: test_loop_real.py."""

import json

import numpy as np
import pytest

from worldsample.loop.calls import Job, Local
from worldsample.loop.checkpoint import load_checkpoint
from worldsample.loop.config import LoopConfig
from worldsample.loop.loop import ASYNC, LOCKSTEP, ROUND, Loop, Parts, schedule_for

from ..store.helpers import make_episode, new_store

LENGTH = 10


class Recorder:
    """Every call of every stand-in, in order, as (part, method)."""

    def __init__(self):
        self.calls = []
        self.eval_episodes = []


class Collector:
    def __init__(self, rec, store):
        self.rec, self.writer, self.seed = rec, store.writer("real"), 100

    def ready(self):
        return True

    def episode(self, seed):
        self.rec.calls.append(("collector", "episode"))
        self.writer.append_episode(make_episode(seed, LENGTH))
        return {"length": LENGTH, "success": False, "policy_version": None}

    def evaluate(self, episodes, seed0):
        self.rec.calls.append(("evaluator", "evaluate"))
        self.rec.eval_episodes.append(episodes)
        return {"success_rate": 0.5, "policy_version": 1}

    def close(self):
        self.writer.close()


class Learner:
    def __init__(self, rec):
        self.rec, self.updates, self.version, self.loaded = rec, 0, 0, None

    def pretrain(self):
        self.rec.calls.append(("learner", "pretrain"))
        return {}

    def learn(self, new_steps):
        self.rec.calls.append(("learner", "learn"))
        self.updates += new_steps
        return {"learner/updates": float(self.updates), "batch/synthetic_share": 0.25}

    def export(self, source):
        self.rec.calls.append(("learner", "export"))
        self.version += 1
        return self.version

    def state(self):
        return {"updates": self.updates, "weights": np.arange(3, dtype=np.float32)}

    def load_state(self, st):
        self.loaded = st
        self.updates = int(st["updates"])


class WorldModel:
    def __init__(self, rec):
        self.rec, self.version = rec, 0

    def train(self):
        self.rec.calls.append(("world_model", "train"))
        self.version += 1
        return {"wm/version": float(self.version)}

    def evaluate(self, horizons):
        return {}

    def recommend(self, version):
        self.rec.calls.append(("world_model", "recommend", version))
        return {"recommend/version": float(max(1, version - 1))}  # the policy before the last looks best


class Synth:
    def __init__(self, rec):
        self.rec, self.steps_written = rec, 0

    def generate(self):
        self.rec.calls.append(("synth", "generate"))
        return {"synth/steps": 5.0}

    def state(self):
        return {"steps_written": self.steps_written}

    def load_state(self, st):
        self.steps_written = int(st["steps_written"])


def run_dir(tmp_path):
    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        w.append_episode(make_episode(0, LENGTH))
    return store


def lockstep(tmp_path, store, rec, **cfg):
    loop = LoopConfig(
        robot="sim",
        real_steps=cfg.pop("real_steps", 6 * LENGTH),
        eval_every_episodes=3,
        wm_every_episodes=4,
        synth_every_episodes=2,
        checkpoint_every_episodes=5,
        tensorboard=False,
        **cfg,
    )
    collector = Local(Collector(rec, store))
    parts = Parts(learner=Local(Learner(rec)), collector=collector, evaluator=collector,
                  world_model=Local(WorldModel(rec)), synth=Local(Synth(rec)))
    return loop, parts


def test_a_lockstep_round_runs_the_named_steps_in_order_at_their_cadences(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    loop_cfg, parts = lockstep(tmp_path, store, rec)
    assert schedule_for(loop_cfg) is LOCKSTEP and LOCKSTEP.steps == ROUND
    rows = []
    summary = Loop(tmp_path, loop_cfg, parts, LOCKSTEP, on_round=rows.append).run()

    assert summary.real_steps == 6 * LENGTH and summary.episodes == 6 and len(rows) == 6
    # round 0 (the first round: every cadence is due), then round 1 (export only: every episode)
    first = [("evaluator", "evaluate"), ("collector", "episode"), ("world_model", "train"), ("synth", "generate"),
             ("learner", "learn"), ("learner", "export"), ("world_model", "recommend", 1)]
    assert rec.calls[1:1 + len(first)] == first and rec.calls[0] == ("learner", "pretrain")
    per_round = [
        [c for c in rec.calls if c == ("world_model", "train")],
        [c for c in rec.calls if c == ("synth", "generate")],
    ]
    assert len(per_round[0]) == 2 and len(per_round[1]) == 4  # episodes 1 and 4 (every 4); 1, 2, 4, 6 (every 2)
    # evaluations: before, after episodes 3 and 6, and the final one
    assert sum(c == ("evaluator", "evaluate") for c in rec.calls) == 4
    assert [e[0] for e in summary.evals] == [0, 30, 60, 60] and summary.success_after == 0.5
    assert rec.eval_episodes == [loop_cfg.eval_episodes] * 4  # the final one too, unless told otherwise
    assert summary.synthetic_share == 0.25 and summary.synthetic_share_mean == 0.25 and summary.wm_versions == 2
    # every exported version is scored in the world model, the final one too; the summary names the choice
    assert [c[2] for c in rec.calls if c[:2] == ("world_model", "recommend")] == [1, 2, 3, 4, 5, 6, 7]
    assert summary.recommended == 6 and summary.human_last_quarter == 0.0
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["real_steps"] for m in metrics if "real_steps" in m] == [10.0 * i for i in range(1, 7)]
    parts_saved, meta = load_checkpoint(tmp_path / "trainer")
    assert meta == {"round": 5, "real_steps": 60, "real_episodes": 6} and parts_saved["learner"]["updates"] == 60


def test_the_final_evaluation_takes_its_own_number_of_held_out_states(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    loop_cfg, parts = lockstep(tmp_path, store, rec, eval_episodes=20, final_eval_episodes=50)
    Loop(tmp_path, loop_cfg, parts, LOCKSTEP).run()
    assert rec.eval_episodes == [20, 20, 20, 50]


def test_resume_continues_from_the_checkpointed_round_and_state(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    loop_cfg, parts = lockstep(tmp_path, store, rec, real_steps=3 * LENGTH)
    Loop(tmp_path, loop_cfg, parts, LOCKSTEP).run()
    parts.collector.obj.close()

    rec2 = Recorder()
    loop_cfg, parts2 = lockstep(tmp_path, store, rec2, real_steps=5 * LENGTH)
    rows = []
    summary = Loop(tmp_path, loop_cfg, parts2, LOCKSTEP, resume=True, on_round=rows.append).run()
    assert ("learner", "pretrain") not in rec2.calls  # no warm start again
    assert parts2.learner.obj.loaded["updates"] == 30
    assert summary.real_steps == 50 and len(rows) == 2
    _, meta = load_checkpoint(tmp_path / "trainer")
    assert meta["round"] == 4  # rounds 3 and 4 after the three of the first run


class Pretraining(Learner):
    def pretrain(self):
        self.rec.calls.append(("learner", "pretrain"))
        return {"pretrain/transitions": float(LENGTH), "pretrain/bc_mse": 0.1}


def test_a_resume_before_the_first_checkpoint_logs_from_the_stores_step(tmp_path):
    """Killed after two episodes but before a checkpoint was published: the warm start runs again,
    and its row sits at the store's step count, not at 0 (metrics steps never go back)."""
    store, rec = run_dir(tmp_path), Recorder()
    with store.writer("real") as w:
        for seed in (1, 2):
            w.append_episode(make_episode(seed, LENGTH))
    loop_cfg, parts = lockstep(tmp_path, store, rec, real_steps=3 * LENGTH)
    parts.learner = Local(Pretraining(rec))
    Loop(tmp_path, loop_cfg, parts, LOCKSTEP, resume=True).run()
    assert rec.calls[0] == ("learner", "pretrain")
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    pre = [m for m in metrics if "pretrain/bc_mse" in m]
    assert [m["step"] for m in pre] == [2 * LENGTH]
    assert min(m["step"] for m in metrics) == 2 * LENGTH


class Slow:
    """A pending call that finishes after `polls` checks (a world model training beside the learner)."""

    def __init__(self, value, polls):
        self.value, self.polls = value, polls

    def done(self):
        self.polls -= 1
        return self.polls < 0

    def result(self):
        return self.value


class SlowPart:
    def __init__(self, rec, polls):
        self.rec, self.polls = rec, polls

    def call(self, method, *args):
        self.rec.calls.append(("world_model", method))
        return Slow({"wm/version": 1.0} if method == "train" else {}, self.polls)


def test_the_async_schedule_learns_while_the_world_model_trains(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    writer = store.writer("real")
    committed = iter(range(1, 100))

    def robot_commits(_row=None):  # the bridge commits on the robot's clock: here, one episode per round
        writer.append_episode(make_episode(next(committed), LENGTH))

    loop_cfg = LoopConfig(
        robot="bridge", real_steps=3 * LENGTH, eval_episodes=0, wm_every_episodes=100, tensorboard=False
    )
    parts = Parts(learner=Local(Learner(rec)), world_model=SlowPart(rec, polls=2))
    rows = []
    loop = Loop(
        tmp_path,
        loop_cfg,
        parts,
        schedule_for(loop_cfg),
        on_round=lambda r: (rows.append(r), robot_commits()),
        idle_s=0,
    )
    loop.start()
    robot_commits()
    while loop.seen_steps < loop_cfg.real_steps:
        assert loop.run_round()
    loop.finish()
    loop.metrics.close()
    writer.close()
    assert schedule_for(loop_cfg) is ASYNC and "collect" not in ASYNC.steps
    assert [c[1] for c in rec.calls].count("train") == 1  # one call in flight, started in the first round
    assert ["wm/version" in r for r in rows] == [False, False, True]  # picked up when it finished
    assert [c for c in rec.calls if c[0] == "learner"].count(("learner", "learn")) == 3  # learning went on meanwhile
    assert loop.summary.real_steps == 30 and loop.summary.wm_versions == 1


def test_world_model_work_that_finishes_after_the_last_round_is_logged(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    loop_cfg = LoopConfig(robot="bridge", real_steps=LENGTH, eval_episodes=0, tensorboard=False)
    loop = Loop(tmp_path, loop_cfg, Parts(learner=Local(Learner(rec)), world_model=SlowPart(rec, polls=10)), ASYNC,
                idle_s=0)
    loop.start()
    with store.writer("real") as w:
        w.append_episode(make_episode(1, LENGTH))
    assert loop.run_round()  # the budget is spent: the world model is still training
    loop.finish()
    loop.metrics.close()
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m.get("wm/version") for m in metrics if "wm/version" in m] == [1.0] and loop.summary.wm_versions == 1


def test_a_round_without_new_steps_ends_after_observe(tmp_path):
    store, rec = run_dir(tmp_path), Recorder()
    loop_cfg = LoopConfig(robot="bridge", eval_episodes=0, tensorboard=False)
    loop = Loop(tmp_path, loop_cfg, Parts(learner=Local(Learner(rec))), ASYNC, idle_s=0)
    loop.start()
    assert loop.run_round() is False and ("learner", "learn") not in rec.calls
    with store.writer("real") as w:
        w.append_episode(make_episode(1, LENGTH))
    assert loop.run_round() is True and loop.seen_steps == LENGTH
    loop.metrics.close()


@pytest.mark.parametrize("wait", [True, False])
def test_a_job_keeps_one_call_in_flight(wait):
    job, started = Job(wait), []
    job.start(lambda: started.append(1) or Slow({"x": 1}, polls=1))
    job.start(lambda: started.append(2) or Slow({"x": 2}, polls=1))  # ignored: one already in flight
    assert started == [1]
    assert job.poll() == ({"x": 1} if wait else {})
    assert job.finish() == ({} if wait else {"x": 1})


def test_the_summary_reports_the_run_mean_share_and_the_humans_last_quarter():
    from types import SimpleNamespace

    from worldsample.loop.summary import TrainSummary, human_share

    s = TrainSummary(evals=[(0, 0.2, 1), (50, 0.9, 3), (100, 0.7, 5)])
    for share in (0.0, 0.1, 0.5):
        s.synthetic_share, s.synthetic_share_sum, s.synthetic_share_rounds = (
            share, s.synthetic_share_sum + share, s.synthetic_share_rounds + 1)
    assert s.synthetic_share == 0.5 and s.synthetic_share_mean == pytest.approx(0.2)
    assert s.last_vs_best == pytest.approx(20.0) and s.best == (50, 0.9, 3)
    eps = [SimpleNamespace(length=100, interventions=n) for n in (80, 60, 10, 0)]
    assert human_share(eps, first_step=300) == 0.0 and human_share(eps, first_step=200) == pytest.approx(0.05)
    assert human_share(eps, first_step=0) == pytest.approx(0.375) and human_share(eps, first_step=400) is None
