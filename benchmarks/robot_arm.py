"""Reacher-v5: trained runs (PPO, SAC, TD3) beside the inverse-kinematics PD baseline and a random policy.

Every row plays the same episodes (seeds ``--seed`` .. ``--seed + episodes - 1``, disjoint from the seeds
0-99 the PD gains were tuned on) through ``rlpilot eval``'s loop, and reports the four measures of the
eval table: return, final fingertip-target distance, control effort (mean squared action) and
smoothness (mean squared change of the action between steps). Per-run rows, then each algorithm's runs
pooled. With ``--out`` the table goes to a stamped result file (JSON beside it) that
tools/gen_results.py turns into docs/results.md's table.

    python benchmarks/robot_arm.py RUN [RUN ...] [--episodes 100] [--out benchmarks/results/robot_arm-DATE.txt]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

from rlpilot.play.episodes import evaluate_target  # noqa: E402
from rlpilot.runs import load_run  # noqa: E402

MEASURES = ("return", "final_distance", "action_effort", "action_smoothness")


def measures(result) -> dict[str, np.ndarray]:
    return {"return": result.returns, **result.per_episode()}


def row(name: str, values: dict[str, np.ndarray]) -> str:
    cells = [f"{values[m].mean():.4g} ± {values[m].std():.2g}" for m in MEASURES]
    return f"| {name} | " + " | ".join(cells) + " |"


def run_label(run: str) -> tuple[str, str]:
    """The run's algorithm (from its config.yaml, data only) and a row label saying what it trained."""
    loaded = load_run(run)
    meta, config = loaded.meta(), loaded.config()
    solved = f"solved at {meta['solved_at_frames']:,}" if meta.get("solved_at_frames") else meta.get("status", "?")
    algo = config.algo.upper()
    frames = f"{meta.get('frames', 0):,} frames"
    return algo, f"{algo} `{config.preset or config.algo}` seed {config.train.seed} ({frames}, {solved})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run directories (ppo-reacher, sac-reacher, td3-reacher)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--env", default="Reacher-v5")
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    header = stamp.header()
    torch.set_num_threads(1)
    csv_dir = Path(tempfile.mkdtemp())
    lines = [
        f"{args.env}, {args.episodes} episodes, seeds {args.seed}..{args.seed + args.episodes - 1}; mean ± std",
        "",
        "| policy | return | final distance (m) | effort (mean a²) | smoothness (mean Δa²) |",
        "|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    summary: dict[str, dict] = {}
    by_algo: dict[str, list[dict[str, np.ndarray]]] = {}

    def add(label: str, values: dict[str, np.ndarray]) -> None:
        lines.append(row(label, values))
        summary[label] = {m: float(values[m].mean()) for m in MEASURES}
        print(lines[-1], flush=True)

    for run in args.runs:
        algo, label = run_label(run)
        result, _, _ = evaluate_target(run, episodes=args.episodes, seed=args.seed, csv_path=csv_dir / "run.csv")
        by_algo.setdefault(algo, []).append(measures(result))
        add(label, by_algo[algo][-1])
    for algo, values in by_algo.items():
        if len(values) > 1:
            add(f"{algo}, {len(values)} runs pooled", {m: np.concatenate([v[m] for v in values]) for m in MEASURES})
    for controller in ("pid", "random"):
        result, _, _ = evaluate_target(
            args.env,
            episodes=args.episodes,
            seed=args.seed,
            csv_path=csv_dir / f"{controller}.csv",
            controller=controller,
        )
        add({"pid": "IK + PD baseline", "random": "random"}[controller], measures(result))
    if args.out:
        data = {"env": args.env, "episodes": args.episodes, "seed": args.seed, "runs": args.runs, "rows": summary}
        stamp.write_result(args.out, header, lines, data)


if __name__ == "__main__":
    main()
