"""Does a run that collects on Ray actors learn like one that collects in its process? (issue 39, Done-when 2)

For each held-out seed (100+), the preset is trained twice: in one process (``collect.workers=1``) and with
``--workers`` actors on a local Ray cluster (``collect.workers=N``, the same ``env.num_envs`` split over them,
so batches hold the same frames). Reported per arm: solved seeds, frames to the threshold (IQM with a 95%
bootstrap interval over seeds, as ``rlpilot sweep``), the final greedy evaluation, and the paired ratio of
frames to solve (actors / one process, median with its interval). Frames, not seconds: CartPole and Pendulum
step in microseconds, where actors only add round trips (docs/distributed.md, "When not to use it").

    python benchmarks/distributed_learning.py --preset ppo-cartpole --workers 4 --seeds 5 \\
        --out benchmarks/results/distributed_learning-ppo-DATE.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="ppo-cartpole")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--set", action="append", default=[], help="extra overrides for both arms")
    parser.add_argument("--actors-only", action="store_true", help="only the actors' arm (does it reach the threshold)")
    parser.add_argument("--out", help="result file (stamped, JSON beside it); default: print only")
    args = parser.parse_args()
    header = stamp.header()

    from rlpilot.cluster import ray_session
    from rlpilot.config.load import load_config
    from rlpilot.loop.trainer import train
    from rlpilot.sweep import bootstrap, iqm

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arms = {"one process": 1, f"{args.workers} actors": args.workers}
    if args.actors_only:
        del arms["one process"]
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    root = Path(tempfile.mkdtemp(prefix="distributed-learning-"))
    with ray_session("local", args.workers):
        for seed in seeds:  # the arms take turns per seed (paired)
            for arm, workers in arms.items():
                overrides = [*args.set, f"train.seed={seed}", f"collect.workers={workers}", "train.loggers=[]"]
                config = load_config(args.preset, overrides=overrides)
                run = train(config, run_root=str(root), show_progress=False, ray="local" if workers > 1 else None)
                row = {
                    "seed": seed,
                    "status": run.status,
                    "frames": run.frames,
                    "solved_at_frames": run.solved_at_frames,
                }
                row["last_eval"] = run.last_eval
                results[arm].append(row)
                print(arm, row, flush=True)

    body = ["| arm | solved | frames to solve, IQM [95% CI] | final greedy eval, mean |", "|---|---|---|---|"]
    summary = {}
    for arm, rows in results.items():
        solved = np.array([r["solved_at_frames"] for r in rows if r["solved_at_frames"] is not None], dtype=float)
        finals = np.array([r["last_eval"] for r in rows if r["last_eval"] is not None], dtype=float)
        low, high = bootstrap(solved, iqm) if len(solved) else (float("nan"), float("nan"))
        centre = iqm(solved) if len(solved) else float("nan")
        summary[arm] = {"solved": len(solved), "iqm": centre, "ci": [low, high], "final_mean": float(finals.mean())}
        body.append(
            f"| {arm} | {len(solved)}/{len(rows)} | {centre:,.0f} [{low:,.0f}, {high:,.0f}] | {finals.mean():.1f} |"
        )
    one, many = (results["one process"], results[f"{args.workers} actors"]) if not args.actors_only else ([], [])
    pairs = [
        b["solved_at_frames"] / a["solved_at_frames"]
        for a, b in zip(one, many)
        if a["solved_at_frames"] and b["solved_at_frames"]
    ]
    if pairs:
        low, high = bootstrap(np.array(pairs), np.median)
        body.append("")
        body.append(
            f"paired ratio of frames to solve (actors / one process): median {np.median(pairs):.2f} "
            f"[{low:.2f}, {high:.2f}]"
        )
    print("\n".join(body))
    if args.out:
        stamp.write_result(args.out, header, body, {"args": vars(args), "results": results, "summary": summary})


if __name__ == "__main__":
    main()
