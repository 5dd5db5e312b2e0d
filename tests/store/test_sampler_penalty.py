"""RLIF's intervention penalty (GroupSampler(intervention_penalty=c)): the policy's last step before
each takeover earns c less, and no other step does, in one-step, n-step and Monte-Carlo returns."""

import numpy as np
import pytest

from worldsample.store import GroupSampler

from .helpers import make_episode, new_store

GAMMA = 0.9
C = 0.5


def _episode(seed: int, length: int, human: list[int], terminal: bool = False) -> dict[str, np.ndarray]:
    ep = make_episode(seed, length, terminal=terminal)
    ep["intervention"] = np.zeros(length, bool)
    ep["intervention"][human] = True
    return ep


@pytest.fixture
def stored(tmp_path):
    store = new_store(tmp_path, group="real")
    # episode 0: the human takes over at steps 3 and 8 (policy steps 2 and 7 hand over), and the
    # policy drives its last step, which hands over to nobody although episode 1 starts with the human
    eps = [_episode(0, 10, [3, 4, 8]), _episode(1, 6, [0, 1], terminal=True)]
    with store.writer("real") as w:
        for e in eps:
            w.append_episode(e)
    return store, eps


CHARGED = {(0, 2): C, (0, 7): C}  # (episode, step) -> the penalty


def test_only_the_step_before_each_takeover_is_charged(stored):
    store, eps = stored
    s = GroupSampler(store.reader("real"), reward_key="reward", intervention_penalty=C)
    b = s.transitions(np.random.default_rng(0), 500)
    ep, t = b["obs/proprio"][:, 1].astype(int), b["obs/proprio"][:, 0].astype(int)
    charged = CHARGED
    want = np.array([eps[e]["reward"][i] - charged.get((e, i), 0.0) for e, i in zip(ep, t)], np.float32)
    np.testing.assert_allclose(b["reward"], want, rtol=1e-6)
    assert {(0, 2), (0, 7)} <= set(zip(ep.tolist(), t.tolist()))
    # without the penalty the stored reward comes back untouched
    plain = GroupSampler(store.reader("real"), reward_key="reward").transitions(np.random.default_rng(0), 500)
    np.testing.assert_array_equal(plain["reward"], np.array([eps[e]["reward"][i] for e, i in zip(ep, t)]))


def test_n_step_and_monte_carlo_returns_carry_the_charge(stored):
    store, eps = stored
    charged = CHARGED
    s = GroupSampler(store.reader("real"), reward_key="success", intervention_penalty=C, returns_to_go=True)
    b = s.nstep(np.random.default_rng(1), 600, 3, GAMMA)
    for i in range(600):
        e, t, m = int(b["obs/proprio"][i, 1]), int(b["obs/proprio"][i, 0]), int(b["n_step"][i])
        r = [float(eps[e]["success"][k]) - charged.get((e, k), 0.0) for k in range(len(eps[e]["success"]))]
        assert b["reward"][i] == pytest.approx(sum(GAMMA**j * r[t + j] for j in range(m)), abs=1e-6)
        assert b["mc_return"][i] == pytest.approx(sum(GAMMA**j * r[t + j] for j in range(len(r) - t)), abs=1e-6)
    assert (b["reward"] < 0).any()


def test_a_negative_penalty_is_refused(stored):
    store, _ = stored
    with pytest.raises(ValueError, match="intervention_penalty"):
        GroupSampler(store.reader("real"), intervention_penalty=-1.0)
