"""Training curves from ``metrics.csv``: training return (faint), its rolling mean, greedy evaluations,
and the solved threshold."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlpilot.runs import Run


def series(run: Run, key: str, x_key: str = "frames") -> tuple[np.ndarray, np.ndarray]:
    rows = [row for row in run.metrics() if key in row and x_key in row]
    return np.array([row[x_key] for row in rows]), np.array([row[key] for row in rows])


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    if len(values) == 0:
        return values
    kernel = np.ones(min(window, len(values)))
    sums = np.convolve(values, kernel, mode="full")[: len(values)]
    counts = np.convolve(np.ones(len(values)), kernel, mode="full")[: len(values)]
    return sums / counts


def plot_run(run: Run, out: str | Path | None = None, *, solved_at: float | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out) if out is not None else run.curve_path
    config = run.config()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    x, y = series(run, "train/episode_return")
    if len(x):
        ax.plot(x, y, color="tab:blue", alpha=0.25, linewidth=1, label="training return (batch mean)")
        ax.plot(x, rolling_mean(y, 10), color="tab:blue", linewidth=2, label="training return, rolling mean of 10")
    ex, ey = series(run, "eval/return_mean")
    if len(ex):
        _, es = series(run, "eval/return_std")
        ax.errorbar(
            ex,
            ey,
            yerr=es if len(es) == len(ey) else None,
            fmt="o-",
            color="tab:orange",
            capsize=3,
            label="greedy evaluation (mean ± std)",
        )
    if solved_at is not None:
        ax.axhline(solved_at, color="gray", linestyle="--", linewidth=1, label=f"solved at {solved_at:g}")
    ax.set_xlabel("environment frames")
    ax.set_ylabel("episode return")
    ax.set_title(f"{config.algo} on {config.env.id} (seed {config.train.seed})")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(out)
    return out
