"""Pretraining from a run's store: behaviour cloning (and inverse dynamics) learns from the frames."""

import numpy as np
import pytest

from tests.vision.helpers import toy_store
from worldsample.policy import NumpyActor
from worldsample.vision import VisionError, encode_frames, load_encoder
from worldsample.vision.pretrain import PretrainConfig, bc_loss, load_demos, pretrain, pretrain_from_run

SMALL = dict(latent_dim=16, channels=[16, 16], strides=[2, 2], hidden=[64, 64], batch_size=64, lr=2e-3, shift_pad=2,
             threads=1)


def test_load_demos_reads_whole_episodes(tmp_path):
    toy_store(tmp_path, episodes=4, length=10, cameras=("corner", "topview"))
    data = load_demos(tmp_path, ["corner", "topview"])
    corner = data.images["corner"]
    assert len(data) == 40 and corner.shape == (40, 32, 32, 3) and corner.dtype == np.uint8
    assert data.proprio.shape == (40, 4) and data.action.shape == (40, 4) and data.episodes == [0, 1, 2, 3]
    assert data.has_next.sum() == 36 and not data.has_next[9]  # no pair across an episode boundary
    train, val = data.split(1)
    assert len(train) == 30 and len(val) == 10 and not set(train.episodes) & set(val.episodes)
    with pytest.raises(VisionError, match="image_gripperPOV"):
        load_demos(tmp_path, ["gripperPOV"])


def test_load_demos_joins_groups_and_names_a_missing_sim_group(tmp_path):
    toy_store(tmp_path, episodes=2, length=10)
    with pytest.raises(VisionError, match="'sim' is not in .*demos.sim_episodes"):
        load_demos(tmp_path, ["corner"], groups=["demo", "sim"])
    toy_store(tmp_path, episodes=3, length=10, seed=5, group="sim")
    data = load_demos(tmp_path, ["corner"], groups=["demo", "sim"])
    assert len(data) == 50 and len(data.episodes) == 5  # the sim group's ids 0-2 do not merge with the demos'
    assert len(load_demos(tmp_path, ["corner"])) == 20  # the default is the demos alone


def test_pretrain_reduces_bc_loss_below_the_constant_guess(tmp_path):
    toy_store(tmp_path, episodes=14, length=20, seed=1)
    train, val = load_demos(tmp_path, ["corner"]).split(4)
    constant = float(((val.action - train.action.mean(0)) ** 2).mean())  # the best frame-blind guess
    res = pretrain(train, PretrainConfig(steps=100, eval_every=50, **SMALL), val=val)
    first, last = res.history[0], res.history[-1]
    assert last["step"] == 100 and last["bc"] < 0.2 * first["bc"]
    assert last["val_bc"] < 0.2 * constant, (last, constant)
    assert last["val_bc"] == pytest.approx(bc_loss(res.encoder, res.actor, val), rel=1e-5)
    # the BC actor is in the registry's format: the numpy actor on the encoder's latents acts the same
    cfg, tensors = res.policy()
    actor = NumpyActor(cfg, tensors)
    z = encode_frames(res.encoder, {"image_corner": val.images["corner"][:5]})
    want = [actor.act({"latent": z[i], "proprio": val.proprio[i]}) for i in range(5)]
    import torch

    with torch.no_grad():
        got = res.actor(torch.cat([torch.from_numpy(z), torch.from_numpy(val.proprio[:5])], 1)).numpy()
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-5)


def test_inverse_dynamics_and_saving(tmp_path):
    toy_store(tmp_path, episodes=3, length=8)
    logs = []
    res = pretrain_from_run(tmp_path, ["corner"], tmp_path / "enc", PretrainConfig(steps=3, eval_every=2,
                            inverse_dynamics=0.5, **SMALL), val_episodes=1, on_log=logs.append)
    assert [e["step"] for e in logs] == [1, 2, 3] and all("idm" in e for e in logs) and "val_bc" in logs[-1]
    back = load_encoder(tmp_path / "enc")
    assert back.config == res.encoder.config and back.config.source["pretrain"]["inverse_dynamics"] == 0.5
