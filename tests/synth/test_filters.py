"""The synthesiser's filters with a real (untrained) world model: observed-range bounds with a
margin, the uncertainty veto on by default (cut per step, calibrated), and a count per reason."""

import logging

import numpy as np
import pytest
import torch

from tests.synth.helpers import HIGH, LOW, imaginer, state_store
from worldsample.synth import SynthConfig
from worldsample.synth.bounds import ObservedRange, outside
from worldsample.synth.synthesiser import Synthesiser


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the suite shares two cores


def _written_states(store):
    r = store.reader("synthetic")
    return [r.episode(rec.episode, keys=["state"])["state"] for rec in r.episode_records()]


def _run(tmp_path, spread, ensemble=1, **cfg):
    store = state_store(tmp_path)
    synth = Synthesiser(store, imaginer(spread, ensemble), SynthConfig(horizon=5, context=2, **cfg), LOW, HIGH)
    return store, synth, synth.generate(32, wm_version=1)


def test_observed_range_is_per_dimension_widened_by_the_margin_of_the_key_range():
    rng = ObservedRange(["state"])
    eps = {0: np.array([[0.0, 1.0], [2.0, 1.5]]), 1: np.array([[1.0, 1.2], [1.5, 1.0]])}
    rng.update([0, 1], lambda e: {"state": eps[e]})
    lo, hi = rng.limits(0.25)["state"]  # key range 2.0 -> slack 0.5
    np.testing.assert_allclose(lo, [-0.5, 0.5])
    np.testing.assert_allclose(hi, [2.5, 2.0])
    lim = rng.limits(0.25)
    assert not outside({"state": np.array([[2.5, 0.5]])}, lim)
    assert outside({"state": np.array([[2.51, 1.0]])}, lim)
    assert outside({"state": np.array([[1.0, 0.49]])}, lim)
    rng.update([1], lambda e: pytest.fail("episode 1 is read once"))  # episode 0 leaves the window
    np.testing.assert_allclose(rng.limits(0.0)["state"][0], [1.0, 1.0])


def test_a_branch_leaving_the_observed_range_is_dropped_and_counted(tmp_path):
    store, synth, st = _run(tmp_path, spread=0.2, max_uncertainty=None)
    # every value is far below the old fixed bound of 100, yet branches leave the data's range
    assert st.dropped["out_of_bounds"] > 0 and st.written > 0
    assert st.written + st.dropped["out_of_bounds"] == st.branches
    lo, hi = synth.limits["state"]
    np.testing.assert_allclose(lo, [-0.1, lo[1], 0.4], rtol=1e-5)  # data [0, 1] x [0, 0.2] x 0.5, range 1
    np.testing.assert_allclose(hi, [1.1, hi[1], 0.6], rtol=1e-5)
    for s in _written_states(store):
        assert (s >= lo).all() and (s <= hi).all() and np.abs(s).max() < 100


def test_the_margin_is_respected(tmp_path):
    _, _, tight = _run(tmp_path / "tight", spread=0.2, max_uncertainty=None, bounds_margin=0.1)
    store, synth, loose = _run(tmp_path / "loose", spread=0.2, max_uncertainty=None, bounds_margin=5.0)
    assert loose.dropped["out_of_bounds"] < tight.dropped["out_of_bounds"]
    assert loose.written > tight.written
    lo, hi = synth.limits["state"]
    np.testing.assert_allclose([lo[0], hi[0], lo[2], hi[2]], [-5.0, 6.0, -4.5, 5.5], rtol=1e-5)
    for s in _written_states(store):
        assert (s >= lo).all() and (s <= hi).all()


def _vetted(tmp_path, cuts, **cfg):
    """Branches of an ensemble of two whose calibrated cuts are `cuts` (bounds wide open, and the
    untrained success head's labels off: no branch ends early on a success)."""
    store = state_store(tmp_path)
    im = imaginer(0.05, ensemble=2)
    im.model.cfg.uncertainty.thresholds = cuts
    synth = Synthesiser(store, im, SynthConfig(horizon=5, context=2, bounds_margin=5.0, success_threshold=0.999, **cfg),
                        LOW, HIGH)
    return store, synth.generate(32, wm_version=1)


def test_the_calibrated_veto_is_on_by_default_and_cuts_a_branch_before_its_first_uncertain_step(tmp_path):
    assert SynthConfig().max_uncertainty == "calibrated"
    # steps 0 and 1 trusted, step 2 on never: every branch keeps its first two transitions
    store, st = _vetted(tmp_path, [1e9, 1e9, 0.0])
    assert st.written == st.branches == st.truncated == 32 and st.unvetted == 0 and st.dropped["uncertain"] == 0
    r = store.reader("synthetic")
    for rec in r.episode_records():
        ep = r.episode(rec.episode, keys=["state", "done", "success"])
        # obs of steps 0-2: step 2 closes the episode unbootstrapped (not terminal, no success)
        assert rec.length == 3 and not ep["done"].any() and not ep["success"].any()


def test_a_branch_uncertain_at_its_first_step_is_dropped(tmp_path):
    store, st = _vetted(tmp_path, [0.0])  # one cut: it applies at every step
    assert st.dropped["uncertain"] == st.branches == 32 and st.written == 0


def test_cuts_above_every_disagreement_pass_every_branch_whole(tmp_path):
    store, st = _vetted(tmp_path, [1e9])
    assert st.written == 32 and st.truncated == 0 and st.unvetted == 0
    assert {rec.length for rec in store.reader("synthetic").episode_records()} == {6}  # horizon + 1 steps


def test_a_fixed_cut_applies_at_every_step(tmp_path):
    _, _, st = _run(tmp_path / "low", spread=0.05, ensemble=2, bounds_margin=5.0, max_uncertainty=1e-12)
    assert st.dropped["uncertain"] == st.branches
    _, _, off = _run(tmp_path / "off", spread=0.05, ensemble=2, bounds_margin=5.0, max_uncertainty=None)
    assert off.dropped["uncertain"] == 0 and off.written == off.branches and off.unvetted == 0


def test_an_ensemble_without_calibrated_cuts_is_counted_unvetted(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="worldsample.synth.synthesiser"):
        _, synth, st = _run(tmp_path, spread=0.05, ensemble=2, bounds_margin=5.0)
    assert not synth.vetting and "no calibrated cuts" in caplog.text
    assert st.written > 0 and st.unvetted == st.written


def test_a_world_model_without_uncertainty_is_counted_not_silently_passed(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="worldsample.synth.synthesiser"):
        _, synth, st = _run(tmp_path, spread=0.05, bounds_margin=5.0)
    assert not synth.vetting and "gives no uncertainty" in caplog.text
    assert st.written > 0 and st.unvetted == st.written
