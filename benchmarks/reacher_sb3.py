"""Reacher-v5: SB3's SAC with RL Zoo's MuJoCo setting against `sac-reacher`, frames and wall time to the threshold.

The rule is the preset's: a greedy evaluation of 20 episodes every 10,000 frames, after the update (SB3 through
``time_to_solve.learn_until_solved``, as in benchmarks/time_to_solve.py), solved at a mean >= -3.75
(gymnasium's threshold), at most 200,000 frames, and at most ``--max-seconds`` of wall time per run (a run cut
by the cap is recorded as not solved, with the frames it reached). SB3 with the Zoo's MuJoCo defaults for SAC
(hyperparams/sac.yml: SB3's defaults, 10,000 warm-up steps: lr 3e-4, batch 256, 256-256, gamma 0.99, tau
0.005, one update per step, buffer 1M). rlpilot's side is read from finished `rlpilot train sac-reacher --seed
S` run directories (their meta.json: frames and the run's own wall time to the first solve). One SB3 run a
process; run two processes at a time at most on 2 cores and say so.

    python benchmarks/reacher_sb3.py --seeds 100,101 --rlpilot-runs R100 R101 \
        --out benchmarks/results/reacher_sb3-DATE-a.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from time_to_solve import worker_sb3  # noqa: E402

ENV_ID = "Reacher-v5"
THRESHOLD = -3.75
EVAL_EVERY = 10_000
BUDGET = 200_000
EPISODES = 20
SB3_SAC_MUJOCO_ZOO = {"learning_starts": 10_000}


def rlpilot_row(run: str) -> dict:
    from rlpilot.runs import load_run

    loaded = load_run(run)
    meta = loaded.meta()
    return {
        "seed": loaded.config().train.seed,
        "solved": meta.get("solved_at_frames") is not None,
        "frames": meta.get("frames"),
        "wall_s": meta.get("elapsed_s"),
        "last_eval": meta.get("last_eval"),
        "run": str(run),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100,101,102", help="comma-separated SB3 seeds, run one after another")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="wall-time cap per SB3 run")
    parser.add_argument("--rlpilot-runs", nargs="*", default=[], help="finished sac-reacher run directories")
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    header, lines = stamp.header(), []
    sb3 = []
    for seed in (int(s) for s in args.seeds.split(",")):
        r = worker_sb3(
            "sac",
            seed,
            EVAL_EVERY,
            BUDGET,
            EPISODES,
            env_id=ENV_ID,
            hyperparams=SB3_SAC_MUJOCO_ZOO,
            threshold=THRESHOLD,
            max_seconds=args.max_seconds,
        )
        sb3.append({"seed": seed, **r})
        lines.append(f"SB3 SAC seed {seed}: {json.dumps(r)}")
        print(lines[-1], flush=True)
    ours = [rlpilot_row(run) for run in args.rlpilot_runs]
    for r in ours:
        lines.append(f"rlpilot sac-reacher seed {r['seed']}: {json.dumps(r)}")
        print(lines[-1], flush=True)
    if args.out:
        data = {
            "env": ENV_ID,
            "threshold": THRESHOLD,
            "eval_every": EVAL_EVERY,
            "budget": BUDGET,
            "max_seconds": args.max_seconds,
            "sb3": sb3,
            "rlpilot": ours,
        }
        stamp.write_result(args.out, header, lines, data)


if __name__ == "__main__":
    main()
