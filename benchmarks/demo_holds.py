"""Does the policy that ``make demo`` keeps hold? Its two commands on seeds no preset was tuned on.

``make demo`` trains ``ppo-cartpole`` until two greedy evaluations in a row reach 475 (20 episodes each),
then runs ``rlpilot eval RUN --episodes 100`` on the checkpoint the run ends with. This runs exactly those
two commands (through ``python -m rlpilot.cli``, the same entry point) with ``--seed`` 100, 101, ... and
reports the 100-episode greedy mean and minimum of each. Returns and frames, not time: it may share the
machine.

    python benchmarks/demo_holds.py --seeds 10 --out benchmarks/results/demo_holds-DATE.txt
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

RLPILOT = [sys.executable, "-m", "rlpilot.cli"]
EPISODES = 100


def demo(seed: int, root: Path) -> dict:
    run = root / f"demo-s{seed}"
    train = [*RLPILOT, "train", "ppo-cartpole", "--set", "train.solved_consecutive=2", "--seed", str(seed)]
    out = subprocess.run([*train, "--run-dir", str(run), "-q"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"seed {seed}: train failed:\n{out.stderr[-1500:]}")
    evaluation = run / "eval.csv"
    cmd = [*RLPILOT, "eval", str(run), "--episodes", str(EPISODES), "--csv", str(evaluation)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"seed {seed}: eval failed:\n{out.stderr[-1500:]}")
    with evaluation.open() as f:
        returns = [float(row["return"]) for row in csv.DictReader(f)]
    meta = json.loads((run / "meta.json").read_text())
    return {
        "seed": seed,
        "status": meta["status"],
        "frames": meta["frames"],
        "eval_mean": statistics.mean(returns),
        "eval_min": min(returns),
        "episodes": len(returns),
        "at_500": sum(r >= 500 for r in returns),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    header, lines = stamp.header(), []
    root = Path(tempfile.mkdtemp(prefix="rlpilot-demo-"))
    rows = []
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            rows.append(demo(seed, root))
            r = rows[-1]
            line = (
                f"seed {seed}: {r['status']} at {r['frames']:,} frames; eval --episodes {EPISODES}: mean "
                f"{r['eval_mean']:.1f}, min {r['eval_min']:.0f}, {r['at_500']}/{r['episodes']} episodes at 500"
            )
            print(line, flush=True)
            lines.append(line)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    means = [r["eval_mean"] for r in rows]
    summary = (
        f"{sum(r['status'] == 'solved' for r in rows)}/{len(rows)} solved; 100-episode greedy mean: median "
        f"{statistics.median(means):.1f}, lowest {min(means):.1f}; seeds at >= 475: {sum(m >= 475 for m in means)}"
        f"/{len(rows)}"
    )
    print(summary)
    if args.out:
        stamp.write_result(args.out, header, [*lines, "", summary], {"episodes": EPISODES, "rows": rows})


if __name__ == "__main__":
    main()
