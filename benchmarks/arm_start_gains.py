"""What ``adaptive-pd``'s gains before the arm is identified cost it (issue 37): a grid of starting kp and kd.

Until its regression has ``min_samples`` samples, ``adaptive-pd`` runs a starting kp and kd (3 and 0.13). On the
typical episode that start is where it loses to a fixed PD on the free arm; a stiffer start wins there and costs
under the delay, where the loop rings until the delay is found. Each (kp_start, kd_start) is scored with
benchmarks/arm_adaptive_tune.py's ratio objective on tuning episodes only (seeds 0..N-1, never the comparison's
12345..): per condition the RMSE and motor effort as ratios to the oracle PD's.

    python benchmarks/arm_start_gains.py [--episodes 100] [--out benchmarks/results/arm_start_gains-DATE.txt]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_adaptive_tune import ratio_score, references  # noqa: E402
from stamp import ROOT, header, write_result  # noqa: E402

from rlpilot.envs.arm.adaptive import TrackAdaptivePD  # noqa: E402

GRID = [(3.0, 0.13), (5.0, 0.13), (5.0, 0.2), (7.0, 0.13), (7.0, 0.2), (10.0, 0.13), (10.0, 0.2)]
"""(kp_start, kd_start); the first is ADAPTIVE_GAINS's."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100, help="tuning episodes per condition (seeds 0..N-1)")
    parser.add_argument("--gains", default=None, help="arm_gains result: the oracle and robust PDs (default: newest)")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / f"arm_start_gains-{time.strftime('%Y-%m-%d')}.txt")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    stamp = header()
    gains_path = Path(args.gains) if args.gains else sorted((ROOT / "benchmarks/results").glob("arm_gains-*.json"))[-1]
    reference = references(json.loads(gains_path.read_text()), args.episodes)
    rows, body = [], []
    for kp_start, kd_start in GRID:
        score, per = ratio_score(TrackAdaptivePD(kp_start=kp_start, kd_start=kd_start), reference, args.episodes)
        rows.append({"kp_start": kp_start, "kd_start": kd_start, "score": score, "conditions": per})
        body.append(
            f"kp_start {kp_start:g} kd_start {kd_start:g}: objective {score:.3f}  "
            + "  ".join(f"{k} {v['rmse_ratio']:.2f}/{v['effort_ratio']:.2f}" for k, v in per.items())
        )
        print(body[-1], flush=True)
    data = {"episodes": args.episodes, "gains": str(gains_path.resolve().relative_to(ROOT)), "rows": rows}
    write_result(args.out, stamp, body, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
