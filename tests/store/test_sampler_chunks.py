"""Action chunks (learner.action_chunk, Q-chunking): a sampled transition carries the k actions
played from its step, the backup spans those k steps, and no chunk runs past a truncated end."""

import numpy as np
import pytest

from worldsample.store import GroupSampler

from .helpers import make_episode, new_store

K, GAMMA = 3, 0.9


@pytest.fixture()
def stored(tmp_path):
    store = new_store(tmp_path)
    eps = [make_episode(0, 7, terminal=True), make_episode(1, 6)]  # one terminated, one truncated
    eps[1]["intervention"] = np.array([0, 1, 1, 1, 0, 0], bool)
    with store.writer("demo") as w:
        for e in eps:
            w.append_episode(e)
    return store, eps


def test_each_transition_carries_the_chunk_played_from_it(stored):
    store, eps = stored
    s = GroupSampler(store.reader("demo"), action_chunk=K, reward_key="success")
    b = s.nstep(np.random.default_rng(0), 400, K, GAMMA)
    assert b["action"].shape == (400, K * 2)
    seen = set()
    for i in range(400):
        ep, t = int(b["obs/proprio"][i, 1]), int(b["obs/proprio"][i, 0])
        e, n = eps[ep], len(eps[ep]["action"])
        seen.add((ep, t))
        rows = np.minimum(np.arange(t, t + K), n - 1)  # past a terminal end: its last action again
        np.testing.assert_array_equal(b["action"][i], e["action"][rows].reshape(-1))
        m = min(K, n - t)
        assert b["n_step"][i] == m
        ret = sum(GAMMA**j * e["success"][t + j] for j in range(m))
        assert b["reward"][i] == pytest.approx(ret)
        assert b["done"][i] == (ep == 0 and t + m == n)
        assert b["chunk_human"][i] == bool(e.get("intervention", np.zeros(n, bool))[t : t + m].all())
        if ep == 1:  # truncated: the state after the chunk is in the episode, so its bootstrap is real
            assert int(b["next_obs/proprio"][i, 0]) == t + K
    # every step of the terminated episode; of the truncated one only those with K steps and a state after
    assert seen == {(0, t) for t in range(7)} | {(1, t) for t in range(6 - K)}
    assert b["chunk_human"][(b["obs/proprio"][:, 1] == 1) & (b["obs/proprio"][:, 0] == 1)].all()


def test_a_chunk_sampler_backs_up_over_its_chunk(stored):
    store, _ = stored
    s = GroupSampler(store.reader("demo"), action_chunk=K)
    with pytest.raises(ValueError, match="n must be 3, got 1"):
        s.nstep(np.random.default_rng(0), 4, 1, GAMMA)
    with pytest.raises(ValueError, match="action_chunk must be >= 1"):
        GroupSampler(store.reader("demo"), action_chunk=0)
    one = GroupSampler(store.reader("demo")).nstep(np.random.default_rng(0), 8, 2, GAMMA)
    assert one["action"].shape == (8, 2) and "chunk_human" not in one  # one action per step, as before
