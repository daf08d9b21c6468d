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


def paired_ratio(values: np.ndarray, reference: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """``mean(values) / mean(reference)`` over the same episodes, and its 95% percentile bootstrap interval:
    episodes resampled jointly (pair ``i`` is the same episode for both), so what the episodes share (a hard
    reference, a heavy load) cancels in the ratio instead of widening it."""
    values, reference = np.asarray(values, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if values.shape != reference.shape:
        raise ValueError(f"paired values of shape {values.shape} and {reference.shape}")
    ratio = float(values.mean() / reference.mean())
    if len(values) < 2:
        return ratio, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_SAMPLES, len(values)))
    ratios = values[picks].mean(axis=1) / reference[picks].mean(axis=1)
    return ratio, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))
