"""Reacher-v5 and LunarLanderContinuous-v3: SB3's SAC (or TD3) with RL Zoo's setting against rlpilot's preset for
the same algorithm, frames and wall time to the threshold.

The rule is the preset's: a greedy evaluation of 20 episodes every 10,000 frames, after the update (SB3 through
``time_to_solve.learn_until_solved``, as in benchmarks/time_to_solve.py), solved at the task's threshold, within the
task's frame budget, and at most ``--max-seconds`` of wall time per run (a run cut by the cap is recorded as not
solved, with the frames it reached). ``--task``:

- ``reacher``: Reacher-v5, solved at a mean >= -3.75 (gymnasium's threshold), 200,000 frames; SB3 with the Zoo's
  MuJoCo defaults for SAC (hyperparams/sac.yml: SB3's defaults, 10,000 warm-up steps: lr 3e-4, batch 256,
  256-256, gamma 0.99, tau 0.005, one update per step, buffer 1M); rlpilot: ``sac-reacher``. ``--algo td3``:
  the Zoo's MuJoCo defaults for TD3 (hyperparams/td3.yml, the ``mujoco-defaults`` anchor; the Zoo has no Reacher
  entry of its own: 10,000 warm-up steps, Gaussian action noise 0.1, one update per step, lr 1e-3, batch 256,
  400-300 networks, SB3's defaults otherwise: gamma 0.99, tau 0.005, buffer 1M, policy delay 2, target noise
  0.2 clipped at 0.5); rlpilot: ``td3-reacher``.
- ``lunarlander-continuous``: LunarLanderContinuous-v3, solved at >= 200, 500,000 frames (the Zoo's budget); SB3
  with the Zoo's LunarLanderContinuous entry of hyperparams/sac.yml (lr 7.3e-4, buffer 1M, batch 256, auto
  entropy, gamma 0.99, tau 0.01, one update per step, 10,000 warm-up steps, 400-300 networks); rlpilot:
  ``sac-lunarlander-continuous``.

rlpilot's side is read from finished ``rlpilot train PRESET --seed S`` run directories (their meta.json: frames
and the run's own wall time to the first solve). One SB3 run a process; run two processes at a time at most on
2 cores and say so.

    python benchmarks/reacher_sb3.py --task reacher --seeds 100,101 --rlpilot-runs R100 R101 \
        --out benchmarks/results/reacher_sb3-DATE-a.txt
    python benchmarks/reacher_sb3.py --task lunarlander-continuous --seeds 100 --rlpilot-runs R100 \
        --out benchmarks/results/llc_sb3-DATE-a.txt
    python benchmarks/reacher_sb3.py --algo td3 --seeds 100 --rlpilot-runs R100 \
        --out benchmarks/results/reacher_td3_sb3-DATE-a.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from time_to_solve import worker_sb3  # noqa: E402

EVAL_EVERY = 10_000
EPISODES = 20
TASKS = {
    "reacher": {
        "env": "Reacher-v5",
        "threshold": -3.75,
        "budget": 200_000,
        "algos": {
            "sac": {"preset": "sac-reacher", "hyperparams": {"learning_starts": 10_000}},
            "td3": {
                "preset": "td3-reacher",
                "hyperparams": {
                    "learning_starts": 10_000,
                    "noise_std": 0.1,  # NormalActionNoise(0, 0.1) on the [-1, 1]-scaled action
                    "train_freq": 1,
                    "gradient_steps": 1,
                    "learning_rate": 1e-3,
                    "batch_size": 256,
                    "policy_kwargs": {"net_arch": [400, 300]},
                },
            },
        },
    },
    "lunarlander-continuous": {
        "env": "LunarLanderContinuous-v3",
        "threshold": 200.0,
        "budget": 500_000,
        "algos": {
            "sac": {
                "preset": "sac-lunarlander-continuous",
                "hyperparams": {
                    "learning_rate": 7.3e-4,
                    "buffer_size": 1_000_000,
                    "batch_size": 256,
                    "ent_coef": "auto",
                    "gamma": 0.99,
                    "tau": 0.01,
                    "train_freq": 1,
                    "gradient_steps": 1,
                    "learning_starts": 10_000,
                    "policy_kwargs": {"net_arch": [400, 300]},
                },
            },
        },
    },
}


def rlpilot_row(run: str, cap_s: float) -> dict:
    """A finished run's frames and run clock at its end, and where it stood at SB3's wall-time cap (its last
    evaluation within ``cap_s`` of run clock): the same-wall-time comparison when the two caps differ."""
    from rlpilot.runs import load_run

    loaded = load_run(run)
    meta = loaded.meta()
    evals = [row for row in loaded.metrics() if "eval/return_mean" in row and row["time/elapsed_s"] <= cap_s]
    return {
        "seed": loaded.config().train.seed,
        "solved": meta.get("solved_at_frames") is not None,
        "status": meta.get("status"),
        "frames": meta.get("frames"),
        "wall_s": meta.get("elapsed_s"),
        "last_eval": meta.get("last_eval"),
        "at_cap": {"frames": evals[-1]["frames"], "eval": evals[-1]["eval/return_mean"]} if evals else None,
        "run": str(run),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="reacher")
    parser.add_argument("--algo", choices=("sac", "td3"), default="sac", help="SB3's algorithm and rlpilot's preset")
    parser.add_argument("--seeds", default="100,101,102", help="comma-separated SB3 seeds, run one after another")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="wall-time cap per SB3 run")
    parser.add_argument("--rlpilot-runs", nargs="*", default=[], help="finished run directories of the task's preset")
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    task = TASKS[args.task]
    if args.algo not in task["algos"]:
        parser.error(f"--algo {args.algo} has no {args.task} setting here; choose from {', '.join(task['algos'])}")
    algo = task["algos"][args.algo]
    header, lines = stamp.header(), []
    sb3 = []
    for seed in (int(s) for s in args.seeds.split(",") if s):  # --seeds "": rlpilot runs only
        r = worker_sb3(
            args.algo,
            seed,
            EVAL_EVERY,
            task["budget"],
            EPISODES,
            env_id=task["env"],
            hyperparams=algo["hyperparams"],
            threshold=task["threshold"],
            max_seconds=args.max_seconds,
        )
        sb3.append({"seed": seed, **r})
        lines.append(f"SB3 {args.algo.upper()} seed {seed}: {json.dumps(r)}")
        print(lines[-1], flush=True)
    ours = [rlpilot_row(run, args.max_seconds) for run in args.rlpilot_runs]
    for r in ours:
        lines.append(f"rlpilot {algo['preset']} seed {r['seed']}: {json.dumps(r)}")
        print(lines[-1], flush=True)
    if args.out:
        data = {
            "task": args.task,
            "env": task["env"],
            "algo": args.algo,
            "preset": algo["preset"],
            "threshold": task["threshold"],
            "eval_every": EVAL_EVERY,
            "budget": task["budget"],
            "max_seconds": args.max_seconds,
            "sb3": sb3,
            "rlpilot": ours,
        }
        stamp.write_result(args.out, header, lines, data)


if __name__ == "__main__":
    main()
