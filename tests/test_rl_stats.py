"""bench/rl_stats.py: the interquartile mean, its bootstrap interval, the area under a success curve,
the probability of improvement, the performance profile and the detectable difference that
bench/sample_efficiency.py reports per arm."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from rl_stats import (  # noqa: E402
    auc,
    bootstrap_ci,
    bootstrap_ci2,
    churn,
    detectable_difference,
    iqm,
    performance_profile,
    prob_improvement,
)


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


def test_probability_of_improvement_counts_pairs_of_runs_and_ties_half():
    assert prob_improvement([0.9, 0.8], [0.1, 0.2, 0.3]) == 1.0
    assert prob_improvement([0.1, 0.2, 0.3], [0.9, 0.8]) == 0.0
    assert prob_improvement([0.5, 0.7], [0.5, 0.6]) == pytest.approx((0.5 + 0 + 1 + 1) / 4)
    assert prob_improvement([0.5, 0.6], [0.5, 0.7]) == pytest.approx(1 - (0.5 + 0 + 1 + 1) / 4)  # symmetric


def test_the_two_arm_interval_resamples_each_arm_and_excludes_zero_only_for_a_clear_gap():
    diff = lambda x, y: float(np.mean(x) - np.mean(y))  # noqa: E731
    lo, hi = bootstrap_ci2([0.9, 0.85, 0.95, 0.9], [0.5, 0.55, 0.45, 0.5], diff)
    assert 0.3 < lo <= 0.4 <= hi < 0.5
    lo, hi = bootstrap_ci2([0.9, 0.1, 0.7, 0.3], [0.5, 0.6, 0.4, 0.5], diff)
    assert lo < 0 < hi


def test_the_performance_profile_is_the_share_of_runs_above_each_threshold():
    assert performance_profile([0.2, 0.5, 0.9, 1.0], [0.0, 0.5, 0.95, 1.0]).tolist() == [1.0, 0.5, 0.25, 0.0]


def test_the_detectable_difference_grows_with_spread_and_shrinks_with_runs():
    assert detectable_difference([0.6, 0.8]) == pytest.approx(2.8 * np.std([0.6, 0.8], ddof=1))
    assert detectable_difference([0.6, 0.8], n=8) == pytest.approx(detectable_difference([0.6, 0.8]) / 2)
    assert detectable_difference([0.7] * 5) == 0.0


def test_churn_is_the_mean_change_between_evaluations_and_the_largest_fall():
    assert churn([0.8, 0.35, 0.9, 1.0]) == pytest.approx(((0.45 + 0.55 + 0.1) / 3, 0.45))
    assert churn([0.2, 0.4, 0.4]) == pytest.approx((0.1, 0.0))  # never fell
    assert churn([0.5]) == (None, None)
