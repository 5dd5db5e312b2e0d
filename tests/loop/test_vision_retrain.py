"""loop.vision.success_retrain_every_episodes: the success classifier (loop.reward=classifier) learns
again from demo + real as real episodes come in: the robot's own success and the operator's marks
(the readers apply them), and every cached step's reward is derived again from the new classifier.
A tiny real run (real demos, encoder, SAC learner; `ppl.mode: off`, no Ray)."""

import json

import numpy as np
import pytest

from worldsample.errors import ConfigError
from worldsample.loop.loop import Loop, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.store import EpisodeStore

from .test_vision_synthesis import CLASSIFIER, _config

RETRAIN = [*CLASSIFIER, "loop.real_steps=140", "loop.vision.success_retrain_every_episodes=1"]


@pytest.fixture(scope="module")
def retrain_run(tmp_path_factory):
    from worldsample.demos import collect_demos

    run = tmp_path_factory.mktemp("image_retrain_run")
    cfg = _config(*RETRAIN)
    collect_demos(run, cfg, cfg.demos.episodes)
    parts = build_parts(run, cfg, EpisodeStore(run))
    learning = parts.learner.obj
    first = learning.success_classifier
    Loop(run, cfg.loop, parts, schedule_for(cfg.loop)).run()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return run, cfg, learning, first, rows


def test_retraining_needs_the_classifier_reward():
    with pytest.raises(ConfigError, match="success_retrain_every_episodes retrains the classifier"):
        _config("loop.vision.success_retrain_every_episodes=2")  # reward: success, as the image profile ships


def test_the_classifier_learns_again_from_the_real_episodes(retrain_run):
    run, cfg, learning, first, rows = retrain_run
    demos = cfg.demos.episodes
    real = EpisodeStore(run).reader("real", cache=False).num_episodes
    assert real >= 2
    trained = [r for r in rows if "vision/success_retrains" in r]
    assert trained, "the classifier was never trained again"
    # each retraining used the demos and the real episodes there were: more than the demos alone
    assert all(r["vision/success_episodes"] > demos for r in trained)
    assert trained[-1]["vision/success_episodes"] <= demos + real
    assert learning.success_classifier is not first
    # the saved classifier is the one in use (what a resumed run loads)
    from worldsample.loop.vision import success_dir
    from worldsample.vision.success import load_success_classifier

    saved = load_success_classifier(success_dir(run))
    z = learning.demo.reader.cache.view("latent")
    p = learning.demo.reader.cache.view("proprio")
    np.testing.assert_array_equal(saved.predict(z, p)[0], learning.success_classifier.predict(z, p)[0])


def test_every_cached_reward_is_the_newest_classifiers_decision(retrain_run):
    _, _, learning, first, _ = retrain_run
    clf = learning.success_classifier
    changed = 0
    for reader in (learning.demo.reader, learning.online.reader):
        c = reader.cache
        assert c.size > 0
        _, now = clf.predict(c.view("latent"), c.view("proprio"))
        np.testing.assert_array_equal(c.view("success_pred"), now)
        changed += int((first.predict(c.view("latent"), c.view("proprio"))[1] != now).sum())
    assert changed > 0, "the new classifier decides every cached step as the first did: the test shows nothing"


def test_the_operators_marks_are_learned_from(retrain_run):
    """With success_labelled_only (a robot that reports no success), only the real episodes an operator
    labelled are learned from, with the operator's verdict as the target."""
    from worldsample.loop.vision import train_success

    run, cfg, learning, _, _ = retrain_run
    store = EpisodeStore(run)
    assert learning.online.reader.num_episodes >= 2
    store.labels("real").append(0, True, source="test")
    clf, m = train_success(run, cfg.loop, learning.encoder, ["demo", "real"], labelled_only=("real",))
    assert m["vision/success_episodes"] == cfg.demos.episodes + 1 and m["vision/success_labelled"] == 1
    # the label is the target: the labelled episode's last step counts as a success step
    from worldsample.vision.success import load_success_data

    data = load_success_data(run, learning.encoder, ["real"], labelled_only=("real",))
    assert len(data.episodes) == 1 and data.target.sum() == 1 and data.target[-1]


def test_a_sampler_built_before_retraining_sees_the_new_rewards(retrain_run):
    """Derived rewards (the intervention penalty's, Monte-Carlo returns) are cached per cache version:
    deriving `success_pred` again must count as a change, or those samplers keep the old classifier's."""
    from worldsample.loop.vision import use_classifier
    from worldsample.store import GroupSampler

    _, _, learning, first, _ = retrain_run
    reader, newest = learning.demo.reader, learning.success_classifier  # where the two classifiers differ
    s = GroupSampler(reader, obs_keys=["proprio"], reward_key="success_pred", intervention_penalty=0.5,
                     returns_to_go=True)
    rng = np.random.default_rng(0)
    s.nstep(rng, 8, 1, 0.9)  # builds the derived rewards with the newest classifier
    try:
        use_classifier([reader], first)
        _, want = first.predict(reader.cache.view("latent"), reader.cache.view("proprio"))
        rewards = s._idx().reward("success_pred")
        human = reader.cache.view("intervention").astype(bool)
        steps = ~np.r_[human[1:] & ~human[:-1], False]  # steps no takeover follows keep their decision
        assert (want != newest.predict(reader.cache.view("latent"), reader.cache.view("proprio"))[1]).any()
        np.testing.assert_array_equal(rewards[steps], want[steps].astype(np.float32))
    finally:
        use_classifier([reader], newest)
