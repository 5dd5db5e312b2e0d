"""Monte-Carlo returns (GroupSampler(returns_to_go=True), Cal-QL's reference value): each sampled
step carries the discounted reward its own episode went on to earn, never counting past its end."""

import numpy as np
import pytest

from worldsample.store import GroupSampler

from .helpers import make_episode, new_store

GAMMA = 0.9


def test_each_step_carries_the_return_its_episode_earned_from_it(tmp_path):
    store = new_store(tmp_path)
    eps = [make_episode(0, 7, terminal=True), make_episode(1, 6), make_episode(2, 5, terminal=True)]
    with store.writer("demo") as w:
        for e in eps:
            w.append_episode(e)
    for key in ("success", "reward"):  # sparse and dense rewards alike
        s = GroupSampler(store.reader("demo"), reward_key=key, returns_to_go=True)
        b = s.nstep(np.random.default_rng(0), 300, 3, GAMMA)
        seen = set()
        for i in range(300):
            ep, t = int(b["obs/proprio"][i, 1]), int(b["obs/proprio"][i, 0])
            r = eps[ep][key].astype(np.float64)
            want = sum(GAMMA**j * r[t + j] for j in range(len(r) - t))
            assert b["mc_return"][i] == pytest.approx(want, rel=1e-5), (key, ep, t)
            seen.add(ep)
        assert seen == {0, 1, 2}
    # the terminated episodes' first steps: the success, 6 and 4 steps on
    s = GroupSampler(store.reader("demo"), reward_key="success", returns_to_go=True)
    b = s.nstep(np.random.default_rng(1), 400, 1, GAMMA)
    first = b["obs/proprio"][:, 0] == 0
    by_ep = {int(e): float(b["mc_return"][first & (b["obs/proprio"][:, 1] == e)][0]) for e in (0, 1, 2)}
    assert by_ep == pytest.approx({0: GAMMA**6, 1: 0.0, 2: GAMMA**4})
    assert "mc_return" not in GroupSampler(store.reader("demo")).nstep(np.random.default_rng(0), 8, 1, GAMMA)


def test_returns_stay_finite_where_gamma_to_the_length_underflows(tmp_path):
    """gamma^t divides a closed form of the sum; past float64's range (0.5^1200) it is summed step by step."""
    store = new_store(tmp_path, chunk_len=256)
    with store.writer("demo") as w:
        w.append_episode(make_episode(0, 1200, terminal=True))
    s = GroupSampler(store.reader("demo"), reward_key="success", returns_to_go=True)
    b = s.nstep(np.random.default_rng(0), 2000, 1, 0.5)
    t = b["obs/proprio"][:, 0].astype(np.int64)
    assert np.isfinite(b["mc_return"]).all() and (t > 1190).any()
    np.testing.assert_allclose(b["mc_return"], (0.5 ** (1199 - t).astype(np.float64)).astype(np.float32), rtol=1e-6)
