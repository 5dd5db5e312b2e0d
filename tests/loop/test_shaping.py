"""Potential-based reward shaping (loop/shaping.py): the per-transition bonus, n-step and terminal
handling, the telescoping that keeps optimal policies, and the config's boundary."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from worldsample.loop.config import LoopConfig
from worldsample.loop.shaping import DistancePotential, shape
from worldsample.sim.layout import GOAL, HAND, OBJECT

GAMMA = 0.97


def _states(hand_x: np.ndarray) -> np.ndarray:
    """Hand on the x axis, object at x 0.3, goal at x 0.5: distance to go = |0.3 - hand| + 0.2."""
    s = np.zeros((len(hand_x), 39), np.float32)
    s[:, HAND.start] = hand_x
    s[:, OBJECT.start] = 0.3
    s[:, GOAL.start] = 0.5
    return s


def _batch(obs, nxt, reward, done, n_step) -> dict[str, np.ndarray]:
    return {"obs/state": obs, "next_obs/state": nxt, "reward": np.asarray(reward, np.float32),
            "done": np.asarray(done, bool), "n_step": np.asarray(n_step, np.int64)}


def test_distance_potential_is_minus_scale_times_distance_to_go():
    phi = DistancePotential(scale=2.0)(_batch(_states(np.array([0.0, 0.3])), None, [0, 0], [0, 0], [1, 1]), "obs/")
    np.testing.assert_allclose(phi, [-2.0 * 0.5, -2.0 * 0.2], atol=1e-6)


def test_bonus_discounts_by_n_step_and_drops_the_next_potential_at_a_terminal():
    obs, nxt = _states(np.array([0.0, 0.0, 0.0])), _states(np.array([0.1, 0.1, 0.1]))
    out = shape(_batch(obs, nxt, [0.0, 0.5, 1.0], [0, 0, 1], [1, 3, 2]), DistancePotential(1.0), GAMMA)
    phi0, phi1 = -0.5, -0.4
    np.testing.assert_allclose(out["reward"], [GAMMA * phi1 - phi0, 0.5 + GAMMA**3 * phi1 - phi0, 1.0 - phi0],
                               atol=1e-6)


def test_shaped_return_telescopes_to_the_sparse_return_minus_the_start_potential():
    """Along any episode that ends in a terminal state, the discounted shaped return is the sparse
    one minus Phi(s_0): the shaping cannot make a different behaviour optimal."""
    rng = np.random.default_rng(0)
    hand = np.concatenate([[0.0], rng.uniform(-0.2, 0.6, 20)])
    T = len(hand) - 1
    reward = np.zeros(T, np.float32)
    reward[-1] = 1.0
    done = np.zeros(T, bool)
    done[-1] = True
    s = _states(hand)
    out = shape(_batch(s[:-1], s[1:], reward, done, np.ones(T)), DistancePotential(3.0), GAMMA)
    disc = GAMMA ** np.arange(T)
    phi0 = DistancePotential(3.0)(_batch(s[:1], None, [0], [0], [1]), "obs/")[0]
    assert float(disc @ out["reward"]) == pytest.approx(float(disc @ reward) - phi0, abs=1e-5)


def test_distance_shaping_rejects_a_state_of_the_wrong_size():
    b = _batch(np.zeros((2, 10), np.float32), np.zeros((2, 10), np.float32), [0, 0], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="39-dim state"):
        shape(b, DistancePotential(1.0), GAMMA)


def test_config_needs_the_state_for_distance_shaping():
    LoopConfig(shaping="distance")  # the state profile's learner sees `state`
    with pytest.raises(ValidationError, match="shaping=distance"):
        LoopConfig(shaping="distance", learner={"obs_keys": ["proprio"]})
    with pytest.raises(ValidationError, match="reward=task"):
        LoopConfig(shaping="progress", reward="task")


def _cache(episodes: list[tuple[np.ndarray, np.ndarray]]):
    from worldsample.store.cache import StepCache

    c = StepCache({"state": ((39,), np.dtype(np.float32)), "success": ((), np.dtype(bool))})
    for i, (hand, success) in enumerate(episodes):
        c.add(i, {"state": _states(hand), "success": success}, terminal=bool(success[-1]))
    return c


def test_steps_to_go_labels_each_step_up_to_the_first_success_only():
    from worldsample.loop.shaping import steps_to_go

    won = np.array([False, False, True, True])  # success at step 2, a step after it
    lost = np.zeros(3, bool)
    obs, to_go = steps_to_go(_cache([(np.zeros(3), lost), (np.array([0.0, 0.1, 0.2, 0.3]), won)]), ["state"])
    np.testing.assert_array_equal(to_go, [3, 2, 1])
    np.testing.assert_allclose(obs[:, HAND.start], [0.0, 0.1, 0.2])


def test_progress_potential_rises_toward_the_goal_and_pays_the_steps_that_make_progress():
    from worldsample.loop.shaping import ProgressPotential

    hand = np.linspace(-0.3, 0.3, 30)  # every episode walks the hand to the object; success at the end
    success = np.zeros(30, bool)
    success[-1] = True
    pot = ProgressPotential(scale=1.0, gamma=0.9, keys=["state"], steps=800)
    before = pot(_batch(_states(hand), None, np.zeros(30), np.zeros(30), np.ones(30)), "obs/")
    assert not before.any()  # nothing fitted yet: no shaping
    import torch

    rng_before = torch.random.get_rng_state()
    metrics = pot.fit([_cache([(hand, success)] * 3)])
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # the learner's own torch RNG is left alone
    assert metrics["shaping/examples"] == 90
    phi = pot(_batch(_states(hand), None, np.zeros(30), np.zeros(30), np.ones(30)), "obs/")
    assert phi[-1] > phi[15] > phi[0]  # closer to the success, higher
    np.testing.assert_allclose(phi, 0.9 ** np.arange(30, 0, -1), atol=0.05)
    toward = shape(_batch(_states(hand[10:11]), _states(hand[11:12]), [0], [0], [1]), pot, 0.9)["reward"][0]
    away = shape(_batch(_states(hand[11:12]), _states(hand[10:11]), [0], [0], [1]), pot, 0.9)["reward"][0]
    assert away < -0.01 and abs(toward) < 0.01  # the TD residual of the demonstrated behaviour


def test_a_run_fits_the_progress_on_its_successes_and_shapes_every_batch_the_learner_gets(tmp_path):
    from worldsample.learner import LearnerConfig
    from worldsample.loop.learning import Learning

    from ..store.helpers import make_episode, new_store

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        for s in (1, 2):
            w.append_episode(make_episode(s, 12, terminal=True))  # success at the last step
    loop = LoopConfig(shaping="progress", shaping_every_episodes=2, min_real_for_learning=1,
                      learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=8, bc_pretrain_steps=0))
    low, high = -np.ones(2, np.float32), np.ones(2, np.float32)
    learning = Learning(tmp_path, loop, {"proprio": 3}, low, high)
    seen, sparse = [], []
    sample = learning.mixer.sample

    def sample_and_keep(*a, **kw):
        b = sample(*a, **kw)
        sparse.append(b["reward"].copy())
        return b

    learning.mixer.sample = sample_and_keep
    learning.algorithm.update = lambda batches: seen.extend(batches) or {}

    assert learning.learn(0)["shaping/examples"] == 24  # fitted on the demos at the first learn step
    with store.writer("real") as w:
        w.append_episode(make_episode(3, 10, terminal=True))
        w.append_episode(make_episode(4, 10))  # no success: no labels
    stats = learning.learn(3)
    assert stats["shaping/examples"] == 34 and len(seen) == 3 * loop.learner.utd
    for b, r in zip(seen, sparse):  # the learner's reward: the sparse success plus the potential's TD step
        phi, phi_next = learning.potential(b, "obs/"), learning.potential(b, "next_obs/")
        bonus = loop.learner.gamma ** b["n_step"] * (1 - b["done"]) * phi_next - phi
        assert np.abs(bonus).max() > 1e-3
        np.testing.assert_allclose(b["reward"], r + bonus, atol=1e-5)
    with store.writer("real") as w:
        w.append_episode(make_episode(5, 10, terminal=True))
    assert "shaping/examples" not in learning.learn(1)  # one new episode: not yet due
