"""Pearson, Spearman (average ranks for ties) and MMRV against hand-computed values, the
ALGORITHMS.md hand-checked case and scipy."""

import math

import numpy as np
import pytest
from scipy import stats

from worldsample.evaluation.metrics import average_ranks, mmrv, pearson, ranking_report, spearman


def test_pearson_by_hand():
    # S = (1, 2, 3, 4), R = (1, 3, 2, 4): deviations (-1.5, -.5, .5, 1.5) and (-1.5, .5, -.5, 1.5),
    # sum of products 4, sums of squares 5 and 5 -> r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_average_ranks_share_ties():
    assert average_ranks([10, 20, 20, 30]).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert average_ranks([5, 5, 5]).tolist() == [2.0, 2.0, 2.0]
    assert average_ranks([3, 1, 2]).tolist() == [3.0, 1.0, 2.0]


def test_spearman_with_ties_by_hand():
    # ranks S (1, 2.5, 2.5, 4), R (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(3 / math.sqrt(10))
    # monotone but not linear: rank correlation 1, Pearson below 1
    assert spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [1, 10, 100, 1000]) < 0.9


def test_mmrv_algorithms_md_hand_check():
    # ALGORITHMS.md section 4: pair (1, 2) swapped with gap 0.3 -> maxima 0.3, 0.3, 0 -> 0.2
    assert mmrv([0.3, 0.1, 0.8], [0.2, 0.5, 0.9]) == pytest.approx(0.2)


def test_mmrv_by_hand():
    assert mmrv([1, 2, 3], [0.0, 0.5, 1.0]) == 0.0  # perfect ranking
    # reversed: maxima 1, 0.5, 1 -> 2.5 / 3
    assert mmrv([3, 2, 1], [0.0, 0.5, 1.0]) == pytest.approx(2.5 / 3)
    # a constant score violates every strict real order (SIMPLER's strict comparisons):
    # maxima 0.9 - 0.2, 0.9 - 0.5, 0 -> 1.1 / 3
    assert mmrv([0, 0, 0], [0.2, 0.5, 0.9]) == pytest.approx(1.1 / 3)
    # a tie in real success costs nothing whatever the scores say
    assert mmrv([0, 1], [0.5, 0.5]) == 0.0
    assert mmrv([0.7], [0.4]) == 0.0


def test_undefined_and_bad_input():
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2, 3], [4, 4, 4]) is None
    assert pearson([1], [1]) is None
    with pytest.raises(ValueError, match="3 scores but 2"):
        pearson([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        mmrv([1, float("nan")], [0, 1])
    with pytest.raises(ValueError):
        mmrv([], [])


def test_against_scipy_with_ties():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(3, 15))
        s = rng.integers(0, 5, n) / 4  # success rates of few episodes: many ties
        r = rng.integers(0, 5, n) / 4
        if np.ptp(s) == 0 or np.ptp(r) == 0:
            continue
        assert pearson(s, r) == pytest.approx(stats.pearsonr(s, r).statistic, abs=1e-12)
        assert spearman(s, r) == pytest.approx(stats.spearmanr(s, r).statistic, abs=1e-12)
        assert average_ranks(s).tolist() == stats.rankdata(s, method="average").tolist()


def test_ranking_report_has_constant_baseline():
    rep = ranking_report([0.3, 0.1, 0.8], [0.2, 0.5, 0.9])
    assert rep["policies"] == 3
    assert rep["mmrv"] == pytest.approx(0.2)
    assert rep["mmrv_constant"] == pytest.approx(1.1 / 3)
    assert rep["pearson"] == pytest.approx(stats.pearsonr([0.3, 0.1, 0.8], [0.2, 0.5, 0.9]).statistic)
