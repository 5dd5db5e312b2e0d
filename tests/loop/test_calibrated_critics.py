"""learner.cql_calibrated (Cal-QL) in the loop: every batch the learner gets carries each row's
Monte-Carlo return, from the demos and the arm's episodes alike, and the learner trains on it."""

from __future__ import annotations

import numpy as np

from worldsample.learner import LearnerConfig
from worldsample.loop.config import LoopConfig


def test_the_loops_batches_carry_the_returns_the_calibration_needs(tmp_path):
    from worldsample.loop.learning import Learning

    from ..store.helpers import make_episode, new_store

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        for s in (1, 2):
            w.append_episode(make_episode(s, 12, terminal=True))  # a success on the last step
    loop = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=16, cql_weight=1.0,
                                            cql_calibrated=True, bc_pretrain_steps=0, critic_warmup_updates=0))
    learning = Learning(tmp_path, loop, {"proprio": 3}, -np.ones(2, np.float32), np.ones(2, np.float32))
    try:
        with store.writer("real") as w:
            w.append_episode(make_episode(3, 10))  # truncated, never a success: worth 0
        batches = []
        update = learning.agent.update_many
        learning.agent.update_many = lambda bs: batches.extend(bs) or update(bs)
        stats = learning.learn(2)
        assert batches and np.isfinite(stats["cql_gap"])
        gamma = loop.learner.gamma
        for b in batches:
            t, ep = b["obs/proprio"][:, 0].astype(int), b["obs/proprio"][:, 1].astype(int)
            want = np.where(ep == 3, 0.0, gamma ** (11 - t))
            np.testing.assert_allclose(b["mc_return"], want, rtol=1e-5)
            assert {1, 2, 3} >= set(ep.tolist())
        assert any((b["obs/proprio"][:, 1] == 3).any() for b in batches)
    finally:
        learning.agent.close()
