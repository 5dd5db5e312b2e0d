"""The image profile with a world model (loop.ppl.mode naive / ppl): the world model is a vector model
over {latent, proprio} trained on the run's frozen-encoder latents, the synthesiser branches off real
states in that space and writes `latent` + `proprio` episodes into `synthetic`, and the learner reads
them as stored. What is checked: no synthetic episode holds the task state or frames, the learner's
ppl batches hold synthetic rows and never `state`, and the world model's keys exclude `state`."""

from pathlib import Path

import numpy as np
import pytest

from worldsample.config import load_config
from worldsample.errors import ConfigError
from worldsample.store import EpisodeStore

from .test_vision_loop import TINY

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "configs" / "bench" / "image.yaml"
LATENT_DIM = 8
TINY_WM = [
    "loop.real_steps=50",
    "loop.eval_episodes=0",  # evaluation on the image profile: test_vision_loop.py
    "loop.wm_every_episodes=1",
    "loop.synth_every_episodes=1",
    "loop.synth_branches=6",
    "loop.wm_eval_horizons=[1]",
    "loop.world_model.train.ae_steps=5",
    "loop.world_model.train.dyn_steps=5",
    "loop.world_model.train.batch=8",
    "loop.world_model.train.holdout_every=2",
    "loop.world_model.autoencoder.vector_latent_dim=4",
    "loop.world_model.dynamics.width=8",
    "loop.world_model.dynamics.blocks=1",
    "loop.world_model.dynamics.cond_dim=8",
    "loop.world_model.dynamics.ensemble=2",  # the uncertainty veto runs (vetting)
    "loop.synth.horizon=3",
    "loop.synth.batch=3",
    "loop.synth.ratio=10",
    "loop.synth.max_uncertainty=1000000",  # an untrained model's disagreement is large: vet, but let it pass
    "loop.synth.bounds_margin=5",
    "loop.ppl.rho_max=0.9",  # ppl's pacing then puts synthetic rows in the batches from the start
    "loop.ppl.kappa=0.01",
    "loop.ppl.q_probe=8",
]


# the same run also learns from the success classifier's reward (test_vision_reward.py reads it):
# 4 demos long enough to succeed (the classifier's train / calibration / test split), one-step rows
CLASSIFIER = [
    "demos.episodes=4",
    "env.max_episode_steps=70",
    "loop.reward=classifier",
    "loop.learner.n_step=1",  # a batch row's reward is then its own step's reward
    "loop.vision.success_steps=60",
]


def _config(*extra):
    return load_config(IMAGE, [*TINY, *TINY_WM, *extra])


def test_the_world_models_keys_on_the_image_profile_exclude_the_state():
    for mode in ("off", "naive", "ppl"):
        wm = _config(f"loop.ppl.mode={mode}").loop.world_model
        assert list(wm.vector_keys) == ["latent", "proprio"] and wm.vector_keys["latent"] == LATENT_DIM, mode
        assert wm.image_keys == []
    # the state profile keeps its state model
    state = load_config(ROOT / "configs" / "bench" / "state.yaml").loop.world_model
    assert "state" in state.vector_keys


@pytest.mark.parametrize(
    "override, message",
    [
        ("loop.world_model.image_keys=[image_corner4]", "name cameras"),
        ("loop.recommend=true", "loop.recommend=false"),
    ],
)
def test_a_world_model_on_frames_or_imagined_scoring_is_refused_on_the_image_profile(override, message):
    with pytest.raises(ConfigError, match=message):
        _config("loop.ppl.mode=ppl", override)


def test_the_world_model_is_trained_on_latent_and_proprio(ppl_run):
    from worldsample.paths import RunFiles
    from worldsample.world_model import checkpoint

    run, cfg, _, _, rows, summary = ppl_run
    model, _ = checkpoint.load(RunFiles.of(run).world_model)
    proprio = int(np.prod(EpisodeStore(run).schema("demo").keys["proprio"].shape))
    assert model.cfg.vector_keys == {"latent": LATENT_DIM, "proprio": proprio} and model.cfg.image_keys == []
    assert summary.wm_versions >= 2  # first from the demos, then continual rounds
    # the held-out fidelity is measured in the latent space, with the copy-last baseline
    assert {"rmse_latent", "rmse_copy_latent", "rmse_proprio"} <= set(summary.wm_eval["horizons"]["1"])


def test_synthetic_episodes_hold_latent_and_proprio_only(ppl_run):
    run, cfg, learning, _, rows, _ = ppl_run
    store = EpisodeStore(run)
    assert "synthetic" in store.groups
    keys = set(store.schema("synthetic").keys)
    assert {"latent", "proprio"} <= keys
    assert "state" not in keys and not any(k.startswith("image_") for k in keys), keys
    reader = store.reader("synthetic", cache=False)
    assert reader.num_episodes > 0
    for rec in reader.episode_records():
        ep = reader.episode(rec.episode)
        assert ep["latent"].shape == (rec.length, LATENT_DIM) and np.isfinite(ep["latent"]).all()
        assert rec.source is not None and rec.source.group in ("real", "demo")
    # the first step of a branch is the real state it branched from, in the learner's latent space
    rec = reader.episode_records()[0]
    first = reader.episode(rec.episode, keys=["latent", "proprio"])
    src = learning._reader(rec.source.group)
    real = src.episode(rec.source.episode, keys=["latent", "proprio"])
    np.testing.assert_allclose(first["latent"][0], real["latent"][rec.source.step], atol=1e-5)
    np.testing.assert_allclose(first["proprio"][0], real["proprio"][rec.source.step], atol=1e-6)
    # the filters ran: the synthesiser vetted (an ensemble) and counted its drops
    synth_rows = [r for r in rows if "synth/written" in r]
    # retention (pool_max_steps 5000) keeps every episode at these sizes
    assert synth_rows and sum(r["synth/written"] for r in synth_rows) == reader.num_episodes
    assert all(r["synth/unvetted"] == 0 for r in synth_rows)
    assert all(f"synth/dropped_{k}" in synth_rows[0] for k in ("out_of_bounds", "uncertain", "non_finite"))
    assert all("synth/truncated_uncertain" in r for r in synth_rows)
    # every world-model round measured the veto's calibrated cuts on held-out episodes
    wm_rows = [r for r in rows if "wm/version" in r]
    assert wm_rows and all(r["wm/uncertainty_cut_first"] > 0 for r in wm_rows)


def test_ppl_batches_hold_synthetic_rows_and_never_the_state(ppl_run):
    _, _, learning, batches, _, _ = ppl_run
    assert learning._synthetic_reader is not None
    cache = learning._synthetic_reader.cache
    assert "latent" in cache.data and "state" not in cache.data
    assert not any(k.startswith("image_") for k in cache.data)
    assert batches, "the learner got no batch"
    synthetic = weighted = 0
    for b in batches:
        assert not any("state" in k or "image_" in k for k in b), sorted(b)
        assert b["obs/latent"].shape[1] == LATENT_DIM
        syn = np.char.startswith(b["source"].astype(str), "synthetic")
        synthetic += int(syn.sum())
        weighted += int((syn & (b["weights"] > 0)).sum())
    assert synthetic > 0, "no synthetic row reached the learner"
    # and the learner trains on them: ppl's Q-bound selection zeroes some weights, not all of them
    assert weighted > 0, f"all {synthetic} synthetic rows had weight 0"


def test_a_latent_reader_reads_a_stored_latent_and_refuses_another_size(ppl_run):
    from worldsample.loop.vision import LatentReader
    from worldsample.vision import VisionError

    run, _, learning, _, _, _ = ppl_run
    store = EpisodeStore(run)
    reader = LatentReader(store, "synthetic", learning.encoder, ["latent", "proprio"])
    plain = store.reader("synthetic", keys=["latent", "proprio"])
    np.testing.assert_array_equal(reader.cache.view("latent"), plain.cache.view("latent"))
    other = learning.encoder.__class__(learning.encoder.config.model_copy(update={"latent_dim": LATENT_DIM + 1}))
    with pytest.raises(VisionError, match="stores latent as"):
        LatentReader(store, "synthetic", other, ["latent", "proprio"])
