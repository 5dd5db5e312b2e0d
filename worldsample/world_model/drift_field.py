"""The drifting field of "Generative Modeling via Drifting" (design/ALGORITHMS.md section 3).

For each generated sample x the field V(x) = V+(x) - V-(x) points towards the data (positives)
and away from the other generated samples (negatives). Affinities are computed jointly over all
targets of a context: distances are divided by their mean (so temperatures are scale-free),
turned into logits -d / tau, and the affinity is sqrt(row-softmax * column-softmax). Each
temperature's field is scaled to unit RMS over the batch before the fields are summed.
"""

from __future__ import annotations

import torch


def drift_field(
    x: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, neg_is_self: torch.Tensor, temperatures: list[float]
) -> torch.Tensor:
    """x (B, G, D) generated; pos (B, P, D); neg (B, N, D); neg_is_self (G, N) bool masks x_i == neg_j.

    Returns V (B, G, D), computed without gradient (it is a regression target)."""
    with torch.no_grad():
        targets = torch.cat([pos, neg], dim=1)  # (B, P+N, D)
        n_pos = pos.shape[1]
        dist = torch.cdist(x, targets)  # (B, G, P+N)
        mask = torch.zeros(dist.shape[1:], dtype=torch.bool, device=x.device)
        mask[:, n_pos:] = neg_is_self
        valid = (~mask).float()[None]
        scale = (dist * valid).sum(dim=(1, 2), keepdim=True) / valid.sum() + 1e-8
        dist = dist / scale
        field = torch.zeros_like(x)
        for tau in temperatures:
            logits = (-dist / tau).masked_fill(mask[None], float("-inf"))
            row = torch.softmax(logits, dim=2)
            col = torch.softmax(logits, dim=1)
            aff = (row * col).clamp_min(0).sqrt()
            v = _mean_shift(aff[:, :, :n_pos], pos, x) - _mean_shift(aff[:, :, n_pos:], neg, x)
            rms = v.pow(2).mean().sqrt() + 1e-8
            field += v / rms
        return field


def _mean_shift(aff: torch.Tensor, targets: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """sum_j a_ij (t_j - x_i) / sum_j a_ij, the affinity-weighted pull of x_i towards the targets."""
    w = aff / (aff.sum(dim=2, keepdim=True) + 1e-12)
    return torch.bmm(w, targets) - x * w.sum(dim=2, keepdim=True)
