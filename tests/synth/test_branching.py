import numpy as np

from worldsample.synth import perturb_actions


def test_scale_is_per_segment_and_dimension_noise_per_step_inactive_dims_stay_zero():
    rng = np.random.default_rng(0)
    a = np.zeros((2000, 12, 3), np.float32)
    a[:, :, 0] = 0.5
    a[:, :, 1] = -0.25  # dim 2 is inactive
    out = perturb_actions(a, rng, scale=0.2, sigma=0.0)
    xi = out[:, :, 0] / 0.5
    assert np.allclose(xi, xi[:, :1])  # one xi per segment (no per-step noise here)
    assert 0.8 <= xi.min() and xi.max() <= 1.2 and xi.std() > 0.1
    assert not np.allclose(out[:, 0, 0] / 0.5, out[:, 0, 1] / -0.25)  # independent per dimension
    assert (out[:, :, 2] == 0).all()
    noisy = perturb_actions(a, np.random.default_rng(1), scale=0.0, sigma=0.05)
    eps = noisy[:, :, 0] - 0.5
    assert abs(eps.std() - 0.05) < 0.003 and abs(eps.mean()) < 0.003
    assert (noisy[:, :, 2] == 0).all()


def test_clipped_to_bounds_and_seeded():
    a = np.full((50, 5, 2), 0.95, np.float32)
    out = perturb_actions(a, np.random.default_rng(3), 0.2, 0.05, low=-1.0, high=np.array([1.0, 0.9]))
    assert out[:, :, 0].max() <= 1.0 and out[:, :, 1].max() <= 0.9 and out.dtype == np.float32
    again = perturb_actions(a, np.random.default_rng(3), 0.2, 0.05, low=-1.0, high=np.array([1.0, 0.9]))
    np.testing.assert_array_equal(out, again)
