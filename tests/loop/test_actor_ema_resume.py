"""learner.actor_ema in the loop: the averaged actor starts at the warm start's behaviour-cloned actor,
is what the policy registry publishes, and a resumed learner publishes the same average it saved."""

from __future__ import annotations

import numpy as np

from worldsample.learner import LearnerConfig
from worldsample.loop.checkpoint import load_checkpoint, save_checkpoint
from worldsample.loop.config import LoopConfig
from worldsample.policy import load_actor


def test_the_averaged_actor_is_published_and_survives_a_resume(tmp_path):
    from worldsample.loop.learning import Learning

    from ..store.helpers import demo_and_real_store

    demo_and_real_store(tmp_path)
    loop = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=16, actor_ema=0.05,
                                            bc_pretrain_steps=20, critic_warmup_updates=0))
    bounds = -np.ones(2, np.float32), np.ones(2, np.float32)
    obs = {"proprio": np.array([0.2, -0.4, 0.9], np.float32)}
    first = Learning(tmp_path, loop, {"proprio": 3}, *bounds)
    try:
        first.pretrain()
        first.learn(3)
        first.export({"round": 0})
        published = load_actor(tmp_path).act(obs)
        np.testing.assert_allclose(published, first.agent.act(obs), atol=1e-5)
        averaged = first.agent.ema_state()
        assert averaged
        save_checkpoint(tmp_path / "ckpt", {"learner": first.state()}, {"round": 0})
    finally:
        first.agent.close()
    second = Learning(tmp_path, loop, {"proprio": 3}, *bounds)
    try:
        parts, _ = load_checkpoint(tmp_path / "ckpt")
        second.load_state(parts["learner"])
        back = {k: v.tolist() for k, v in second.agent.ema_state().items()}
        assert back == {k: v.tolist() for k, v in averaged.items()}  # the same average, to the bit
        np.testing.assert_allclose(second.agent.act(obs), published, atol=1e-5)
    finally:
        second.agent.close()
