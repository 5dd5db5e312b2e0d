"""The success classifier on the frozen encoder's latent: learning, calibration, weighting, labels, checkpoints."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.vision.helpers import SIZE, episode
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.vision import Encoder, EncoderConfig, VisionError, encode_frames
from worldsample.vision.success import (
    CONFIG_FILE,
    TENSORS_FILE,
    SuccessData,
    SuccessTrainConfig,
    best_threshold,
    fit,
    load_success_classifier,
    load_success_data,
    save_success_classifier,
    split_episodes,
    train_success_classifier,
)

FAST = dict(steps=300, batch_size=256, threads=1, use_proprio=False)


def tiny_encoder(latent_dim: int = 8, seed: int = 0) -> Encoder:
    import torch

    torch.manual_seed(seed)
    return Encoder(EncoderConfig(cameras=["corner"], height=SIZE, width=SIZE, latent_dim=latent_dim, channels=[4],
                                 strides=[2])).eval()


def toy(episodes: int, length: int = 50, dim: int = 8, sep: float = 6.0, ring: bool = False, seed: int = 0):
    """Latents of episodes whose last step is the success step (1 in `length`). Linear: success latents
    are shifted by `sep` in two dims. Ring: the first dim of a success latent is +-sep (not linearly separable)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1, (episodes, length, dim)).astype(np.float32)
    if ring:
        z[:, -1, 0] = rng.choice([-1.0, 1.0], episodes) * sep + 0.3 * rng.normal(size=episodes)
    else:
        z[:, -1, :2] += sep
    target = np.zeros((episodes, length), bool)
    target[:, -1] = True
    n = episodes * length
    return SuccessData(z.reshape(n, dim), np.zeros((n, 0), np.float32), target.reshape(n),
                       np.repeat(np.arange(episodes), length))


def test_learns_a_separable_case_on_held_out_episodes():
    data = toy(40, length=40)
    res = train_success_classifier(data, tiny_encoder(), SuccessTrainConfig(**FAST))
    parts = res.splits
    assert not set(parts["train"]) & set(parts["calibration"]) and not set(parts["test"]) & set(
        parts["train"] + parts["calibration"])
    assert len(parts["test"]) == 8 and len(parts["calibration"]) == 8
    t = res.test
    assert t["positives"] == 8 and t["frames"] == 8 * 40
    assert t["precision"] >= 0.85 and t["recall"] >= 0.85, t
    assert res.classifier.config.metrics["test"] == t


def test_threshold_is_calibrated_on_the_calibration_episodes():
    data = toy(40, length=40, sep=2.5, seed=3)  # overlapping: the cut matters
    train, calib, test = split_episodes(data.episodes, [0.6, 0.2, 0.2], seed=1)
    res = train_success_classifier(data, tiny_encoder(), SuccessTrainConfig(**FAST), splits=[train, calib, test])
    clf = res.classifier
    c = data.select(calib)
    want = best_threshold(clf.probability(c.latent), c.target)
    assert clf.threshold == pytest.approx(want) and clf.threshold != 0.5
    tr = data.select(train)  # not the training episodes' best cut
    assert best_threshold(clf.probability(tr.latent), tr.target) != pytest.approx(clf.threshold)
    # a precision target: the best recall at that precision on the calibration episodes
    res9 = train_success_classifier(data, tiny_encoder(), SuccessTrainConfig(**FAST, min_precision=0.9),
                                    splits=[train, calib, test])
    assert res9.calibration["precision"] >= 0.9


def test_positive_weighting_raises_recall_at_a_two_percent_positive_rate():
    data = toy(80, length=50, dim=4, sep=4.0, ring=True)  # 2% of frames are success frames
    splits = split_episodes(data.episodes, [0.5, 0.25, 0.25], seed=0)
    test = data.select(splits[2])
    out = {}
    for pw in ("balanced", 1.0):
        res = train_success_classifier(data, tiny_encoder(4), SuccessTrainConfig(**{**FAST, "hidden": [32]},
                                       pos_weight=pw), splits=splits)
        at_half = float((res.classifier.probability(test.latent)[test.target] > 0.5).mean())
        out[pw] = (res.test["recall"], res.test["f1"] or 0.0, at_half)
    (rw, fw, hw), (ru, fu, hu) = out["balanced"], out[1.0]
    assert rw >= ru + 0.1 and fw > fu, out  # at each one's calibrated threshold
    assert hw >= hu + 0.3, out  # at an uncalibrated 0.5 the unweighted one misses most success frames


def _store(path, recorded_success=(True, True, True, False), length=12):
    obs = {"image_corner": KeySpec(dtype="uint8", shape=(SIZE, SIZE, 3), kind="image", camera="corner"),
           "proprio": KeySpec(dtype="float32", shape=(4,), finite=True)}
    store = EpisodeStore(path, create=True)
    store.ensure_group("demo", GroupSchema.build(obs, action_dim=4, chunk_len=16))
    rng = np.random.default_rng(0)
    with store.writer("demo") as w:
        for ok in recorded_success:
            ep = episode(rng, length)
            done = np.zeros(length, bool)
            done[-1] = ok
            w.append_episode({**ep, "reward": np.zeros(length, np.float32), "done": done, "success": done.copy()})
    return store


def test_operator_labels_set_the_target(tmp_path):
    store = _store(tmp_path)
    enc = tiny_encoder()
    before = load_success_data(tmp_path, enc)
    assert before.groups == ["demo"] and before.labelled == 0 and len(before) == 48
    per_ep = {e: before.target[before.episode == e] for e in before.episodes}
    assert [int(t.sum()) for t in per_ep.values()] == [1, 1, 1, 0] and per_ep[0][-1]
    # the latent is the frozen encoder's output of the stored frames
    frames = store.reader("demo", cache=False).episode(0, keys=["image_corner"])
    np.testing.assert_allclose(before.latent[:12], encode_frames(enc, frames), rtol=1e-6, atol=1e-6)

    store.labels("demo").append(1, False, source="dashboard")  # mark failure
    store.labels("demo").append(3, True, source="dashboard")  # mark success
    after = load_success_data(tmp_path, enc)
    got = {e: after.target[after.episode == e] for e in after.episodes}
    assert after.labelled == 2
    assert not got[1].any()  # the recorded success step is gone
    assert got[3][-1] and got[3].sum() == 1  # the labelled success is the last step, as the readers apply it
    np.testing.assert_array_equal(got[0], per_ep[0])
    np.testing.assert_array_equal(after.latent, before.latent)

    only = load_success_data(tmp_path, enc, labelled_only=["demo"])  # a robot without a success signal
    assert only.episodes == [1, 3]
    with pytest.raises(VisionError, match="image_topview"):
        load_success_data(tmp_path, Encoder(EncoderConfig(cameras=["topview"], height=SIZE, width=SIZE,
                                                          latent_dim=8, channels=[4], strides=[2])))


def test_checkpoint_round_trip_without_pickle(tmp_path):
    _store(tmp_path / "run", recorded_success=(True,) * 6)
    enc = tiny_encoder()
    data = load_success_data(tmp_path / "run", enc)
    assert data.proprio.shape == (72, 4)
    res = train_success_classifier(data, enc, SuccessTrainConfig(steps=20, threads=1, test_share=0.0,
                                                                 calib_share=0.34))
    clf = res.classifier
    d = save_success_classifier(clf, tmp_path / "success")
    assert sorted(p.name for p in d.iterdir()) == [CONFIG_FILE, TENSORS_FILE]
    cfg = json.loads((d / CONFIG_FILE).read_text())
    assert cfg["threshold"] == clf.threshold and cfg["metrics"]["calibration"] == res.calibration
    assert cfg["proprio_dim"] == 4 and cfg["metrics"]["test"] is None
    back = load_success_classifier(d)
    assert back.config == clf.config
    np.testing.assert_array_equal(back.probability(data.latent, data.proprio), clf.probability(data.latent,
                                                                                               data.proprio))
    # frames -> (probability, success) through the encoder it was trained on, and only that one
    frames = store_frames = EpisodeStore(tmp_path / "run").reader("demo", cache=False).episode(0)
    prob, ok = back.score_frames(enc, store_frames)
    want = back.probability(encode_frames(enc, frames), frames["proprio"])
    np.testing.assert_allclose(prob, want, rtol=1e-6)
    np.testing.assert_array_equal(ok, want > back.threshold)
    with pytest.raises(VisionError, match="another encoder"):
        back.score_frames(tiny_encoder(seed=1), frames)
    with pytest.raises(VisionError, match="proprio"):
        back.probability(data.latent)
    # damage: tensors of the wrong shape, a missing file
    tensors = load_file(str(d / TENSORS_FILE))
    tensors["in_mean"] = np.zeros(3, np.float32)
    save_file(tensors, str(d / TENSORS_FILE))
    with pytest.raises(VisionError, match="in_mean"):
        load_success_classifier(d)
    (d / TENSORS_FILE).unlink()
    with pytest.raises(VisionError, match="cannot read"):
        load_success_classifier(d)
    with pytest.raises(VisionError, match="no success classifier"):
        load_success_classifier(tmp_path)


def test_no_success_step_to_learn_from_is_a_clear_error():
    data = toy(5, length=10)
    data.target[:] = False
    with pytest.raises(VisionError, match="no success step"):
        fit(data, SuccessTrainConfig(**FAST), 8, ["corner"], 0, None)
