"""The `synthetic` group the synthesiser writes is a bounded pool: oldest world model first."""

import torch

from tests.synth.helpers import HIGH, LOW, imaginer, state_store
from worldsample.store import Retention
from worldsample.store.verify import verify_store
from worldsample.synth import SynthConfig
from worldsample.synth.synthesiser import Synthesiser

# no filter and no predicted success: every branch is written with horizon + 1 = 6 steps
UNFILTERED = {"horizon": 5, "context": 2, "max_uncertainty": None, "bounds_margin": 5.0, "success_threshold": 0.999}


def test_synthetic_pool_drops_the_oldest_world_model_version_first(tmp_path):
    torch.set_num_threads(1)
    store = state_store(tmp_path)
    cfg = SynthConfig(**UNFILTERED, pool_max_steps=60)
    old = Synthesiser(store, imaginer(0.05, seed=1), cfg, LOW, HIGH).generate(8, wm_version=1)
    assert old.steps == 48  # 8 branches of 6 steps, all kept: under the bound
    new = Synthesiser(store, imaginer(0.05, seed=2), cfg, LOW, HIGH).generate(8, wm_version=2)
    assert new.steps == 48
    recs = store.reader("synthetic").episode_records()
    assert sum(r.length for r in recs) <= 60
    assert sorted(r.wm_version for r in recs) == [1, 1] + [2] * 8  # every new episode kept, old ones dropped
    assert [r.episode for r in recs if r.wm_version == 1] == [6, 7]  # the oldest ids of that version went first
    assert verify_store(tmp_path).ok


def test_a_configured_bound_applies_to_a_synthetic_group_created_without_one(tmp_path):
    torch.set_num_threads(1)
    store = state_store(tmp_path)
    unbounded = SynthConfig(**UNFILTERED, pool_max_steps=None)
    Synthesiser(store, imaginer(0.05), unbounded, LOW, HIGH).generate(8, wm_version=1)
    assert store.reader("synthetic").retention == Retention()
    bounded = unbounded.model_copy(update={"pool_max_steps": 12})
    Synthesiser(store, imaginer(0.05), bounded, LOW, HIGH).generate(1, wm_version=2)
    recs = store.reader("synthetic").episode_records()
    assert [r.wm_version for r in recs] == [1, 2] and sum(r.length for r in recs) == 12
    assert verify_store(tmp_path).ok
