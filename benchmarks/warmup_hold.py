"""How far held random actions explore: MountainCarContinuous-v0 episodes of uniform forces, each force held for
``hold`` steps, and how many reach the flag (the evidence for ``sac.warmup_hold`` in sac-mountaincar-continuous).

Plain gymnasium, no learning; the forces come from one numpy generator per hold (seed 0), episode ``i`` is reset
with seed ``i``. Seconds on one core.

    python benchmarks/warmup_hold.py --out benchmarks/results/warmup_hold-DATE.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402


def reach(hold: int, episodes: int) -> dict:
    """Episodes of uniform forces in [-1, 1], a new force every ``hold`` steps: how many reach the flag, and in
    how many steps (median over those that do)."""
    env = gym.make("MountainCarContinuous-v0")
    rng = np.random.default_rng(0)
    steps = []
    for episode in range(episodes):
        env.reset(seed=episode)
        for t in range(env.spec.max_episode_steps):
            if t % hold == 0:
                force = rng.uniform(-1.0, 1.0, size=1).astype(np.float32)
            _, _, terminated, truncated, _ = env.step(force)
            if terminated:
                steps.append(t + 1)
            if terminated or truncated:
                break
    return {
        "hold": hold,
        "episodes": episodes,
        "reached": len(steps),
        "median_steps": statistics.median(steps) if steps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holds", default="1,5,20,50,100,200", help="comma-separated steps each force is held")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    header, lines, rows = stamp.header(), [], []
    for hold in (int(h) for h in args.holds.split(",")):
        rows.append(reach(hold, args.episodes))
        r = rows[-1]
        lines.append(
            f"hold {hold:>3} steps: {r['reached']}/{r['episodes']} episodes reach the flag, "
            f"median {r['median_steps']} steps"
        )
        print(lines[-1], flush=True)
    if args.out:
        stamp.write_result(args.out, header, lines, {"env": "MountainCarContinuous-v0", "rows": rows})


if __name__ == "__main__":
    main()
