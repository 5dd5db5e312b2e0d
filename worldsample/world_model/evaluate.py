"""Open-loop fidelity on held-out episodes: PSNR/SSIM per horizon, a JSON report and a PNG strip.

From several start points of every held-out episode the model sees `history` real frames (and
the real actions between them), then imagines `max(horizons)` steps under the real actions; each
imagined frame is scored against the real one. The copy-last-frame baseline (the last context
frame, forever) and the autoencoder's reconstruction (the ceiling of any latent model) are scored
on the same frames. Both reports add the success and done heads' precision and recall at the
model's thresholds on every full-history window of the same episodes (`heads`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from worldsample.world_model import heads
from worldsample.world_model.data import WindowSource
from worldsample.world_model.errors import NotEnoughDataError
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.metrics import psnr, ssim
from worldsample.world_model.model import WorldModel
from worldsample.world_model.rotations import align_quaternions


def heldout_windows(source: WindowSource, length: int, per_episode: int) -> list[tuple[str, int]]:
    """(group, first cache row) of evenly spaced windows in every held-out episode long enough."""
    out = []
    for g, gw in source.groups.items():
        c = gw.cache
        for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len):
            if gw.keep(e) and n >= length:
                for off in np.unique(np.linspace(0, n - length, per_episode).round().astype(int)):
                    out.append((g, int(s + off)))
    return out


def _rollouts(model: WorldModel, source: WindowSource, horizon: int, per_episode: int, batch: int, seed: int,
              on_batch: Callable[[int, int], None] | None, uncertainty: bool = False):
    """Yield (data, rollout) per batch of held-out windows: data holds the real key -> (B, K + H, ...)
    arrays, the rollout the model's H imagined steps from the first K (with the members' disagreement
    per step when `uncertainty`)."""
    cfg = model.cfg
    K = cfg.dynamics.history
    wins = heldout_windows(source, K + horizon, per_episode)
    if not wins:
        raise NotEnoughDataError(
            f"no held-out episode of length >= {K + horizon} (history {K} + horizon {horizon}); "
            "collect more episodes or lower the horizon"
        )
    im = Imaginer(model)
    keys = [*cfg.image_keys, *cfg.vector_keys]
    for i in range(0, len(wins), batch):
        part = wins[i : i + batch]
        rows = {g: np.array([s for gg, s in part if gg == g])[:, None] + np.arange(K + horizon) for g in source.groups}
        rows = {g: r for g, r in rows.items() if len(r)}
        data = {
            k: np.concatenate([source.table(g, k)[r] for g, r in rows.items()]) for k in [*keys, "action", "reward"]
        }
        dom = np.concatenate([np.full(len(r), 1 if g == "sim" else 0) for g, r in rows.items()])
        out = im.rollout({k: data[k][:, :K] for k in keys}, data["action"][:, K - 1 : K - 1 + horizon],
                         context_actions=data["action"][:, : K - 1], domain=dom, seed=seed + i,
                         uncertainty=uncertainty)
        yield im, data, out, len(wins)
        if on_batch:
            on_batch(min(i + batch, len(wins)), len(wins))


def evaluate(
    model: WorldModel,
    source: WindowSource,
    horizons: list[int] = (1, 8, 32),
    per_episode: int = 4,
    batch: int = 64,
    seed: int = 0,
    strip_path: Path | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> dict:
    """Image fidelity (PSNR, SSIM, and copying the last frame as the baseline) per horizon, and the heads' scores."""
    cfg = model.cfg
    K, H = cfg.dynamics.history, max(horizons)
    if not cfg.image_keys:
        raise NotEnoughDataError("fidelity needs an image observation; this model has none (see evaluate_vectors)")
    keys = [*cfg.image_keys, *cfg.vector_keys]
    scores = {n: [] for n in ("psnr", "ssim", "copy_psnr", "copy_ssim", "recon_psnr", "reward_err")}
    strip = None
    windows = 0
    for im, data, out, n_windows in _rollouts(model, source, H, per_episode, batch, seed, on_batch):
        windows = n_windows
        for k in cfg.image_keys:
            real, pred = data[k][:, K:], out.frames[k]
            copy = np.repeat(data[k][:, K - 1 : K], H, axis=1)
            recon = im.decode(im.encode({kk: data[kk][:, K:].reshape(-1, *data[kk].shape[2:]) for kk in keys}))[k]
            scores["psnr"].append(psnr(pred, real))
            scores["ssim"].append(ssim(pred, real))
            scores["copy_psnr"].append(psnr(copy, real))
            scores["copy_ssim"].append(ssim(copy, real))
            scores["recon_psnr"].append(psnr(recon.reshape(real.shape), real))
            if strip is None:
                strip = (real[0], pred[0])
        scores["reward_err"].append(np.abs(out.reward - data["reward"][:, K - 1 : K - 1 + H]))
    curve = {n: np.concatenate(v).mean(axis=0) for n, v in scores.items()}  # per step, averaged over windows
    report = {
        "windows": windows,
        "groups": list(source.groups),
        "history": K,
        "generator": cfg.generator.kind,
        "horizons": {
            str(h): {n: float(curve[n][h - 1]) for n in ("psnr", "ssim", "copy_psnr", "copy_ssim", "recon_psnr")}
            for h in horizons
        },
        "curve": {n: [round(float(x), 4) for x in curve[n]] for n in ("psnr", "ssim", "copy_psnr")},
        "reward_mae": float(curve["reward_err"].mean()),
        "heads": heads.report(model, source),
    }
    if strip_path is not None and strip is not None:
        write_strip(strip_path, *strip)
    return report


def evaluate_vectors(model: WorldModel, source: WindowSource, horizons: list[int] = (1, 8, 32), per_episode: int = 4,
                     batch: int = 64, seed: int = 0, parts: dict[str, tuple[str, slice]] | None = None) -> dict:
    """For models without images: RMSE of each predicted vector observation per horizon, with
    copying the last observation as the baseline (and, with two frames of history or more, extrapolating
    the last step's change at constant velocity, `rmse_velocity_*`), and the reward head's error. `parts` (name ->
    (vector key, slice of it)) adds the same errors on those parts of a key (hand, object, goal).
    Quaternions (`quaternions`) are compared with the real one's sign nearest the prediction's, and the
    copy's: q and -q are one rotation, so neither pays for a sign the pose message happened to carry."""
    cfg = model.cfg
    K, H = cfg.dynamics.history, max(horizons)
    parts = parts or {}
    names = [*cfg.vector_keys, *parts]
    baselines = ("copy", "velocity") if K > 1 else ("copy",)
    prefixes = ("", *(f"{b}_" for b in baselines))
    err = {f"{p}{n}": [] for p in prefixes for n in names} | {"reward": []}
    windows = 0
    for _, data, out, n_windows in _rollouts(model, source, H, per_episode, batch, seed, None):
        windows = n_windows
        sq = {}
        for k in cfg.vector_keys:
            q = cfg.quaternions.get(k, [])
            real = data[k][:, K:].reshape(len(data[k]), H, -1).astype(np.float32)
            last = np.repeat(data[k][:, K - 1 : K].reshape(len(data[k]), 1, -1).astype(np.float32), H, axis=1)
            pred = out.frames[k].reshape(real.shape)
            sq[k] = (pred - align_quaternions(real, pred, q)) ** 2
            sq[f"copy_{k}"] = (last - align_quaternions(real, last, q)) ** 2
            if K > 1:
                prev = align_quaternions(data[k][:, K - 2 : K - 1].reshape(len(data[k]), 1, -1).astype(np.float32),
                                         last[:, :1], q)
                steady = last + (last[:, :1] - prev) * np.arange(1, H + 1, dtype=np.float32)[None, :, None]
                sq[f"velocity_{k}"] = (steady - align_quaternions(real, steady, q)) ** 2
        for name, (k, sl) in parts.items():
            for p in prefixes:
                sq[f"{p}{name}"] = sq[f"{p}{k}"][..., sl]
        for n, v in sq.items():
            err[n].append(v.mean(-1))
        err["reward"].append(np.abs(out.reward - data["reward"][:, K - 1 : K - 1 + H]))
    curve = {n: np.concatenate(v).mean(axis=0) for n, v in err.items()}
    rmse_keys = [f"{p}{n}" for p in prefixes for n in names]
    return {
        "windows": windows,
        "groups": list(source.groups),
        "generator": cfg.generator.kind,
        "horizons": {str(h): {f"rmse_{k}": float(np.sqrt(curve[k][h - 1])) for k in rmse_keys} for h in horizons},
        "reward_mae": float(curve["reward"].mean()),
        "heads": heads.report(model, source),
    }


def write_strip(path: Path, real: np.ndarray, pred: np.ndarray, columns: int = 8, scale: int = 2) -> None:
    """Two rows of frames (real on top, predicted below) at evenly spaced steps, as a PNG."""
    from PIL import Image

    idx = np.unique(np.linspace(0, len(real) - 1, min(columns, len(real))).round().astype(int))
    top = np.concatenate([real[i] for i in idx], axis=1)
    bottom = np.concatenate([pred[i] for i in idx], axis=1)
    img = Image.fromarray(np.concatenate([top, bottom], axis=0))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    img.resize((img.width * scale, img.height * scale), Image.NEAREST).save(path)


def write_report(path: Path, report: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=1))
