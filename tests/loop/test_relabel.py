"""Hindsight goal relabelling (loop/relabel.py, loop.relabel_goals): which rows get a new goal, where the
goal comes from, the reward, end and backup recomputed for it, and the loop's batches carrying it."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from worldsample.learner import LearnerConfig
from worldsample.loop.config import LoopConfig
from worldsample.loop.relabel import relabel_goals
from worldsample.sim.layout import GOAL, OBJECT
from worldsample.store import GroupSchema, KeySpec
from worldsample.store.cache import StepCache

GAMMA = 0.9
RADIUS = 0.05
GOAL_AT = 5.0  # the real goal, far from every object position below: no stored step is a success


def _episode(episode: int, length: int) -> np.ndarray:
    """(length, 39) states: the object moves 0.1 along x each step from x = 0; dim 0 holds the
    episode and dim 1 the step, so a test can tell which stored step a value came from."""
    s = np.zeros((length, 39), np.float32)
    s[:, 0], s[:, 1] = episode, np.arange(length)
    s[:, OBJECT.start] = 0.1 * np.arange(length)
    s[:, GOAL] = GOAL_AT
    return s


def _cache(lengths=(8, 6)) -> StepCache:
    c = StepCache({"state": ((39,), np.dtype(np.float32))})
    for i, n in enumerate(lengths):
        c.add(i, {"state": _episode(i, n)}, terminal=False)
    return c


def _batch(cache: StepCache, rows: np.ndarray, source: list[str], n: int) -> dict[str, np.ndarray]:
    """Rows as the sampler gives them on a truncated episode: n steps summed where they exist."""
    state = cache.view("state")
    ends = np.repeat(cache.ep_start + cache.ep_len, cache.ep_len)[rows]
    m = np.minimum(n, ends - 1 - rows)
    return {"obs/state": state[rows].copy(), "next_obs/state": state[rows + m].copy(),
            "reward": np.zeros(len(rows), np.float32), "done": np.zeros(len(rows), bool),
            "n_step": m.astype(np.int64), "discount": (GAMMA ** m).astype(np.float32),
            "index": rows, "source": np.array(source)}


def test_only_online_rows_get_a_goal_from_a_later_step_of_their_own_episode():
    c = _cache()
    rows = np.array([0, 3, 6, 8, 10] * 40)
    sources = ["online", "online", "online", "demo", "intervention"] * 40
    b, metrics = relabel_goals(_batch(c, rows, sources, 1), c, ["state"], np.random.default_rng(0), 1.0, RADIUS, 1,
                               GAMMA)
    online = b["source"] == "online"
    assert (b["obs/state"][~online, GOAL] == GOAL_AT).all()  # demos and the human's steps keep their goals
    goal_x = b["obs/state"][online, GOAL.start]
    assert not (goal_x == GOAL_AT).any()
    np.testing.assert_array_equal(b["next_obs/state"][online, GOAL], b["obs/state"][online, GOAL])
    t = b["obs/state"][online, 1]  # episode 0 is 8 steps: a goal from steps t + 1 .. 7
    later = np.round(goal_x / 0.1)
    assert ((later > t) & (later <= 7)).all()
    assert set(later[t == 0].tolist()) == set(range(1, 8))  # uniformly over every later step
    assert metrics["relabel/share"] == pytest.approx(0.6)


def test_share_zero_and_the_last_step_are_left_alone():
    c = _cache()
    b = _batch(c, np.array([1, 2, 3]), ["online"] * 3, 1)
    same, metrics = relabel_goals({k: v.copy() for k, v in b.items()}, c, ["state"], np.random.default_rng(0), 0.0,
                                  RADIUS, 1, GAMMA)
    for k in b:
        np.testing.assert_array_equal(same[k], b[k])
    last = {**b, "index": np.array([7, 7, 13])}  # the last stored step of each episode: no later one
    out, metrics = relabel_goals({k: v.copy() for k, v in last.items()}, c, ["state"], np.random.default_rng(0), 1.0,
                                 RADIUS, 1, GAMMA)
    assert metrics == {"relabel/share": 0.0, "relabel/won": 0.0}
    assert (out["obs/state"][:, GOAL] == GOAL_AT).all()


@pytest.mark.parametrize("n", [1, 3])
def test_reward_end_and_backup_follow_the_new_goal(n):
    """The object moves 0.1 a step, so a goal taken from step f is reached first at step f: within the
    backup (f - t <= n) the row ends there with reward gamma^(f - t - 1); otherwise it sums its n steps
    (fewer near the episode's end), earns nothing and goes on."""
    c = _cache()
    rows = np.arange(0, 7).repeat(30)  # every step of episode 0 but its last
    b, _ = relabel_goals(_batch(c, rows, ["online"] * len(rows), n), c, ["state"], np.random.default_rng(1), 1.0,
                         RADIUS, n, GAMMA)
    t = rows
    f = np.round(b["obs/state"][:, GOAL.start] / 0.1).astype(int)
    won = f - t <= n
    assert won.any() and (~won).any()
    np.testing.assert_array_equal(b["done"], won)
    steps = np.where(won, f - t, np.minimum(n, 7 - t))
    np.testing.assert_array_equal(b["n_step"], steps)
    np.testing.assert_allclose(b["reward"], np.where(won, GAMMA ** (steps - 1.0), 0.0), rtol=1e-6)
    np.testing.assert_allclose(b["discount"], GAMMA ** steps, rtol=1e-6)
    np.testing.assert_array_equal(b["next_obs/state"][:, 1], t + steps)  # the state the backup reaches
    np.testing.assert_array_equal(b["next_obs/state"][:, GOAL.start], b["obs/state"][:, GOAL.start])


def test_moved_only_takes_goals_the_row_has_not_reached_already():
    """Episode 0's object rests for 4 steps, then moves 0.1 a step; episode 1's never moves. With
    moved_only a row's goal comes only from a step where the object is more than the radius from where it
    is at the row's own step; a row with no such step keeps its goal."""
    c = StepCache({"state": ((39,), np.dtype(np.float32))})
    moving = _episode(0, 8)
    moving[:, OBJECT.start] = 0.1 * np.maximum(np.arange(8) - 3, 0)
    still = _episode(1, 6)
    still[:, OBJECT.start] = 0.0
    c.add(0, {"state": moving}, terminal=False)
    c.add(1, {"state": still}, terminal=False)
    rows = np.array([0, 5, 9] * 60)
    b, metrics = relabel_goals(_batch(c, rows, ["online"] * len(rows), 1), c, ["state"], np.random.default_rng(2),
                               1.0, RADIUS, 1, GAMMA, moved_only=True)
    goal_x = b["obs/state"][:, GOAL.start]
    assert (goal_x[rows == 9] == GOAL_AT).all()  # the still object: no goal it has not reached
    assert set(np.round(goal_x[rows == 0] / 0.1 + 3).astype(int).tolist()) == {4, 5, 6, 7}
    assert set(np.round(goal_x[rows == 5] / 0.1 + 3).astype(int).tolist()) == {6, 7}
    assert metrics["relabel/share"] == pytest.approx(2 / 3)
    assert 0 < metrics["relabel/won"] < 1  # won only from t = 5 with the goal of step 6
    np.testing.assert_array_equal(b["done"], (rows == 5) & (goal_x == np.float32(0.3)))


def test_the_config_needs_the_state_and_the_sparse_reward():
    LoopConfig(relabel_goals=0.5)  # the state profile
    for bad in ({"reward": "task"}, {"learner": {"obs_keys": ["proprio"]}},
                {"learner": {"cql_calibrated": True, "cql_weight": 1.0}}, {"intervention_penalty": 0.5}):
        with pytest.raises(ValidationError, match="relabel_goals"):
            LoopConfig(relabel_goals=0.5, **bad)
    with pytest.raises(ValidationError):
        LoopConfig(relabel_goals=1.5)


def test_the_loops_batches_carry_the_relabelled_goals(tmp_path):
    """Learning with relabel_goals: every online row's goal in the learner's batches is an object position of
    its episode (the demos keep theirs), and the metrics say how many were relabelled."""
    from worldsample.loop.learning import Learning
    from worldsample.store import EpisodeStore

    from .helpers import record_batches

    store = EpisodeStore(tmp_path, create=True)
    schema = GroupSchema.build({"state": KeySpec(dtype="float32", shape=(39,), finite=True)}, action_dim=4,
                               chunk_len=4)
    for group in ("demo", "real"):
        store.ensure_group(group, schema)

    def episode(i: int, n: int, success: bool) -> dict[str, np.ndarray]:
        done = np.zeros(n, bool)
        done[-1] = success
        return {"state": _episode(i, n), "action": np.zeros((n, 4), np.float32), "reward": np.zeros(n, np.float32),
                "done": done, "success": done.copy()}

    with store.writer("demo") as w:
        w.append_episode(episode(0, 12, True))
    with store.writer("real") as w:
        w.append_episode(episode(1, 10, False))
    tiny = {"hidden": [16, 16], "batch_size": 32, "bc_pretrain_steps": 0, "critic_warmup_updates": 0}
    cfg = LoopConfig(robot="sim", ppl={"mode": "off"}, min_real_for_learning=1, relabel_goals=1.0,
                     learner=LearnerConfig(**tiny))
    learning = Learning(tmp_path, cfg, {"state": 39}, -np.ones(4, np.float32), np.ones(4, np.float32))
    try:
        batches = record_batches(learning)
        stats = learning.learn(4)
        assert batches
        for b in batches:
            online = b["source"] == "online"
            assert online.any() and (~online).any()
            assert (b["obs/state"][~online, GOAL] == GOAL_AT).all()
            goal = b["obs/state"][online, GOAL.start]
            assert ((goal > b["obs/state"][online, 1] * 0.1) & (goal <= 0.9 + 1e-6)).all()
        assert 0 < stats["relabel/share"] < 1 and stats["relabel/won"] > 0
    finally:
        learning.agent.close()
