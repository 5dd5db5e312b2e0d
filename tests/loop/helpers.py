"""A tiny state-profile learner on a store of two successful demonstrations, for tests that look at
the batches the loop hands the learner."""

from __future__ import annotations

import numpy as np

from worldsample.learner import LearnerConfig
from worldsample.loop.config import LoopConfig

from ..store.helpers import make_episode, new_store


def tiny_learning(tmp_path, learner: dict, **loop):
    """(store, Learning): demos 1 and 2 (12 steps, a success on the last) and an empty `real` group;
    `learner` and `loop` override the tiny defaults. Close `learning.agent` when done."""
    from worldsample.loop.learning import Learning

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        for s in (1, 2):
            w.append_episode(make_episode(s, 12, terminal=True))
    tiny = {"obs_keys": ["proprio"], "hidden": [16, 16], "batch_size": 16, "bc_pretrain_steps": 0,
            "critic_warmup_updates": 0}
    cfg = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1, learner=LearnerConfig(**tiny | learner),
                     **loop)
    return store, Learning(tmp_path, cfg, {"proprio": 3}, -np.ones(2, np.float32), np.ones(2, np.float32))


def record_batches(learning) -> list[dict[str, np.ndarray]]:
    """The list every batch the learner updates on is appended to from now on."""
    batches: list[dict[str, np.ndarray]] = []
    update = learning.agent.update_many
    learning.agent.update_many = lambda bs, report=True: batches.extend(bs) or update(bs, report)
    return batches
