"""docs/adapt.md's generated block ``adapt_first_step``: what the first step of an episode costs any controller that
must learn the plant from history (``benchmarks/adapt_first_step.py``), per plant, from its newest
``benchmarks/results/adapt_first_step-PLANT-*.json`` (tools/gen_results.py runs this)."""

from __future__ import annotations

import json
from pathlib import Path

import results_figures  # the newest result file of a pattern
from result_stamps import stamp_value

PLANTS = {"arm": "the arm (`rlpilot/ReacherTrack-v0`)", "dc-motor": "the DC motor", "tank": "the heated tank"}


def _worst(row: dict[str, list[float]]) -> tuple[str, list[float]]:
    return max(row.items(), key=lambda item: item[1][0])


def first_step_table() -> str | None:
    rows, sources = [], []
    for plant, label in PLANTS.items():
        path = results_figures.newest(f"adapt_first_step-{plant}-*.json")
        if path is None:
            continue
        data = json.loads(Path(path).read_text())
        ratios = data["ratios"]
        robust_plant, robust = _worst(ratios["x1"])
        best = data["best"]
        best_plant, worst = _worst(ratios[best])
        # the plants within the worst one's interval, where the first step costs anything (a few percent)
        binding = [name for name, r in ratios[best].items() if r[2] >= worst[1]] if worst[0] > 1.02 else ["-"]
        rows.append(
            f"| {label} | {data['steps']} | {robust[0]:.2f} ({robust_plant}) | {best} | "
            f"{worst[0]:.2f} [{worst[1]:.2f}, {worst[2]:.2f}] | {', '.join(binding)} |"
        )
        shown = Path(path).relative_to(results_figures.ROOT).with_suffix(".txt")
        commit, cpu, command = (stamp_value(data["stamp"], key) for key in ("commit", "cpu", "command"))
        sources.append(
            f"`{shown}` ({data['episodes']} episodes a cell, commit {commit[:12]}, {cpu}; command: `{command}`)"
        )
    if not rows:
        return None
    head = [
        "| plant | first steps not knowing it | robust gains first: worst plant | best first choice | "
        "its worst ratio [paired 95%] | where it binds |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n\nSources (each with every plant and candidate): " + "; ".join(sources) + "."


def tables() -> dict[str, str]:
    table = first_step_table()
    return {"adapt_first_step": table} if table else {}
