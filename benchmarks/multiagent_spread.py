"""MAPPO and IPPO on MPE2 simple_spread: rlpilot's presets against BenchMARL's MAPPO (its own
configuration), the random policy and the hand-written heuristic, on seeds no preset was tuned on.

Per seed (100, 101, ... by default), one process at a time:
- ``rlpilot train mappo-spread`` and ``ippo-spread`` (the presets, whole budget; native batched env);
- BenchMARL 1.5.2's MAPPO on the PettingZoo env (``benchmarks/peers/benchmarl_spread.py`` in BenchMARL's
  own virtualenv, ``make bench-marl-venv``: BenchMARL pins torchrl<0.12), for ``--peer-frames`` frames
  (its yaml says 3M; at ~300-500 frames/s on this CPU that is hours per seed, so the comparison at equal
  frames is made at the peer's budget, read from rlpilot's evaluation at the same frame count).
References: the random policy and the heuristic, 1000 episodes each (seed 100) on the native env.
Writes ``benchmarks/results/multiagent_spread-DATE.json``; the tables in docs/multi-agent.md and
docs/results.md are generated from it (tools/gen_results.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import ROOT, footer, header  # noqa: E402

PRESETS = ("mappo-spread", "ippo-spread")


def rlpilot_run(preset: str, seed: int, out: Path) -> dict:
    run_dir = out / f"{preset}-s{seed}"
    argv = [str(Path(sys.executable).parent / "rlpilot"), "train", preset, "--seed", str(seed)]
    argv += ["--run-dir", str(run_dir), "-q"]
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.DEVNULL)
    process_s = time.perf_counter() - started
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    evals = [
        {
            "frames": int(row["frames"]),
            "return_mean": float(row["eval/return_mean"]),
            "landmarks_covered": float(row["eval/landmarks_covered"]),
            "collisions": float(row["eval/collisions"]),
            "elapsed_s": float(row["time/elapsed_s"]),
        }
        for row in rows
        if row.get("eval/return_mean")
    ]
    return {"preset": preset, "seed": seed, "evals": evals, "process_s": process_s, "run": str(run_dir)}


def peer_run(python: str, seed: int, frames: int, out: Path) -> dict:
    folder = out / f"benchmarl-s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    script = ROOT / "benchmarks" / "peers" / "benchmarl_spread.py"
    argv = [python, str(script), "--seed", str(seed), "--frames", str(frames), "--eval-every", str(frames)]
    argv += ["--out", str(folder)]
    done = subprocess.run(argv, check=True, cwd=folder, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def references(seed: int, episodes: int, out: Path) -> dict:
    from rlpilot.play.group import evaluate_group

    found = {}
    for name in ("random", "heuristic"):
        per_agent, task, _, _ = evaluate_group(
            "mpe2.simple_spread_v3",
            episodes=episodes,
            seed=seed,
            controller_name=name,
            csv_path=out / f"eval-{name}.csv",
        )
        returns = per_agent.mean(1)
        found[name] = {"return_mean": float(returns.mean()), "return_std": float(returns.std()), **task}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--peer-frames", type=int, default=300_000)
    parser.add_argument("--peer-python", default=str(ROOT / ".venv-benchmarl" / "bin" / "python"))
    parser.add_argument("--out", default="runs/bench-multiagent")
    args = parser.parse_args()
    out = ROOT / args.out
    if out.exists():
        sys.exit(f"{args.out} exists: remove it or choose another --out (every run here is timed from scratch)")
    args.peer_python = str(Path(args.peer_python).absolute())  # the peer runs in its own folder
    if not Path(args.peer_python).is_file():
        sys.exit(f"{args.peer_python} not found: make bench-marl-venv (BenchMARL's own virtualenv)")
    stamp = header()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    result = {"stamp": stamp, "seeds": seeds, "peer_frames": args.peer_frames, "references": {}, "runs": []}
    out.mkdir(parents=True)
    result["references"] = references(args.first_seed, 1000, out)
    for seed in seeds:
        for preset in PRESETS:
            result["runs"].append(rlpilot_run(preset, seed, out))
            print(f"{preset} seed {seed}: {result['runs'][-1]['evals'][-1]}", flush=True)
        result["runs"].append(peer_run(args.peer_python, seed, args.peer_frames, out))
        print(f"benchmarl seed {seed}: {result['runs'][-1]['evals'][-1]}", flush=True)
    result["stamp"] = [*stamp, *footer()]
    result["command"] = shlex.join(["python", *sys.argv])
    path = ROOT / "benchmarks" / "results" / f"multiagent_spread-{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
