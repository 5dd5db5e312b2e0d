"""Action chunks (learner.action_chunk, Q-chunking): the learner learns and exports a policy that
outputs k steps' actions; the simulated arm plays them open-loop, asks again when they are played
or when the human has taken over; every runner that plays one action per step refuses them."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from worldsample.config import load_config
from worldsample.learner import LearnerConfig
from worldsample.learner.algorithm import SACAlgorithm
from worldsample.loop.config import LoopConfig
from worldsample.loop.learning import chunk_actions
from worldsample.loop.robot import Evaluator, SimCollector
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig, PolicyError, PolicyRegistry, load_actor

K = 3


def test_chunk_actions_take_the_next_actions_of_the_same_episode():
    a = np.arange(10, dtype=np.float32).reshape(5, 2)  # episodes of 3 and 2 steps
    out = chunk_actions(a, np.array([3, 2]), 2)
    np.testing.assert_array_equal(out, [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 4, 5], [6, 7, 8, 9], [8, 9, 8, 9]])
    np.testing.assert_array_equal(chunk_actions(a, np.array([3, 2]), 1), a)


def test_an_intervention_chunk_is_imitated_only_if_the_human_chose_all_of_it():
    class Agent:
        cfg = LearnerConfig()
        updates = 0

    batch = {"source": np.array(["demo", "intervention", "intervention", "online"]),
             "chunk_human": np.array([False, True, False, True]), "reward": np.zeros(4, np.float32)}
    np.testing.assert_array_equal(SACAlgorithm(Agent()).prepare(batch)["bc_mask"], [1, 1, 0, 0])


def _chunk_policy(stochastic: bool = True) -> tuple[PolicyConfig, dict]:
    cfg = PolicyConfig(obs=[ObsInput(key="state", dim=39)], action_dim=4 * K, hidden=[16], action_low=[-1] * 4 * K,
                       action_high=[1] * 4 * K, stochastic=stochastic, action_chunk=K)
    rng = np.random.default_rng(0)
    return cfg, {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()}


def test_one_step_runners_refuse_a_chunk_policy(tmp_path):
    from robot_bridge.core.policy_source import PolicySource

    PolicyRegistry(tmp_path).publish(*_chunk_policy())
    with pytest.raises(PolicyError, match="chunks of 3 actions"):
        load_actor(tmp_path)
    assert load_actor(tmp_path, chunks=True).config.action_chunk == K
    src = PolicySource(tmp_path, {"state": (39,)}, action_dim=4)
    assert src.refresh() is False and src.version is None and "does not play" in src.error
    with pytest.raises(ValidationError, match="whole number of 3-step chunks"):
        PolicyConfig(obs=[ObsInput(key="state", dim=39)], action_dim=4, action_low=[-1] * 4, action_high=[1] * 4,
                     action_chunk=K)


def test_config_keeps_chunks_where_they_are_played():
    with pytest.raises(ValidationError, match="n_step .4. must be 1 or the chunk's length"):
        LearnerConfig(action_chunk=K, n_step=4)
    assert LearnerConfig(action_chunk=K).backup_steps == K and LearnerConfig(n_step=2).backup_steps == 2
    chunked = LearnerConfig(action_chunk=K)
    with pytest.raises(ValidationError, match="loop.ppl.mode=ppl: set loop.learner.action_chunk=1"):
        LoopConfig(robot="sim", learner=chunked, ppl={"mode": "ppl"})
    with pytest.raises(ValidationError, match="loop.robot=bridge"):
        LoopConfig(robot="bridge", learner=chunked, ppl={"mode": "off"})
    LoopConfig(robot="sim", learner=chunked, ppl={"mode": "off"})


def _spy(actor: NumpyActor) -> list[int]:
    calls: list[int] = []
    act = actor.act
    actor.act = lambda *a, **kw: calls.append(1) or act(*a, **kw)
    return calls


def test_the_evaluator_plays_each_chunk_open_loop(tmp_path):
    cfg = load_config(None, ["loop.robot=sim", "loop.ppl.mode=off", f"loop.learner.action_chunk={K}"])
    ev = Evaluator(tmp_path, cfg.env, cfg.loop)
    ev.policy = NumpyActor(*_chunk_policy())
    calls = _spy(ev.policy)
    obs = {"state": np.linspace(-0.5, 0.5, 39).astype(np.float32)}
    chunk = ev.policy.act(obs).reshape(K, 4)
    calls.clear()
    for i in range(K):  # the chunk, in order, from one call
        np.testing.assert_allclose(ev._action(obs, explore=False), chunk[i])
    assert len(calls) == 1
    ev._action(obs, explore=False)
    assert len(calls) == 2
    try:
        out = ev.evaluate(1, seed0=3)  # an episode starts with a fresh chunk
        assert len(calls) == 2 + -(-out["mean_length"] // K)
    finally:
        ev.close()


def test_the_collector_asks_again_once_the_human_has_taken_over(tmp_path):
    cfg = load_config(None, ["loop.robot=sim", "loop.ppl.mode=off", f"loop.learner.action_chunk={K}",
                             "env.max_episode_steps=60"])
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    try:
        col.policy = NumpyActor(*_chunk_policy())
        calls = _spy(col.policy)
        rec = col.episode(seed=1)
        human = col.store.reader("real").episode(rec["episode"])["intervention"]
    finally:
        col.close()
    assert 0 < rec["interventions"] < rec["length"]  # a random policy strays, and is let go again
    expected, left = 0, 0
    for h in human:  # a new chunk when the last one is played or the human drove the step before
        if left == 0:
            expected, left = expected + 1, K
        left = 0 if h else left - 1
    assert len(calls) == expected < rec["length"]


def test_a_run_learns_exports_and_pretrains_on_chunks(tmp_path):
    from worldsample.loop.learning import Learning

    from ..store.helpers import make_episode, new_store

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    demos = [make_episode(s, 12, terminal=True) for s in (1, 2)]
    with store.writer("demo") as w:
        for e in demos:
            w.append_episode(e)
    loop = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=8, action_chunk=K,
                                            bc_pretrain_steps=5, critic_warmup_updates=0))
    low, high = -np.ones(2, np.float32), np.ones(2, np.float32)
    learning = Learning(tmp_path, loop, {"proprio": 3}, low, high)
    try:
        seen = []
        pretrain = learning.agent.bc_pretrain
        learning.agent.bc_pretrain = lambda o, a, n: seen.append(a) or pretrain(o, a, n)
        assert learning.pretrain()["pretrain/transitions"] == 24
        np.testing.assert_array_equal(seen[0][:12], chunk_actions(demos[0]["action"], np.array([12]), K))
        with store.writer("real") as w:
            w.append_episode(make_episode(3, 10))
        batches = []
        update = learning.agent.update_many
        learning.agent.update_many = lambda bs, report=True: batches.extend(bs) or update(bs, report)
        stats = learning.learn(2)
        assert len(batches) == 2 * loop.learner.utd and np.isfinite(stats["learner/updates"])
        assert all(b["action"].shape == (8, 2 * K) and (b["n_step"] <= K).all() for b in batches)
        version = learning.export({"real_steps": 10})
        actor = load_actor(tmp_path, version, chunks=True)
        assert actor.config.action_chunk == K and actor.act({"proprio": np.zeros(3, np.float32)}).shape == (2 * K,)
    finally:
        learning.agent.close()
