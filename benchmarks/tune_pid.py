"""Tune the Reacher PD baseline's gains (rlpilot.envs.arm.controllers.ReacherPD) by grid search.

Procedure (reproducible, no randomness beyond the env seeds): every (kp, kd) pair of the grid plays
the same 100 episodes, seeds 0-99, through rlpilot's evaluation loop (the one ``rlpilot eval`` uses);
the pair with the best mean return wins. The evaluation seeds of ``rlpilot eval`` start at 12345, so
the tuning episodes never overlap the episodes the baseline is judged on. Mean return is the criterion
because it is the task's own score (distance to target plus the env's control cost), the same one PPO
maximises; final distance, effort and smoothness are printed beside it.

    python benchmarks/tune_pid.py [--episodes 100] [--env Reacher-v5]   # needs the [mujoco] extra
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch

from rlpilot.config import EnvConfig
from rlpilot.control.evaluate import evaluate
from rlpilot.envs import make_env
from rlpilot.envs.arm.controllers import ReacherPD

KP = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 4.0)
KD = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Reacher-v5")
    parser.add_argument("--episodes", type=int, default=100, help="tuning episodes, seeds 0..N-1")
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = make_env(EnvConfig(id=args.env, num_envs=min(args.episodes, 100)), seed=0)
    start = time.perf_counter()
    rows = []
    print(f"{'kp':>5} {'kd':>5} {'return':>8} {'final_dist':>10} {'effort':>7} {'smooth':>7}")
    for kp, kd in itertools.product(KP, KD):
        result = evaluate(env, ReacherPD(kp=kp, kd=kd), episodes=args.episodes, seed=0)
        row = (kp, kd, result.mean, result.final["final_distance"].mean(), result.action_effort.mean())
        rows.append(row + (result.action_smoothness.mean(),))
        print(f"{kp:5.2f} {kd:5.2f} {rows[-1][2]:8.3f} {rows[-1][3]:10.4f} {rows[-1][4]:7.4f} {rows[-1][5]:7.4f}")
    env.close()
    best = max(rows, key=lambda r: r[2])
    print(
        f"\nbest: kp={best[0]} kd={best[1]}: mean return {best[2]:.3f} over seeds 0-{args.episodes - 1} "
        f"({len(rows)} pairs, {time.perf_counter() - start:.1f} s)"
    )


if __name__ == "__main__":
    main()
