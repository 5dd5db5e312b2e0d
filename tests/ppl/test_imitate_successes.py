"""`loop.imitate_successes`: the episodes the policy won without a human join the imitated half of
each batch, and the learner's behaviour-cloning mask covers them."""

from types import SimpleNamespace

import numpy as np

from worldsample.learner.algorithm import SACAlgorithm
from worldsample.learner.config import LearnerConfig
from worldsample.loop.config import LoopConfig
from worldsample.loop.learning import won_alone
from worldsample.ppl import PPLConfig
from worldsample.ppl.mixer import make_mixer
from worldsample.store import GroupSampler

from ..store.helpers import make_episode, new_store


def _seed(batch) -> np.ndarray:
    return batch["obs/proprio"][:, 1]  # make_episode writes its seed there: it names the episode


def _store(tmp_path):
    """demo: 30 transitions; real: a win alone (seed 7, 10 transitions), a win with one human step (seed 8),
    a failure (seed 9, 13 steps)."""
    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        w.append_episode(make_episode(3, 31))
    helped = np.zeros(8, bool)
    helped[2] = True
    with store.writer("real") as w:
        w.append_episode(make_episode(7, 10, terminal=True))
        w.append_episode({**make_episode(8, 8, terminal=True), "intervention": helped})
        w.append_episode(make_episode(9, 13))
    return store


def test_only_the_wins_without_a_human_are_imitated(tmp_path):
    store = _store(tmp_path)
    real = store.reader("real")
    wins = GroupSampler(real, where=won_alone(real))
    assert wins.num_transitions == 10
    b = wins.transitions(np.random.default_rng(0), 64)
    assert (_seed(b) == 7).all()

    # the operator's verdict decides: a win labelled a failure leaves the pool, a failure labelled a win joins it
    store.labels("real").append(0, False, source="test")
    store.labels("real").append(2, True, source="test")
    real.refresh()
    assert wins.num_transitions == 13  # labelled a win, its last step is terminal: all 13 steps are transitions
    assert set(np.unique(_seed(wins.transitions(np.random.default_rng(1), 64)))) == {9}


def test_wins_share_the_demo_half_by_size_and_get_the_bc_term(tmp_path):
    store = _store(tmp_path)
    real = store.reader("real")
    mixer = make_mixer(PPLConfig(mode="off"), GroupSampler(store.reader("demo")), GroupSampler(real),
                       GroupSampler(real, step_key="intervention"), successes=GroupSampler(real, where=won_alone(real)))
    b = mixer.sample(np.random.default_rng(0), 82)
    # demo half 41 split 30 : 1 : 10 by size (demo, the one human step, the win alone); online keeps 41
    assert (mixer.last["batch/demo"], mixer.last["batch/intervention"], mixer.last["batch/success"],
            mixer.last["batch/online"]) == (30, 1, 10, 41)
    assert (_seed(b)[b["source"] == "success"] == 7).all()

    algo = SACAlgorithm(SimpleNamespace(cfg=LearnerConfig()))
    mask = algo.prepare(b)["bc_mask"]
    np.testing.assert_array_equal(mask, np.isin(b["source"], ["demo", "intervention", "success"]))
    assert mask[b["source"] == "success"].all() and not mask[b["source"] == "online"].any()


def test_off_by_default_and_the_mixer_then_has_no_success_pool(tmp_path):
    assert LoopConfig().imitate_successes is False
    store = _store(tmp_path)
    real = store.reader("real")
    mixer = make_mixer(PPLConfig(mode="off"), GroupSampler(store.reader("demo")), GroupSampler(real),
                       GroupSampler(real, step_key="intervention"))
    mixer.sample(np.random.default_rng(0), 82)
    assert mixer.last["batch/success"] == 0 and "success" not in mixer.real.samplers
