"""Aggregates over seeds, shared by ``sweep``, ``bench`` and ``tune``: the interquartile mean and percentile
bootstrap intervals. numpy only."""

from __future__ import annotations

import numpy as np

BOOTSTRAP_SAMPLES = 2000


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% (rliable's robust aggregate)."""
    ordered = np.sort(values)
    n = len(ordered)
    low, high = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return float(ordered[low:high].mean()) if high > low else float(ordered.mean())


def bootstrap(values: np.ndarray, statistic, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of ``statistic`` over seeds."""
    if len(values) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = [statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(BOOTSTRAP_SAMPLES)]
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))
