"""bench/rl_stats.py: the interquartile mean, its bootstrap interval and the area under a success
curve that bench/sample_efficiency.py reports per arm."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from rl_stats import auc, bootstrap_ci, iqm  # noqa: E402


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([0.0, 0.5, 0.6, 0.7, 1.0, 1.0, 1.0, 0.0]) == pytest.approx(np.mean([0.5, 0.6, 0.7, 1.0]))
    assert iqm([0.1, 0.9, 0.2, 0.8]) == pytest.approx(0.5)  # an outlier at each end does not move it
    assert iqm([0.1, 0.9, 0.2, 0.8, 0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.5)


def test_the_bootstrap_interval_holds_the_estimate_and_narrows_with_agreement():
    spread = [0.3, 0.9, 0.5, 0.7, 0.8]
    lo, hi = bootstrap_ci(spread)
    assert lo <= iqm(spread) <= hi and hi - lo > 0.1
    assert bootstrap_ci([0.8] * 5) == (pytest.approx(0.8), pytest.approx(0.8))
    assert bootstrap_ci(spread) == bootstrap_ci(spread)  # seeded: the README's intervals repeat


def test_auc_holds_each_evaluation_until_the_next():
    assert auc([(0, 0.2), (2000, 0.8)], 4000) == pytest.approx(0.5)
    assert auc([(0, 0.0), (1000, 1.0), (4100, 1.0)], 4000) == pytest.approx(0.75)  # past the budget: cut there
    assert auc([], 4000) == 0.0
