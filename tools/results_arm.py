"""The robot arm's and the DC motor's tables (docs/robot-arm.md, docs/arm-report.md, docs/results.md): gains per
condition, tracking per controller and condition, the answer to the client's question (tools/gen_results.py runs
this).
"""

from __future__ import annotations

import json
from pathlib import Path

import results_compare
from result_stamps import ROOT, shown, source_line


def arm_gains_table(path: Path) -> str:
    """benchmarks/arm_gains.py: the gains per condition (nominal = what the controllers ship with)."""
    data = json.loads(path.read_text())
    lines = [
        "| condition | disturbance | PD kp, kd | PD mean return | PID kp, kd, ki | PID mean return |",
        "|---|---|---|---|---|---|",
    ]
    for name, gains in data["gains"].items():
        pd, pid = gains["pd"], gains["pid"]
        if name == "robust":  # tuned on randomised dynamics: every disturbance drawn per episode
            disturbance = "randomised: each disturbance drawn from its range per episode"
        else:
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
            lines.append(f"| {track_label(name, row)} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + (
        f"\n\n{data['episodes']} episodes per row (seeds {data['seed']}-{data['seed'] + data['episodes'] - 1}); "
        f"RL groups: {track_groups(data)}; gains from `{data['gains']}`"
        + (f" and `{data['autotune']}`" if "autotune" in data else "")
        + ". "
        + source_line(path, data["stamp"])
    )


RENAMED_PRESETS = {"(ppo-reacher-track-adaptive)": "(ppo-reacher-track-history)"}
"""Presets renamed since their result files were written (the files' group names keep the old one): the end-to-end
PPO history student's name went to the preset of ``train adapt``."""


def track_label(name: str, row: dict) -> str:
    """A robot_arm_track row's name (under its preset's present name), with its number of runs for an RL group."""
    for old, new in RENAMED_PRESETS.items():
        name = name.replace(old, new)
    return f"{name} ({row['runs']} runs, IQM)" if "runs" in row else name


def track_groups(data: dict) -> str:
    """The RL groups of a robot_arm_track result: runs each, and where a reused group was measured."""
    reused = data.get("reused", {})
    parts = []
    for name, runs in data.get("groups", {}).items():
        where = ""
        if name in reused:
            where = f", measured earlier: `{reused[name]['file']}`, commit {reused[name]['commit']}"
        parts.append(f"{track_label(name, {})}: {len(runs)} runs{where}")
    return "; ".join(parts) or "none"


TRACK_DETAIL = "intervals and the other measures in the tables per condition below"


ORACLE_ROW = "PD oracle (gains for this condition)"
NOT_MEASURED = "n/m"
"""A robot_arm_track cell a reused RL group has no measure for (a condition added after its runs were gone)."""


def ratio_to_oracle_lines(data: dict, reference: str = ORACLE_ROW) -> list[str]:
    """Every row's tracking RMSE over the per-condition retuned PD's (issue 37's bar: at most 1.2x), or over
    another ``reference`` row's."""
    conditions = list(data["conditions"])
    names = [n for n in next(iter(data["conditions"].values())) if n != reference]
    lines = ["| controller | " + " | ".join(conditions) + " |", "|---|" + "---|" * len(conditions)]
    for name in names:
        cells = [
            f"{data['conditions'][c][name]['RMSE (mm)'] / data['conditions'][c][reference]['RMSE (mm)']:.2f}x"
            if name in data["conditions"][c]
            else NOT_MEASURED
            for c in conditions
        ]
        lines.append(f"| {track_label(name, data['conditions'][conditions[0]][name])} | " + " | ".join(cells) + " |")
    return lines


def robot_arm_track_summary(path: Path, detail: str = TRACK_DETAIL, ratios: bool = True) -> str:
    """benchmarks/robot_arm_track.py at a glance: tracking RMSE (mm) and effort, every row by condition; with
    ``ratios``, each row's RMSE as a ratio to the per-condition retuned PD's."""
    data = json.loads(path.read_text())
    conditions = list(data["conditions"])
    names = list(next(iter(data["conditions"].values())))
    lines = [
        "| controller | " + " | ".join(conditions) + " |",
        "|---|" + "---|" * len(conditions),
    ]
    for name in names:
        cells = []
        for condition in conditions:
            row = data["conditions"][condition].get(name)
            cells.append(f"{row['RMSE (mm)']:.3g} ({row['effort']:.2g})" if row else NOT_MEASURED)
        lines.append(f"| {track_label(name, data['conditions'][conditions[0]][name])} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + (
        f"\n\nTracking RMSE in mm (motor effort, mean |a|^2, in brackets; {NOT_MEASURED}: not measured, a group reused "
        "from a file without that condition, or the relay auto-tune, which tunes one arm, where every episode has its "
        "own); "
        f"{data['episodes']} episodes per cell "
        f"(seeds {data['seed']}-{data['seed'] + data['episodes'] - 1}); {detail}. " + source_line(path, data["stamp"])
    )
    if ratios and all(ORACLE_ROW in rows for rows in data["conditions"].values()):
        text += "\n\nThe same rows' RMSE as a ratio to the PD retuned for each condition (the oracle):\n\n"
        text += "\n".join(ratio_to_oracle_lines(data))
    return text


ROBUST_ROW = "PD robust (gains for randomised dynamics)"
ANSWER_ROWS = {  # the page's question, per condition: these rows of the comparison, by what they are
    "PD oracle (gains for this condition)": "PD retuned for the condition (oracle)",
    ROBUST_ROW: "PD tuned once on randomised dynamics (robust)",
    "PID Optuna (randomised arm)": "PID searched by Optuna on the randomised arm",
    "PD adaptive (online identification, adaptive-pd)": "PD retuned online from an identification (adaptive-pd)",
}
ANSWER_ADAPTIVE = "PD adaptive (online identification, adaptive-pd)"
"""The classical adaptive row: its verdict and its effort are shown beside the RL student's."""
ANSWER_TEACHER = "privileged teacher, PPO schedule from the true dynamics (ppo-reacher-track-teacher)"
"""The RL bound, not deployable: shown where the comparison measured it."""
ANSWER_RL = "PPO gain schedule on PD from measured history (ppo-reacher-track-adaptive)"
"""The deployable RL student the question is asked of, on the fixed PD."""
ANSWER_RL_ADAPTIVE = "PPO gain schedule on adaptive-pd from measured history (ppo-reacher-track-adaptive-pd)"
"""The deployable RL student on the classical adaptive controller: PPO refining adaptive-pd's gains."""
ANSWER_STUDENTS = {
    ANSWER_RL: "RL student (PPO schedule from measured history)",
    ANSWER_RL_ADAPTIVE: "RL student on adaptive-pd (PPO refining its gains)",
}
ANSWER_VERDICTS = {  # the rows the bar is asked of: (label, question, whether the effort clause gets its own line)
    ANSWER_ADAPTIVE: ("adaptive-pd", "meets the bar", True),
    ANSWER_RL: ("RL student", "replaces the tuning", False),  # far from the bar: its effort would not decide it
    ANSWER_RL_ADAPTIVE: ("RL on adaptive-pd", "replaces the tuning", True),
}


def robot_arm_answer(path: Path, answer: Path | None = None) -> str:
    """docs/robot-arm.md's answer, per condition, against the **fine oracle** of ``rlpilot compare`` (the newest
    ``compare-arm-*/compare.json``: the PD searched continuously per condition): each row of the benchmark script's
    comparison as the ratio of its mean tracking RMSE to the oracle's, on the same 100 evaluation episodes (the two
    play the same episodes: their PD and adaptive-pd rows agree to 4-5 digits), and whether the rows the question is
    asked of meet the bar (at most 1.2x the oracle, below compare's robust PD). ``answer``: that compare.json
    (default: the newest)."""
    data = json.loads(path.read_text())
    answer = answer or results_compare.newest("arm")
    if answer is None:
        return "No `rlpilot compare` answer for the arm yet (benchmarks/results/compare-arm-*/compare.json)."
    compared = json.loads(answer.read_text())
    # the named conditions only: the script's "random" arm draws other dynamics than compare's "sampled" one
    conditions = [c for c in data["conditions"] if c in compared["conditions"]]
    cells = {c: compared["conditions"][c]["cells"] for c in conditions}
    oracle = {c: cells[c]["oracle"]["error"] * 1e3 for c in conditions}  # m -> mm
    robust = {c: cells[c]["robust"]["error"] * 1e3 for c in conditions}
    lines = ["| | " + " | ".join(conditions) + " |", "|---|" + "---|" * len(conditions)]
    lines.append("| fine oracle RMSE (mm) | " + " | ".join(f"{oracle[c]:.3g}" for c in conditions) + " |")
    lines.append("| robust PD (compare's) | " + " | ".join(f"{robust[c] / oracle[c]:.2f}x" for c in conditions) + " |")
    rows = [*ANSWER_ROWS.items(), (ANSWER_TEACHER, "RL teacher (told the true dynamics: not deployable)")]
    for name, label in [*rows, *ANSWER_STUDENTS.items()]:
        if name in (ORACLE_ROW, ROBUST_ROW) or not any(name in data["conditions"][c] for c in conditions):
            continue
        ratio = [data["conditions"][c].get(name) for c in conditions]
        text = [f"{row['RMSE (mm)'] / oracle[c]:.2f}x" if row else NOT_MEASURED for row, c in zip(ratio, conditions)]
        lines.append(f"| {label} | " + " | ".join(text) + " |")
    for name, (label, question, with_effort) in ANSWER_VERDICTS.items():
        if not any(name in data["conditions"][c] for c in conditions):
            continue
        verdicts = []
        for c in conditions:
            row = data["conditions"][c].get(name)
            within = row is not None and row["RMSE (mm)"] <= 1.2 * oracle[c] and row["RMSE (mm)"] < robust[c]
            verdicts.append(NOT_MEASURED if row is None else "**yes**" if within else "no")
        lines.append(f"| {label} {question} (<= 1.2x oracle, < robust)? | " + " | ".join(verdicts) + " |")
        if with_effort:  # the bar's effort clause (within 20% of the oracle's)
            effort = [
                f"{data['conditions'][c][name]['effort'] / cells[c]['oracle']['effort']:.2f}x"
                if name in data["conditions"][c]
                else NOT_MEASURED
                for c in conditions
            ]
            lines.append(f"| {label}'s motor effort / oracle's | " + " | ".join(effort) + " |")
    return "\n".join(lines) + (
        f"\n\nRatios of mean tracking RMSE to the fine oracle's on the same {data['episodes']} evaluation episodes "
        "per cell (the named conditions, played alike by both; the randomised arm draws its dynamics differently in "
        "each and is in compare's table below as `sampled`); the RL rows are the IQM over their held-out training "
        "seeds. " + source_line(path, data["stamp"]) + f" The fine oracle and the robust PD: `{shown(answer.parent)}/`."
    )


def arm_adaptive_tune_table(path: Path) -> str:
    """benchmarks/arm_adaptive_tune.py: the adaptive PD's constants as searched, the cost, the tuning RMSE (with the
    ratio objective, also each condition's RMSE and effort as ratios to the oracle PD's on the tuning episodes)."""
    data = json.loads(path.read_text())
    best = {k: v for k, v in data["best"].items() if k != "score"}
    constants = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in best.items())
    conditions = list(data["tuning_rmse_mm"])
    if data.get("objective", "return") == "ratio":
        score = (
            f"Worst RMSE ratio to the oracle PD over the conditions, relative to the bar there, plus the effort "
            f"penalty, on the tuning episodes (0-{data['episodes'] - 1} per condition): {data['best']['score']:.3f} "
            f"(below 1: every condition within the bar; the hand-set start: {data['start_score']:.3f}; the first "
            f"search's constants, 2026-12-03: {data['history'][1]['score']:.3f})"
        )
    else:
        score = (
            f"Mean return on the training arm's tuning episodes {data['best']['score']:.3f} "
            f"(the hand-set start: {data['start_score']:.3f})"
        )
    lines = [
        f"Constants found (trial {data['best_trial']} of {data['trials']}): {constants}. {score}. "
        f"Cost: {data['wall_s']:.0f} s of wall time, {data['simulated_s']:,.0f} simulated seconds "
        f"({data['trials']} trials of {data['episodes']} episodes"
        + (f" on each of {len(data['ratios'])} conditions)." if "ratios" in data else ")."),
        "",
        "| tuning episodes 0-31 | " + " | ".join(conditions) + " |",
        "|---|" + "---|" * len(conditions),
        "| RMSE (mm) | " + " | ".join(f"{data['tuning_rmse_mm'][c]:.3g}" for c in conditions) + " |",
    ]
    if "ratios" in data:
        ratios = data["ratios"]
        lines[-3:] = [
            f"| tuning episodes 0-{data['episodes'] - 1} | " + " | ".join(ratios) + " |",
            "|---|" + "---|" * len(ratios),
            "| RMSE (mm) | "
            + " | ".join(f"{ratios[c]['rmse_ratio'] * data['references'][c]['oracle_rmse_mm']:.3g}" for c in ratios)
            + " |",
            "| oracle PD's RMSE (mm) | "
            + " | ".join(f"{data['references'][c]['oracle_rmse_mm']:.3g}" for c in ratios)
            + " |",
            "| RMSE / oracle's | " + " | ".join(f"{ratios[c]['rmse_ratio']:.2f}x" for c in ratios) + " |",
            "| bar there | " + " | ".join(f"{data['references'][c]['bar']:.2f}x" for c in ratios) + " |",
            "| effort / oracle's | " + " | ".join(f"{ratios[c]['effort_ratio']:.2f}x" for c in ratios) + " |",
        ]
    return "\n".join([*lines, "", source_line(path, data["stamp"])])


def robot_arm_beyond(path: Path) -> str:
    """benchmarks/robot_arm_track.py on levels and combinations beyond the named conditions: RMSE and effort, then
    each row's RMSE as a ratio to the robust PD's (no oracle was tuned there)."""
    data = json.loads(path.read_text())
    text = robot_arm_track_summary(path, "no per-condition oracle was tuned for these", ratios=False)
    text += "\n\nThe same rows' RMSE as a ratio to the robust PD's (one set of gains tuned on randomised dynamics):\n\n"
    return text + "\n".join(ratio_to_oracle_lines(data, ROBUST_ROW))


def arm_ratio_spread_table(path: Path) -> str:
    """benchmarks/arm_ratio_spread.py: adaptive-pd's ratio to the oracle on many episodes, with a paired interval,
    its spread over blocks of 100 episodes and the typical episode's ratio."""
    data = json.loads(path.read_text())
    conditions = data["conditions"]
    names = list(conditions)
    block = data["block"]

    def row(label: str, cell) -> str:
        return f"| {label} | " + " | ".join(cell(conditions[n]) for n in names) + " |"

    def ratio(c: dict, who: str) -> str:
        r = c[who]
        return f"{r['ratio']:.2f}x [{r['ratio_ci'][0]:.2f}-{r['ratio_ci'][1]:.2f}]"

    def meets(c: dict) -> str:
        r = c["adaptive-pd"]
        if r["ratio_ci"][1] <= c["bar"]:
            return "**yes**"
        return "no" if r["ratio_ci"][0] > c["bar"] else "undecided"

    lines = [
        f"| {data['episodes']:,} episodes per condition | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        row("oracle PD's RMSE (mm)", lambda c: f"{c['rmse_mm']['oracle']:.3g}"),
        row("adaptive-pd's RMSE (mm)", lambda c: f"{c['rmse_mm']['adaptive-pd']:.3g}"),
        row("adaptive-pd / oracle, 95% interval", lambda c: ratio(c, "adaptive-pd")),
        row(
            f"the same on each block of {block} (first: the comparison's)",
            lambda c: (
                f"{min(c['adaptive-pd']['blocks']):.2f}-{max(c['adaptive-pd']['blocks']):.2f} "
                f"({c['adaptive-pd']['blocks'][0]:.2f})"
            ),
        ),
        row("median of the per-episode ratios", lambda c: f"{c['adaptive-pd']['median_episode_ratio']:.2f}x"),
        row("robust PD / oracle", lambda c: ratio(c, "robust")),
        row("bar there", lambda c: f"{c['bar']:.2f}x"),
        row("adaptive-pd within the bar (interval)?", meets),
        row("adaptive-pd's effort / oracle's", lambda c: f"{c['adaptive_effort_ratio']:.2f}x"),
        row(
            "worst episode, oracle / adaptive-pd (mm)",
            lambda c: f"{c['oracle_max_mm']:.3g} / {c['adaptive_max_mm']:.3g}",
        ),
        "",
        f"Ratios of mean tracking RMSE over {data['episodes']:,} episodes (seeds {data['seed']}-"
        f"{data['seed'] + data['episodes'] - 1}; the comparison's 100 are the first block), the interval a paired "
        f"bootstrap over episodes; the oracle is the PD retuned per condition (the robust PD on the randomised arm). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def arm_schedule_tuning(path: Path) -> str:
    """The tries behind ppo-reacher-track-gains: training seed 0 (one try also 1), on tuning episodes."""
    return robot_arm_track_summary(
        path, "training seed 0 for every RL row but the one marked training seed 1, one run each", ratios=False
    )


def reacher_table(path: Path) -> str:
    """benchmarks/robot_arm.py's table, copied from its stamped result file (older files: from the raw output
    and the comment lines written above it)."""
    if path.with_suffix(".json").exists():
        data = json.loads(path.with_suffix(".json").read_text())
        table = [line for line in path.read_text().splitlines() if line.startswith("|")]
        return "\n".join(table) + "\n\n" + source_line(path, data["stamp"])
    text = path.read_text().splitlines()
    table = [line for line in text if line.startswith("|")]
    header = [line.lstrip("# ") for line in text if line.startswith("#")]
    return "\n".join(table) + f"\n\nSource: `{path.relative_to(ROOT)}`: " + "; ".join(header) + "."


def dc_motor_table(path: Path) -> str:
    """docs/your-controller.md: examples/dc_motor/compare.py's table and its stamp."""
    record = json.loads(path.read_text())
    reused = record.get("reused")
    command = record["command"].split(" --group")[0] + (
        " with the two groups above" if "--group" in record["command"] else ""
    )
    kept = (
        f"; the RL rows' episodes kept from `{Path(reused['file']).name}` (commit {reused['commit']}), where "
        "they were played"
        if reused
        else ""
    )
    return (
        f"{record['table']}\n\nSource: `{path.relative_to(ROOT)}` (commit {record['commit']}, {record['date']}); "
        f"command: `cd examples && {command}`{kept}."
    )


SOURCES = {
    "arm_gains": ("arm_gains-*.json", arm_gains_table),
    "reacher": ("robot_arm-*.txt", reacher_table),
    "robot_arm_track": ("robot_arm_track-*.json", robot_arm_track_table),
    "robot_arm_track_summary": ("robot_arm_track-*.json", robot_arm_track_summary),
    "robot_arm_beyond": ("robot_arm_beyond-*.json", robot_arm_beyond),
    "robot_arm_answer": ("robot_arm_track-*.json", robot_arm_answer),
    "arm_adaptive_tune": ("arm_adaptive_tune-*.json", arm_adaptive_tune_table),
    "arm_ratio_spread": ("arm_ratio_spread-*.json", arm_ratio_spread_table),
    "arm_schedule_tuning": ("arm_schedule_tuning-*.json", arm_schedule_tuning),
    "dc_motor": ("dc_motor-*.json", dc_motor_table),
}
"""Each block of these pages and the newest result file of the pattern it is generated from (tools/gen_results.py)."""
