"""Figures of the committed result files, drawn for the docs pages (tools/gen_results.py runs this).

Each figure is drawn from the newest file of its pattern in ``benchmarks/results/`` into ``docs/img/results/``:
learning curves per preset family with the spread over seeds, the time to solve against the peers, the scaling of
distributed collection. ``docs/img/results/sources.json`` records, per figure, the files it was drawn from and the
SHA-256 of those files and of this module; a figure whose record differs (a newer result file, a changed drawing)
is stale: ``python tools/gen_results.py`` redraws it and ``--check`` names it. Pixels are not compared, so a
different matplotlib or font does not make a figure stale.
"""

from __future__ import annotations

import hashlib
import io
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from result_stamps import ROOT, newest  # noqa: E402

IMAGES = ROOT / "docs" / "img" / "results"
MANIFEST = IMAGES / "sources.json"
SIDES = {
    "rlpilot-{algo}-preset": ("rlpilot preset", "tab:orange"),
    "rlpilot-{algo}-same": ("rlpilot, the Zoo's settings", "tab:red"),
    "sb3-{algo}-zoo": ("SB3", "tab:blue"),
    "sbx-{algo}-zoo": ("SBX", "tab:green"),
    "cleanrl-{algo}-zoo": ("CleanRL-style", "tab:purple"),
}
"""Time to solve: each side's result key, its label and its colour."""


def _figure(width: float = 8.0, height: float = 4.5, rows: int = 1, cols: int = 1, **share):
    """A bare ``Figure`` on the Agg canvas (no pyplot, no display) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, **share)


def _plain_log_ticks(axis) -> None:
    """A log axis labelled 1, 2, 5, 10, 20, ... (not 2 x 10^1), minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _png(fig) -> bytes:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _source_note(fig, path: Path) -> None:
    fig.text(0.99, 0.005, f"source: {path.relative_to(ROOT)}", ha="right", va="bottom", fontsize=7, color="gray")


def _count_ticks(axis) -> None:
    """Frames or responses as 20k, 1.5M (not 1e6 in the corner)."""
    from matplotlib.ticker import FuncFormatter

    def short(value: float, _) -> str:
        for size, suffix in ((1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                return f"{value / size:g}{suffix}"
        return f"{value:g}"

    axis.set_major_formatter(FuncFormatter(short))


def _seed_band(ax, curves: list[list[tuple[float, float]]], *, label: str, color: str) -> None:
    """Several seeds' curves of the same preset: the median over the seeds at each x where every seed was
    evaluated, the range (min to max) as a band, each seed faint. One seed: its curve."""
    if len(curves) == 1:
        ax.plot(*zip(*curves[0], strict=True), color=color, linewidth=2, marker="o", markersize=3,
                label=f"{label}: one seed")  # fmt: skip
        return
    for points in curves:
        ax.plot(*zip(*points, strict=True), color=color, alpha=0.3, linewidth=0.8)
    xs = sorted(set.intersection(*({x for x, _ in points} for points in curves)))
    at = [[dict(points)[x] for points in curves] for x in xs]
    ax.plot(xs, [statistics.median(v) for v in at], color=color, linewidth=2, marker="o", markersize=3,
            label=f"{label}: median of {len(curves)} seeds")  # fmt: skip
    ax.fill_between(xs, [min(v) for v in at], [max(v) for v in at], color=color, alpha=0.18,
                    label=f"{label}: range over the seeds")  # fmt: skip


# -- the figures -------------------------------------------------------------------------------------------------
def time_to_solve(path: Path) -> bytes:
    """Per task, each side's training-clock seconds to the first solved greedy evaluation, one dot a seed (a cross:
    not solved within the budget, at the time it stopped), the median as a bar; log time axis."""
    data = json.loads(path.read_text())
    tasks = list(data["tasks"].items())
    order = {"ppo": 0, "dqn": 1, "sac": 2, "td3": 3}
    tasks.sort(key=lambda item: order.get(item[0], 9))
    fig, axes = _figure(11, 6.4, 2, 2, sharex=True)
    for ax, (algo, task) in zip(axes.flat, tasks, strict=False):
        labels = []
        for key, (label, color) in SIDES.items():
            runs = task["results"].get(key.format(algo=algo))
            if not runs:
                continue
            y = len(labels)
            labels.append(label)
            solved = [r["train_s"] for r in runs if r["solved"]]
            failed = [r["train_s"] for r in runs if not r["solved"]]
            ax.scatter(solved, [y] * len(solved), color=color, s=18, alpha=0.7, zorder=3)
            if failed:
                ax.scatter(failed, [y] * len(failed), color=color, marker="x", s=30, zorder=3)
            if solved:
                median = statistics.median(solved)
                ax.plot([median, median], [y - 0.3, y + 0.3], color="black", linewidth=2, zorder=4)
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
        ax.tick_params(axis="x", labelbottom=True)
        ax.set_title(f"{algo.upper()} on {task['env_id']} ({len(task['seeds'])} seeds)", fontsize=10)
        ax.set_xlabel("seconds on the training clock to solve (log scale)")
        ax.grid(alpha=0.3, axis="x", which="both")
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="gray", marker="o", linestyle="", label="one seed, solved"),
        Line2D([], [], color="gray", marker="x", linestyle="", label="one seed, not solved (where it stopped)"),
        Line2D([], [], color="black", linewidth=2, label="median of the solved seeds"),
    ]
    fig.suptitle("Time to solve: rlpilot's presets and the peers with RL Zoo's settings", fontsize=11)
    fig.legend(handles=handles, loc="lower left", ncol=3, fontsize=8, bbox_to_anchor=(0.01, 0.0))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    _source_note(fig, path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def distributed_scaling(path: Path) -> bytes:
    """Frames per second against the number of Ray actors, per schedule, beside N x one actor's rate (perfect
    scaling) and 0.8 of it (the target)."""
    data = json.loads(path.read_text())
    results = data["results"]
    fig, axes = _figure(7.5, 4.6)
    ax = axes[0, 0]
    workers = [r["workers"] for r in results]
    one = results[0]["sync"]["fps"] / results[0]["workers"]
    ax.plot(workers, [one * n for n in workers], color="gray", linestyle="--", label="N x one actor (perfect)")
    ax.plot(workers, [0.8 * one * n for n in workers], color="gray", linestyle=":", label="0.8 x N x one actor")
    for schedule, color, what in (("sync", "tab:blue", "PPO's"), ("async", "tab:orange", "DQN/SAC/TD3's")):
        ax.plot(workers, [r[schedule]["fps"] for r in results], marker="o", color=color,
                label=f"{schedule} ({what} schedule)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_ticks(ax.yaxis)
    ax.set_xticks(workers, [str(n) for n in workers])
    ax.set_xlabel("Ray actors (log scale)")
    ax.set_ylabel("collected frames/s (log scale)")
    args = data["args"]
    ax.set_title(
        f"Distributed collection: SlowCartPole at {args['step_ms']:g} ms a step, {args['envs_per_actor']} envs an "
        "actor",
        fontsize=10,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    _source_note(fig, path)
    return _png(fig)


def multiagent_spread(path: Path) -> bytes:
    """Greedy return over training frames on simple_spread: each preset's seeds, BenchMARL's MAPPO, and the
    random and heuristic policies as lines."""
    data = json.loads(path.read_text())
    fig, axes = _figure(8, 4.6)
    ax = axes[0, 0]
    groups = {
        "rlpilot mappo-spread": ([r for r in data["runs"] if r.get("preset") == "mappo-spread"], "tab:orange"),
        "rlpilot ippo-spread": ([r for r in data["runs"] if r.get("preset") == "ippo-spread"], "tab:blue"),
        "BenchMARL MAPPO": ([r for r in data["runs"] if r.get("peer") == "benchmarl"], "tab:green"),
    }
    for label, (runs, color) in groups.items():
        if runs:
            curves = [[(e["frames"], e["return_mean"]) for e in r["evals"]] for r in runs]
            _seed_band(ax, curves, label=label, color=color)
    for (name, ref), style in zip(data["references"].items(), (":", "--"), strict=False):
        ax.axhline(ref["return_mean"], color="black", linestyle=style, linewidth=1, label=f"{name} policy")
    ax.set_xlabel("training frames")
    _count_ticks(ax.xaxis)
    ax.set_ylabel("greedy return (mean over episodes)")
    ax.set_title("Multi-agent simple_spread (3 agents): greedy return while training", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    _source_note(fig, path)
    return _png(fig)


def _seed_runs(paths: list[Path], *, ylabel: str, xlabel: str, title: str, each_seed: bool = False,
               threshold: float | None = None, ylim: tuple[float, float] | None = None) -> bytes:  # fmt: skip
    """benchmarks/seed_runs.py files, one panel each: the seeds' greedy evaluations over training, as a median and
    a band, or (``each_seed``: runs that stop when solved, so later points have fewer seeds) a line per seed."""
    fig, axes = _figure(5.2 * len(paths), 4.4, 1, len(paths))
    for ax, path in zip(axes.flat, paths, strict=True):
        data = json.loads(path.read_text())
        rows = [row for row in data["rows"] if row["curve"]]
        if each_seed:
            for row in rows:
                points = [(p["frames"], p["eval"]) for p in row["curve"]]
                ax.plot(*zip(*points, strict=True), marker="o", linewidth=1.5, label=f"seed {row['seed']}")
        else:
            curves = [[(p["frames"], p["eval"]) for p in row["curve"]] for row in rows]
            _seed_band(ax, curves, label=data["preset"], color="tab:orange")
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"solved at {threshold:g}")
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_xlabel(xlabel)
        _count_ticks(ax.xaxis)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{data['preset']}: {title}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        ax.text(0.01, 0.99, f"source: {path.name}", transform=ax.transAxes, fontsize=7, color="gray", va="top")
    return _png(fig)


def grpo_curves(*paths: Path) -> bytes:
    """GRPO's held-out reward over sampled responses, a panel per preset."""
    return _seed_runs(
        paths, ylabel="greedy reward on held-out prompts (max 1)", xlabel="sampled responses",
        title="held-out reward while training", ylim=(0, 1),
    )  # fmt: skip


def minatar_curves(path: Path) -> bytes:
    """MinAtar Breakout: greedy return at each evaluation until the run solved (the preset's threshold)."""
    sys.path.insert(0, str(ROOT / "src"))
    from rlpilot.config import load_config, solved_threshold

    threshold = solved_threshold(load_config(json.loads(path.read_text())["preset"]))
    return _seed_runs(
        [path], ylabel="greedy return (mean over episodes)", xlabel="environment frames",
        title="greedy return until solved", each_seed=True, threshold=threshold,
    )  # fmt: skip


def classic_curves(*paths: Path) -> bytes:
    """The classic-control presets on held-out seeds: greedy return at each evaluation, a line per seed, up to the
    evaluations a run makes past its first solve (``train.evals_after_solved``; the preset's threshold dashed):
    whether the greedy policy holds once solved."""
    sys.path.insert(0, str(ROOT / "src"))
    from rlpilot.config import load_config, solved_threshold

    figures = []
    for path in paths:
        threshold = solved_threshold(load_config(json.loads(path.read_text())["preset"]))
        figures.append((path, threshold))
    fig, axes = _figure(5.2 * len(paths), 4.4, 1, len(paths))
    for ax, (path, threshold) in zip(axes.flat, figures, strict=True):
        data = json.loads(path.read_text())
        for row in (row for row in data["rows"] if row["curve"]):
            points = [(p["frames"], p["eval"]) for p in row["curve"]]
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, linewidth=1.2, label=f"seed {row['seed']}")
        ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"solved at {threshold:g}")
        ax.set_xlabel("environment frames")
        _count_ticks(ax.xaxis)
        ax.set_ylabel("greedy return (mean over episodes)")
        ax.set_title(f"{data['preset']}: greedy return, and after its first solve", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        ax.text(0.01, 0.99, f"source: {path.name}", transform=ax.transAxes, fontsize=7, color="gray", va="top")
    return _png(fig)


def tune_acrobot(path: Path) -> bytes:
    """``rlpilot tune``'s acceptance run: each trial's frames to solve per tuning seed (the budget where a seed did
    not solve), its mean and the best so far; then the start and the best on the fresh check seeds, paired."""
    data = json.loads(path.read_text())
    summary = data["summary"]
    check = summary["check"]
    budget = max(max(row["scores"]) for row in summary["rows"])
    fig, axes = _figure(11, 5.0, 1, 2, gridspec_kw={"width_ratios": [2, 1]})
    ax = axes[0, 0]
    best, best_so_far = float("inf"), []
    for row in sorted(summary["rows"], key=lambda r: r["number"]):
        color = "tab:blue" if row["state"] == "complete" else "gray"
        n = row["number"]
        for score in row["scores"]:
            ax.scatter([n], [score], color=color, marker="x" if score >= budget else "o", s=22, alpha=0.8, zorder=3)
        ax.plot([n - 0.3, n + 0.3], [row["value"]] * 2, color=color, linewidth=2)
        if row["state"] == "complete":
            best = min(best, row["value"])
        best_so_far.append((n, best))
    ax.step(*zip(*best_so_far, strict=True), where="post", color="tab:orange", linewidth=1.5,
            label="best mean so far")  # fmt: skip
    ax.axhline(budget, color="gray", linestyle=":", linewidth=1, label=f"budget ({budget:,.0f} frames): not solved")
    from matplotlib.lines import Line2D

    handles = ax.get_legend_handles_labels()[0] + [
        Line2D([], [], color="tab:blue", marker="o", linestyle="", label="a tuning seed (complete trial)"),
        Line2D([], [], color="gray", marker="o", linestyle="", label="a tuning seed (pruned trial)"),
        Line2D([], [], color="tab:blue", linewidth=2, label="the trial's mean (a bar)"),
    ]
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    ax.set_xticks(sorted(row["number"] for row in summary["rows"]))
    _count_ticks(ax.yaxis)
    ax.set_xlabel("trial")
    ax.set_ylabel("frames to solved (per tuning seed)")
    ax.set_title("The search: ppo-acrobot from a poor learning rate", fontsize=10)
    ax.grid(alpha=0.3)
    ax = axes[0, 1]
    arms = check["arms"]
    for i, pair in enumerate(zip(arms["start"]["scores"], arms["best"]["scores"], strict=True)):
        ax.plot([0, 1], pair, color="tab:blue", alpha=0.6, marker="o", label="one check seed" if i == 0 else None)
    ax.set_xticks([0, 1], ["start", "best"])
    ax.set_xlim(-0.3, 1.3)
    _count_ticks(ax.yaxis)
    ax.set_ylabel("frames to solved (fresh seeds)")
    ax.set_title(f"The check on seeds {check['seeds'][0]}-{check['seeds'][-1]}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _source_note(fig, path)
    return _png(fig)


def locomotion_curves(*paths: Path) -> bytes:
    """The MuJoCo locomotion presets on held-out seeds, a panel per env over the 1M-frame budget: each algorithm's
    greedy return (median and range over the seeds), the peers measured here dotted (benchmarks/locomotion_peers.py),
    and, dashed, the best 1M-step return the peers publish."""
    published = json.loads((ROOT / "benchmarks" / "peers" / "published_mujoco.json").read_text())["scores"]
    envs = ("HalfCheetah", "Hopper", "Walker2d", "Ant")
    colors = {"sac": "tab:orange", "td3": "tab:blue"}
    peer_colors = {("sb3", "sac"): "tab:red", ("sb3", "td3"): "tab:purple", ("sbx", "sac"): "tab:green",
                   ("sbx", "td3"): "tab:olive"}  # fmt: skip
    fig, axes = _figure(16, 4.4, 1, len(envs))
    for ax, env in zip(axes.flat, envs, strict=True):
        drawn = False
        for path in paths:
            data = json.loads(path.read_text())
            *library, algo, name = data["preset"].split("-")
            if name != env.lower():
                continue
            curves = [[(p["frames"], p["eval"]) for p in row["curve"]] for row in data["rows"] if row["curve"]]
            if not curves:
                continue
            drawn = True
            if library:  # a peer measured here
                label = f"{library[0].upper()} {algo.upper()} (the Zoo's settings)"
                for points in curves:
                    ax.plot(*zip(*points, strict=True), color=peer_colors[(library[0], algo)], linestyle=":",
                            linewidth=1.8, label=label)  # fmt: skip
            else:
                _seed_band(ax, curves, label=data["preset"], color=colors[algo])
        for algo, color in colors.items():
            best = [row["mean"] for row in published if row["algo"] == algo and row["env"] == env]
            if best:
                ax.axhline(max(best), color=color, linestyle="--", linewidth=1, label=f"{algo}: best published, 1M")
        if not drawn:
            ax.text(0.5, 0.5, "no held-out run yet", transform=ax.transAxes, ha="center", color="gray")
        ax.set_xlim(0, 1_000_000)
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_title(f"{env}-v5", fontsize=10)
        ax.set_xlabel("environment frames")
        _count_ticks(ax.xaxis)
        ax.set_ylabel("greedy return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


FIGURES: dict[str, tuple[tuple[str, ...], Callable[..., bytes]]] = {
    "time-to-solve.png": (("time_to_solve-*.json",), time_to_solve),
    "distributed-scaling.png": (("distributed_scaling-*.json",), distributed_scaling),
    "multiagent-spread.png": (("multiagent_spread-*.json",), multiagent_spread),
    "grpo-curves.png": (("seed_runs-grpo-reverse-*.json", "seed_runs-grpo-arithmetic-*.json"), grpo_curves),
    "minatar-curves.png": (("seed_runs-ppo-minatar-breakout-*.json",), minatar_curves),
    "tune-acrobot.png": (("tune_acrobot-*.json",), tune_acrobot),
    "classic-curves.png": (
        ("seed_runs-ppo-cartpole-*.json", "seed_runs-dqn-cartpole-*.json", "seed_runs-sac-pendulum-*.json"),
        classic_curves,
    ),
    "locomotion-curves.png": (
        tuple(
            f"{kind}-{algo}-{env}-*.json"
            for kind in ("seed_runs", "locomotion_peers-sb3", "locomotion_peers-sbx")
            for algo in ("sac", "td3")
            for env in ("halfcheetah", "hopper", "walker2d", "ant")
        ),
        locomotion_curves,
    ),
}
"""Figure file (in ``docs/img/results/``) -> the patterns of its result files (the newest of each is drawn) and
what draws it."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sources(patterns: tuple[str, ...]) -> list[Path]:
    return [path for path in map(newest, patterns) if path is not None]


def _record(sources: list[Path]) -> dict:
    return {
        "sources": {str(path.relative_to(ROOT)): _digest(path.read_bytes()) for path in sources},
        "drawn_by": _digest(Path(__file__).read_bytes()),
    }


def stale_figures(write: bool) -> list[Path]:
    """The figures whose newest result files or drawing code differ from what drew them (redrawn when
    ``write``)."""
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    stale = []
    for name, (patterns, draw) in FIGURES.items():
        sources = _sources(patterns)
        if not sources:
            continue
        record, target = _record(sources), IMAGES / name
        if manifest.get(name) != record or not target.exists():
            stale.append(target)
            if write:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(draw(*sources))
                manifest[name] = record
    if write and stale:
        MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return stale


if __name__ == "__main__":  # draw every figure, stale or not (to look at them while changing the drawing)
    for figure_name, (figure_patterns, figure_draw) in FIGURES.items():
        if found := _sources(figure_patterns):
            IMAGES.mkdir(parents=True, exist_ok=True)
            (IMAGES / figure_name).write_bytes(figure_draw(*found))
            print(IMAGES / figure_name)
