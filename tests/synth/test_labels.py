"""The synthesiser labels success (and the end of a branch) with the world model's own calibrated
thresholds unless a fixed one is configured."""

import torch

from tests.synth.helpers import HIGH, LOW, imaginer, state_store
from worldsample.synth import SynthConfig
from worldsample.synth.synthesiser import Synthesiser

BASE = {"horizon": 5, "context": 2, "max_uncertainty": None, "bounds_margin": 5.0}


def branches(tmp_path, success: float, done: float, **cfg):
    torch.set_num_threads(1)
    store = state_store(tmp_path)
    im = imaginer(0.05)
    im.model.cfg.heads.success_threshold, im.model.cfg.heads.done_threshold = success, done
    Synthesiser(store, im, SynthConfig(**BASE, **cfg), LOW, HIGH).generate(6, wm_version=1)
    return store.reader("synthetic").episode_records()


def test_the_calibrated_success_threshold_labels_the_branches(tmp_path):
    # a threshold below any head output: every branch succeeds at its first imagined step
    recs = branches(tmp_path, success=1e-6, done=1 - 1e-6)
    assert recs and all(r.success and r.length == 1 for r in recs)


def test_a_predicted_done_ends_the_branch_as_a_failure(tmp_path):
    recs = branches(tmp_path, success=1 - 1e-6, done=1e-6)
    assert recs and all(not r.success and r.length == 1 for r in recs)


def test_a_configured_threshold_overrides_the_models(tmp_path):
    recs = branches(tmp_path, success=1e-6, done=1e-6, success_threshold=0.999)
    assert recs and all(not r.success and r.length == 6 for r in recs)
