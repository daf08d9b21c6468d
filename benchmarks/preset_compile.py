"""A preset's time to solve with ``train.compile`` at its default (``auto``) against ``off``, paired per seed.

Issue 38's rule: compiling must not make a preset slower, whole process included. Both sides run the preset through
the CLI as ``benchmarks/time_to_solve.py`` runs its ``preset`` arm (the same evaluation, budget and seeds, one CPU),
alternating per seed; ratio = ``off`` time / ``auto`` time (above 1: the default is faster).

    python benchmarks/preset_compile.py --algos dqn --seeds 10 --out benchmarks/results/preset_compile-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stamp  # noqa: E402
import time_to_solve as tts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="dqn", help="comma-separated: ppo, dqn, sac, td3")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", help="result file (stamped)")
    args = parser.parse_args()
    lines = list(stamp.header())
    data: dict = {"stamp": list(lines), "tasks": {}}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    for algo in args.algos.split(","):
        task = tts.TASKS[algo]
        args.budget, args.eval_every = task.budget, task.eval_every
        sides = {"auto": [], "off": ["train.compile=off"]}
        results: dict[str, list[dict]] = {name: [] for name in sides}
        for seed in seeds:
            for name, extra in sides.items():
                args.set = extra
                r = tts.run_child(f"{task.preset}-{name}", seed, args, cli=tts.rlpilot_cli(task, "preset", seed, args))
                results[name].append(r)
                line = (
                    f"  {task.preset:<14} {name:<5} seed {seed}: solved={r['solved']} frames={r['frames']:>7} "
                    f"train {r['train_s']:.2f} s  process {r['process_s']:.2f} s"
                )
                print(line, flush=True)
                lines.append(line)
        comparison = tts.compare(results, "auto", "off", seeds)
        for key in ("train_s", "process_s"):
            solved = [r[key] for r in results["auto"] if r["solved"]]
            lines.append(f"{task.preset} auto {key} median {statistics.median(solved):.2f}" if solved else "")
        lines += [f"## {task.preset}: train.compile=auto against off", *tts.comparison_lines(comparison)]
        data["tasks"][algo] = {"preset": task.preset, "seeds": seeds, "results": results, "comparison": comparison}
        print("\n".join(lines[-5:]), flush=True)
    lines += stamp.footer()
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"written: {out}")


if __name__ == "__main__":
    main()
