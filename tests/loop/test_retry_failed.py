"""`loop.retry_failed`: the simulated arm starts again from an initial state the policy did not win alone."""

import numpy as np
import pytest

from worldsample.config import load_config
from worldsample.loop.robot import SimCollector
from worldsample.sim.expert import ScriptedExpert
from worldsample.store import EpisodeStore


class _Expert:
    """The scripted expert as the collector's policy: it wins push-v3 alone."""

    def __init__(self, env):
        self.expert = ScriptedExpert(env)

    def act(self, obs, **_):
        return self.expert.act()


class _Still:
    """A policy that never moves: it never wins."""

    def act(self, obs, **_):
        return np.zeros(4, np.float32)


def _cfg(retries: int, interventions: bool = False):
    return load_config(None, [f"loop.retry_failed={retries}", f"loop.interventions={str(interventions).lower()}",
                              "env.max_episode_steps=40", "loop.seed=3"])


def _starts(run_dir) -> list[tuple[int, int]]:
    recs = EpisodeStore(run_dir).reader("real").episode_records()
    return [(r.extra["seed"], r.extra.get("retry", 0)) for r in recs]


def test_a_failed_start_is_tried_again_up_to_the_limit_and_a_resume_goes_on(tmp_path):
    cfg = _cfg(2)
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _Still()
    first = col.episode(10)
    second = col.episode(11)
    col.close()
    assert (first["success"], first["retry"], second["retry"]) == (False, 0, 1)
    # a collector opened again on the run (a resume) reads where the retries stand from the store
    again = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    again.policy = _Still()
    again.episode(12)
    again.episode(13)
    again.close()
    assert _starts(tmp_path) == [(10, 0), (10, 1), (10, 2), (13, 0)]


def test_the_same_start_is_the_same_initial_state(tmp_path):
    cfg = _cfg(1)
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _Still()
    col.episode(7)
    col.episode(8)
    col.close()
    reader = EpisodeStore(tmp_path).reader("real")
    a, b = (reader.episode(e, ["state"])["state"][0] for e in range(2))
    np.testing.assert_array_equal(a, b)


def test_a_start_won_alone_is_not_tried_again(tmp_path):
    cfg = load_config(None, ["loop.retry_failed=2", "loop.interventions=false", "loop.seed=3"])
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _Expert(col.env)
    won = col.episode(4)
    col.episode(5)
    col.close()
    assert won["success"] and won["interventions"] == 0
    assert _starts(tmp_path) == [(4, 0), (5, 0)]


def test_a_start_the_human_finished_is_tried_again(tmp_path):
    """With the human, an episode he stepped into is no win of the policy's: its start comes back."""
    cfg = load_config(None, ["loop.retry_failed=1", "loop.interventions=true", "loop.seed=3"])
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _Still()
    first = col.episode(4)
    col.episode(5)
    col.close()
    assert first["interventions"] > 0
    assert _starts(tmp_path) == [(4, 0), (4, 1)]


def test_off_by_default_and_only_on_the_simulated_arm(tmp_path):
    cfg = _cfg(0)
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _Still()
    ep = col.episode(1)
    col.episode(2)
    col.close()
    assert "retry" not in ep and _starts(tmp_path) == [(1, 0), (2, 0)]
    with pytest.raises(Exception, match="retry_failed"):
        load_config(None, ["loop.retry_failed=1", "loop.robot=bridge"])
    with pytest.raises(Exception, match="retry_failed"):
        load_config(None, ["loop.retry_failed=-1"])
