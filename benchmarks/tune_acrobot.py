"""Issue 20's acceptance: `rlpilot tune` from a deliberately poor ppo-acrobot start (ppo.lr=1e-4, ten times
below the preset's), a budget that runs in under 20 minutes on a 2-core CPU, and the closing check on fresh
seeds (1000-1004; tuning seeds 0-2).

    python benchmarks/tune_acrobot.py [--out runs/tune-acrobot-bench] [--trials 12]

Runs the CLI as a user does (a fresh study folder: an existing one is refused, so the wall time is the whole
search), then writes ``benchmarks/results/tune_acrobot-DATE.json``: the stamp, the command, the whole
process's wall time, and the study's summary (trials, importances, check). ``tools/gen_results.py``
renders it into docs/tune.md and docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import ROOT, footer, header  # noqa: E402


def command(out: str, trials: int) -> list[str]:
    return [
        *("rlpilot", "tune", "ppo-acrobot", "--set", "ppo.lr=1e-4"),
        *("--param", "ppo.lr=1e-4:3e-3:log", "--param", "ppo.epochs=2:10"),
        *("--param", "ppo.gae_lambda=0.8:0.99", "--param", "ppo.minibatch_size=128,256,512"),
        *("--trials", str(trials), "--seeds-per-trial", "3", "--workers", "2", "--check-seeds", "5"),
        *("--out", out),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/tune-acrobot-bench")
    parser.add_argument("--trials", type=int, default=12)
    args = parser.parse_args()
    if Path(args.out).exists():
        sys.exit(f"{args.out} exists: this benchmark times a whole search; remove it or choose another --out")
    stamp = header()
    argv = command(args.out, args.trials)
    started = time.perf_counter()
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / argv[0]), *argv[1:]], check=True, cwd=ROOT)
    wall_s = time.perf_counter() - started
    summary = json.loads((ROOT / args.out / "summary.json").read_text())
    result = {
        "stamp": [*stamp, *footer()],
        "command": shlex.join(argv),
        "wall_s": wall_s,
        "start": "ppo-acrobot preset with ppo.lr=1e-4 (the preset's is 1e-3)",
        "summary": summary,
    }
    path = ROOT / "benchmarks" / "results" / f"tune_acrobot-{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"{path.relative_to(ROOT)}: whole search {wall_s / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
