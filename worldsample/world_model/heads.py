"""The success and done heads on held-out windows: their scores, and the thresholds that cut them.

Success and done are rare (one step per episode), and training draws windows that end on them
more often than the data holds them, so 0.5 on the head's probability is not a meaningful cut.
`calibrate` picks each head's threshold on held-out windows (best F1, or the best recall at a
required precision) and stores it in the model's config, which travels in the checkpoint; the
Imaginer's labels use it.
"""

from __future__ import annotations

import numpy as np
import torch

from worldsample.world_model.data import DOMAIN_OF_GROUP, WindowSource
from worldsample.world_model.errors import NotEnoughDataError
from worldsample.world_model.model import WorldModel

HEADS = {"success": 1, "done": 2}  # head name -> column of Context.heads


@torch.no_grad()
def head_probabilities(model: WorldModel, source: WindowSource, batch: int = 512) -> dict[str, tuple]:
    """head -> (probabilities, labels) over every full-history window of the source's episodes,
    scored at the window's last step, as imagination reads the heads (ensemble member 0)."""
    cfg, K, dev = model.cfg, model.cfg.dynamics.history, model.device
    keys = [*cfg.image_keys, *cfg.vector_keys]
    net = model.dynamics.member(0)
    logits, labels = {h: [] for h in HEADS}, {h: [] for h in HEADS}
    for g, gw in source.groups.items():
        c = gw.cache
        for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len):
            if not gw.keep(e) or n < K:
                continue
            z = torch.cat([model.encode({k: c.view(k)[s + i : s + min(i + 256, n)] for k in keys})
                           for i in range(0, n, 256)])
            act = torch.as_tensor(c.view("action")[s : s + n], device=dev).float()
            idx = torch.arange(n - K + 1, device=dev)[:, None] + torch.arange(K, device=dev)
            dom = torch.full((len(idx),), DOMAIN_OF_GROUP.get(g, 0), device=dev, dtype=torch.long)
            out = torch.cat([net.context(model.align_window(z[idx[i : i + batch]], K - 1), act[idx[i : i + batch]],
                                         dom[i : i + batch]).heads
                             for i in range(0, len(idx), batch)])
            for h, col in HEADS.items():
                logits[h].append(out[:, col].cpu().numpy())
                labels[h].append(c.view(h)[s + K - 1 : s + n].astype(bool).reshape(n - K + 1, -1).any(axis=1))
    if not any(len(v) for v in logits["success"]):
        raise NotEnoughDataError(f"no held-out episode of length >= {K} in groups {list(source.groups)}")
    return {h: (1 / (1 + np.exp(-np.concatenate(logits[h]))), np.concatenate(labels[h])) for h in HEADS}


def scores(prob: np.ndarray, label: np.ndarray, threshold: float) -> dict:
    """Precision and recall of `prob > threshold` (None where undefined: nothing predicted or no positive)."""
    pred = prob > threshold
    tp = int((pred & label).sum())
    return {
        "threshold": float(threshold),
        "precision": tp / int(pred.sum()) if pred.any() else None,
        "recall": tp / int(label.sum()) if label.any() else None,
        "positives": int(label.sum()),
        "windows": len(label),
    }


def best_threshold(prob: np.ndarray, label: np.ndarray, min_precision: float | None = None) -> float | None:
    """The cut with the best F1 (or, with `min_precision`, the best recall at that precision, else
    the best F1); midway between the last probability kept and the next one. None without positives."""
    if not label.any():
        return None
    order = np.argsort(-prob, kind="stable")
    p, y = prob[order], label[order]
    tp = np.cumsum(y)
    k = np.arange(1, len(p) + 1)
    last = np.r_[p[1:] < p[:-1], True]  # a cut can only fall between distinct probabilities
    precision, recall = tp / k, tp / y.sum()
    f1 = np.where(last, 2 * precision * recall / np.maximum(precision + recall, 1e-12), -1.0)
    i = int(np.argmax(f1))
    if min_precision is not None:
        ok = last & (precision >= min_precision)
        if ok.any():
            i = int(np.flatnonzero(ok)[np.argmax(recall[ok])])
    nxt = p[i + 1] if i + 1 < len(p) else 0.0
    return float(np.clip((p[i] + nxt) / 2, 1e-4, 1 - 1e-4))


def report(model: WorldModel, source: WindowSource) -> dict:
    """Each head's precision and recall at the model's thresholds on the source's windows."""
    h = model.cfg.heads
    thresholds = {"success": h.success_threshold, "done": h.done_threshold}
    probs = head_probabilities(model, source)
    return {name: scores(prob, label, thresholds[name]) for name, (prob, label) in probs.items()}


def calibrate(model: WorldModel, source: WindowSource) -> dict:
    """Set the success and done thresholds in `model.cfg.heads` from the source's (held-out) windows;
    a head without a positive keeps its threshold. Returns `report` at the new thresholds."""
    probs = head_probabilities(model, source)
    h = model.cfg.heads
    new = {}
    for name, (prob, label) in probs.items():
        thr = best_threshold(prob, label, h.min_precision)
        if thr is not None:
            new[f"{name}_threshold"] = thr
    model.cfg = model.cfg.model_copy(update={"heads": h.model_copy(update=new)})
    cut = {"success": model.cfg.heads.success_threshold, "done": model.cfg.heads.done_threshold}
    return {name: scores(prob, label, cut[name]) | {"calibrated": f"{name}_threshold" in new}
            for name, (prob, label) in probs.items()}
