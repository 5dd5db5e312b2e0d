"""learner.anchor_weight in the loop: the actor's behaviour-cloned copy is taken at the warm start,
saved in the trainer checkpoint, and the resumed learner holds the actor to that same copy (not to
a copy of the actor it resumed with)."""

from __future__ import annotations

import logging

import numpy as np

from worldsample.learner import LearnerConfig
from worldsample.loop.checkpoint import load_checkpoint, save_checkpoint
from worldsample.loop.config import LoopConfig


def test_the_anchor_is_taken_at_the_warm_start_and_survives_a_resume(tmp_path, caplog):
    from worldsample.loop.learning import Learning

    from ..store.helpers import demo_and_real_store

    demo_and_real_store(tmp_path)
    loop = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=16, anchor_weight=1.0,
                                            bc_pretrain_steps=20, critic_warmup_updates=0))
    bounds = -np.ones(2, np.float32), np.ones(2, np.float32)
    first = Learning(tmp_path, loop, {"proprio": 3}, *bounds)
    try:
        assert not first.agent.anchor_state()
        first.pretrain()
        anchor = first.agent.anchor_state()
        assert anchor
        stats = first.learn(3)  # the actor moves on; its anchor does not
        assert np.isfinite(stats["anchor_mse"]) and stats["anchor_mse"] > 0
        for k, v in first.agent.anchor_state().items():
            np.testing.assert_array_equal(v, anchor[k])
        save_checkpoint(tmp_path / "ckpt", {"learner": first.state()}, {"round": 0})
    finally:
        first.agent.close()
    second = Learning(tmp_path, loop, {"proprio": 3}, *bounds)
    try:
        parts, _ = load_checkpoint(tmp_path / "ckpt")
        second.load_state(parts["learner"])
        back = second.agent.anchor_state()
        assert back.keys() == anchor.keys()
        for k in anchor:
            np.testing.assert_array_equal(back[k], anchor[k])
        assert np.isfinite(second.learn(1)["anchor_mse"])
    finally:
        second.agent.close()
    # a checkpoint of a run that started without the anchor: the restored actor becomes it, said in the log
    third = Learning(tmp_path, loop, {"proprio": 3}, *bounds)
    try:
        with caplog.at_level(logging.WARNING):
            third.load_state({**parts["learner"], "anchor": {}})
        assert "holds no behaviour-cloned copy" in caplog.text
        taken = third.agent.anchor_state()
        assert taken.keys() == anchor.keys() and any((taken[k] != anchor[k]).any() for k in anchor)
    finally:
        third.agent.close()
