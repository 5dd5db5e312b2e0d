"""loop.reward=classifier on the image profile: the success classifier is trained on the demos once after
the encoder, saved in RUN/vision/success and loaded (never retrained) on a second start; the learner's
reward is its decision on each step's [latent, proprio] (the cached `success_pred` column), not the
store's `success` column. A tiny real run (real demos, real encoder, real SAC learner, no Ray)."""

import json
import shutil

import numpy as np
import pytest
import torch

from worldsample.loop.config import LoopConfig
from worldsample.store import EpisodeStore


@pytest.fixture(scope="module")
def reward_run(ppl_run):
    """The ppl image run (tests/loop/conftest.py), which learns from the classifier's reward."""
    run, cfg, learning, batches, _, summary = ppl_run
    return run, cfg, learning, batches, summary


def test_classifier_reward_without_vision_is_refused():
    with pytest.raises(ValueError, match="only loop.vision.enabled"):
        LoopConfig(reward="classifier")
    assert LoopConfig(reward="success").reward == "success"  # the state path is unchanged


def test_the_rewards_are_the_classifiers_decisions(reward_run):
    run, cfg, learning, seen, summary = reward_run
    clf = learning.success_classifier
    assert clf is not None and learning.algorithm.reward_key == "success_pred"
    assert summary.updates > 0 and seen
    for batch in seen:
        _, decision = clf.predict(batch["obs/latent"], batch["obs/proprio"])
        np.testing.assert_array_equal(batch["reward"], decision.astype(np.float32))
    # every cached step of demo and real: success_pred is the classifier on that step's [latent, proprio],
    # beside the store's `success` column, which stays as recorded (operator labels applied)
    for reader in (learning.demo.reader, learning.online.reader):
        c = reader.cache
        assert c.size > 0 and "success" in c.data
        _, decision = clf.predict(c.view("latent"), c.view("proprio"))
        np.testing.assert_array_equal(c.view("success_pred"), decision)


def test_the_classifier_reads_a_stored_latent(reward_run, tmp_path):
    """A group that stores `latent` (the world model's `synthetic`): success_pred from the stored latent."""
    from worldsample.loop.vision import LatentReader

    run, cfg, learning, _, _ = reward_run
    clf, encoder = learning.success_classifier, learning.encoder
    src = learning.demo.reader
    schema = EpisodeStore(run).schema("demo")
    keys = {k: v for k, v in schema.model_dump()["keys"].items() if not k.startswith("image_")}
    keys["latent"] = {**keys["proprio"], "shape": [encoder.config.latent_dim], "dtype": "float32"}
    obs_keys = [k for k in schema.obs_keys if k in keys] + ["latent"]
    new_schema = type(schema).model_validate({**schema.model_dump(), "keys": keys, "obs_keys": obs_keys})
    store = EpisodeStore(tmp_path / "syn", create=True)
    store.ensure_group("synthetic", new_schema)
    rng = np.random.default_rng(0)
    with store.writer("synthetic") as w:
        for e in src.cache.episode_ids[:2]:
            ep = src.episode(e, keys=[k for k in keys])
            ep["latent"] = (ep["latent"] + rng.normal(size=ep["latent"].shape)).astype(np.float32)
            w.append_episode(ep)
    reader = LatentReader(store, "synthetic", encoder, ["latent", "proprio"], classifier=clf)
    assert not reader.encodes and "success_pred" in reader.keys
    c = reader.cache
    _, decision = clf.predict(c.view("latent"), c.view("proprio"))
    np.testing.assert_array_equal(c.view("success_pred"), decision)


def test_precision_recall_are_logged_and_the_classifier_is_saved(reward_run):
    run, _, learning, _, _ = reward_run
    d = run / "vision" / "success"
    assert (d / "success.json").is_file() and (d / "success.safetensors").is_file()
    saved = json.loads((d / "success.json").read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    pre = [r for r in rows if "vision/success_threshold" in json.dumps(r)]
    assert pre, "no metrics row carries the success classifier's metrics"
    flat = json.dumps(pre[0])
    test = saved["metrics"]["test"]
    for k in ("precision", "recall"):
        if test[k] is not None:
            assert f"vision/success_{k}" in flat


def test_a_second_start_loads_the_classifier_and_refuses_another_encoder(reward_run, tmp_path):
    from worldsample.loop.vision import encoder_dir, ensure_success_classifier, success_dir
    from worldsample.vision import load_encoder

    run, cfg, learning, _, _ = reward_run
    copy = tmp_path / "run"
    shutil.copytree(encoder_dir(run), encoder_dir(copy))
    shutil.copytree(success_dir(run), success_dir(copy))
    before = (success_dir(copy) / "success.safetensors").read_bytes()
    encoder = load_encoder(encoder_dir(copy))
    clf, metrics = ensure_success_classifier(copy, cfg.loop, encoder)  # no demos in `copy`: training would fail
    assert metrics == {} and (success_dir(copy) / "success.safetensors").read_bytes() == before
    z = learning.demo.reader.cache.view("latent")[:20]
    p = learning.demo.reader.cache.view("proprio")[:20]
    np.testing.assert_array_equal(clf.predict(z, p)[0], learning.success_classifier.predict(z, p)[0])
    with torch.no_grad():
        next(encoder.parameters()).add_(0.01)
    with pytest.raises(Exception, match="trained on another encoder"):
        ensure_success_classifier(copy, cfg.loop, encoder)
