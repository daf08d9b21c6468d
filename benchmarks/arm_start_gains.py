"""What ``adaptive-pd``'s gains before the arm is identified cost it (issue 37): a grid of starting kp and kd.

Until its regression has ``min_samples`` samples, ``adaptive-pd`` runs a starting kp and kd (3 and 0.13). On the
typical episode that start is where it loses to a fixed PD on the free arm; a stiffer start wins there and costs
under the delay, where the loop rings until the delay is found. Each (kp_start, kd_start) is scored with
benchmarks/arm_adaptive_tune.py's ratio objective on tuning episodes only (seeds 0..N-1, never the comparison's
12345..): per condition the RMSE and motor effort as ratios to the oracle PD's.

Before the grid, where in an episode ``adaptive-pd`` loses to the oracle PD on the nominal arm and the weak motor:
the share of the final gap in summed squared tracking error already there after 5, 10, 20, 40 and 80 of the 200
steps (``--where`` episodes, seeds 100.., also never the comparison's).

    python benchmarks/arm_start_gains.py [--episodes 100] [--where 20] \\
        [--out benchmarks/results/arm_start_gains-DATE.txt]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_adaptive_tune import ratio_score, references  # noqa: E402
from arm_gains import gains_file, tuned  # noqa: E402
from stamp import ROOT, header, write_result  # noqa: E402

from rlpilot.envs.arm.adaptive import TrackAdaptivePD  # noqa: E402
from rlpilot.envs.arm.env import EPISODE_STEPS, ReacherTrackEnv  # noqa: E402

GRID = [(3.0, 0.13), (5.0, 0.13), (5.0, 0.2), (7.0, 0.13), (7.0, 0.2), (10.0, 0.13), (10.0, 0.2)]
"""(kp_start, kd_start); the first is ADAPTIVE_GAINS's."""


WHERE_STEPS = (5, 10, 20, 40, 80)


def squared_errors(controller, kwargs: dict, seed: int) -> np.ndarray:
    """One episode's squared tracking error per step (m^2); a stateful controller starts it from zeros."""
    env = ReacherTrackEnv(**kwargs)
    try:
        controller.reset()
        observation, _ = env.reset(seed=seed)
        errors = []
        for _ in range(EPISODE_STEPS):
            with torch.no_grad():
                action = controller(torch.as_tensor(observation[None], dtype=torch.float32))
            observation, _, terminated, truncated, info = env.step(action[0].numpy())
            errors.append(info["error"] ** 2)
            if terminated or truncated:
                break
        return np.asarray(errors)
    finally:
        env.close()


def where_lost(gains: dict, episodes: int) -> dict[str, dict[int, float]]:
    """Per condition (nominal, gain): the share of the final summed-squared-error gap between ``adaptive-pd`` and
    the oracle PD reached after each of ``WHERE_STEPS``, averaged over ``episodes`` episodes (seeds 100..)."""
    out = {}
    for name, kwargs in (("nominal", {}), ("gain", {"gain": 0.6})):
        oracle, adaptive = tuned(gains["gains"][name])[0], TrackAdaptivePD()
        gap = np.mean(
            [
                np.cumsum(squared_errors(adaptive, kwargs, 100 + i))
                - np.cumsum(squared_errors(oracle, kwargs, 100 + i))
                for i in range(episodes)
            ],
            axis=0,
        )
        out[name] = {step: float(gap[step - 1] / gap[-1]) for step in WHERE_STEPS}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100, help="tuning episodes per condition (seeds 0..N-1)")
    parser.add_argument("--where", type=int, default=20, help="episodes for the where-it-loses measure (seeds 100..)")
    parser.add_argument("--gains", default=None, help="arm_gains result: the oracle and robust PDs (default: newest)")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / f"arm_start_gains-{time.strftime('%Y-%m-%d')}.txt")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    stamp = header()
    gains_path = gains_file(args.gains)
    gains = json.loads(gains_path.read_text())
    where = where_lost(gains, args.where)
    body = [
        f"{name}: share of adaptive-pd's final squared-error gap to the oracle reached by step "
        + ", ".join(f"{step}: {share:.2f}" for step, share in shares.items())
        for name, shares in where.items()
    ]
    print("\n".join(body), flush=True)
    reference = references(gains, args.episodes)
    rows = []
    for kp_start, kd_start in GRID:
        score, per = ratio_score(TrackAdaptivePD(kp_start=kp_start, kd_start=kd_start), reference, args.episodes)
        rows.append({"kp_start": kp_start, "kd_start": kd_start, "score": score, "conditions": per})
        body.append(
            f"kp_start {kp_start:g} kd_start {kd_start:g}: objective {score:.3f}  "
            + "  ".join(f"{k} {v['rmse_ratio']:.2f}/{v['effort_ratio']:.2f}" for k, v in per.items())
        )
        print(body[-1], flush=True)
    data = {
        "episodes": args.episodes,
        "where": {"episodes": args.where, "share_by_step": where},
        "gains": str(gains_path.resolve().relative_to(ROOT)),
        "rows": rows,
    }
    write_result(args.out, stamp, body, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
