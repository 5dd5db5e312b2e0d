"""Reward from pixels: a success classifier on the frozen encoder's latent (HIL-SERL's reward classifier).

Target: the store's per-step `success` column as a step-caching reader holds it, the same column the
world model's success head trains on and is calibrated against (world_model/heads.py): true at the
step whose action ended the episode in success (one step per successful episode; the frame is the
observation that action was taken from). Its sources are therefore those of the store: demonstration
outcomes, the robot's success signal recorded by the loop, and the operator's "mark success / mark
failure" (store/labels.py), which the cached readers apply: a failure label clears the episode's
success step, a success label on a recorded failure sets its last step.

Model: an MLP (`hidden=[]`: logistic regression) on [latent, proprio] standardised by the training
data, trained with binary cross-entropy whose positive class is weighted by the negatives-to-positives
ratio (success steps are about 1 in 60), then cut at a threshold calibrated on held-out episodes
(`best_threshold` of the world model's heads: best F1, or the best recall at `min_precision`);
precision and recall are measured on other held-out episodes.

A checkpoint is a directory with `success.json` (SuccessModelConfig: dims, threshold, metrics, and
the encoder it was trained on, by cameras, latent size and a crc32 of its weights) and
`success.safetensors` (float32 tensors); loading validates both and unpickles nothing. The learner's
reward with `loop.reward: classifier` (worldsample/loop/vision.py `ensure_success_classifier`, docs/vision.md);
`SuccessClassifier.score_frames` / `predict` are what a caller uses.

    enc = load_encoder(run / "vision" / "encoder")
    data = load_success_data(run, enc)
    result = train_success_classifier(data, enc, SuccessTrainConfig())
    print(result.test)                 # precision / recall / f1 on held-out frames
    save_success_classifier(result.classifier, run / "vision" / "success")
    prob, ok = result.classifier.score_frames(enc, {"image_corner": frames})
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from worldsample.errors import StoreError
from worldsample.store import EpisodeStore
from worldsample.vision.checkpoint import load_module, save_module
from worldsample.vision.encoder import Encoder, VisionError, encode_frames
from worldsample.world_model.heads import best_threshold, scores

__all__ = [
    "SuccessClassifier", "SuccessData", "SuccessModelConfig", "SuccessResult", "SuccessTrainConfig", "best_threshold",
    "calibrate", "cross_validate", "encoder_fingerprint", "evaluate", "fit", "frame_scores", "load_success_classifier",
    "load_success_data", "save_success_classifier", "split_episodes", "train_success_classifier",
]

log = logging.getLogger(__name__)

SUCCESS_KEY = "success"  # the step column the classifier predicts, as the world model's success head
CONFIG_FILE, TENSORS_FILE = "success.json", "success.safetensors"
DEFAULT_GROUPS = ("demo", "real", "sim")  # not "synthetic": its success flags come from the world model
GROUP_STRIDE = 1 << 32  # episode ids of different groups never collide (as pretrain.load_demos)


def encoder_fingerprint(encoder: Encoder) -> int:
    """crc32 of the encoder's weights (sorted by name): a classifier fits only the encoder it was trained on."""
    crc = 0
    for k, v in sorted(encoder.state_dict().items()):
        crc = zlib.crc32(k.encode(), crc)
        crc = zlib.crc32(np.ascontiguousarray(v.detach().cpu().to(torch.float32).numpy()).data, crc)
    return crc


# -- data ---------------------------------------------------------------------------------------------


@dataclass
class SuccessData:
    """Steps of whole episodes, concatenated: the frozen encoder's latent, proprio, the success target."""

    latent: np.ndarray  # (N, D) float32
    proprio: np.ndarray  # (N, P) float32 (P may be 0)
    target: np.ndarray  # (N,) bool
    episode: np.ndarray  # (N,) int64: group index * 2**32 + the store's episode id
    groups: list[str] = field(default_factory=list)  # group names, by the index in `episode`
    labelled: int = 0  # episodes whose target follows an operator label
    skipped: int = 0  # episodes left out because their frames could not be read (logged)

    def __post_init__(self) -> None:
        n = len(self.target)
        if any(len(a) != n for a in (self.latent, self.proprio, self.episode)):
            raise VisionError("success data arrays hold different numbers of steps")

    def __len__(self) -> int:
        return len(self.target)

    @property
    def episodes(self) -> list[int]:
        return list(dict.fromkeys(self.episode.tolist()))

    def select(self, episodes: Iterable[int]) -> SuccessData:
        keep = np.isin(self.episode, list(episodes))
        return SuccessData(self.latent[keep], self.proprio[keep], self.target[keep], self.episode[keep],
                           list(self.groups), self.labelled, self.skipped)

    def steps_to_success(self) -> np.ndarray:
        """(N,) steps from each step to the next success step of its episode (-1 where none follows)."""
        out = np.full(len(self), -1, np.int64)
        for e in self.episodes:
            idx = np.flatnonzero(self.episode == e)
            nxt = -1
            for i in idx[::-1]:
                if self.target[i]:
                    nxt = i
                out[i] = nxt - i if nxt >= 0 else -1
        return out


def load_success_data(
    run_dir: Path | str,
    encoder: Encoder,
    groups: Sequence[str] | None = None,
    proprio_key: str | None = "proprio",
    labelled_only: Sequence[str] = (),
    max_episodes: int | None = None,
) -> SuccessData:
    """Every committed episode of `groups` (default: those of demo, real, sim the store has) encoded by
    the frozen `encoder`, with the per-step success target as a cached reader holds it (operator labels
    applied). Groups in `labelled_only` contribute only the episodes an operator labelled (for a robot
    without a success signal, whose recorded `success` is always false). Frames are read one episode
    at a time and not kept. VisionError when a group lacks the encoder's cameras or `proprio_key`."""
    store = EpisodeStore(run_dir)
    names = list(groups) if groups is not None else [g for g in DEFAULT_GROUPS if g in store.groups]
    missing = [g for g in names if g not in store.groups]
    if missing or not names:
        raise VisionError(f"the store in {store.root} has no group {missing or list(DEFAULT_GROUPS)}; "
                          f"it has {store.groups or 'none'}")
    img_keys = encoder.config.keys
    lat, pro, tgt, ids = [], [], [], []
    labelled = skipped = 0
    for gi, g in enumerate(names):
        schema = store.schema(g)
        want = img_keys + ([proprio_key] if proprio_key else [])
        absent = [k for k in want if k not in schema.keys]
        if absent:
            raise VisionError(f"group {g!r} of {store.root} has no {absent}; it has {sorted(schema.keys)}")
        # the cache holds the step columns with the labels applied (and proprio); frames are read per episode
        reader = store.reader(g, keys=[proprio_key] if proprio_key else [], cache=True)
        c = reader.cache
        for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len):
            if max_episodes is not None and len(ids) >= max_episodes:
                break
            if g in labelled_only and e not in reader.labels:
                continue
            try:
                frames = reader.episode(e, keys=img_keys)
            except StoreError as err:  # damaged (set aside by the reader) or dropped by retention meanwhile
                skipped += 1
                log.error("success data: group %r episode %d left out: %s", g, e, err)
                continue
            lat.append(encode_frames(encoder, frames))
            pro.append(c.view(proprio_key)[s : s + n].reshape(n, -1).astype(np.float32) if proprio_key
                       else np.zeros((n, 0), np.float32))
            tgt.append(c.view(SUCCESS_KEY)[s : s + n].astype(bool).reshape(n, -1).any(axis=1))
            ids.append(np.full(n, gi * GROUP_STRIDE + int(e), np.int64))
            labelled += int(e in reader.labels)
    if not ids:
        raise VisionError(f"no committed episodes to learn success from in groups {names} of {store.root}")
    return SuccessData(np.concatenate(lat), np.concatenate(pro), np.concatenate(tgt), np.concatenate(ids),
                       names, labelled, skipped)


def split_episodes(episodes: Sequence[int], shares: Sequence[float], seed: int = 0) -> list[list[int]]:
    """Episodes shuffled under `seed` and cut into parts of these shares (the last takes the rest);
    every part but the first gets at least one episode. VisionError when there are too few."""
    eps = list(episodes)
    if len(eps) < len(shares):
        raise VisionError(f"{len(eps)} episode(s) cannot be split into {len(shares)} parts")
    order = np.random.default_rng(seed).permutation(len(eps))
    sizes = [max(1, int(round(s * len(eps)))) for s in shares[1:]]
    first = len(eps) - sum(sizes)
    if first < 1:
        raise VisionError(f"{len(eps)} episode(s) leave none to train on with shares {list(shares)}")
    out, lo = [], 0
    for size in [first, *sizes]:
        out.append(sorted(eps[i] for i in order[lo : lo + size]))
        lo += size
    return out


# -- model ------------------------------------------------------------------------------------------


class SuccessTrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hidden: list[int] = Field(default=[64], max_length=4, description="MLP layers; [] = logistic regression")
    use_proprio: bool = True
    pos_weight: float | Literal["balanced"] = Field(
        "balanced", description="weight of a positive step in the loss; balanced = negatives / positives, 1 = none"
    )
    steps: int = Field(800, ge=1, le=1_000_000)
    batch_size: int = Field(512, ge=1, le=65_536)
    lr: float = Field(3e-3, gt=0.0)
    weight_decay: float = Field(1e-4, ge=0.0)
    min_precision: float | None = Field(
        None, gt=0.0, le=1.0, description="calibrate to the best recall at this precision instead of the best F1"
    )
    calib_share: float = Field(0.2, gt=0.0, lt=1.0, description="episodes held out to set the threshold")
    test_share: float = Field(0.2, ge=0.0, lt=1.0, description="episodes held out to measure it (0 = none)")
    seed: int = 0
    threads: int | None = Field(None, ge=1)


class SuccessModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["worldsample-success"] = "worldsample-success"
    format_version: Literal[1] = 1
    latent_dim: int = Field(gt=0, le=4096)
    proprio_key: str | None = None
    proprio_dim: int = Field(0, ge=0, le=4096)
    hidden: list[int] = Field(default_factory=list, max_length=4)
    threshold: float = Field(0.5, gt=0.0, lt=1.0, description="probability above which a frame is a success")
    encoder_cameras: list[str] = Field(min_length=1)
    encoder_fingerprint: int = Field(ge=0, description="crc32 of the encoder weights it was trained on")
    metrics: dict[str, Any] = Field(default_factory=dict, description="calibration and held-out test scores")
    source: dict[str, Any] = Field(default_factory=dict, description="provenance (run, groups, train config)")

    @property
    def in_dim(self) -> int:
        return self.latent_dim + self.proprio_dim


class SuccessClassifier(nn.Module):
    """P(success at this step) from [latent, proprio]; `threshold` cuts it."""

    def __init__(self, config: SuccessModelConfig):
        super().__init__()
        self.config = config
        layers: list[nn.Module] = []
        d = config.in_dim
        for h in config.hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, 1))
        self.net = nn.Sequential(*layers)
        self.register_buffer("in_mean", torch.zeros(config.in_dim))
        self.register_buffer("in_std", torch.ones(config.in_dim))

    @property
    def threshold(self) -> float:
        return self.config.threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B,) of standardised inputs (B, latent_dim + proprio_dim)."""
        return self.net((x - self.in_mean) / self.in_std).squeeze(-1)

    def _inputs(self, latent: np.ndarray, proprio: np.ndarray | None) -> np.ndarray:
        z = np.asarray(latent, np.float32)
        z = z[None] if z.ndim == 1 else z
        if z.ndim != 2 or z.shape[1] != self.config.latent_dim:
            raise VisionError(f"latent is {z.shape}; the success classifier wants (N, {self.config.latent_dim})")
        if self.config.proprio_dim == 0:
            return z
        if proprio is None:
            raise VisionError(f"the success classifier also reads {self.config.proprio_key!r} "
                              f"({self.config.proprio_dim} values per step)")
        p = np.asarray(proprio, np.float32).reshape(len(z), -1)
        if p.shape[1] != self.config.proprio_dim:
            raise VisionError(f"{self.config.proprio_key} has {p.shape[1]} values per step; "
                              f"the classifier wants {self.config.proprio_dim}")
        return np.concatenate([z, p], axis=1)

    def probability(self, latent: np.ndarray, proprio: np.ndarray | None = None) -> np.ndarray:
        """(N,) float32 success probability of N latents (and proprio); a single (D,) latent gives (1,)."""
        x = self._inputs(latent, proprio)
        if not np.isfinite(x).all():
            raise VisionError("latent/proprio holds NaN or inf")
        was = self.training
        self.eval()
        try:
            with torch.no_grad():
                return torch.sigmoid(self(torch.from_numpy(x))).numpy().astype(np.float32)
        finally:
            self.train(was)

    def predict(self, latent: np.ndarray, proprio: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(probability, probability > threshold) of each step."""
        p = self.probability(latent, proprio)
        return p, p > self.threshold

    def score_frames(self, encoder: Encoder, frames: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(probability, success) of N frames per camera ({`image_<cam>`: (N, H, W, 3) uint8}, plus the
        proprio key when the classifier reads it) through the frozen `encoder` it was trained on."""
        if encoder_fingerprint(encoder) != self.config.encoder_fingerprint:
            raise VisionError("this success classifier was trained on another encoder (its weights differ): "
                              "retrain it on the run's frozen encoder")
        z = encode_frames(encoder, frames)
        key = self.config.proprio_key
        proprio = None
        if self.config.proprio_dim:
            if key not in frames:
                raise VisionError(f"the success classifier also reads {key!r}; given {sorted(frames)}")
            proprio = np.asarray(frames[key], np.float32).reshape(len(np.atleast_2d(z)), -1)
        return self.predict(z, proprio)


def save_success_classifier(clf: SuccessClassifier, directory: Path | str) -> Path:
    """Write `success.json` and `success.safetensors` into `directory` (each replaced atomically)."""
    return save_module(clf, clf.config, directory, "success")


def load_success_classifier(directory: Path | str) -> SuccessClassifier:
    """The classifier saved in `directory`, in eval mode; VisionError says what is missing or wrong."""
    return load_module(directory, "success", SuccessModelConfig, SuccessClassifier, VisionError, "success classifier")


# -- training ---------------------------------------------------------------------------------------


def frame_scores(prob: np.ndarray, target: np.ndarray, threshold: float, steps_to_success: np.ndarray | None = None,
                 near: int = 3) -> dict[str, Any]:
    """Precision, recall and F1 of `prob > threshold` on frames (heads.scores plus f1); with
    `steps_to_success`, `near_misses` counts false positives at most `near` steps before a success step
    (frames that look almost like it)."""
    out = scores(prob, target, threshold)
    p, r = out["precision"], out["recall"]
    out["f1"] = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else None
    out["frames"] = out.pop("windows")
    out["predicted"] = int((prob > threshold).sum())
    if steps_to_success is not None:
        fp = (prob > threshold) & ~target
        out["near_misses"] = int((fp & (steps_to_success > 0) & (steps_to_success <= near)).sum())
    return out


@dataclass
class SuccessResult:
    classifier: SuccessClassifier
    calibration: dict[str, Any]  # scores on the calibration episodes at the chosen threshold
    test: dict[str, Any] | None  # scores on the test episodes (None without a test split)
    splits: dict[str, list[int]]
    seconds: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)


def fit(data: SuccessData, cfg: SuccessTrainConfig, latent_dim: int, encoder_cameras: Sequence[str],
        fingerprint: int, proprio_key: str | None = "proprio") -> tuple[SuccessClassifier, list[dict[str, float]]]:
    """Train a classifier on all of `data` (no threshold set: 0.5 until `calibrate`)."""
    if len(data) == 0:
        raise VisionError("no steps to train the success classifier on")
    pos = int(data.target.sum())
    if pos == 0:
        raise VisionError("the training episodes hold no success step: nothing to learn success from")
    proprio_dim = data.proprio.shape[1] if cfg.use_proprio else 0
    config = SuccessModelConfig(
        latent_dim=latent_dim, proprio_key=proprio_key if proprio_dim else None, proprio_dim=proprio_dim,
        hidden=list(cfg.hidden), encoder_cameras=list(encoder_cameras), encoder_fingerprint=fingerprint,
    )
    x = np.concatenate([data.latent, data.proprio], axis=1) if proprio_dim else data.latent
    if x.shape[1] != config.in_dim:
        raise VisionError(f"latents are {data.latent.shape[1]}-d; the encoder's latent_dim is {latent_dim}")
    y = data.target.astype(np.float32)
    weight = (len(y) - pos) / pos if cfg.pos_weight == "balanced" else float(cfg.pos_weight)
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        torch.manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed)
        clf = SuccessClassifier(config)
        with torch.no_grad():
            clf.in_mean.copy_(torch.from_numpy(x.mean(0)))
            clf.in_std.copy_(torch.from_numpy(x.std(0) + 1e-3))
        opt = torch.optim.AdamW(clf.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight))
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        history = []
        clf.train()
        for step in range(1, cfg.steps + 1):
            if len(y) <= cfg.batch_size:
                xb, yb = xt, yt
            else:
                idx = torch.from_numpy(rng.integers(0, len(y), cfg.batch_size))
                xb, yb = xt[idx], yt[idx]
            loss = loss_fn(clf(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step == 1 or step % 200 == 0 or step == cfg.steps:
                history.append({"step": float(step), "loss": loss.item()})
        clf.config = config.model_copy(update={"source": {"train": cfg.model_dump(), "pos_weight": weight,
                                                           "train_steps_of_data": len(y), "train_positives": pos}})
        return clf.eval(), history
    finally:
        torch.set_num_threads(threads)


def calibrate(clf: SuccessClassifier, data: SuccessData, min_precision: float | None = None) -> dict[str, Any]:
    """Set the threshold from `data` (held-out episodes): the world model heads' rule, best F1 or the best
    recall at `min_precision`. Returns the scores there. VisionError without a success step in `data`."""
    prob = clf.probability(data.latent, data.proprio if clf.config.proprio_dim else None)
    thr = best_threshold(prob, data.target, min_precision)
    if thr is None:
        raise VisionError("the calibration episodes hold no success step: the threshold cannot be set")
    clf.config = clf.config.model_copy(update={"threshold": thr})
    return frame_scores(prob, data.target, thr, data.steps_to_success())


def evaluate(clf: SuccessClassifier, data: SuccessData) -> dict[str, Any]:
    """Scores of the classifier at its threshold on `data`'s frames."""
    prob = clf.probability(data.latent, data.proprio if clf.config.proprio_dim else None)
    return frame_scores(prob, data.target, clf.threshold, data.steps_to_success())


def train_success_classifier(
    data: SuccessData,
    encoder: Encoder,
    cfg: SuccessTrainConfig | None = None,
    splits: Sequence[Sequence[int]] | None = None,
    proprio_key: str | None = "proprio",
) -> SuccessResult:
    """Split `data` by episode into train / calibration / test (`cfg` shares, or `splits` given as
    [train, calib, test] episode lists), train on train, calibrate the threshold on calib and score
    test; the scores are stored in the classifier's config (`metrics`)."""
    cfg = cfg or SuccessTrainConfig()
    t0 = time.perf_counter()
    if splits is None:
        shares = [1 - cfg.calib_share - cfg.test_share, cfg.calib_share] + ([cfg.test_share] if cfg.test_share else [])
        parts = split_episodes(data.episodes, shares, cfg.seed)
    else:
        parts = [list(p) for p in splits]
    train, calib = data.select(parts[0]), data.select(parts[1])
    test = data.select(parts[2]) if len(parts) > 2 and parts[2] else None
    clf, history = fit(train, cfg, encoder.config.latent_dim, encoder.config.cameras, encoder_fingerprint(encoder),
                       proprio_key)
    cal = calibrate(clf, calib, cfg.min_precision)
    tst = evaluate(clf, test) if test is not None else None
    clf.config = clf.config.model_copy(update={"metrics": {"calibration": cal, "test": tst}})
    names = ["train", "calibration", "test"]
    return SuccessResult(clf, cal, tst, {names[i]: [int(e) for e in p] for i, p in enumerate(parts)},
                         time.perf_counter() - t0, history)


def cross_validate(data: SuccessData, encoder: Encoder, cfg: SuccessTrainConfig | None = None, folds: int = 5,
                   proprio_key: str | None = "proprio") -> dict[str, Any]:
    """Precision and recall on every episode held out once: per fold, that fold is the test set, the next
    one calibrates and the rest train; the test frames of all folds are scored together (each at its
    fold's threshold)."""
    cfg = cfg or SuccessTrainConfig()
    eps = data.episodes
    if folds < 3 or folds > len(eps):
        raise VisionError(f"cross-validation needs 3 <= folds <= episodes ({len(eps)}); got {folds}")
    order = np.random.default_rng(cfg.seed).permutation(len(eps))
    parts = [sorted(eps[i] for i in order[f::folds]) for f in range(folds)]
    prob, target, near, thresholds = [], [], [], []
    for f in range(folds):
        test, calib = parts[f], parts[(f + 1) % folds]
        train = [e for i, p in enumerate(parts) if i not in (f, (f + 1) % folds) for e in p]
        res = train_success_classifier(data, encoder, cfg, splits=[train, calib, test], proprio_key=proprio_key)
        t = data.select(test)
        prob.append(res.classifier.probability(t.latent, t.proprio if res.classifier.config.proprio_dim else None)
                    > res.classifier.threshold)
        target.append(t.target)
        near.append(t.steps_to_success())
        thresholds.append(res.classifier.threshold)
    # the pooled cut decisions are scored as 0/1 "probabilities" at 0.5
    out = frame_scores(np.concatenate(prob).astype(np.float32), np.concatenate(target), 0.5, np.concatenate(near))
    out["threshold"] = None
    out["thresholds"] = thresholds
    out["folds"] = folds
    return out
