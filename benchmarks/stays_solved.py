"""Solved, and stays solved: for each preset, the frames to the first solved evaluation and the share of
the next 5 evaluations at or above the threshold while training continues (``train.evals_after_solved=5``).

A preset tuned only for the first crossing can fall back right after it; this measures whether the greedy
policy holds. Seeds 100+ (no preset was tuned on them). Frames and returns, not wall time: this is not a
timing benchmark and may share the machine.

    python benchmarks/stays_solved.py [--presets ppo-cartpole,dqn-cartpole] [--seeds 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

AFTER = 5
DEFAULT_PRESETS = "ppo-cartpole,dqn-cartpole,ppo-acrobot,dqn-acrobot,ppo-pendulum,sac-pendulum,td3-pendulum"


def run_preset(preset: str, seed: int, root: str) -> dict:
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    config = load_config(preset, overrides=[f"train.seed={seed}", f"train.evals_after_solved={AFTER}"])
    run = train(config, run_root=root, show_progress=False)
    meta = run.meta()
    return {
        "solved": run.solved_at_frames is not None,
        "solved_at_frames": run.solved_at_frames,
        "stays_solved": meta.get("stays_solved"),
        "evals_after_solved": meta.get("evals_after_solved", []),
        "threshold": meta.get("solved_at"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=DEFAULT_PRESETS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    lines, data = stamp.header(), {"after": AFTER, "presets": {}}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    with tempfile.TemporaryDirectory() as root:
        for preset in args.presets.split(","):
            results = []
            for seed in seeds:
                r = run_preset(preset, seed, root)
                results.append(r)
                line = (
                    f"  {preset:<14} seed {seed}: solved at {r['solved_at_frames']}, next {AFTER} evaluations "
                    f"{[round(x, 1) for x in r['evals_after_solved']]}, share >= threshold {r['stays_solved']}"
                )
                print(line, flush=True)
                lines.append(line)
            solved = [r for r in results if r["solved"]]
            shares = [r["stays_solved"] for r in solved if r["stays_solved"] is not None]
            frames = statistics.median(r["solved_at_frames"] for r in solved) if solved else "n/a"
            share = statistics.mean(shares) if shares else "n/a"
            summary = (
                f"{preset}: {len(solved)}/{len(seeds)} solved; median frames to solve {frames}; "
                f"share of the next {AFTER} evaluations >= threshold: mean {share}"
            )
            print(summary, flush=True)
            lines.append(summary)
            data["presets"][preset] = {"seeds": seeds, "results": results}
    lines += stamp.footer()
    data["stamp"] = lines[: len(stamp.header())] + stamp.footer()
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
