"""docs/adapt.md's generated blocks: ``adapt_first_step``, what the first step of an episode costs any controller that
must learn the plant from history (``benchmarks/adapt_first_step.py``), per plant, from its newest
``benchmarks/results/adapt_first_step-PLANT-*.json``; ``adapt_identify``, how much the first steps tell about the arm
(``benchmarks/adapt_identify.py``, its newest ``adapt_identify-arm-*.json``); ``adapt_cost``, what each plant's
command costs from nothing cached (``benchmarks/adapt_cost.py``). tools/gen_results.py runs this."""

from __future__ import annotations

import json
from pathlib import Path

from result_stamps import RESULTS, ROOT, newest, stamp_value

PLANTS = {"arm": "the arm (`rlpilot/ReacherTrack-v0`)", "dc-motor": "the DC motor", "tank": "the heated tank"}


def _worst(row: dict[str, list[float]]) -> tuple[str, list[float]]:
    return max(row.items(), key=lambda item: item[1][0])


def first_step_table() -> str | None:
    rows, sources = [], []
    for plant, label in PLANTS.items():
        path = newest(f"adapt_first_step-{plant}-*.json")
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
        sources.append(_source(Path(path), data, f"{data['episodes']} episodes a cell"))
    if not rows:
        return None
    head = [
        "| plant | first steps not knowing it | robust gains first: worst plant | best first choice | "
        "its worst ratio [paired 95%] | where it binds |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n\nSources (each with every plant and candidate): " + "; ".join(sources) + "."


def _source(path: Path, data: dict, what: str) -> str:
    shown = path.relative_to(ROOT).with_suffix(".txt")
    commit, cpu, command = (stamp_value(data["stamp"], key) for key in ("commit", "cpu", "command"))
    return f"`{shown}` ({what}, commit {commit[:12]}, {cpu}; command: `{command}`)"


def identify_table() -> str | None:
    path = newest("adapt_identify-arm-*.json")
    if path is None:
        return None
    data = json.loads(Path(path).read_text())
    errors, named = data["errors"], data["named"]
    last = data["steps"] - 1
    lines = ["| step | mean label | fresh fit | student | fresh fit / mean label |", "|---|---|---|---|---|"]
    for step in range(data["steps"]):
        cells = [f"{errors[name][step]:.3f}" for name in ("mean label", "fresh fit", "student")]
        ratio = errors["fresh fit"][step] / errors["mean label"][step]
        lines.append(f"| {step} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    lines += [
        "",
        f"| named arm | oracle kp, kd | fresh fit at step 1 | at step {last} | student at step 1 | at step {last} |",
    ]
    lines.append("|---|---|---|---|---|---|")
    for plant, row in named.items():
        cells = [
            row["label"],
            row["fresh fit @1"],
            row[f"fresh fit @{last}"],
            row["student @1"],
            row[f"student @{last}"],
        ]
        lines.append(f"| {plant} | " + " | ".join("/".join(f"{x:.2f}" for x in cell) for cell in cells) + " |")
    what = f"{data['train_episodes']} fitting and {data['episodes']} measured episodes a plant"
    return (
        "\n".join(lines) + "\n\nGains as multiples of the robust PD's. Source: " + _source(Path(path), data, what) + "."
    )


def cost_table() -> str | None:
    """What each plant's documented ``train adapt`` command costs from nothing cached (``benchmarks/adapt_cost.py``):
    each plant from the newest file (by its stamp's date) that measured it, so that re-timing one plant
    (``--plant arm``) replaces that row alone, and each row names its source."""
    newest: dict[str, tuple[str, Path, dict]] = {}
    for path in sorted(RESULTS.glob("adapt_cost-*.json")):
        data = json.loads(path.read_text())
        date = stamp_value(data["stamp"], "date")
        for plant in data["plants"]:
            if plant not in newest or date > newest[plant][0]:
                newest[plant] = (date, path, data)
    if not newest:
        return None
    lines = [
        "| plant | whole process | teacher (robust + oracles) | DAgger and its evaluations | plants | frames |",
        "|---|---|---|---|---|---|",
    ]
    order = [plant for plant in ("arm", "tank", "dc-motor") if plant in newest] + sorted(set(newest) - set(PLANTS))
    for plant in order:
        found = newest[plant][2]["plants"][plant]
        lines.append(
            f"| {PLANTS.get(plant, plant)} | {found['whole_s'] / 60:.1f} min | {found['teacher_s']:.0f} s | "
            f"{found['training_s']:.0f} s | {found['conditions']} | {found['frames']:,} |"
        )
    commands = "; ".join(f"{plant}: `{newest[plant][2]['plants'][plant]['command']}`" for plant in order)
    sources: dict[Path, list[str]] = {}
    for plant in order:
        sources.setdefault(newest[plant][1], []).append(plant)
    cited = []
    for path, plants in sources.items():
        data = newest[plants[0]][2]
        what = f"{', '.join(plants)}: {data['cores']} cores, one command at a time, each from an empty runs folder"
        cited.append(_source(path, data, what))
    return "\n".join(lines) + f"\n\nThe commands: {commands}. Sources: " + "; ".join(cited) + "."


def tables() -> dict[str, str]:
    found = {"adapt_first_step": first_step_table(), "adapt_identify": identify_table(), "adapt_cost": cost_table()}
    return {name: table for name, table in found.items() if table}
