"""docs/locomotion.md's generated blocks: the MuJoCo locomotion presets on held-out seeds beside the scores the
peers publish (tools/gen_results.py runs this).

Each preset's newest ``benchmarks/results/seed_runs-PRESET-*.json`` (``benchmarks/seed_runs.py``, held-out seeds
100+) gives its greedy return at 300k and 1M frames: the mean over the seeds with a 95% t interval (one seed: its
value). ``benchmarks/peers/published_mujoco.json`` holds the peers' published 1M-step returns, copied with their
sources; a preset reaches the best of them when its interval's upper end is at or above it.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from result_stamps import newest as _newest_file

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "benchmarks" / "peers" / "published_mujoco.json"
ENVS = ("HalfCheetah", "Hopper", "Walker2d", "Ant")
PRESETS = [f"{algo}-{env.lower()}" for algo in ("sac", "td3") for env in ENVS]
MILESTONES = (300_000, 1_000_000)
DONE = ("finished", "solved")
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
"""Student's t quantile (97.5%) by degrees of freedom: the 95% interval of a mean over a few seeds."""


def newest(preset: str, kind: str = "seed_runs") -> Path | None:
    return _newest_file(f"{kind}-{preset}-*.json")


def peers_cell(preset: str, sources: list[Path]) -> str:
    """The peers measured here (benchmarks/locomotion_peers.py) at 300k frames, on their seeds."""
    cells = []
    for library in ("sb3", "sbx"):
        path = newest(f"{library}-{preset}", kind="locomotion_peers")
        if path is None:
            continue
        sources.append(path)
        rows = json.loads(path.read_text())["rows"]
        values = [v for row in rows if (v := at_frames(row["curve"], MILESTONES[0])) is not None]
        seeds = ", ".join(str(row["seed"]) for row in rows)
        cells.append(f"{library.upper()}: {_cell(values)}, seed {seeds}")
    return "; ".join(cells) or "-"


def at_frames(curve: list[dict], frames: int) -> float | None:
    """The greedy evaluation at ``frames`` (the first at or past it; evaluations fall on batch boundaries), or
    ``None`` where the run has not got there."""
    return next((point["eval"] for point in curve if point["frames"] >= frames), None)


def first_at(curve: list[dict], threshold: float) -> int | None:
    """The frames of the first greedy evaluation at or above ``threshold``."""
    return next((point["frames"] for point in curve if point["eval"] >= threshold), None)


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and its 95% t interval (one value: itself, no width)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def _cell(values: list[float]) -> str:
    if not values:
        return "not reached yet"
    mean, low, high = interval(values)
    if len(values) == 1:
        return f"{mean:,.0f} (1 seed)"
    return f"{mean:,.0f} [{low:,.0f}, {high:,.0f}] ({len(values)} seeds)"


def best_published(algo: str, env: str) -> tuple[float, str] | None:
    data = json.loads(PUBLISHED.read_text())
    rows = [row for row in data["scores"] if row["algo"] == algo and row["env"] == env]
    if not rows:
        return None
    best = max(rows, key=lambda row: row["mean"])
    source = data["sources"][best["source"]]
    return best["mean"], f"{source['label']}, {env}-{source['version']}"


def scores_table() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from rlpilot.config import load_config, solved_threshold

    lines = [
        "| preset | held-out seeds run | greedy return at 300k | at 1M | first at the threshold (frames) "
        "| peers here at 300k (the Zoo's settings) | best published at 1M | reached? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sources = []
    for preset in PRESETS:
        algo, env_name = preset.split("-", 1)
        env = next(env for env in ENVS if env.lower() == env_name)
        published = best_published(algo, env)
        published_cell = f"{published[0]:,.0f} ({published[1]})" if published else "none published"
        path = newest(preset)
        if path is None:
            peers = peers_cell(preset, sources)
            lines.append(f"| `{preset}` | none yet | - | - | - | {peers} | {published_cell} | not measured |")
            continue
        sources.append(path)
        rows = [row for row in json.loads(path.read_text())["rows"] if row["curve"]]
        cells = []
        for frames in MILESTONES:
            cells.append(_cell([v for row in rows if (v := at_frames(row["curve"], frames)) is not None]))
        final = [v for row in rows if (v := at_frames(row["curve"], MILESTONES[-1])) is not None]
        if not final or not published:
            verdict = "not measured" if not final else "-"
        else:
            verdict = "yes" if interval(final)[2] >= published[0] else f"no ({interval(final)[2] / published[0]:.0%})"
            verdict += " (one seed: no interval)" if len(final) == 1 else ""
        threshold = solved_threshold(load_config(preset))
        solved = [f for row in rows if (f := first_at(row["curve"], threshold)) is not None]
        solved_cell = f"{statistics.median(solved):,.0f} (median, {len(solved)}/{len(rows)})" if solved else "-"
        seeds = ", ".join(
            str(row["seed"])
            + ("" if row["status"] in DONE else f" ({row['status']}, at {row['curve'][-1]['frames']:,} frames)")
            for row in rows
        )
        lines.append(
            f"| `{preset}` | {seeds} | {cells[0]} | {cells[1]} | {solved_cell} | {peers_cell(preset, sources)} "
            f"| {published_cell} | {verdict} |"
        )
    data = json.loads(PUBLISHED.read_text())
    lines += [
        "",
        "Published: " + "; ".join(f"{s['label']}: {s['where']}, {s['protocol']}" for s in data["sources"].values()),
    ]
    lines += ["", "Sources: " + (", ".join(f"`{p.relative_to(ROOT)}`" for p in sources) or "none yet") + "."]
    return "\n".join(lines)


def tables() -> dict[str, str]:
    return {"locomotion_scores": scores_table()}
