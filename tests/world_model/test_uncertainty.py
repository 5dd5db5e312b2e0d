"""The uncertainty veto's cuts (world_model/uncertainty.py): measured on held-out real episodes
under their recorded actions, one per imagined step, kept in the checkpoint."""

import numpy as np
import pytest
import torch

from tests.synth.helpers import imaginer, state_store
from worldsample.world_model import checkpoint, uncertainty
from worldsample.world_model.data import WindowSource
from worldsample.world_model.train import cache_keys


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _source(tmp_path, model, episodes=6, length=20):
    store = state_store(tmp_path, episodes=episodes, length=length)
    return WindowSource(store, {"real": 1.0}, cache_keys(model.cfg), holdout_every=2)


def test_the_cuts_are_a_per_step_quantile_of_heldout_disagreement(tmp_path):
    model = imaginer(spread=0.05, ensemble=2).model
    source = _source(tmp_path, model)
    heldout = source.heldout()
    rep = uncertainty.calibrate(model, heldout)
    cuts = np.array(model.cfg.uncertainty.thresholds)
    # 20-step episodes with a history of 2 leave 18 steps: the configured 16 fit
    assert len(cuts) == model.cfg.uncertainty.horizon == 16 and rep["thresholds"] == list(cuts)
    assert (cuts > 0).all()
    # held-out episodes only (ids 1, 3, 5), 3 distinct start points each in a 20-step episode
    assert rep["windows"] == 9
    unc, err = uncertainty.measure(model, heldout, 16, model.cfg.uncertainty.per_episode)
    assert unc.shape == err.shape == (9, 16)
    # the cut at each step is that step's 95 % quantile over the held-out windows
    np.testing.assert_allclose(cuts, np.quantile(unc, 0.95, axis=0), rtol=1e-6)
    assert ((unc <= cuts[None, :] * (1 + 1e-6)).mean(axis=0) >= 8 / 9).all()
    # the report's rank correlation is the one of these windows' mean disagreement and mean error,
    # and on this seeded model and store disagreement does rank the errors (measured: 0.80 over 9 windows)
    assert rep["error_rank_corr"] == pytest.approx(uncertainty.rank_correlation(unc.mean(axis=1), err.mean(axis=1)))
    assert rep["error_rank_corr"] > 0.5


def test_the_horizon_shrinks_to_the_heldout_episodes(tmp_path):
    model = imaginer(spread=0.05, ensemble=2).model
    uncertainty.calibrate(model, _source(tmp_path, model, length=8).heldout())
    assert len(model.cfg.uncertainty.thresholds) == 8 - model.cfg.dynamics.history


def test_a_model_without_disagreement_gets_no_cuts(tmp_path):
    model = imaginer(spread=0.05, ensemble=1).model
    assert uncertainty.calibrate(model, _source(tmp_path, model).heldout()) == {}
    assert model.cfg.uncertainty.thresholds == []


def test_no_heldout_episode_leaves_the_cuts_unset(tmp_path):
    model = imaginer(spread=0.05, ensemble=2).model
    store = state_store(tmp_path, episodes=1)  # episode 0 only: nothing held out at holdout_every 2
    src = WindowSource(store, {"real": 1.0}, cache_keys(model.cfg), holdout_every=2)
    assert uncertainty.calibrate(model, src.heldout()) == {} and model.cfg.uncertainty.thresholds == []


def test_the_cuts_travel_with_the_checkpoint(tmp_path):
    model = imaginer(spread=0.05, ensemble=2).model
    uncertainty.calibrate(model, _source(tmp_path / "store", model).heldout())
    path = checkpoint.save(tmp_path / "wm", model, {})
    loaded, _ = checkpoint.load(path)
    assert loaded.cfg.uncertainty.thresholds == model.cfg.uncertainty.thresholds != []


def test_rank_correlation():
    assert uncertainty.rank_correlation(np.arange(5.0), np.arange(5.0) ** 3) == pytest.approx(1.0)
    assert uncertainty.rank_correlation(np.arange(5.0), -np.arange(5.0)) == pytest.approx(-1.0)
    assert uncertainty.rank_correlation(np.ones(5), np.arange(5.0)) is None
