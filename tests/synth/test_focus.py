"""Success focus: a share of branch points from the steps just before (and at) a real success, so
counterfactual actions near the goal feed the success pool; the rest stay uniform."""

import numpy as np
import pytest
import torch

from tests.synth.helpers import ACTION_DIM, HIGH, LOW, imaginer
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.synth import SynthConfig
from worldsample.synth.synthesiser import Synthesiser

H, LENGTH = 5, 20
UNFILTERED = {"horizon": H, "context": 2, "max_uncertainty": None, "bounds_margin": 5.0, "success_threshold": 0.999}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _store(path):
    """Episodes 0, 2, 4 succeed at their last step; 1, 3, 5 time out."""
    store = EpisodeStore(path, create=True)
    schema = GroupSchema.build({"state": KeySpec(dtype="float32", shape=(3,), finite=True)}, ACTION_DIM, chunk_len=8)
    store.ensure_group("real", schema)
    rng = np.random.default_rng(0)
    with store.writer("real") as w:
        for e in range(6):
            success = np.zeros(LENGTH, bool)
            success[-1] = e % 2 == 0
            w.append_episode(
                {"state": rng.uniform(0, 1, (LENGTH, 3)).astype(np.float32),
                 "action": rng.uniform(-0.5, 0.5, (LENGTH, ACTION_DIM)).astype(np.float32),
                 "reward": success.astype(np.float32), "done": success.copy(), "success": success},
                domain="real",
            )
    return store


def _branches(tmp_path, focus):
    store = _store(tmp_path)
    synth = Synthesiser(store, imaginer(0.01), SynthConfig(**UNFILTERED, success_focus=focus), LOW, HIGH)
    st = synth.generate(48, wm_version=1)
    r = store.reader("synthetic")
    return store, st, r, r.episode_records()


def test_focused_branches_start_within_a_horizon_of_a_success(tmp_path):
    store, st, r, recs = _branches(tmp_path, focus=1.0)
    assert st.written == st.branches == 48
    real = store.reader("real")
    for rec in recs:
        assert rec.source.episode % 2 == 0, "only successful episodes are focused on"
        assert LENGTH - 1 - H <= rec.source.step <= LENGTH - 1
    # past the episode's end the segment holds the last real action, perturbed
    past = [rec for rec in recs if rec.source.step + rec.length > LENGTH]
    assert past
    for rec in past:
        last = real.episode(rec.source.episode, keys=["action"])["action"][-1]
        acts = r.episode(rec.episode, keys=["action"])["action"][LENGTH - rec.source.step:]
        assert np.all(np.abs(acts - last) <= 0.2 * np.abs(last) + 4 * 0.05 + 1e-6)


def test_without_focus_every_branch_has_a_whole_real_segment(tmp_path):
    _, st, _, recs = _branches(tmp_path, focus=0.0)
    steps = [rec.source.step for rec in recs]
    assert st.written == 48 and max(steps) <= LENGTH - H - 1
    assert {rec.source.episode % 2 for rec in recs} == {0, 1}


def test_a_partial_focus_mixes_both(tmp_path):
    _, _, _, recs = _branches(tmp_path, focus=0.5)
    late = sum(rec.source.step > LENGTH - H - 1 for rec in recs)  # only focus reaches these steps
    assert 0 < late < len(recs)
