"""The success head on a rare but learnable event: success when a state crosses a line (about 2% of
steps, once per episode). Uniform windows with an unweighted loss leave the head below 0.5 at true
successes; oversampled terminal windows and a threshold calibrated on held-out episodes find them."""

import json

import numpy as np
import pytest

from worldsample.loop.world_model import head_metrics
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.world_model import checkpoint
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.data import WindowSource, is_heldout
from worldsample.world_model.evaluate import evaluate_vectors
from worldsample.world_model.heads import best_threshold
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.modes import train_run
from worldsample.world_model.train import cache_keys

HOLDOUT = 3
LINE = 1.0


def episode(rng: np.random.Generator, max_len: int = 80) -> dict[str, np.ndarray]:
    """A drifting random walk; the transition that takes it past LINE is the success and ends the episode."""
    pos = rng.uniform(0.0, 0.4)
    obs, acts, success = [], [], []
    for _ in range(max_len):
        a = np.array([rng.uniform(-0.7, 1.0), rng.uniform(-1, 1)], np.float32)
        obs.append(np.array([pos, 0.1 * rng.normal(), 0, 0], np.float32))
        acts.append(a)
        pos += 0.1 * a[0]
        success.append(pos >= LINE)
        if success[-1]:
            break
    done = np.zeros(len(acts), bool)
    done[-1] = True
    return {"proprio": np.stack(obs), "action": np.stack(acts), "reward": np.array(success, np.float32),
            "done": done, "success": np.array(success)}


def make_run(path, episodes: int = 75, seed: int = 0) -> list[dict[str, np.ndarray]]:
    store = EpisodeStore(path, create=True)
    obs = {"proprio": KeySpec(dtype="float32", shape=(4,), finite=True)}
    store.ensure_group("demo", GroupSchema.build(obs, action_dim=2, chunk_len=16))
    rng = np.random.default_rng(seed)
    eps = [episode(rng) for _ in range(episodes)]
    with store.writer("demo") as w:
        for e in eps:
            w.append_episode(e, domain="real")
    return eps


def config(**heads) -> WorldModelConfig:
    return WorldModelConfig.model_validate({
        "image_keys": [], "vector_keys": {"proprio": 4}, "action_dim": 2,
        "autoencoder": {"vector_latent_dim": 4, "vector_grid": 2},
        "dynamics": {"history": 2, "width": 16, "blocks": 1, "cond_dim": 32},
        # heads weighted up so that a few hundred steps suffice; the same budget for both arms
        "train": {"batch": 32, "ae_steps": 100, "dyn_steps": 300, "ae_lr": 3e-3, "dyn_lr": 2e-3,
                  "head_weight": 0.5, "holdout_every": HOLDOUT},
        "heads": heads,
    })


def heldout_labels(model, eps) -> tuple[np.ndarray, np.ndarray]:
    """The Imaginer's success label and the truth for every transition of the held-out episodes
    that has a full history (real context, the real action)."""
    ctx, past, act, truth = [], [], [], []
    for i, e in enumerate(eps):
        if is_heldout(i, HOLDOUT):
            for t in range(1, len(e["action"])):
                ctx.append(e["proprio"][t - 1 : t + 1])
                past.append(e["action"][t - 1 : t])
                act.append(e["action"][t : t + 1])
                truth.append(e["success"][t])
    out = Imaginer(model).rollout({"proprio": np.stack(ctx)}, np.stack(act), context_actions=np.stack(past),
                                  decode=False)
    return out.success_label[:, 0], np.array(truth)


def precision_recall(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    tp = (pred & truth).sum()
    return tp / max(pred.sum(), 1), tp / truth.sum()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("rare")
    eps = make_run(path)
    steps = np.concatenate([e["success"] for e in eps])
    assert 0.01 < steps.mean() < 0.03  # rare, as on the robot
    return path, eps


def test_uniform_unweighted_heads_miss_success(run, tmp_path):
    path, eps = run
    model, _ = train_run(path, config(positive_share=0.0, calibrate=False), "demo", out_dir=tmp_path)
    pred, truth = heldout_labels(model, eps)
    assert truth.sum() >= 15
    assert precision_recall(pred, truth)[1] < 0.3


def test_oversampled_calibrated_heads_find_success(run, tmp_path):
    path, eps = run
    model, ckpt = train_run(path, config(), "demo", out_dir=tmp_path)
    pred, truth = heldout_labels(model, eps)
    precision, recall = precision_recall(pred, truth)
    assert recall >= 0.7 and precision >= 0.5, (precision, recall)

    # the threshold travels in the checkpoint and the reloaded model labels the same way
    meta = json.loads(ckpt.read_text())["meta"]
    threshold = meta["heads"]["success"]["threshold"]
    assert threshold != 0.5 and meta["heads"]["success"]["calibrated"]
    loaded, _ = checkpoint.load(tmp_path)
    assert loaded.cfg.heads.success_threshold == threshold
    assert (heldout_labels(loaded, eps)[0] == pred).all()

    # the evaluation report and the loop's metrics carry the same scores
    src = WindowSource(EpisodeStore(path), {"demo": 1.0}, cache_keys(model.cfg), HOLDOUT, split="heldout")
    rep = evaluate_vectors(loaded, src, horizons=[1])["heads"]["success"]
    assert rep["positives"] == truth.sum() and rep["recall"] == pytest.approx(recall)
    assert rep["precision"] == pytest.approx(precision)
    metrics = head_metrics(meta)
    assert metrics["wm/success_recall"] == pytest.approx(recall)
    assert metrics["wm/success_threshold"] == threshold and "wm/done_precision" in metrics


def test_best_threshold():
    prob = np.array([0.9, 0.8, 0.3, 0.2, 0.1, 0.05])
    label = np.array([True, False, True, False, False, False])
    assert best_threshold(prob, label) == pytest.approx(0.25)  # F1 0.8 with both positives
    assert best_threshold(prob, label, min_precision=1.0) == pytest.approx(0.85)
    assert best_threshold(prob, np.zeros(6, bool)) is None
