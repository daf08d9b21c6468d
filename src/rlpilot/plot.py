"""Training curves from ``metrics.csv``.

One run: training return per logged batch (faint), its rolling mean over the last 50 points (a fifth of
the points in a short run) with a ±1 std band, greedy evaluations (mean ± std), the solved threshold
dashed. Several runs (seeds): the mean greedy evaluation across runs on a common x grid, with a 95%
confidence band (t-interval of the mean), and each run faint. x is environment frames or wall time. PNG
or SVG by the file's extension.
:func:`curve_data` returns exactly what is drawn, so tests check the data behind the figure.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from rlpilot.common.files import atomic_write
from rlpilot.runs import Run

WINDOW = 50
X_KEYS = {"frames": ("frames", "environment frames"), "time": ("time/elapsed_s", "wall time (s)")}
# two-sided 95% t quantiles for n - 1 degrees of freedom (n runs); normal beyond 30
T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def new_axes(height: float = 4.0):
    """A figure and axes that only ever write files: a bare ``Figure`` on the Agg canvas, without pyplot
    (importing pyplot cost ~1.5 s at the end of every run, for a GUI state rlpilot never uses)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, height), dpi=120)
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def finish_figure(
    fig, ax, path: str | Path, *, xlabel: str, ylabel: str, title: str, legend_outside: bool = False
) -> Path:
    """Labels, grid and legend (beside the axes with ``legend_outside``: many entries would hide the data), then an
    atomic write (temp file, rename): never half an image."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a run that logged no return yet has nothing to label
        if legend_outside:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
        else:
            ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".").lower() or "png")
    atomic_write(path, buffer.getvalue())  # a device or a pipe (--out /dev/stdout) is written as a stream
    return path


def series(run: Run, key: str, x_key: str = "frames") -> tuple[np.ndarray, np.ndarray]:
    rows = [row for row in run.metrics() if key in row and x_key in row]
    return np.array([row[x_key] for row in rows]), np.array([row[key] for row in rows])


def rolling(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Trailing mean and std over the last ``window`` points (fewer at the start)."""
    means, stds = np.empty(len(values)), np.empty(len(values))
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        means[i], stds[i] = chunk.mean(), chunk.std()
    return means, stds


def smoothing_window(points: int) -> int:
    """Points in the rolling mean: ``WINDOW`` in a long run, a fifth of the points in a short one. A window
    as long as the run would draw the average of all of it: the 5 rows of a CartPole run that solves at 8k
    frames drew 179 at the end while the last batch's return was 500. 1: no smoothing (the line is drawn
    as logged, no band)."""
    return max(1, min(WINDOW, points // 5))


def t95(n: int) -> float:
    if n < 2:
        return float("nan")
    dof = n - 1
    return T95.get(dof) or (T95[max(k for k in T95 if k <= dof)] if dof < 30 else 1.96)


def curve_data(runs: list[Run], x: str = "frames") -> dict:
    x_key = X_KEYS[x][0]
    if len(runs) == 1:
        run = runs[0]
        tx, ty = series(run, "train/episode_return", x_key)
        window = smoothing_window(len(ty))
        mean, std = rolling(ty, window)
        ex, ey = series(run, "eval/return_mean", x_key)
        _, es = series(run, "eval/return_std", x_key)
        return {
            "kind": "single",
            "train_x": tx,
            "train_y": ty,
            "rolling_mean": mean,
            "rolling_std": std,
            "window": window,
            "eval_x": ex,
            "eval_y": ey,
            "eval_std": es,
        }
    per_run = [series(run, "eval/return_mean", x_key) for run in runs]
    per_run = [(rx, ry) for rx, ry in per_run if len(rx)]
    if not per_run:
        return {
            "kind": "multi",
            "runs": [],
            "grid": np.array([]),
            "mean": np.array([]),
            "low": np.array([]),
            "high": np.array([]),
            "n": 0,
        }
    end = min(rx[-1] for rx, _ in per_run)  # the span every run covers
    start = max(rx[0] for rx, _ in per_run)
    grid = np.linspace(start, end, 100) if end > start else np.array([start])
    stacked = np.stack([np.interp(grid, rx, ry) for rx, ry in per_run])
    mean = stacked.mean(0)
    half = t95(len(per_run)) * stacked.std(0, ddof=1) / np.sqrt(len(per_run)) if len(per_run) > 1 else 0 * mean
    return {
        "kind": "multi",
        "runs": per_run,
        "grid": grid,
        "mean": mean,
        "low": mean - half,
        "high": mean + half,
        "n": len(per_run),
    }


def plot_runs(runs: list[Run], out: str | Path, *, x: str = "frames", solved_at: float | None = None) -> dict:
    data = curve_data(runs, x)
    fig, ax = new_axes()
    if data["kind"] == "single":
        window = data["window"]
        if len(data["train_x"]):  # faint under its rolling mean; as the line itself when too short to smooth
            ax.plot(
                data["train_x"],
                data["train_y"],
                color="tab:blue",
                alpha=0.25 if window > 1 else 1.0,
                linewidth=1 if window > 1 else 2,
                label="training return (per logged batch)",
            )
        if len(data["train_x"]) and window > 1:
            ax.plot(
                data["train_x"],
                data["rolling_mean"],
                color="tab:blue",
                linewidth=2,
                label=f"rolling mean of the last {window}",
            )
            ax.fill_between(
                data["train_x"],
                data["rolling_mean"] - data["rolling_std"],
                data["rolling_mean"] + data["rolling_std"],
                color="tab:blue",
                alpha=0.12,
                label=f"± 1 std over the last {window}",
            )
        if len(data["eval_x"]):
            ax.errorbar(
                data["eval_x"],
                data["eval_y"],
                yerr=data["eval_std"] if len(data["eval_std"]) else None,
                fmt="o-",
                color="tab:orange",
                capsize=3,
                label="greedy evaluation (mean ± std)",
            )
        config = runs[0].config()
        title = f"{config.algo} on {config.subject} (seed {config.train.seed})"
    else:
        for i, (rx, ry) in enumerate(data["runs"]):
            ax.plot(rx, ry, color="gray", alpha=0.35, linewidth=1, label="each run" if i == 0 else None)
        ax.plot(
            data["grid"],
            data["mean"],
            color="tab:orange",
            linewidth=2,
            label=f"mean greedy evaluation over {data['n']} runs",
        )
        ax.fill_between(
            data["grid"],
            data["low"],
            data["high"],
            color="tab:orange",
            alpha=0.25,
            label="95% confidence band of the mean",
        )
        config = runs[0].config()
        title = f"{config.algo} on {config.subject}: {data['n']} runs"
    if solved_at is not None:
        ax.axhline(solved_at, color="gray", linestyle="--", linewidth=1, label=f"solved at {solved_at:g}")
    xlabel, ylabel = X_KEYS[x][1], "episode return"
    if config.algo == "grpo":  # a frame is a sampled response, an episode's return its reward
        xlabel, ylabel = ("sampled responses" if x == "frames" else xlabel), "reward per response (max 1)"
    finish_figure(fig, ax, out, xlabel=xlabel, ylabel=ylabel, title=title)
    return data


def plot_run(run: Run, out: str | Path | None = None, *, solved_at: float | None = None) -> Path:
    out = Path(out) if out is not None else run.curve_path
    plot_runs([run], out, solved_at=solved_at)
    return out


def plot_groups(groups: list[tuple[str, list[Run]]], path: Path, *, title: str) -> None:
    """Several groups of runs (a sweep's grid points): per group, the mean greedy evaluation over its
    runs with a 95% band. The caller finds the runs; this only draws them."""
    fig, ax = new_axes()
    for label, runs in groups:
        data = curve_data(runs) if len(runs) > 1 else None
        if data is None or not data["n"]:
            continue
        ax.plot(data["grid"], data["mean"], linewidth=2, label=f"{label} (n={data['n']})")
        ax.fill_between(data["grid"], data["low"], data["high"], alpha=0.2)
    finish_figure(fig, ax, path, xlabel="environment frames", ylabel="greedy evaluation return", title=title)
