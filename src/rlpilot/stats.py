"""Aggregates over seeds, shared by ``sweep``, ``bench``, ``tune`` and ``compare``: the interquartile mean,
percentile bootstrap intervals, and paired ones (a ratio or a difference over the same seeds or episodes).
numpy only."""

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
    values, reference = _pairs(values, reference)
    ratio = float(values.mean() / reference.mean())
    if len(values) < 2:
        return ratio, float("nan"), float("nan")
    picks = _resampled_pairs(len(values), seed)
    ratios = values[picks].mean(axis=1) / reference[picks].mean(axis=1)
    return ratio, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def paired_difference(values: np.ndarray, reference: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """``mean(values - reference)`` over pairs (the same seed or episode for both) and its 95% percentile
    bootstrap interval, pairs resampled jointly: what a pair shares (an easy seed, a hard episode) cancels in
    its difference, so two configurations whose own intervals overlap can still differ clearly. An interval
    that excludes 0 says which is better; NaN bounds for fewer than two pairs."""
    values, reference = _pairs(values, reference)
    differences = values - reference
    if len(differences) < 2:
        return float(differences.mean()), float("nan"), float("nan")
    means = differences[_resampled_pairs(len(differences), seed)].mean(axis=1)
    return float(differences.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _pairs(values: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, reference = np.asarray(values, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if values.shape != reference.shape:
        raise ValueError(f"paired values of shape {values.shape} and {reference.shape}")
    return values, reference


def _resampled_pairs(n: int, seed: int) -> np.ndarray:
    """``BOOTSTRAP_SAMPLES`` resamples of ``n`` pair indices, drawn with replacement (one row a resample)."""
    return np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP_SAMPLES, n))
