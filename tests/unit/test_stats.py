"""The paired statistics of ``rlpilot.stats`` against numbers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlpilot.stats import paired_difference, paired_ratio
from rlpilot.tune.report import paired_check, verdict


def test_paired_difference_two_pairs_by_hand():
    """Differences 1 and 5: a resample of two pairs has mean 1 (both the first, 1 in 4), 3 (one of each, 1 in 2)
    or 5 (1 in 4), so the 2.5th and 97.5th percentiles of 2,000 resamples are 1 and 5; the mean is 3."""
    mean, low, high = paired_difference([11.0, 25.0], [10.0, 20.0])
    assert (mean, low, high) == (3.0, 1.0, 5.0)


def test_paired_difference_three_pairs_by_hand():
    """Differences 0, 0, 3: a resample's mean is 0, 1, 2 or 3 with chances 8/27, 12/27, 6/27 and 1/27. 0 is far
    more than the lowest 2.5%, and 3 (3.7%) more than the highest 2.5%: the interval is [0, 3], the mean 1."""
    mean, low, high = paired_difference(np.array([5.0, 7.0, 9.0]), np.array([5.0, 7.0, 6.0]))
    assert (mean, low, high) == (1.0, 0.0, 3.0)


def test_pairs_cancel_what_they_share():
    """Seeds that differ a lot, configurations by 1 on every seed: each arm's own interval is wide and they
    overlap, the paired one is exactly [1, 1]."""
    start = np.array([10.0, 200.0, 35.0, 480.0, 90.0])
    best = start + 1.0
    assert paired_difference(best, start) == (1.0, 1.0, 1.0)
    check = paired_check(best.tolist(), start.tolist(), maximize=True, what="best - start")
    assert check["differences"] == [1.0] * 5
    assert check["verdict"] == "tuning helped: the 95% paired interval excludes 0 (best - start: +1 [+1, +1])"


def test_paired_difference_of_one_pair_has_no_interval():
    mean, low, high = paired_difference([4.0], [1.0])
    assert mean == 3.0 and math.isnan(low) and math.isnan(high)
    assert verdict(mean, low, high, maximize=True, what="d").startswith("no verdict: a paired interval needs two")


@pytest.mark.parametrize(
    "low, high, maximize, start",
    [
        (1.0, 2.0, True, "tuning helped"),  # more return
        (-2.0, -1.0, False, "tuning helped"),  # fewer frames to solved
        (1.0, 2.0, False, "tuning hurt"),
        (-1.0, 2.0, True, "no significant difference"),
        (0.0, 0.0, False, "no significant difference"),  # every pair equal (both unsolved at the budget)
    ],
)
def test_verdict(low, high, maximize, start):
    assert verdict((low + high) / 2, low, high, maximize=maximize, what="d").startswith(start)


def test_paired_ratio_is_a_ratio_of_means_over_the_same_pairs():
    ratio, low, high = paired_ratio([2.0, 4.0], [1.0, 2.0])
    assert (ratio, low, high) == (2.0, 2.0, 2.0)  # every resample: twice the reference
    with pytest.raises(ValueError):
        paired_ratio([1.0, 2.0], [1.0])
