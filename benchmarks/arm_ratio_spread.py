"""How much the arm comparison's ratio to the oracle moves with the evaluation episodes (issue 37's bar).

The answer table's ratios (benchmarks/robot_arm_track.py) are ratios of mean tracking RMSE over 100 episodes
(seeds 12345-12444). A fixed PD's RMSE is heavy-tailed over episodes (on most it tracks closely; on a few it
rings, one at 29 mm on the nominal arm), so a ratio of means over 100 episodes depends on which episodes came.
This plays the oracle PD, the robust PD and ``adaptive-pd`` on ``--episodes`` episodes per condition (seeds
12345.., the comparison's 100 first), and reports per condition: the ratio of means with a paired 95% bootstrap
interval over episodes, the same ratio on each block of 100 episodes (the first block is the comparison's), and
the median of the per-episode ratios (the typical episode, blind to the tails).

    python benchmarks/arm_ratio_spread.py [--episodes 1000] [--out benchmarks/results/arm_ratio_spread-DATE.txt]
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
from arm_adaptive_tune import BAR, ORACLE_OF, RATIO_CONDITIONS  # noqa: E402
from arm_gains import gains_file, play, tuned  # noqa: E402
from stamp import ROOT, header, write_result  # noqa: E402

from rlpilot.envs.arm.adaptive import TrackAdaptivePD  # noqa: E402
from rlpilot.sweep import bootstrap  # noqa: E402

SEED = 12345  # robot_arm_track.py's evaluation episodes: its 100 are the first block here
BLOCK = 100


def ratio_of_means(pairs: np.ndarray) -> float:
    """mean(x) / mean(oracle) over rows of (x, oracle) pairs."""
    return float(pairs[:, 0].mean() / pairs[:, 1].mean())


def compare(x: np.ndarray, oracle: np.ndarray) -> dict:
    """x's ratio of means to the oracle's with a paired 95% bootstrap interval over episodes, per block of
    ``BLOCK`` episodes, and the median per-episode ratio."""
    blocks = [x[i : i + BLOCK].mean() / oracle[i : i + BLOCK].mean() for i in range(0, len(x) - BLOCK + 1, BLOCK)]
    return {
        "ratio": float(x.mean() / oracle.mean()),
        "ratio_ci": bootstrap(np.stack([x, oracle], axis=1), ratio_of_means),  # the episodes resampled in pairs
        "blocks": [float(b) for b in blocks],
        "median_episode_ratio": float(np.median(x / oracle)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="per condition (seeds 12345..); a multiple of 100")
    parser.add_argument("--gains", default=None, help="arm_gains result: the oracle and robust PDs (default: newest)")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / f"arm_ratio_spread-{time.strftime('%Y-%m-%d')}.txt")
    )
    args = parser.parse_args()
    if args.episodes < BLOCK or args.episodes % BLOCK:
        parser.error(f"--episodes must be a positive multiple of {BLOCK}, got {args.episodes}")
    torch.set_num_threads(1)
    stamp = header()
    gains_path = gains_file(args.gains)
    gains = json.loads(gains_path.read_text())["gains"]
    started = time.perf_counter()
    conditions, body = {}, []
    for name, kwargs in RATIO_CONDITIONS.items():
        rmse, effort = {}, {}
        controllers = {
            "oracle": tuned(gains[ORACLE_OF.get(name, name)])[0],
            "robust": tuned(gains["robust"])[0],
            "adaptive-pd": TrackAdaptivePD(),
        }
        for which, controller in controllers.items():
            result = play(controller, kwargs, episodes=args.episodes, seed=SEED)
            rmse[which] = np.asarray(result.final["tracking_error"], dtype=float) * 1e3
            effort[which] = np.asarray(result.final["effort"], dtype=float)
        conditions[name] = {
            "rmse_mm": {k: float(v.mean()) for k, v in rmse.items()},
            "bar": min(BAR, float(rmse["robust"].mean() / rmse["oracle"].mean())),
            "adaptive-pd": compare(rmse["adaptive-pd"], rmse["oracle"]),
            "robust": compare(rmse["robust"], rmse["oracle"]),
            "adaptive_effort_ratio": float(effort["adaptive-pd"].mean() / effort["oracle"].mean()),
            "oracle_max_mm": float(rmse["oracle"].max()),
            "adaptive_max_mm": float(rmse["adaptive-pd"].max()),
        }
        c = conditions[name]["adaptive-pd"]
        body.append(
            f"{name:8s} adaptive-pd / oracle {c['ratio']:.3f} [{c['ratio_ci'][0]:.3f}-{c['ratio_ci'][1]:.3f}]"
            f"  blocks of {BLOCK}: {min(c['blocks']):.2f}-{max(c['blocks']):.2f} (first {c['blocks'][0]:.2f})"
            f"  median episode {c['median_episode_ratio']:.2f}"
        )
        print(body[-1], flush=True)
    data = {
        "episodes": args.episodes,
        "seed": SEED,
        "block": BLOCK,
        "gains": str(gains_path.resolve().relative_to(ROOT)),
        "wall_s": time.perf_counter() - started,
        "conditions": conditions,
    }
    write_result(args.out, stamp, body, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
