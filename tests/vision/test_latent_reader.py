"""The loop's LatentReader: the learner's cache holds the frozen encoder's `latent` of each stored
episode instead of its frames, computed once as the episode is loaded."""

import numpy as np
import pytest
import torch

from worldsample.loop.vision import LatentReader
from worldsample.store import GroupSampler
from worldsample.vision import Encoder, EncoderConfig, VisionError, encode_frames

from .helpers import SIZE, episode, toy_store

KEYS = ["latent", "proprio"]


def _encoder(cameras=("corner",), size=SIZE) -> Encoder:
    torch.manual_seed(0)
    return Encoder(EncoderConfig(cameras=list(cameras), height=size, width=size, latent_dim=6, channels=[4, 4],
                                 strides=[2, 2])).eval()


def test_the_cache_holds_the_encoders_latent_of_every_step_and_no_frames(tmp_path):
    store = toy_store(tmp_path, episodes=3, length=12)
    enc = _encoder()
    reader = LatentReader(store, "demo", enc, KEYS)
    c = reader.cache
    assert "latent" in c.data and not any(k.startswith("image_") for k in c.data)
    plain = store.reader("demo", cache=False)
    want = np.concatenate([encode_frames(enc, plain.episode(e)) for e in range(3)])
    np.testing.assert_allclose(c.view("latent"), want, atol=1e-6)
    # a new commit is encoded on refresh; the old rows are kept as they were
    with store.writer("demo") as w:
        ep = episode(np.random.default_rng(5), 7)
        done = np.zeros(7, bool)
        done[-1] = True
        w.append_episode({**ep, "reward": np.zeros(7, np.float32), "done": done, "success": done.copy()})
    assert reader.refresh() == 1
    np.testing.assert_allclose(reader.cache.view("latent")[: len(want)], want, atol=1e-6)
    np.testing.assert_allclose(reader.cache.view("latent")[len(want) :], encode_frames(enc, ep), atol=1e-6)
    batch = GroupSampler(reader, obs_keys=KEYS, reward_key="success").nstep(np.random.default_rng(0), 16, 1, 0.9)
    assert batch["obs/latent"].shape == (16, 6) and batch["next_obs/latent"].shape == (16, 6)


def test_a_group_without_the_encoders_camera_or_at_another_size_is_refused(tmp_path):
    store = toy_store(tmp_path, episodes=1, length=5)
    with pytest.raises(VisionError, match="has no image_gripperPOV"):
        LatentReader(store, "demo", _encoder(cameras=("gripperPOV",)), KEYS)
    with pytest.raises(VisionError, match=r"holds image_corner as \(32, 32, 3\); the encoder wants \(64, 64, 3\)"):
        LatentReader(store, "demo", _encoder(size=64), KEYS)
