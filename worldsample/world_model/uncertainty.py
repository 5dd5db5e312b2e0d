"""Where the world model stops being trusted: the uncertainty veto's cuts, calibrated on held-out data.

The disagreement of an imagined step is the variance of the next normalised latent across the
dynamics members (or across samples of a stochastic generator), averaged over latent cells. It has
no natural scale: it depends on the data, the model size and how long it trained. So the cut is
measured instead of configured: held-out real episodes (never trained on) are rolled out open loop
under their recorded actions, and the cut at imagined step t is the `quantile` of their disagreement
at step t (disagreement changes with depth: it need not grow, the members can also converge). A
synthetic branch whose disagreement exceeds the cut is less certain than the model is on real data
at the same depth: its perturbed actions took it off the data.

The report also says whether disagreement means anything here: the rank correlation, over held-out
windows, between a window's disagreement and its actual latent error against the real episode.
"""

from __future__ import annotations

import numpy as np

from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.data import WindowSource
from worldsample.world_model.errors import NotEnoughDataError


def gives_uncertainty(cfg: WorldModelConfig) -> bool:
    """Whether a world model with config `cfg` has a disagreement to veto on: an ensemble of at least
    two dynamics members, or a stochastic generator (every kind but regression) sampled several times."""
    return cfg.dynamics.ensemble >= 2 or cfg.generator.kind != "regression"


def _rank(x: np.ndarray) -> np.ndarray:
    r = np.empty(len(x))
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho (ties broken by order); None for fewer than three points or a constant input."""
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(np.corrcoef(_rank(a), _rank(b))[0, 1])


def measure(model, source: WindowSource, horizon: int, per_episode: int, batch: int = 64, seed: int = 0):
    """(disagreement, error), each (windows, horizon): the members' disagreement at each imagined step
    of held-out windows under their recorded actions, and the squared latent error of member 0's
    prediction against the encoded real frames (mean over cells)."""
    from worldsample.world_model.evaluate import _rollouts

    K = model.cfg.dynamics.history
    keys = [*model.cfg.image_keys, *model.cfg.vector_keys]
    unc, err = [], []
    for im, data, out, _ in _rollouts(model, source, horizon, per_episode, batch, seed, None, uncertainty=True):
        real = im.encode({k: data[k][:, K:].reshape(-1, *data[k].shape[2:]) for k in keys})
        real = real.view(out.latents.shape)
        err.append(((out.latents - real) ** 2).mean(dim=(2, 3, 4)).cpu().numpy())
        unc.append(out.uncertainty)
    return np.concatenate(unc), np.concatenate(err)


def calibrate(model, source: WindowSource) -> dict:
    """Set `model.cfg.uncertainty.thresholds` from the source's (held-out) episodes and return the
    report; {} (thresholds unchanged) when the model gives no disagreement or there is nothing to
    measure on. The horizon shrinks to what the held-out episodes allow."""
    u = model.cfg.uncertainty
    if not (u.calibrate and gives_uncertainty(model.cfg)):
        return {}
    K = model.cfg.dynamics.history
    longest = max((int(n) for gw in source.groups.values() for e, n in zip(gw.cache.episode_ids, gw.cache.ep_len)
                   if gw.keep(e)), default=0)
    horizon = min(u.horizon, longest - K)
    if horizon < 1:
        return {}
    try:
        unc, err = measure(model, source, horizon, u.per_episode)
    except NotEnoughDataError:
        return {}
    cuts = [float(c) for c in np.quantile(unc, u.quantile, axis=0)]
    model.cfg = model.cfg.model_copy(update={"uncertainty": u.model_copy(update={"thresholds": cuts})})
    return {
        "windows": int(len(unc)),
        "quantile": u.quantile,
        "thresholds": cuts,
        "disagreement_median": [float(x) for x in np.median(unc, axis=0)],
        "error_rank_corr": rank_correlation(unc.mean(axis=1), err.mean(axis=1)),
    }
