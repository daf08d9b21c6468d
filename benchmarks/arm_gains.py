"""Gains of the classical controllers on rlpilot/ReacherTrack-v0, tuned as a commissioning engineer would.

A grid over kp x kd (PD with velocity feed-forward), then ki on the best PD gains (PID with anti-windup),
scored by mean return (tracking error plus the effort penalty, the reward the RL policies get) over
episodes on seeds 0-31 (evaluation in benchmarks/robot_arm.py uses 12345+: disjoint). Tuned once on the
nominal arm (the gains the controllers ship with, ``rlpilot.envs.arm.controllers.TRACK_GAINS``), and once per
disturbed condition (the "oracle" rows: gains re-tuned for a condition the engineer could not know), and once
on randomised dynamics (``ROBUST``: every disturbance drawn from its randomisation range at each episode, as
the RL policies are trained): the fixed gains a careful engineer picks for an arm whose payload, friction,
motors, sensors and delay are only known within ranges; the classical counterpart of training under
randomised dynamics.

    python benchmarks/arm_gains.py [--out benchmarks/results/arm_gains-DATE.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import ROOT, footer, header  # noqa: E402

from rlpilot.config import EnvConfig  # noqa: E402
from rlpilot.control.evaluate import EvalResult, evaluate  # noqa: E402
from rlpilot.envs import make_env  # noqa: E402
from rlpilot.envs.arm.controllers import TrackPD, TrackPID  # noqa: E402
from rlpilot.envs.arm.disturbances import NAMED_CONDITIONS  # noqa: E402

ENV_ID = "rlpilot/ReacherTrack-v0"

# The evaluation conditions (also benchmarks/robot_arm.py's): one disturbance each at about the upper middle
# of its randomisation range (rlpilot.envs.arm.disturbances.RANDOMIZE_RANGES), then all together.
CONDITIONS: dict[str, dict] = NAMED_CONDITIONS  # the arm declares them (rlpilot.envs.arm.disturbances)
ROBUST: dict = {"randomize": "all"}  # tuning only: the "robust" gains (not an evaluation condition)
KP = (0.3, 1.0, 3.0, 10.0, 30.0)
KD = (0.05, 0.1, 0.2, 0.5, 1.0)
KI = (0.0, 1.0, 5.0, 20.0)
TUNING_SEEDS = 32  # seeds 0..31


def gains_file(given: str | None = None) -> Path:
    """An arm_gains result: the one given (``--gains``), or the newest in benchmarks/results."""
    return Path(given) if given else sorted((ROOT / "benchmarks" / "results").glob("arm_gains-*.json"))[-1]


def tuned(entry: dict) -> tuple[TrackPD, TrackPID]:
    """The PD and the PID with one arm_gains entry's gains (``{"pd": {...}, "pid": {...}}``)."""
    pd, pid = entry["pd"], entry["pid"]
    return TrackPD(kp=pd["kp"], kd=pd["kd"]), TrackPID(kp=pid["kp"], kd=pid["kd"], ki=pid["ki"])


def play(controller, kwargs: dict, *, episodes: int, seed: int) -> EvalResult:
    """``episodes`` episodes of ``controller`` under ``kwargs`` through rlpilot's evaluation loop (episode i:
    seed + i), at most 50 side by side; per episode: return and the tracking measures."""
    env = make_env(EnvConfig(id=ENV_ID, backend="sync", kwargs=kwargs), num_envs=min(episodes, 50), seed=seed)
    try:
        return evaluate(env, controller, episodes=episodes, seed=seed)
    finally:
        env.close()


def tune(kwargs: dict) -> dict:
    scores = {}
    for kp, kd in itertools.product(KP, KD):
        scores[(kp, kd, 0.0)] = play(TrackPD(kp=kp, kd=kd), kwargs, episodes=TUNING_SEEDS, seed=0).mean
    kp, kd, _ = max(scores, key=scores.get)
    for ki in KI[1:]:
        pid = TrackPID(kp=kp, kd=kd, ki=ki)
        scores[(kp, kd, ki)] = play(pid, kwargs, episodes=TUNING_SEEDS, seed=0).mean
    best_pd = max((k for k in scores if k[2] == 0.0), key=scores.get)
    best_pid = max((k for k in scores if k[2] > 0.0), key=scores.get)
    return {
        "pd": {"kp": best_pd[0], "kd": best_pd[1], "score": scores[best_pd]},
        "pid": {"kp": best_pid[0], "kd": best_pid[1], "ki": best_pid[2], "score": scores[best_pid]},
        "grid": [{"kp": k[0], "kd": k[1], "ki": k[2], "mean_return": v} for k, v in scores.items()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / f"arm_gains-{time.strftime('%Y-%m-%d')}.json")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    stamp = header()
    result = {"conditions": CONDITIONS, "robust": ROBUST, "tuning_seeds": f"0-{TUNING_SEEDS - 1}", "gains": {}}
    for name, kwargs in {**CONDITIONS, "robust": ROBUST}.items():
        started = time.perf_counter()
        result["gains"][name] = tune(kwargs)
        gains = result["gains"][name]
        print(f"{name:>9}: PD {gains['pd']}  PID {gains['pid']}  ({time.perf_counter() - started:.0f} s)", flush=True)
    result["stamp"] = [*stamp, *footer()]
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
