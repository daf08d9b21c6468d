"""``rlpilot compare``'s answer: per condition and row the mean error and effort, the paired ratios to the oracle and
the robust reference with their intervals, the verdict; written as ``answer.md``, ``compare.json`` and figures."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from rlpilot.conditions import OUTSIDE, SAMPLED
from rlpilot.control.evaluate import EvalResult
from rlpilot.stats import paired_ratio

ORACLE, ROBUST = "oracle", "robust"
YES, NO = "replaces the tuning", "no"


def _cell(plan, errors: dict[str, np.ndarray], efforts: dict[str, np.ndarray], row: str) -> dict:
    cell = {
        "error": float(errors[row].mean()),
        "effort": float(efforts[row].mean()),
        "episodes": len(errors[row]),
    }
    for reference in (ORACLE, ROBUST):
        if reference in errors and reference != row:
            ratio, low, high = paired_ratio(errors[row], errors[reference])
            cell[f"to_{reference}"] = [ratio, low, high]
    if ORACLE in efforts and row != ORACLE and efforts[ORACLE].mean() > 0:
        cell["effort_to_oracle"] = float(efforts[row].mean() / efforts[ORACLE].mean())
    if row not in (ORACLE, ROBUST):
        cell["verdict"] = _verdict(plan, cell)
    return cell


def _verdict(plan, cell: dict) -> str:
    """Within ``bar`` x the oracle (or no oracle: the sampled plants), below the robust reference (the interval's
    top under 1), effort within ``effort_bar`` x the oracle's."""
    to_oracle, to_robust = cell.get("to_oracle"), cell.get("to_robust")
    if to_oracle is not None and not to_oracle[0] <= plan.bar:
        return NO
    if to_robust is not None and not to_robust[2] < 1.0:
        return NO
    if "effort_to_oracle" in cell and not cell["effort_to_oracle"] <= plan.effort_bar:
        return NO
    return YES


def summarise(plan, refs: dict, table: dict[str, dict[str, EvalResult]]) -> dict:
    """Everything ``compare.json`` holds: the plan, the references, per condition the cells and the per-episode
    errors and efforts."""
    from rlpilot.compare import per_episode

    conditions = {}
    for label, rows in table.items():
        measured = {row: per_episode(result, plan.objective) for row, result in rows.items()}
        errors = {row: m["error"] for row, m in measured.items()}
        efforts = {row: m["effort"] for row, m in measured.items()}
        conditions[label] = {
            "condition": plan.conditions[label],
            "cells": {row: _cell(plan, errors, efforts, row) for row in rows},
            "per_episode": {row: {"error": errors[row].tolist(), "effort": efforts[row].tolist()} for row in rows},
        }
    return {
        "env": plan.env.id,
        "controller": plan.controller,
        "objective": plan.objective.describe(),
        "bar": plan.bar,
        "effort_bar": plan.effort_bar,
        "episodes": plan.episodes,
        "seeds": [plan.seed, plan.seed + plan.episodes - 1],
        "tuning_seeds": [plan.tuning_seed, plan.tuning_seed + plan.tuning_episodes - 1],
        "references": {name: ref.as_dict() for name, ref in refs.items()},
        "stamp": _stamp(plan.command),
        "conditions": conditions,
    }


def _stamp(command: str) -> dict:
    """When, with what, and asked how: what makes a result file a record."""
    import platform
    import time
    from importlib.metadata import version

    from rlpilot.runs import git_revision

    versions = {name: version(name) for name in ("rlpilot", "torch", "gymnasium", "numpy")}
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime()),
        "commit": git_revision() or "unknown",  # the checkout's (an installed rlpilot has none)
        "command": command,
        "versions": versions,
        "cpu": platform.processor() or platform.machine(),
    }


def _ratio(cell: dict, key: str) -> str:
    if key not in cell:
        return "-"
    ratio, low, high = cell[key]
    return f"{ratio:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(low) else f"{ratio:.2f}"


def answer_table(summary: dict) -> str:
    """The answer as a Markdown table: a line per condition and row (a condition with a value beyond its declared
    range flagged)."""
    lines = [
        "| condition | row | error | effort | vs oracle | vs robust | effort vs oracle | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, data in summary["conditions"].items():
        flag = f" ({', '.join(data['outside'])}: {OUTSIDE})" if data.get("outside") else ""
        for row, cell in data["cells"].items():
            effort_ratio = f"{cell['effort_to_oracle']:.2f}" if "effort_to_oracle" in cell else "-"
            lines.append(
                f"| {label}{flag} | {row} | {cell['error']:.4g} | {cell['effort']:.4g} | {_ratio(cell, 'to_oracle')} "
                f"| {_ratio(cell, 'to_robust')} | {effort_ratio} | {cell.get('verdict', '(reference)')} |"
            )
    return "\n".join(lines)


def _references_text(summary: dict) -> list[str]:
    lines = []
    for name, ref in summary["references"].items():
        edge = f"; on the search's edge: {', '.join(ref['edge'])}" if ref["edge"] else ""
        values = ", ".join(f"{k} {v:.4g}" for k, v in ref["kwargs"].items() if isinstance(v, (int, float)))
        lines.append(
            f"- {name}: {values} (tuning score {ref['tuning_score']:.4g}, {ref['evaluated']} candidates, "
            f"{ref['seconds']:.0f} s{edge})"
        )
    return lines


def write_report(plan, declared, summary: dict, table: dict, out: Path) -> None:
    """``answer.md``, ``compare.json``, ``ratios.png`` and a trace per condition into ``out``."""
    from rlpilot.common.files import atomic_write, dumps

    for label, data in summary["conditions"].items():
        data["outside"] = declared.outside(plan.conditions[label])
    figures = [ratio_chart(summary, out / "ratios.png", plan.bar)]
    if declared.trace:
        figures += [
            trace_chart(label, rows, declared.trace, out / f"trace-{_slug(label)}.png") for label, rows in table.items()
        ]
    text = [
        f"# Does a policy replace the tuning of {plan.controller} on {plan.env.id}?",
        "",
        f"Error: {summary['objective']} per episode, mean over {plan.episodes} evaluation episodes (seeds "
        f"{summary['seeds'][0]}-{summary['seeds'][1]}); references tuned on seeds {summary['tuning_seeds'][0]}-"
        f"{summary['tuning_seeds'][1]}. Ratios are paired (the same episodes), with 95% bootstrap intervals. A row "
        f"replaces the tuning where its error is within {plan.bar:g}x the oracle's, below the robust reference's "
        f"(interval under 1) and its effort within {plan.effort_bar:g}x the oracle's"
        + (f"; `{SAMPLED}` draws each condition from its declared ranges (no oracle)." if SAMPLED in table else "."),
        "",
        answer_table(summary),
        "",
        "References:",
        "",
        *_references_text(summary),
        "",
        *(f"![{path.stem}]({path.name})" for path in figures if path is not None),
        "",
        f"`{summary['stamp']['command']}`; {summary['stamp']['date']}; commit "
        f"{summary['stamp'].get('commit', 'unknown')[:12]}; "
        + ", ".join(f"{k} {v}" for k, v in summary["stamp"]["versions"].items())
        + f"; the references' search took {sum(r['seconds'] for r in summary['references'].values()):.0f} s.",
        "",
    ]
    atomic_write(out / "answer.md", "\n".join(text))
    atomic_write(out / "compare.json", dumps(summary))


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label)


def ratio_chart(summary: dict, path: Path, bar: float) -> Path:
    """Each row's error over the oracle's per condition, with its interval; a line at ``bar`` and at 1."""
    from rlpilot.plot import finish_figure, new_axes

    conditions = [label for label, data in summary["conditions"].items() if ORACLE in data["cells"]]
    rows = []
    for label in conditions:
        rows += [row for row in summary["conditions"][label]["cells"] if row != ORACLE and row not in rows]
    fig, ax = new_axes(height=3.6)
    width = 0.8 / max(len(rows), 1)
    colors = row_colors(len(rows))
    for k, row in enumerate(rows):
        x, y, low, high = [], [], [], []
        for i, label in enumerate(conditions):
            cell = summary["conditions"][label]["cells"].get(row, {})
            if "to_oracle" in cell:
                ratio, lo, hi = cell["to_oracle"]
                x.append(i + (k - (len(rows) - 1) / 2) * width)
                y.append(ratio)
                low.append(ratio - lo if math.isfinite(lo) else 0.0)
                high.append(hi - ratio if math.isfinite(hi) else 0.0)
        ax.bar(x, y, width=width, label=row, yerr=[low, high], capsize=2, color=colors[k])
    if runaway([patch.get_height() for patch in ax.patches]):  # a delayed PD at 100x would flatten the rest
        ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(bar, color="tab:red", linewidth=0.8, linestyle="--", label=f"bar {bar:g}x")
    ax.set_xticks(range(len(conditions)))
    ax.set_xticklabels(conditions, rotation=20, fontsize=8)
    ylabel = "error / oracle's" + (" (log scale)" if ax.get_yscale() == "log" else "")
    return finish_figure(
        fig, ax, path, xlabel="condition", ylabel=ylabel, title="Error against the oracle", legend_outside=len(rows) > 6
    )


def runaway(peaks: list[float], factor: float = 20.0) -> bool:
    """Whether the largest of the positive ``peaks`` is over ``factor`` times the smallest: a chart of them reads on a
    log scale (one runaway row would flatten the rest)."""
    positive = [peak for peak in peaks if peak > 0]
    return bool(positive) and max(positive) / min(positive) > factor


def row_colors(count: int) -> list:
    """One colour per row, all distinct: matplotlib's ten-colour cycle repeats from the eleventh row (compare's
    arm table has twelve), so more rows take the twenty of ``tab20``."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [palette(k % palette.N) for k in range(count)]


def trace_chart(label: str, rows: dict[str, EvalResult], names: tuple[str, ...], path: Path) -> Path | None:
    """The first evaluation episode of each row under condition ``label``: each traced entry on its own axes, step
    by step, on a log scale where one row runs 20x above another's peak (a delayed PD's oscillation would flatten
    the rest), the legend beside the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    traced = {row: result for row, result in rows.items() if all(name in result.trace for name in names)}
    if not traced:
        return None
    fig = Figure(figsize=(8.5, 1.2 + 1.6 * len(names)), dpi=120)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    colors = row_colors(len(traced))
    for ax, name in zip(axes, names):
        lows, peaks = [], []
        for color, (row, result) in zip(colors, traced.items()):
            values = result.trace[name][: int(result.lengths[0]), 0]
            ax.plot(np.arange(len(values)), values, linewidth=1.0, label=row, color=color)
            lows.append(float(values.min()) if len(values) else 0.0)
            peaks.append(float(values.max()) if len(values) else 0.0)
        if min(lows) > 0 and runaway(peaks):
            ax.set_yscale("log")
        ax.set_ylabel(name, fontsize=8)
        ax.grid(alpha=0.3)
    return _finish(fig, axes, path, f"One evaluation episode, {label}")


def _finish(fig, axes, path: Path, title: str) -> Path:
    from rlpilot.common.files import atomic_write

    axes[0].set_title(title)
    axes[-1].set_xlabel("step")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomic_write(path, buffer.getvalue())
    return path
