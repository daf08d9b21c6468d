"""Writes the generated result tables into README.md and docs/results.md from the stamped result files.

    python tools/gen_results.py          # rewrite the tables between their markers
    python tools/gen_results.py --check  # exit 1 if a table differs from its result file (a unit test runs this)

Each table lives between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``; nothing between the
markers is typed by hand. Sources: the newest ``benchmarks/results/time_to_solve-*.json`` (written by
``benchmarks/time_to_solve.py --out``).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGETS = (
    ROOT / "README.md",
    ROOT / "docs" / "results.md",
    ROOT / "docs" / "tune.md",
    ROOT / "docs" / "robot-arm.md",
)
ARM_NAMES = {"preset": "preset vs preset (what a user gets)", "same": "same settings (implementation speed)"}


def newest(pattern: str) -> Path | None:
    found = sorted(RESULTS.glob(pattern))
    return found[-1] if found else None


def stamp_value(stamp: list[str], key: str) -> str:
    for line in stamp:
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return "?"


def source_line(path: Path, stamp: list[str]) -> str:
    """Where a table's numbers come from: the file, its commit, date, load and command."""
    load = stamp_value(stamp, "load at start").split(" (")[0]
    return (
        f"Source: `{path.relative_to(ROOT)}` (commit {stamp_value(stamp, 'commit')[:12]}, "
        f"{stamp_value(stamp, 'date')}, load at start {load}); command: `{stamp_value(stamp, 'command')}`."
    )


def time_to_solve_table(path: Path) -> str:
    data = json.loads(path.read_text())
    lines = [
        "| task | arm | seeds solved by both | rlpilot train s (median) | SB3 + Zoo train s (median) | "
        "ratio, training clock [95% CI] | ratio, whole process [95% CI] | ratio, frames [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo, task in data["tasks"].items():
        peer = f"sb3-{algo}-zoo"
        for arm, c in task["comparisons"].items():
            ours = c["ours"]
            solved = [
                i for i, r in enumerate(task["results"][ours]) if r["solved"] and task["results"][peer][i]["solved"]
            ]
            ours_s = statistics.median(task["results"][ours][i]["train_s"] for i in solved) if solved else float("nan")
            peer_s = statistics.median(task["results"][peer][i]["train_s"] for i in solved) if solved else float("nan")
            cells = [
                f"{c[key][0]:.2f}x [{c[key][1]:.2f}-{c[key][2]:.2f}]" for key in ("train_s", "process_s", "frames")
            ]
            lines.append(
                f"| {algo.upper()} on {task['env_id']} | {ARM_NAMES.get(arm, arm)} | {c['both_solved']}/{c['seeds']} | "
                f"{ours_s:.2f} | {peer_s:.2f} | {' | '.join(cells)} |"
            )
    seeds = next(iter(data["tasks"].values()))["seeds"]
    lines += [
        "",
        f"Ratios are SB3 time / rlpilot time per seed (above 1: rlpilot is faster), median over the seeds both "
        f"solved, with a 95% bootstrap interval; seeds {seeds[0]}-{seeds[-1]} (no preset was tuned on them). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def update_cost_table(path: Path) -> str:
    data = json.loads(path.read_text())
    ms = data["ms"]
    rows = [
        (
            "PPO update, minibatch " + str(data["minibatch"]) + ", 64-64 tanh MLPs",
            "ClipPPOLoss update",
            "rlpilot ppo_loss update",
        ),
        ("GAE over a 256-transition batch", "GAE module per batch", "rlpilot gae per batch"),
        ("DQN update, batch 64, 64-64 ReLU MLP, double DQN", "DQNLoss update", "rlpilot dqn_loss update"),
    ]
    lines = ["| what | TorchRL module | rlpilot (plain torch) | ratio |", "|---|---|---|---|"]
    for what, theirs, ours in rows:
        lines.append(f"| {what} | {ms[theirs]:.2f} ms | {ms[ours]:.2f} ms | {ms[theirs] / ms[ours]:.2f}x |")
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def stays_solved_table(path: Path) -> str:
    data = json.loads(path.read_text())
    lines = [
        f"| preset | seeds solved | frames to first solve (median) | share of the next {data['after']} evaluations "
        "at or above the threshold (mean over solved seeds) | per seed |",
        "|---|---|---|---|---|",
    ]
    for preset, entry in data["presets"].items():
        solved = [r for r in entry["results"] if r["solved"]]
        shares = [r["stays_solved"] for r in solved if r["stays_solved"] is not None]
        frames = f"{statistics.median(r['solved_at_frames'] for r in solved):,.0f}" if solved else "-"
        share = f"{statistics.mean(shares):.2f}" if shares else "-"
        per_seed = ", ".join("-" if r["stays_solved"] is None else f"{r['stays_solved']:.1f}" for r in entry["results"])
        lines.append(f"| `{preset}` | {len(solved)}/{len(entry['results'])} | {frames} | {share} | {per_seed} |")
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def fault_soak_table(path: Path) -> str:
    data = json.loads(path.read_text())
    counts: dict[str, int] = {}
    for fault in data["faults"]:
        counts[fault["fault"]] = counts.get(fault["fault"], 0) + 1
    growth = data["rss_growth_percent_per_process"]
    rows = [
        ("minutes of training", f"{data['minutes']:g}"),
        ("faults injected", ", ".join(f"{name} x{n}" for name, n in counts.items())),
        ("frames trained", f"{data['frames']:,.0f}"),
        ("metrics.csv rows; frames strictly increasing", f"{data['rows']:,}; {data['frames_strictly_increasing']}"),
        (
            "restarts; resume events; meta.json resumes",
            f"{data['restarts']}; {data['resume_events']}; {data['meta_resumes']}",
        ),
        ("NaN observation events (reset, training went on)", f"{data['nonfinite_observation_events']:,}"),
        (
            "resident memory growth after warm-up, per process (max)",
            f"{max(growth.values()):+.2f}% over {len(growth)} processes" if growth else "-",
        ),
        ("final greedy evaluation", data["final_eval_100_episodes"]),
    ]
    lines = ["| measure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def _num(value) -> str:
    return "-" if value is None else (f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}")


def tune_acrobot_table(path: Path) -> str:
    """Issue 20's acceptance: the search's cost, its best trial, and the check on fresh seeds."""
    data = json.loads(path.read_text())
    summary = data["summary"]
    rows, check = summary["rows"], summary["check"]
    complete = [r for r in rows if r["state"] == "complete"]
    best = complete[0]
    params = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items())
    lines = [
        f"Start: {data['start']}. Search: {len(complete)} complete and {len(rows) - len(complete)} pruned trials, "
        f"3 tuning seeds each (0-2), whole command **{data['wall_s'] / 60:.1f} min** on this machine "
        f"(closing check included). Best trial {best['number']}: `{params}` (IQM over its seeds "
        f"{_num(best['value'])} frames).",
        "",
        "| configuration | seeds solved | IQM frames to solved [95% CI] | per seed (unsolved: the 200k budget) |",
        "|---|---|---|---|",
    ]
    for arm, values in check["arms"].items():
        low, high = values["interval"]
        lines.append(
            f"| {arm} | {values['solved']}/{len(check['seeds'])} | "
            f"{_num(values['value'])} [{_num(low)}, {_num(high)}] | "
            f"{', '.join(_num(v) for v in values['scores'])} |"
        )
    low, high = check["ratio_interval"]
    lines += [
        "",
        f"Check seeds {check['seeds'][0]}-{check['seeds'][-1]}, none of them a tuning seed. Paired ratio start/best "
        f"per seed: median {check['ratio_median']:.2f}x [{low:.2f}, {high:.2f}] (95% bootstrap; above 1: the best "
        "configuration needs fewer frames"
        + (
            "; a lower bound: unsolved start seeds are scored at the budget"
            if check["arms"]["start"]["solved"] < len(check["seeds"])
            else ""
        )
        + "). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def arm_gains_table(path: Path) -> str:
    """benchmarks/arm_gains.py: the gains per condition (nominal = what the controllers ship with)."""
    data = json.loads(path.read_text())
    lines = [
        "| condition | disturbance | PD kp, kd | PD mean return | PID kp, kd, ki | PID mean return |",
        "|---|---|---|---|---|---|",
    ]
    for name, gains in data["gains"].items():
        pd, pid = gains["pd"], gains["pid"]
        disturbance = ", ".join(f"{k} {v:g}" for k, v in data["conditions"][name].items()) or "none"
        lines.append(
            f"| {name} | {disturbance} | {pd['kp']:g}, {pd['kd']:g} | {pd['score']:.3f} | "
            f"{pid['kp']:g}, {pid['kd']:g}, {pid['ki']:g} | {pid['score']:.3f} |"
        )
    lines += [
        "",
        f"Best of the grid on tuning seeds {data['tuning_seeds']} (mean return over those episodes). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def robot_arm_track_table(path: Path) -> str:
    """benchmarks/robot_arm_track.py: one table per condition, every controller and RL group a row."""
    data = json.loads(path.read_text())
    blocks = []
    for condition, rows in data["conditions"].items():
        measures = [k for k in next(iter(rows.values())) if not k.endswith(" CI") and k != "runs"]
        lines = [
            f"**{condition}**",
            "",
            "| controller | " + " | ".join(measures) + " |",
            "|---|" + "---|" * len(measures),
        ]
        for name, row in rows.items():
            cells = []
            for measure in measures:
                cell = f"{row[measure]:.3g}"
                interval = row.get(f"{measure} CI")
                if interval and interval[0] == interval[0]:  # not NaN
                    cell += f" [{interval[0]:.3g}, {interval[1]:.3g}]"
                cells.append(cell)
            label = f"{name} ({row['runs']} runs, IQM)" if "runs" in row else name
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    groups = "; ".join(f"{name}: {len(runs)} runs" for name, runs in data.get("groups", {}).items()) or "none"
    return "\n\n".join(blocks) + (
        f"\n\n{data['episodes']} episodes per row (seeds {data['seed']}-{data['seed'] + data['episodes'] - 1}); "
        f"RL groups: {groups}; gains from `{data['gains']}`. " + source_line(path, data["stamp"])
    )


SOURCES = {
    "time_to_solve": ("time_to_solve-*.json", time_to_solve_table),
    "update_cost": ("update_cost-*.json", update_cost_table),
    "stays_solved": ("stays_solved-*.json", stays_solved_table),
    "fault_soak": ("fault_soak-*.json", fault_soak_table),
    "tune_acrobot": ("tune_acrobot-*.json", tune_acrobot_table),
    "arm_gains": ("arm_gains-*.json", arm_gains_table),
    "robot_arm_track": ("robot_arm_track-*.json", robot_arm_track_table),
}


def tables() -> dict[str, str]:
    found = {}
    for name, (pattern, table) in SOURCES.items():
        source = newest(pattern)
        if source is not None:
            found[name] = table(source)
    return found


def render(text: str, generated: dict[str, str]) -> str:
    for name, table in generated.items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", re.S)
        text = pattern.sub(lambda m, t=table: f"{m.group(1)}{t}\n{m.group(2)}", text)
    return text


def main() -> int:
    generated = tables()
    stale = []
    for target in TARGETS:
        text = target.read_text()
        new = render(text, generated)
        if new != text:
            stale.append(target)
            if "--check" not in sys.argv:
                target.write_text(new)
    if "--check" in sys.argv and stale:
        print(
            f"stale generated tables in {', '.join(str(p.relative_to(ROOT)) for p in stale)}: "
            "run python tools/gen_results.py"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
