"""Automatic tuners a control engineer would run on rlpilot/ReacherTrack-v0 (issue 37, item 4), with what each costs.

- **Relay auto-tune, per arm** (:mod:`rlpilot.envs.arm.relay`, Åström-Hägglund): a relay experiment on the arm
  in front of the engineer (each condition's arm: a commissioning engineer tunes the arm they have, so this is a
  per-arm auto-tune, not an oracle with hindsight), two relays per joint (without, then with the derivative in
  the loop; the module says why). Cost: arm seconds of experiment and wall seconds. The first relay's gains by
  the textbook rules (Ziegler-Nichols, Tyreus-Luyben, "some/no overshoot") are scored beside it.
- **Bayesian search on the randomised arm** (Optuna, TPE, seeded): kp, kd, ki of the PID on
  ``arm_gains.ROBUST``, each trial scored as arm_gains.py scores its grid (mean return over the tuning seeds
  0-31); the "robust" row's gains found by a search instead of a grid. Cost: trials and wall seconds.

Every set of gains is scored on the tuning episodes of the arm it was tuned for, beside the grid's (the
arm_gains result robot_arm_track.py reads by default). benchmarks/robot_arm_track.py ``--autotune`` plays them
on the evaluation episodes.

Not here: a classical adaptive scheme (gains scheduled from an online estimate of the delay or the load). The
relay's measurement already is such an estimate, taken once at commissioning; scheduling online would re-run it
(or fit the arm's gain and delay by recursive least squares from the commanded action and the measured
acceleration) while the arm works, and look the gains up from the same rule.

    python benchmarks/arm_autotune.py [--trials 80] [--out benchmarks/results/arm_autotune-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_gains import CONDITIONS, ROBUST, TUNING_SEEDS, gains_file, play  # noqa: E402
from stamp import ROOT, footer, header  # noqa: E402

from rlpilot.envs.arm.controllers import TrackPD, TrackPID  # noqa: E402
from rlpilot.envs.arm.relay import autotune  # noqa: E402

SEARCH_SPACE = {  # name: (low, high, log scale); about the grid's span (arm_gains.KP, KD, KI), continuous
    "kp": (0.1, 30.0, True),
    "kd": (0.02, 1.0, True),
    "ki": (0.0, 20.0, False),
}
TRIALS = 80
"""Optuna trials: about what the grid spends on one arm (25 PD + 3 PID points), three times over."""


def score(gains: dict, kwargs: dict) -> float:
    """Mean return over the tuning episodes (seeds 0-31), as arm_gains.py scores its grid: a PD where ki is
    absent or 0."""
    controller = TrackPID(**gains) if gains.get("ki", 0.0) > 0 else TrackPD(kp=gains["kp"], kd=gains["kd"])
    return play(controller, kwargs, episodes=TUNING_SEEDS, seed=0).mean


def relay_rows(grid: dict) -> dict:
    """The relay auto-tune on each condition's arm: gains, cost, and tuning scores beside the grid's."""
    rows = {}
    for name, kwargs in CONDITIONS.items():
        started = time.perf_counter()
        tuned = autotune(kwargs)
        wall_s = time.perf_counter() - started
        row = {
            **tuned,
            "wall_s": wall_s,
            "score": {"pd": score(tuned["pd"], kwargs), "pid": score(tuned["pid"], kwargs)},
            "rule_scores": {rule: score(gains, kwargs) for rule, gains in tuned["rules"].items()},
            "grid_score": {kind: grid[name][kind]["score"] for kind in ("pd", "pid")},
        }
        rows[name] = row
        print(
            f"{name:>9}: relay PD kp {tuned['pd']['kp']:.3g} kd {tuned['pd']['kd']:.3g} ki "
            f"{tuned['pid']['ki']:.3g}; score PD {row['score']['pd']:.3f} PID {row['score']['pid']:.3f} "
            f"(grid oracle PD {row['grid_score']['pd']:.3f}); {tuned['simulated_s']:.0f} arm s, {wall_s:.1f} s",
            flush=True,
        )
    return rows


def optuna_search(trials: int, seed: int) -> dict:
    """TPE search of the PID's gains on the randomised arm, scored on the tuning episodes."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial) -> float:
        gains = {name: trial.suggest_float(name, low, high, log=log) for name, (low, high, log) in SEARCH_SPACE.items()}
        return score(gains, ROBUST)

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    started = time.perf_counter()
    study.optimize(objective, n_trials=trials)
    wall_s = time.perf_counter() - started
    best = study.best_trial
    return {
        "pid": {**best.params, "score": best.value},
        "best_trial": best.number,
        "trials": trials,
        "sampler": f"TPESampler(seed={seed})",
        "search_space": SEARCH_SPACE,
        "wall_s": wall_s,
        "simulated_s": trials * TUNING_SEEDS * 4.0,  # 32 episodes of 4 s per trial
        "history": [{**t.params, "mean_return": t.value} for t in study.trials],
    }


def summary(result: dict) -> str:
    lines = [
        "Relay auto-tune per arm (two relays), scores: mean return on the tuning episodes (higher is better);"
        " grid: arm_gains.py's gains for that arm (oracle):",
        "| condition | kp | kd | ki | PD | PID | grid PD | grid PID | ZN PID, 1st relay | arm s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in result["relay"].items():
        pid = row["pid"]
        lines.append(
            f"| {name} | {pid['kp']:.3g} | {pid['kd']:.3g} | {pid['ki']:.3g} | {row['score']['pd']:.3f} | "
            f"{row['score']['pid']:.3f} | {row['grid_score']['pd']:.3f} | {row['grid_score']['pid']:.3f} | "
            f"{row['rule_scores']['ziegler-nichols PID']:.3f} | {row['simulated_s']:.0f} | {row['wall_s']:.1f} |"
        )
    search, grid = result["optuna"], result["grid_robust"]
    lines += [
        "",
        f"Optuna on the randomised arm: kp {search['pid']['kp']:.3g} kd {search['pid']['kd']:.3g} "
        f"ki {search['pid']['ki']:.3g}, score {search['pid']['score']:.3f} (trial {search['best_trial']} of "
        f"{search['trials']}, {search['wall_s']:.0f} s wall, {search['simulated_s']:.0f} arm s); grid robust PID "
        f"kp {grid['pid']['kp']} kd {grid['pid']['kd']} ki {grid['pid']['ki']}, score {grid['pid']['score']:.3f} "
        f"(PD {grid['pd']['score']:.3f}).",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=TRIALS, help="Optuna trials on the randomised arm")
    parser.add_argument("--seed", type=int, default=0, help="the TPE sampler's seed")
    parser.add_argument("--gains", default=None, help="arm_gains result to compare with (default: the newest)")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / f"arm_autotune-{time.strftime('%Y-%m-%d')}.json")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    gains_path = gains_file(args.gains)
    grid = json.loads(gains_path.read_text())["gains"]
    stamp = header()
    result = {
        "conditions": CONDITIONS,
        "robust": ROBUST,
        "tuning_seeds": f"0-{TUNING_SEEDS - 1}",
        "grid": str(gains_path.resolve().relative_to(ROOT)),
        "grid_robust": {kind: grid["robust"][kind] for kind in ("pd", "pid")},
        "relay": relay_rows(grid),
    }
    result["optuna"] = optuna_search(args.trials, args.seed)
    result["stamp"] = [*stamp, *footer()]
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    text = summary(result)
    out.with_suffix(".txt").write_text("\n".join(result["stamp"]) + "\n\n" + text + "\n")
    print(text)
    print(f"wrote {out} and {out.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
