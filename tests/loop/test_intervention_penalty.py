"""loop.intervention_penalty (RLIF) in the loop: the learner's batches charge the arm's last step before
each takeover, in the online and intervention pools alike, and nothing in the demonstrations."""

from __future__ import annotations

import numpy as np

from ..store.helpers import make_episode
from .helpers import record_batches, tiny_learning

PENALTY = 0.7


def test_the_loops_batches_charge_the_step_before_each_takeover(tmp_path):
    store, learning = tiny_learning(tmp_path, {"batch_size": 64}, intervention_penalty=PENALTY)
    try:
        real = make_episode(3, 10)
        real["intervention"] = np.zeros(10, bool)
        real["intervention"][[4, 5]] = True  # the human drives steps 4-5: the arm's step 3 handed over
        with store.writer("real") as w:
            w.append_episode(real)
        batches = record_batches(learning)
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
