"""PSNR and SSIM against hand-computed values and independent implementations."""

import numpy as np
import pytest
from scipy import ndimage

from worldsample.world_model.metrics import MAX_PSNR, psnr, ssim


def test_psnr_hand_computed():
    a = np.full((2, 16, 16, 3), 100, np.uint8)
    b = a + 10  # every pixel off by 10: MSE 100
    assert psnr(a, b) == pytest.approx(10 * np.log10(255**2 / 100), abs=1e-9)
    f = np.zeros((8, 8, 3))
    g = f.copy()
    g[0, 0, 0] = 1.0  # one pixel of 192 off by the full range: MSE 1/192
    assert psnr(f, g) == pytest.approx(10 * np.log10(192), abs=1e-9)
    assert psnr(a, a)[0] == MAX_PSNR


def ssim_reference(x: np.ndarray, y: np.ndarray, data_range: float) -> float:
    """Wang et al. written out with a 2-D window and scipy's correlate, cropped to the valid region."""
    r = np.arange(11) - 5
    g1 = np.exp(-(r**2) / (2 * 1.5**2))
    win = np.outer(g1, g1) / np.outer(g1, g1).sum()
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    vals = []
    for ch in range(x.shape[2]):
        a, b = x[..., ch].astype(np.float64), y[..., ch].astype(np.float64)
        f = lambda t: ndimage.correlate(t, win, mode="constant")[5:-5, 5:-5]  # noqa: E731
        ma, mb = f(a), f(b)
        saa, sbb, sab = f(a * a) - ma * ma, f(b * b) - mb * mb, f(a * b) - ma * mb
        m = ((2 * ma * mb + c1) * (2 * sab + c2)) / ((ma * ma + mb * mb + c1) * (saa + sbb + c2))
        vals.append(m.mean())
    return float(np.mean(vals))


def _pairs():
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:32, 0:40]
    smooth = np.stack([xx * 5, yy * 6, (xx + yy) * 3], -1).astype(np.float64) % 256
    noisy = np.clip(smooth + rng.normal(0, 20, smooth.shape), 0, 255)
    shifted = np.roll(smooth, 3, axis=1)
    rand = rng.integers(0, 256, smooth.shape)
    return [(smooth, noisy), (smooth, shifted), (rand, smooth), (noisy, noisy)]


@pytest.mark.parametrize("i", range(4))
def test_ssim_matches_a_direct_implementation(i):
    a, b = _pairs()[i]
    ours = ssim(a.astype(np.uint8), b.astype(np.uint8))
    assert ours == pytest.approx(ssim_reference(a.astype(np.uint8), b.astype(np.uint8), 255), abs=1e-9)


@pytest.mark.parametrize("i", range(4))
def test_ssim_matches_scikit_image(i):
    metrics = pytest.importorskip("skimage.metrics")
    a, b = (p.astype(np.uint8) for p in _pairs()[i])
    ref = metrics.structural_similarity(
        a, b, data_range=255, channel_axis=-1, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert ssim(a, b) == pytest.approx(ref, abs=1e-6)


def test_metrics_are_per_frame_over_leading_axes():
    a, b = _pairs()[0]
    stack_a = np.stack([a, a, b]).astype(np.uint8)[None]  # (1, 3, H, W, C)
    stack_b = np.stack([b, a, a]).astype(np.uint8)[None]
    s, p = ssim(stack_a, stack_b), psnr(stack_a, stack_b)
    assert s.shape == p.shape == (1, 3)
    assert s[0, 1] == pytest.approx(1.0) and s[0, 0] == pytest.approx(s[0, 2])
    assert ssim(a / 255.0, b / 255.0) == pytest.approx(ssim(a, b, data_range=255.0), abs=1e-9)
