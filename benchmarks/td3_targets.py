"""What makes SBX's TD3 solve Pendulum in fewer updates than SB3's at the same RL Zoo settings: rlpilot's TD3 with
each of SBX's departures from the paper alone, frames to the first solved greedy evaluation per tuning seed.

SBX 0.28's TD3 differs from SB3's (and the paper's) in three ways at the same settings: its target actor and critics
move after every critic update (SB3: only with the delayed actor update), its actor ascends the twins' minimum
(SB3: the first critic), and Flax initialises with lecun normal (SB3: PyTorch's default; rlpilot: orthogonal). Each
variant below is the paper's computation (with rlpilot's init) and one of them; the settings are time_to_solve.py's
"same" arm (the Zoo's), and so are the evaluation and threshold (20 greedy episodes every 1,000 frames, solved at
-200). Frames are counted, not seconds, so runs may share the machine.

    python benchmarks/td3_targets.py --seeds 0,1,2,3 --out benchmarks/results/td3_targets-DATE.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from time_to_solve import SAME_SETTINGS, TASKS, rlpilot_settings  # noqa: E402

from rlpilot.config import load_config  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402

PAPER = ["td3.delay_targets=true", "td3.actor_q=q1"]  # and rlpilot's orthogonal init
VARIANTS = {
    "the paper's (SB3's)": PAPER,
    "targets after every critic update": [*PAPER, "td3.delay_targets=false"],
    "actor on the twins' minimum": [*PAPER, "td3.actor_q=min"],
    "lecun init": [*PAPER, "model.init=lecun"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated tuning seeds (0-99)")
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    task = TASKS["td3"]
    header, lines, rows = stamp.header(), [], []
    for seed in seeds:
        for name, overrides in VARIANTS.items():
            settings = rlpilot_settings(
                seed, task.eval_every, task.budget, 20, threshold=task.threshold,
                overrides=(*SAME_SETTINGS["td3"], *overrides, "train.compile=off"),
            )  # fmt: skip
            meta = train(
                load_config(task.preset, overrides=settings), run_root="runs/bench", show_progress=False
            ).meta()
            row = {"variant": name, "seed": seed, "solved": meta["status"] == "solved"}
            row["frames"] = meta.get("solved_at_frames") or meta["frames"]
            rows.append(row)
            print(f"seed {seed} {name}: solved={row['solved']} frames={row['frames']}", flush=True)
    lines.append("| variant | frames to solve per seed | median |")
    lines.append("|---|---|---|")
    for name in VARIANTS:
        frames = [row["frames"] for row in rows if row["variant"] == name]
        unsolved = sum(not row["solved"] for row in rows if row["variant"] == name)
        note = f" ({unsolved} not solved)" if unsolved else ""
        lines.append(f"| {name} | {', '.join(f'{f:,}' for f in frames)}{note} | {statistics.median(frames):,.0f} |")
    print("\n".join(lines))
    if args.out:
        stamp.write_result(args.out, header, lines, {"seeds": seeds, "variants": VARIANTS, "rows": rows})


if __name__ == "__main__":
    main()
