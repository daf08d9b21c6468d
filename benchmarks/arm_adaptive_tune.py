"""Tunes the classical adaptive controller's constants once (``adaptive-pd``, rlpilot.envs.arm.adaptive): an Optuna TPE
search of its schedule (kp and kd on a free arm, kp under a delay, the noise limit, how kp and kd follow the
estimated actuator strength, kp's ceiling, kp before the arm is known) and its estimator (prior, velocity gate,
samples before trusting the estimates) on the arm the RL students train on: every disturbance present at half the
resets (``randomize: all``, ``randomize_prob: 0.5``), scored by mean return on tuning episodes 0-63 (evaluation uses
12345 on). The first trials are the hand-set starting point and the best of
an earlier, smaller search. What it costs is reported (wall and simulated seconds),
as for the other tuners (arm_autotune.py).

    python benchmarks/arm_adaptive_tune.py [--trials 120] [--episodes 64] \\
        [--out benchmarks/results/arm_adaptive_tune-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_gains import CONDITIONS, play  # noqa: E402
from stamp import ROOT, footer, header  # noqa: E402

from rlpilot.envs.arm.adaptive import TrackAdaptivePD  # noqa: E402

TRAINING_ARM = {"randomize": "all", "randomize_prob": 0.5}
"""The RL students' training distribution (ppo-reacher-track-adaptive, -teacher): tuned where they learn."""
SEARCH_SPACE = {  # name: (low, high, log scale) for floats, (low, high) for whole numbers
    "kp": (3.0, 30.0, True),
    "kd": (0.05, 1.0, True),
    "kp_delay": (0.3, 5.0, True),
    "noise_limit": (0.01, 0.2, True),
    "kp_gain_power": (-1.0, 2.0, False),
    "kd_gain_power": (-1.0, 3.0, False),
    "kp_max": (5.0, 60.0, True),
    "kp_start": (0.5, 20.0, True),
    "prior": (1e-6, 1e-3, True),
    "gate": (0.01, 0.3, True),
    "min_samples": (2, 24),
}
START = {  # the hand-set point the search starts from
    "kp": 10.0,
    "kd": 0.2,
    "kp_delay": 1.0,
    "noise_limit": 0.04,
    "kp_gain_power": 1.0,
    "kd_gain_power": 1.0,
    "kp_max": 30.0,
    "kp_start": 1.0,
    "prior": 1e-4,
    "gate": 0.05,
    "min_samples": 6,
}


EARLIER = {  # the best of an earlier search (80 trials, without kp_max and kp_start: those at their neutral values)
    "kp": 12.6,
    "kd": 0.179,
    "kp_delay": 2.17,
    "noise_limit": 0.0273,
    "kp_gain_power": 1.34,
    "kd_gain_power": 0.762,
    "kp_max": 60.0,
    "kp_start": 2.17,
    "prior": 8.6e-6,
    "gate": 0.0543,
    "min_samples": 3,
}


def suggest(trial, name: str, space: tuple):
    if len(space) == 2:
        return trial.suggest_int(name, *space)
    low, high, log = space
    return trial.suggest_float(name, low, high, log=log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=120)
    parser.add_argument("--episodes", type=int, default=64, help="tuning episodes per trial (seeds 0..N-1)")
    parser.add_argument("--seed", type=int, default=0, help="the TPE sampler's seed")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import optuna

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    stamp = header()

    def objective(trial) -> float:
        constants = {name: suggest(trial, name, space) for name, space in SEARCH_SPACE.items()}
        return play(TrackAdaptivePD(**constants), TRAINING_ARM, episodes=args.episodes, seed=0).mean

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=args.seed))
    study.enqueue_trial(START)
    study.enqueue_trial(EARLIER)
    started = time.perf_counter()
    study.optimize(objective, n_trials=args.trials)
    wall_s = time.perf_counter() - started
    best = study.best_trial
    tuning = {  # the chosen constants on each named condition's tuning episodes (0-31), RMSE in mm
        name: float(play(TrackAdaptivePD(**best.params), kwargs, episodes=32, seed=0).final["track_rmse"].mean() * 1e3)
        for name, kwargs in CONDITIONS.items()
    }
    result = {
        "best": {**best.params, "score": best.value},
        "start_score": study.trials[0].value,
        "best_trial": best.number,
        "trials": args.trials,
        "episodes": args.episodes,
        "training_arm": TRAINING_ARM,
        "sampler": f"TPESampler(seed={args.seed})",
        "search_space": SEARCH_SPACE,
        "wall_s": wall_s,
        "simulated_s": args.trials * args.episodes * 4.0,  # episodes of 4 s
        "tuning_rmse_mm": tuning,
        "history": [{**t.params, "mean_return": t.value} for t in study.trials],
        "stamp": [*stamp, *footer()],
    }
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"arm_adaptive_tune-{time.strftime('%Y-%m-%d')}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"best of {args.trials} trials (trial {best.number}): mean return {best.value:.4f} "
        f"(start {result['start_score']:.4f}); "
        f"{wall_s:.0f} s wall, {result['simulated_s']:.0f} simulated s"
    )
    print(
        "constants:", json.dumps({k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in best.params.items()})
    )
    print("tuning RMSE (mm):", ", ".join(f"{name} {value:.3g}" for name, value in tuning.items()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
