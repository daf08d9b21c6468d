"""What the first steps of an episode cost a controller that does not know the plant yet: a bound on every history
policy of a ``rlpilot train adapt`` run, measured on the named plants of its teacher table.

A history policy (the DAgger student, or RL on it) sees nothing of the plant before its first action: at step 0 it
takes the same gains on every plant. Each candidate here is that first choice, the robust gains times ``M`` for the
first ``--steps`` steps, followed on each plant by that plant's oracle gains (the teacher's, as if the plant were
identified perfectly and at once). Its tracking error on a plant, over the error of the oracle gains throughout,
is the least ratio to the oracle any such controller can reach there with that first choice; the worst plant's
ratio, minimised over the candidates, bounds what "within X of the oracle on every named plant" can mean.

    python benchmarks/adapt_first_step.py runs/adapt-arm --multiplier 1 --multiplier 2 --multiplier 3 \\
        --multiplier 5 --episodes 100 --out benchmarks/results/adapt_first_step-arm-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from adapt_excitation import held  # noqa: E402

from rlpilot.adapt.teacher import named_plants  # noqa: E402
from rlpilot.envs.residual import gain_multipliers  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402
from rlpilot.stats import paired_ratio  # noqa: E402


def oracle_multipliers(table: dict, plant: str, scale: float) -> tuple[float, ...]:
    """The plant's oracle gains over the robust ones, as the teacher's label reaches them (within its clip)."""
    return tuple(gain_multipliers(torch.tensor(table["labels"][plant], dtype=torch.float64), scale).tolist())


def measure(run: Path, multipliers: list[float], steps: int, episodes: int, seed: int) -> dict:
    """``oracle`` (each named plant's multipliers), ``ratios`` (candidate -> plant -> [ratio, low, high]) and
    ``best`` (the candidate whose worst plant's ratio is least)."""
    table = json.loads((run / "teacher.json").read_text())
    policy = playable(run)
    scale = float(policy.env_config.residual_scale)
    plants = named_plants(table["conditions"])
    oracle = {plant: oracle_multipliers(table, plant, scale) for plant in plants}
    candidates: dict[str, float | tuple[float, ...]] = {f"x{m:g}": m for m in sorted({1.0, *multipliers})}
    candidates |= {f"{plant}'s oracle": oracle[plant] for plant in plants}

    def play(plant: str, first, steps: int) -> np.ndarray:
        return held(policy, table["conditions"][plant], (first, steps, oracle[plant]), episodes, seed)

    reference = {plant: play(plant, oracle[plant], 0) for plant in plants}
    ratios = {
        label: {
            plant: [float(x) for x in paired_ratio(play(plant, first, steps), reference[plant])] for plant in plants
        }
        for label, first in candidates.items()
    }
    best = min(ratios, key=lambda label: max(r[0] for r in ratios[label].values()))
    return {"oracle": oracle, "ratios": ratios, "best": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--multiplier", action="append", type=float, default=[], help="a first choice: every gain x M")
    parser.add_argument("--steps", type=int, default=1, help="how many steps the first choice holds")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    head = stamp.header()
    found = measure(args.run, args.multiplier, args.steps, args.episodes, args.seed)
    oracle, ratios, best = found["oracle"], found["ratios"], found["best"]
    plants = list(oracle)
    worst = {label: max(row.values(), key=lambda r: r[0]) for label, row in ratios.items()}
    lines = [
        f"Run `{args.run}`: the first {args.steps} step(s) at the robust gains x M, then each plant's oracle gains; "
        f"{args.episodes} episodes a cell from seed {args.seed}. Each cell: tracking error over the plant's oracle "
        "gains held throughout on the same episodes [paired 95% interval].",
        "",
        "| first choice | " + " | ".join(plants) + " | worst |",
        "|---|" + "---|" * (len(plants) + 1),
    ]
    for label, row in ratios.items():
        cells = [f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]" for r in row.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {worst[label][0]:.2f} |")
    lines += [
        "",
        "Oracle multipliers (of the robust gains, per gain): "
        + "; ".join(f"{p} {'/'.join(f'{x:.2f}' for x in oracle[p])}" for p in plants),
        f"The best first choice here, {best}, leaves {worst[best][0]:.2f}x the oracle on its worst plant: no "
        "controller that starts without knowing the plant tracks closer on every one of them.",
    ]
    print("\n".join(lines))
    if args.out:
        data = {"run": str(args.run), "steps": args.steps, "episodes": args.episodes, "seed": args.seed}
        data.update(oracle=oracle, ratios=ratios, best=best)
        stamp.write_result(args.out, head, lines, data)


if __name__ == "__main__":
    main()
