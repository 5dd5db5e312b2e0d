"""Frame fidelity: PSNR and SSIM (design/ALGORITHMS.md section 5), per frame.

Frames are float arrays in [0, 1] (data range 1) or uint8 (data range 255), shaped (..., H, W, C).
SSIM uses the standard 11x11 Gaussian window (sigma 1.5), K1 = 0.01, K2 = 0.03, population
statistics, computed per channel over the "valid" region (no padding) and averaged; this is
what scikit-image's `structural_similarity(gaussian_weights=True, use_sample_covariance=False)`
reports, because it crops the padded border.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

MAX_PSNR = 100.0  # identical frames: report a finite ceiling instead of inf


def _as_float(x, data_range: float | None) -> tuple[torch.Tensor, float]:
    t = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
    if data_range is None:
        data_range = 255.0 if t.dtype == torch.uint8 else 1.0
    return t.double(), data_range


def psnr(a, b, data_range: float | None = None) -> np.ndarray:
    """PSNR in dB of each frame; a, b shaped (..., H, W, C)."""
    x, r = _as_float(a, data_range)
    y, _ = _as_float(b, data_range)
    mse = (x - y).pow(2).mean(dim=(-3, -2, -1))
    out = 10 * torch.log10(r**2 / mse.clamp_min(1e-30))
    return out.clamp(max=MAX_PSNR).numpy()


def gaussian_window(size: int = 11, sigma: float = 1.5) -> torch.Tensor:
    r = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(r**2) / (2 * sigma**2))
    return g / g.sum()


def ssim(
    a, b, data_range: float | None = None, size: int = 11, sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03
) -> np.ndarray:
    """Mean SSIM of each frame; a, b shaped (..., H, W, C) with H, W >= size."""
    x, r = _as_float(a, data_range)
    y, _ = _as_float(b, data_range)
    lead = x.shape[:-3]
    h, w, c = x.shape[-3:]
    x = x.reshape(-1, h, w, c).permute(0, 3, 1, 2).reshape(-1, 1, h, w)
    y = y.reshape(-1, h, w, c).permute(0, 3, 1, 2).reshape(-1, 1, h, w)
    g = gaussian_window(size, sigma)

    def blur(t: torch.Tensor) -> torch.Tensor:  # separable: rows, then columns
        return F.conv2d(F.conv2d(t, g.view(1, 1, 1, -1)), g.view(1, 1, -1, 1))

    mx, my = blur(x), blur(y)
    vx = blur(x * x) - mx**2
    vy = blur(y * y) - my**2
    cxy = blur(x * y) - mx * my
    c1, c2 = (k1 * r) ** 2, (k2 * r) ** 2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    per_channel = s.mean(dim=(1, 2, 3)).view(-1, c)
    return per_channel.mean(dim=1).reshape(lead).numpy()
