"""loop.intervention_penalty (RLIF) in the loop: the learner's batches charge the arm's last step before
each takeover, in the online and intervention pools alike, and nothing in the demonstrations."""

from __future__ import annotations

import numpy as np

from worldsample.learner import LearnerConfig
from worldsample.loop.config import LoopConfig

PENALTY = 0.7


def test_the_loops_batches_charge_the_step_before_each_takeover(tmp_path):
    from worldsample.loop.learning import Learning

    from ..store.helpers import make_episode, new_store

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        for s in (1, 2):
            w.append_episode(make_episode(s, 12, terminal=True))  # a success on the last step
    loop = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1, intervention_penalty=PENALTY,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=64,
                                            bc_pretrain_steps=0, critic_warmup_updates=0))
    learning = Learning(tmp_path, loop, {"proprio": 3}, -np.ones(2, np.float32), np.ones(2, np.float32))
    try:
        real = make_episode(3, 10)
        real["intervention"] = np.zeros(10, bool)
        real["intervention"][[4, 5]] = True  # the human drives steps 4-5: the arm's step 3 handed over
        with store.writer("real") as w:
            w.append_episode(real)
        batches = []
        update = learning.agent.update_many
        learning.agent.update_many = lambda bs: batches.extend(bs) or update(bs)
        learning.learn(8)
        assert batches
        seen = set()
        for b in batches:
            t, ep = b["obs/proprio"][:, 0].astype(int), b["obs/proprio"][:, 1].astype(int)
            success = np.where((ep < 3) & (t == 11), 1.0, 0.0)
            want = success - np.where((ep == 3) & (t == 3), PENALTY, 0.0)
            np.testing.assert_allclose(b["reward"], want, rtol=1e-6)
            seen |= set(zip(ep.tolist(), t.tolist()))
        assert (3, 3) in seen and (3, 4) in seen  # the charged step and a human one were both learnt from
    finally:
        learning.agent.close()
