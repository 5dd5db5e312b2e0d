"""learner.cql_calibrated (Cal-QL) in the loop: every batch the learner gets carries each row's
Monte-Carlo return, from the demos and the arm's episodes alike, and the learner trains on it."""

from __future__ import annotations

import numpy as np

from ..store.helpers import make_episode
from .helpers import record_batches, tiny_learning


def test_the_loops_batches_carry_the_returns_the_calibration_needs(tmp_path):
    store, learning = tiny_learning(tmp_path, {"cql_weight": 1.0, "cql_calibrated": True})
    try:
        with store.writer("real") as w:
            w.append_episode(make_episode(3, 10))  # truncated, never a success: worth 0
        batches = record_batches(learning)
        stats = learning.learn(2)
        assert batches and np.isfinite(stats["cql_gap"])
        gamma = learning.loop.learner.gamma
        for b in batches:
            t, ep = b["obs/proprio"][:, 0].astype(int), b["obs/proprio"][:, 1].astype(int)
            want = np.where(ep == 3, 0.0, gamma ** (11 - t))
            np.testing.assert_allclose(b["mc_return"], want, rtol=1e-5)
            assert {1, 2, 3} >= set(ep.tolist())
        assert any((b["obs/proprio"][:, 1] == 3).any() for b in batches)
    finally:
        learning.agent.close()
