"""The comparison table of docs/your-controller.md: the axis PID (as written, tuned on the nominal axis, tuned
on randomised dynamics) against PPO runs on top of the robust PID, on the same evaluation episodes.

    cd examples && python -m dc_motor.compare --group "PPO gain schedule=RUN_DIR,RUN_DIR" ... [--out FILE.json]
    cd examples && python -m dc_motor.compare --tuned "PID tuned by rlpilot tune=runs/tune-axis/best.yaml" \
        --reuse ../benchmarks/results/dc_motor-DATE.json --out FILE.json

``--tuned NAME=best.yaml`` adds a row for the controller arguments ``rlpilot tune --controller`` found;
``--reuse FILE`` keeps an earlier file's RL rows (their returns, per episode) instead of playing runs again.

Every row plays 100 episodes per condition with seeds 12345 on (tuning used 0-31) through rlpilot's own
evaluation loop; an RL group pools its runs' episodes (one run per training seed). The interval is a 95%
bootstrap interval of the mean return over those episodes (2,000 resamples, seeded).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from rlpilot.control.evaluate import evaluate
from rlpilot.play.episodes import playable

PLANT = "dc_motor.plant:ConveyorAxis"
PID = "dc_motor.pid:AxisPID"
CONDITIONS = {
    "nominal": {},
    "delay 2": {"delay": 2},
    "heavy": {"load": 8.0, "friction": 1.5, "load_torque": 1.5},
    "randomised": {"randomize": True},
}
CONTROLLERS = {  # gains from python -m dc_motor.tune_pid (tuning seeds 0-31)
    "PID as written (kp 4, ki 2, kd 0.5)": {},
    "PID tuned on the nominal axis (kp 64, ki 0, kd 4)": {"kp": 64.0, "ki": 0.0, "kd": 4.0},
    "PID tuned on randomised dynamics (kp 16, ki 32, kd 4)": {"kp": 16.0, "ki": 32.0, "kd": 4.0},
}
EPISODES, SEED = 100, 12345


def play(target: str, kwargs: dict, *, controller: str | None = None, gains: dict | None = None) -> np.ndarray:
    policy = playable(target, controller=controller, controller_kwargs=gains)
    policy.env_config = replace(policy.env_config, id=PLANT, kwargs=kwargs)
    env = policy.make_env(num_envs=20, seed=SEED)
    try:
        return evaluate(env, policy.policy_for(env), episodes=EPISODES, seed=SEED).returns
    finally:
        env.close()


def interval(returns: np.ndarray) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    means = rng.choice(returns, size=(2000, len(returns))).mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--group", action="append", default=[], help="NAME=RUN_DIR[,RUN_DIR...]")
    parser.add_argument("--tuned", action="append", default=[], help="NAME=best.yaml of rlpilot tune --controller")
    parser.add_argument("--reuse", help="an earlier result file whose RL rows are kept")
    parser.add_argument("--out", help="write the result file here (JSON)")
    args = parser.parse_args()
    rows = {}
    for name, gains in CONTROLLERS.items():
        rows[name] = {c: play(PLANT, kw, controller=PID, gains=gains) for c, kw in CONDITIONS.items()}
    for tuned in args.tuned:
        name, _, path = tuned.partition("=")
        gains = yaml.safe_load(Path(path).read_text())["env"]["base_controller_kwargs"]
        label = f"{name} ({', '.join(f'{k} {v:.3g}' for k, v in sorted(gains.items()))})"
        rows[label] = {c: play(PLANT, kw, controller=PID, gains=gains) for c, kw in CONDITIONS.items()}
    reused = json.loads(Path(args.reuse).read_text()) if args.reuse else None
    if reused is not None:
        if (reused["episodes"], reused["seed"]) != (EPISODES, SEED):
            raise SystemExit(f"--reuse {args.reuse}: other episodes or seeds")
        for name, by_condition in reused["returns"].items():
            if name not in rows and name not in CONTROLLERS:  # RL rows: classical ones are played again
                rows[name] = {c: np.array(by_condition[c]) for c in CONDITIONS}
    for group in args.group:
        name, _, runs = group.partition("=")
        dirs = runs.split(",")
        rows[f"{name} ({len(dirs)} seeds)"] = {
            c: np.concatenate([play(run, kw) for run in dirs]) for c, kw in CONDITIONS.items()
        }
    header = "| controller | " + " | ".join(CONDITIONS) + " |"
    lines = [header, "|---" * (len(CONDITIONS) + 1) + "|"]
    for name, by_condition in rows.items():
        cells = []
        for returns in by_condition.values():
            low, high = interval(returns)
            cells.append(f"{returns.mean():.2f} [{low:.2f}, {high:.2f}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout
        record = {
            "command": "python -m dc_motor.compare "
            + " ".join(
                [f'--group "{g}"' for g in args.group]
                + [f'--tuned "{t}"' for t in args.tuned]
                + ([f"--reuse {args.reuse}"] if args.reuse else [])
            ),
            "reused": {"file": args.reuse, "commit": reused["commit"]} if reused is not None else None,
            "commit": commit.strip(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "machine": platform.processor() or platform.machine(),
            "episodes": EPISODES,
            "seed": SEED,
            "returns": {name: {c: r.tolist() for c, r in by.items()} for name, by in rows.items()},
            "table": table,
        }
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
