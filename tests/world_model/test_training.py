"""Training on the toy world: losses fall, the model beats copy-last-frame, modes compose."""

import numpy as np
import pytest

from tests.world_model.helpers import tiny_config, toy_store
from worldsample.store import EpisodeStore
from worldsample.world_model import checkpoint
from worldsample.world_model.data import WindowSource
from worldsample.world_model.errors import NotEnoughDataError
from worldsample.world_model.evaluate import evaluate
from worldsample.world_model.modes import train_run
from worldsample.world_model.train import cache_keys


@pytest.fixture(scope="module")
def trained(toy_run, tmp_path_factory):
    cfg = tiny_config("regression", ae_steps=150, dyn_steps=150)
    losses = []
    model, path = train_run(
        toy_run,
        cfg,
        "demo",
        on_step=lambda s, i, loss: losses.append((s, loss)),
        out_dir=tmp_path_factory.mktemp("ckpt"),
    )
    return model, path, losses


def test_losses_fall(trained):
    _, _, losses = trained
    for stage in ("autoencoder", "dynamics"):
        v = np.array([loss for s, loss in losses if s == stage])
        assert len(v) == 150 and v[-25:].mean() < 0.5 * v[:25].mean(), stage


def test_beats_copy_last_frame_on_held_out_episodes(trained, toy_run):
    model, _, _ = trained
    src = WindowSource(
        EpisodeStore(toy_run), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every, split="heldout"
    )
    assert src.groups["demo"].episodes() == [4, 9, 14]
    rep = evaluate(model, src, horizons=[1, 3], per_episode=8)
    for h in ("1", "3"):  # odd horizons: the square is never where it was
        r = rep["horizons"][h]
        assert r["psnr"] > r["copy_psnr"] + 1.0, rep["horizons"]
        assert r["ssim"] > r["copy_ssim"], rep["horizons"]
    assert len(rep["curve"]["psnr"]) == 3


def test_held_out_episodes_never_train(toy_run):
    src = WindowSource(EpisodeStore(toy_run), {"demo": 1.0}, cache_keys(tiny_config()), 5)
    rows = np.concatenate([rows for _, rows in src.sample(np.random.default_rng(0), 512, 3).parts])
    c = src.groups["demo"].cache
    episode_of_row = np.repeat(c.episode_ids, c.ep_len)
    assert not set(episode_of_row[rows.ravel()]) & {4, 9, 14}


def test_loop_continues_from_the_checkpoint_and_sees_new_rollouts(tmp_path):
    toy_store(tmp_path, episodes=5, length=16)
    cfg = tiny_config("regression", ae_steps=5, dyn_steps=5)
    _, first = train_run(tmp_path, cfg, "demo")
    toy_store(tmp_path, episodes=4, length=16, seed=3, group="real")  # rollouts arrive
    seen = []
    _, last = train_run(tmp_path, cfg, "loop", rounds=2, on_round=lambda r, p: seen.append(p))
    assert [p.relative_to(tmp_path).as_posix() for p in seen] == [
        "world_model/v000002/model.json",
        "world_model/v000003/model.json",
    ] and last == seen[-1]
    _, doc = checkpoint.load(last)
    assert doc["meta"]["mode"] == "loop" and doc["meta"]["episodes"] == {"demo": 4, "real": 4}


def test_cotrain_mixes_the_sim_group_with_its_domain(tmp_path):
    toy_store(tmp_path, episodes=4, length=16)
    toy_store(tmp_path, episodes=4, length=16, seed=5, group="sim")
    cfg = tiny_config("drift", ae_steps=3, dyn_steps=3)
    cfg.train.sim_weight = 0.25
    _, path = train_run(tmp_path, cfg, "cotrain")
    _, doc = checkpoint.load(path)
    assert doc["meta"]["groups"] == {"demo": 0.75, "sim": 0.25}
    src = WindowSource(EpisodeStore(tmp_path), doc["meta"]["groups"], cache_keys(cfg), 5)
    w = src.sample(np.random.default_rng(0), 8, 3)
    assert sorted(w.domains().tolist()) == [0] * 6 + [1] * 2


def test_missing_groups_and_short_episodes_are_clear_errors(tmp_path):
    toy_store(tmp_path, episodes=2, length=4)
    with pytest.raises(NotEnoughDataError, match="sim"):
        train_run(tmp_path, tiny_config(ae_steps=1, dyn_steps=1), "cotrain")
    with pytest.raises(NotEnoughDataError, match="length >= "):
        train_run(
            tmp_path,
            tiny_config(ae_steps=1, dyn_steps=1).model_copy(
                update={"dynamics": tiny_config().dynamics.model_copy(update={"history": 8})}
            ),
            "demo",
        )


def test_state_only_model_is_scored_by_vector_error(toy_run, tmp_path):
    from worldsample.world_model.evaluate import evaluate_vectors

    cfg = tiny_config("regression", ae_steps=150, dyn_steps=200)
    cfg.image_keys, cfg.vector_keys = [], {"proprio": 4}
    model, _ = train_run(toy_run, cfg, "demo", out_dir=tmp_path)
    src = WindowSource(
        EpisodeStore(toy_run), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every, split="heldout"
    )
    with pytest.raises(NotEnoughDataError, match="image"):
        evaluate(model, src, horizons=[1])
    rep = evaluate_vectors(model, src, horizons=[1, 3], per_episode=8)
    r = rep["horizons"]["1"]
    assert set(r) == {"rmse_proprio", "rmse_copy_proprio", "rmse_velocity_proprio"} and np.isfinite(rep["reward_mae"])
    assert r["rmse_proprio"] < r["rmse_copy_proprio"], rep["horizons"]


def test_a_fresh_model_is_the_same_for_the_same_config_whatever_the_process_rng(toy_run, tmp_path):
    # imports (Ray, RLlib) reseed torch's global generator from the OS: a fresh model must not depend on it
    import torch

    cfg = tiny_config(ae_steps=2, dyn_steps=2)
    weights = []
    for i in range(2):
        torch.manual_seed(1000 + i)  # a different global state before each run
        model, _ = train_run(toy_run, cfg, "demo", out_dir=tmp_path / str(i))
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
