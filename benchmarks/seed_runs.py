"""A preset over several seeds through the real CLI: per seed, its status, first solve, wall time and
greedy evaluation curve (plus chosen training metrics at each evaluation), in a stamped result file.

The source of the per-seed tables in docs/pixels.md (MinAtar) and docs/llm.md (GRPO): learning runs whose
numbers were typed by hand before. Runs one seed at a time (``--threads`` torch threads each, default 1),
so the wall column is one run's own; the stamp records the machine's load.

    python benchmarks/seed_runs.py ppo-minatar-breakout --seeds 4 \
        --out benchmarks/results/seed_runs-ppo-minatar-breakout-DATE.txt
    python benchmarks/seed_runs.py grpo-reverse --seeds 3 \
        --metrics train/reward_mean,train/kl_to_ref,train/response_length --out ...
    python benchmarks/seed_runs.py sac-halfcheetah --seeds 3 --seed-start 100 --root runs/loco/sac-halfcheetah \
        --jobs 2 --out ...   # 1M-step runs: kept, and resumed where a sitting ended
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

from rlpilot.runs import read_metrics  # noqa: E402

RLPILOT = [sys.executable, "-m", "rlpilot.cli"]


def _finite(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def curve(rows: list[dict], metrics: list[str]) -> list[dict]:
    """One entry per greedy evaluation: its frames, ``eval/return_mean`` and the newest value of each of
    ``metrics`` logged at or before it (training rows and evaluation rows are separate lines)."""
    latest: dict[str, float] = {}
    points = []
    for row in rows:
        for name in metrics:
            if _finite(row.get(name)) is not None:
                latest[name] = float(row[name])
        value = _finite(row.get("eval/return_mean"))
        if value is not None:
            points.append({"frames": int(row["frames"]), "eval": value, **{m: latest.get(m) for m in metrics}})
    return points


DONE = ("finished", "solved")


def run_seed(preset: str, seed: int, root: Path, settings: list[str], threads: int, metrics: list[str]) -> dict:
    """One seed's run in ``root/sSEED``: trained, or, where an earlier invocation left it unfinished (killed,
    interrupted), resumed (``train --resume``); a finished one is only read."""
    run = root / f"s{seed}"
    meta_path = run / "meta.json"
    status = json.loads(meta_path.read_text())["status"] if meta_path.exists() else None
    if status in DONE:
        out = subprocess.CompletedProcess([], 0, "", "")
    else:
        if status is None:
            cmd = [*RLPILOT, "train", preset, "--seed", str(seed), "--run-dir", str(run), "-q"]
            cmd += [f"--set=train.num_threads={threads}", *(f"--set={s}" for s in settings)]
        else:
            cmd = [*RLPILOT, "train", "--resume", str(run), "-q"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if not meta_path.exists():
        return {"seed": seed, "status": "crashed", "error": out.stderr.strip()[-500:], "curve": []}
    meta = json.loads(meta_path.read_text())
    return {
        "seed": seed,
        "status": meta["status"],
        "frames": meta.get("frames"),
        "solved_at_frames": meta.get("solved_at_frames"),
        "wall_s": meta.get("elapsed_s"),
        "exit_code": out.returncode,
        "curve": curve(read_metrics(run / "metrics.csv"), metrics),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed-start", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    parser.add_argument("--metrics", default="", help="training metrics to record at each evaluation, comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--root",
        help="keep the runs in ROOT/sSEED, and resume those an earlier invocation left unfinished (long runs over "
        "several sittings); default: a temporary folder, removed at the end",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="seeds trained side by side (their wall times then share the CPU)"
    )
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    metrics = [m for m in args.metrics.split(",") if m]
    header, lines, rows = stamp.header(), [], []
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="rlpilot-seeds-"))
    root.mkdir(parents=True, exist_ok=True)
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each seed is its own process
            done = pool.map(lambda seed: run_seed(args.preset, seed, root, args.set, args.threads, metrics), seeds)
        for seed, row in zip(seeds, done):
            rows.append(row)
            solved = f"solved at {row['solved_at_frames']:,} frames" if row.get("solved_at_frames") else "not solved"
            last = row["curve"][-1]["eval"] if row["curve"] else None
            line = (
                f"seed {seed}: {row['status']}, {solved}, {row.get('frames') or 0:,} frames in "
                f"{row.get('wall_s') or 0:.1f} s; last greedy eval {last}"
            )
            print(line, flush=True)
            lines.append(line)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    if args.out:
        data = {"preset": args.preset, "settings": args.set, "threads": args.threads, "metrics": metrics, "rows": rows}
        data["jobs"] = args.jobs
        stamp.write_result(args.out, header, lines, data)


if __name__ == "__main__":
    main()
