"""Reacher-v5: trained PPO runs beside the inverse-kinematics PD baseline and a random policy.

Every row plays the same episodes (seeds ``--seed`` .. ``--seed + episodes - 1``, disjoint from the seeds
0-99 the PD gains were tuned on) through ``rlpilot eval``'s loop, and reports the four measures of the
eval table: return, final fingertip-target distance, control effort (mean squared action) and
smoothness (mean squared change of the action between steps). Per-run rows, then PPO over runs.

    python benchmarks/robot_arm.py runs/ppo-reacher-v5-s0-* runs/ppo-reacher-v5-s1-* [--episodes 100]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from rlpilot.play.episodes import evaluate_target

MEASURES = ("return", "final_distance", "action_effort", "action_smoothness")


def measures(result) -> dict[str, np.ndarray]:
    return {"return": result.returns, **result.per_episode()}


def row(name: str, values: dict[str, np.ndarray]) -> str:
    cells = [f"{values[m].mean():.4g} ± {values[m].std():.2g}" for m in MEASURES]
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="ppo-reacher run directories")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--env", default="Reacher-v5")
    args = parser.parse_args()
    torch.set_num_threads(1)
    csv_dir = Path(tempfile.mkdtemp())
    print(f"{args.env}, {args.episodes} episodes, seeds {args.seed}..{args.seed + args.episodes - 1}; mean ± std\n")
    print("| policy | return | final distance (m) | effort (mean a²) | smoothness (mean Δa²) |")
    print("|---|---|---|---|---|")
    ppo = []
    for run in args.runs:
        result, _, _ = evaluate_target(run, episodes=args.episodes, seed=args.seed, csv_path=csv_dir / "run.csv")
        ppo.append(measures(result))
        print(row(f"PPO `{Path(run).name}`", ppo[-1]))
    if len(ppo) > 1:
        pooled = {m: np.concatenate([p[m] for p in ppo]) for m in MEASURES}
        print(row(f"PPO, {len(ppo)} runs pooled", pooled))
    for controller in ("pid", "random"):
        result, _, _ = evaluate_target(
            args.env,
            episodes=args.episodes,
            seed=args.seed,
            csv_path=csv_dir / f"{controller}.csv",
            controller=controller,
        )
        print(row({"pid": "IK + PD baseline", "random": "random"}[controller], measures(result)))


if __name__ == "__main__":
    main()
