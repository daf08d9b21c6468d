"""Generated blocks of ``rlpilot compare`` answers (docs/replace-pid.md): each plant's newest committed answer
(``benchmarks/results/compare-PLANT-DATE/compare.json``) as its table, its references and the command that measured
it, and its figures copied into ``docs/img/compare/PLANT/`` (what the site can show)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
IMAGES = ROOT / "docs" / "img" / "compare"
PLANTS = {
    "compare_tank": "heated-tank",
    "compare_dc_motor": "dc-motor",
    "compare_arm": "arm",
    "compare_tank_refine": "tank-refine",  # docs/adapt.md: the student against its PPO refinements
    "compare_arm_outside": "outside-arm",  # docs/adapt.md: the arm's student beyond its trained ranges
    "compare_arm_ff": "armff",  # docs/adapt.md: pd-ff's student against the PD retuned per arm
    "compare_arm_1000": "armff1000",  # docs/robot-arm.md: the preset's (pd-ff's) student on 1,000 episodes a condition
}
"""Block name -> the plant's folder prefix (``compare-heated-tank-2026-12-06``)."""
SHOWN = {
    "tank-refine": ("ratios.png",),
    "outside-arm": ("ratios.png", "trace-delay-2.png", "trace-weak-motor.png"),
    "armff": ("ratios.png", "trace-nominal.png"),
    "armff1000": ("ratios.png",),
}
"""The figures a block shows where not all of them (the refinement's rows are told apart by the ratios alone)."""


def newest(plant: str) -> Path | None:
    found = sorted(RESULTS.glob(f"compare-{plant}-*/compare.json"))
    return found[-1] if found else None


def shown_figures(path: Path, plant: str) -> list[Path]:
    return [p for p in sorted(path.parent.glob("*.png")) if p.name in SHOWN.get(plant, (p.name,))]


def answer_block(path: Path, plant: str) -> str:
    """The answer table (one line per condition and row), the references, the figures and the stamp."""
    sys.path.insert(0, str(ROOT / "src"))
    from rlpilot.compare.report import answer_table

    summary = json.loads(path.read_text())
    lines = [answer_table(summary), "", "References (searched on the tuning episodes):", ""]
    for name, ref in summary["references"].items():
        values = ", ".join(f"{k} {v:.4g}" for k, v in ref["kwargs"].items() if isinstance(v, (int, float)))
        edge = f"; on the search's edge: {', '.join(ref['edge'])}" if ref["edge"] else ""
        lines.append(f"- {name}: {values} ({ref['evaluated']} candidates, {ref['seconds']:.0f} s{edge})")
    figures = [p.name for p in shown_figures(path, plant)]
    lines += [""] + [f"![{name[:-4]}](img/compare/{plant}/{name})" for name in figures]
    stamp = summary.get("stamp", {})
    versions = ", ".join(f"{k} {v}" for k, v in stamp.get("versions", {}).items())
    lines += [
        "",
        f"Measured by `{stamp.get('command', 'rlpilot compare')}` on {stamp.get('date', '?')} at commit "
        f"{stamp.get('commit', 'unknown')[:12]} ({versions}; "
        f"{stamp.get('cpu', '?')}); the references' search took "
        f"{sum(r['seconds'] for r in summary['references'].values()):.0f} s. Source: "
        f"`{path.parent.relative_to(ROOT)}/` (answer.md, compare.json).",
    ]
    return "\n".join(lines)


def tables() -> dict[str, str]:
    found = {}
    for block, plant in PLANTS.items():
        path = newest(plant)
        if path is not None:
            found[block] = answer_block(path, plant)
    return {**found, **grid_tables()}


def stale_figures(write: bool) -> list[Path]:
    """The figures of the newest answers that ``docs/img/compare/`` lacks or holds another version of (copied
    there when ``write``)."""
    stale = []
    for plant in PLANTS.values():
        path = newest(plant)
        if path is None:
            continue
        for figure in shown_figures(path, plant):
            target = IMAGES / plant / figure.name
            if not target.exists() or target.read_bytes() != figure.read_bytes():
                stale.append(target)
                if write:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(figure, target)
    return stale


def oracle_grid_block(path: Path) -> str:
    """docs/arm-report.md: compare's arm oracle against every PD of the 15 x 12 log grid on each condition's tuning
    episodes (``benchmarks/arm_oracle_grid.py``)."""
    data = json.loads(path.read_text())
    lines = [
        "| condition | oracle kp, kd | oracle RMSE (mm) | best grid PD kp, kd | its RMSE (mm) | oracle / grid |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in data["conditions"].items():
        edge = " (grid edge)" if row["grid_edge"] else ""
        lines.append(
            f"| {label} | {row['oracle']['kp']:.3g}, {row['oracle']['kd']:.3g} | {1e3 * row['oracle_score']:.3f} "
            f"| {row['grid_best']['kp']:.3g}, {row['grid_best']['kd']:.3g}{edge} | {1e3 * row['grid_best_score']:.3f} "
            f"| {row['oracle_score'] / row['grid_best_score']:.3f} |"
        )
    stamp = {line.split(": ", 1)[0][2:]: line.split(": ", 1)[1] for line in data["stamp"] if ": " in line}
    first, last = data["tuning_seeds"]
    lines += [
        "",
        f"Mean tracking RMSE over the tuning episodes (seeds {first}-{last}) of each condition; the grid is kp in "
        f"0.3-60 (15 points, log), kd in 0.02-2 (12). Source: `{path.relative_to(ROOT)}` ({stamp.get('date', '?')}, "
        f"commit {stamp.get('commit', '?')[:12]}); command: `{stamp.get('command', '?')}`.",
    ]
    return "\n".join(lines)


def grid_tables() -> dict[str, str]:
    found = sorted(RESULTS.glob("arm_oracle_grid-*.json"))
    return {"arm_oracle_grid": oracle_grid_block(found[-1])} if found else {}
