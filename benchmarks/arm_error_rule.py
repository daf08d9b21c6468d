"""A hand-written gain schedule on the arm: the nominal PD's gains while the tracking error is small, kp a tenth
once it passes a threshold (the evidence, in docs/robot-arm.md, that the observation's tracking error already
tells a delayed, oscillating loop from a good one; a sketch, not a controller rlpilot ships).

The rule reads only the observation's fingertip-minus-reference (floats 10-11), so it is memoryless: a loop
pushed back to kp 10 by a small error is caught again a few steps later. Episodes 0-19 (the first 20 of
benchmarks/arm_gains.py's tuning episodes, 0-31) under each evaluation condition, through the evaluation loop
rlpilot uses. About 20 s on one core per controller.

    python benchmarks/arm_error_rule.py --out benchmarks/results/arm_error_rule-DATE.txt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from arm_gains import CONDITIONS, play  # noqa: E402

from rlpilot.envs.arm.controllers import TrackPD  # noqa: E402


class ErrorRule(TrackPD):
    """The nominal PD (kp 10, kd 0.2) with kp times 0.1 whenever |fingertip - reference| > ``threshold`` (m)."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def __call__(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        large = (observation[:, 10:12].norm(dim=-1, keepdim=True) > self.threshold).float()
        return super().__call__(observation, torch.cat([10.0 ** (-large), torch.ones_like(large)], dim=-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thresholds", default="0.003,0.006,0.012", help="comma-separated, in metres")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    header, lines, rows = stamp.header(), [], []
    controllers = {"PD (nominal gains)": TrackPD()}
    controllers |= {f"rule, {t * 1000:g} mm": ErrorRule(t) for t in (float(t) for t in args.thresholds.split(","))}
    for name, controller in controllers.items():
        rmse = {
            condition: float(play(controller, kwargs, episodes=args.episodes, seed=0).final["tracking_error"].mean())
            * 1000
            for condition, kwargs in CONDITIONS.items()
        }
        rows.append({"controller": name, "rmse_mm": rmse})
        lines.append(f"{name:>20}: " + "  ".join(f"{c} {v:.3g}" for c, v in rmse.items()))
        print(lines[-1], flush=True)
    lines.append(f"tracking RMSE (mm), episodes 0-{args.episodes - 1} per condition")
    if args.out:
        stamp.write_result(args.out, header, lines, {"episodes": args.episodes, "seed": 0, "rows": rows})


if __name__ == "__main__":
    main()
