"""The single-run curve's smoothing: a window the run's length can carry."""

import numpy as np

from rlpilot.plot import WINDOW, rolling, smoothing_window


def test_short_runs_are_not_averaged_over_their_whole_length():
    # ppo-cartpole solving at 8k frames logs 5 rows: a 50-point window drew their overall mean (179)
    # while the last row was 500
    assert smoothing_window(5) == 1
    assert smoothing_window(9) == 1
    assert smoothing_window(10) == 2
    assert smoothing_window(100) == 20
    assert smoothing_window(250) == smoothing_window(10_000) == WINDOW
    returns = np.array([20.1, 29.7, 82.2, 257.5, 500.0])
    mean, std = rolling(returns, smoothing_window(len(returns)))
    np.testing.assert_array_equal(mean, returns)  # window 1: the returns as logged
    assert not std.any()


def test_rolling_is_a_trailing_window():
    values = np.arange(10.0)
    mean, std = rolling(values, 3)
    np.testing.assert_allclose(mean, [0, 0.5, 1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_allclose(std[-1], np.std([7.0, 8.0, 9.0]))
