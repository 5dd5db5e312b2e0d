"""`loop.search`: the lock-step arm acts through Best-of-N in the run's world model once the run has
one (and, for score=value, a trainer checkpoint), in evaluations and in the episodes it records; the
policy alone before that, and wherever the setting is off. The world model is the hand-rigged one of
tests/evaluation: only a first action dimension above about 0.35 succeeds in imagination."""

import numpy as np
import pytest

from tests.evaluation.helpers import policy_tensors, rigged_model
from tests.evaluation.test_critic import sac_agent, save_learner
from worldsample.loop.config import LoopConfig
from worldsample.loop.robot import Evaluator, SimCollector
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry
from worldsample.sim import SimArmConfig
from worldsample.sim.config import InterventionConfig
from worldsample.store import EpisodeStore
from worldsample.world_model import checkpoint

ENV = SimArmConfig(cameras=[], max_episode_steps=4)
BASE = 0.2  # the policy's first action dimension: imagined to fail


def loop_cfg(**search) -> LoopConfig:
    return LoopConfig(search={"n": 8, "horizon": 1, "spread": 0.5, "score": "success", **search})


def publish(run, world_model: bool = True):
    PolicyRegistry(run).publish(*policy_tensors(BASE))
    if world_model:
        checkpoint.save(RunFiles.of(run).world_model, rigged_model())


def first_action(ev: Evaluator, explore: bool) -> np.ndarray:
    ev._refresh_policy()
    obs, _ = ev.eval_env.reset(seed=10_000)
    ev._start(obs, explore)
    return ev._action(obs, explore)


def test_evaluations_act_through_the_search_once_there_is_a_world_model(tmp_path):
    publish(tmp_path, world_model=False)
    ev = Evaluator(tmp_path, ENV, loop_cfg())
    try:
        assert first_action(ev, explore=False)[0] == pytest.approx(BASE) and not ev.search.active  # no model yet
        checkpoint.save(RunFiles.of(tmp_path).world_model, rigged_model())
        a = first_action(ev, explore=False)
        last = ev.search.planner.last
        np.testing.assert_array_equal(a, last["actions"][last["best"], 0])  # the best candidate's action
        assert (last["actions"][:, 0, 0] > 0.35).any() and a[0] > 0.35  # one the model says succeeds
        out = ev.evaluate(2, 10_000)
        assert out["searched_steps"] == 2 * 4 and ev.search.decisions == 2 * 4 + 1
    finally:
        ev.close()
    off = Evaluator(tmp_path, ENV, loop_cfg(evaluate=False))
    try:
        assert first_action(off, explore=False)[0] == pytest.approx(BASE) and off.search.active
        assert off.evaluate(1, 10_000)["searched_steps"] == 0
    finally:
        off.close()


def test_value_waits_for_a_trainer_checkpoint_and_then_uses_its_critic(tmp_path):
    publish(tmp_path)
    ev = Evaluator(tmp_path, ENV, loop_cfg(score="value"))
    try:
        first_action(ev, explore=False)
        assert not ev.search.active and "trainer checkpoint" in ev.search.error
        agent = sac_agent(2, 39)
        try:
            save_learner(tmp_path, agent)
        finally:
            agent.close()
        first_action(ev, explore=False)
        assert ev.search.active and ev.search.critic is not None and ev.search.ckpt_version == 1
        assert ev.evaluate(1, 10_000)["searched_steps"] == 4
    finally:
        ev.close()


@pytest.mark.parametrize("human", [False, True])
def test_the_collector_records_the_searched_actions(tmp_path, human):
    publish(tmp_path)
    cfg = loop_cfg().model_copy(update={"interventions": human})
    col = SimCollector(tmp_path, ENV, cfg, InterventionConfig())
    try:
        if human:  # a human who always has the controls: the search's imagined history holds their actions
            col.expert.filter = lambda a: (np.full(4, 0.2, np.float32), True)
        out = col.episode(seed=3)
        history = list(col.search.planner._acts)
    finally:
        col.close()
    real = EpisodeStore(tmp_path).reader("real", cache=False)
    assert real.records[0].extra["searched_steps"] == out["length"] == 4
    actions = real.episode(0)["action"]
    if human:
        np.testing.assert_allclose(actions, 0.2)
        np.testing.assert_allclose(history[-1], 0.2)
    else:  # the chosen candidates, not the policy's own action
        assert np.abs(actions[:, 0] - BASE).min() > 1e-3


def test_search_settings_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="ppl.mode=off"):
        LoopConfig(search={"n": 8}, ppl={"mode": "off"})
    with pytest.raises(ValueError, match="action_chunk"):
        LoopConfig(search={"n": 8}, learner={"action_chunk": 2})
    assert LoopConfig(ppl={"mode": "off"}).search.n == 0  # off by default, whatever the mixer
