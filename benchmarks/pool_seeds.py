"""Seeds of one time-to-solve benchmark measured in separate runs, pooled into one stamped result file.

A locomotion seed costs about an hour for rlpilot, SB3 and SBX one after another on one core
(benchmarks/time_to_solve.py), so its seeds are measured a few at a time, across sessions, each run writing
its own stamped file. This pools them: the per-seed rows side by side and the paired ratios and intervals
recomputed over all of them (``time_to_solve.compare``, as one run of every seed would have written them).

    python benchmarks/pool_seeds.py benchmarks/results/A.json benchmarks/results/B.json \\
        --out benchmarks/results/C.txt

The files must have measured the same thing: the same tasks with the same settings (env, threshold, budget,
evaluation), the same rows (arms and peers), the same cores and the same SBX interpreter; no seed twice. Each
seed keeps the stamp it was measured under (``pooled`` in the JSON: file, stamp and seeds); the pooled file's own
stamp says when and how it was pooled. A pooled file may be pooled again with newer seeds: its runs are listed as
they were.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stamp  # noqa: E402
from time_to_solve import TASKS, compare, report  # noqa: E402

SAME_FILE = ("cores", "sbx_interpreter")
"""What every pooled file must agree on (the thread budget and the SBX interpreter with its versions)."""
SAME = ("algo", "env_id", "episodes", "threshold", "budget", "eval_every", "peers")
"""What every pooled file's task must agree on (its seeds and results are what is pooled)."""


class Mismatch(ValueError):
    """The files measured different things: one line saying what differs."""


def pool(files: list[tuple[str, dict]]) -> dict:
    """The pooled data of ``(path, data)`` pairs: tasks with every file's seeds and results in file order, the
    comparisons recomputed, and ``pooled``: each file with its stamp and the seeds it measured."""
    first_path, first = files[0]
    for path, data in files[1:]:
        for key in SAME_FILE:
            if data.get(key) != first.get(key):
                raise Mismatch(f"{path}: {key} {data.get(key)!r} differs from {first_path}'s {first.get(key)!r}")
        if sorted(data["tasks"]) != sorted(first["tasks"]):
            raise Mismatch(f"{path}: tasks {sorted(data['tasks'])} differ from {first_path}'s {sorted(first['tasks'])}")
    tasks = {}
    for algo, task in first["tasks"].items():
        merged = {**task, "seeds": [], "results": {name: [] for name in task["results"]}}
        for path, data in files:
            other = data["tasks"][algo]
            for key in SAME:
                if other.get(key) != task.get(key):
                    theirs, ours = other.get(key), task.get(key)
                    raise Mismatch(f"{path}: {algo} {key} {theirs!r} differs from {first_path}'s {ours!r}")
            if sorted(other["results"]) != sorted(task["results"]) or sorted(other["comparisons"]) != sorted(
                task["comparisons"]
            ):
                raise Mismatch(f"{path}: {algo}'s rows {sorted(other['results'])} differ from {first_path}'s")
            twice = set(other["seeds"]) & set(merged["seeds"])
            if twice:
                raise Mismatch(f"{path}: {algo} seed(s) {sorted(twice)} are already in an earlier file")
            merged["seeds"] += other["seeds"]
            for name, rows in other["results"].items():
                merged["results"][name] += rows
        merged["comparisons"] = {
            key: compare(merged["results"], c["ours"], c["peer"], merged["seeds"])
            for key, c in task["comparisons"].items()
        }
        tasks[algo] = merged
    pooled = [  # a file pooled before lists the runs it pooled: each seed keeps the stamp it was measured under
        entry
        for path, data in files
        for entry in data.get("pooled")
        or [{"from": path, "stamp": data["stamp"], "seeds": {algo: t["seeds"] for algo, t in data["tasks"].items()}}]
    ]
    kept = {key: first[key] for key in SAME_FILE if key in first}
    return {"tasks": tasks, **kept, "pooled": pooled}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="time_to_solve result files (.json), two or more")
    parser.add_argument("--out", required=True, help="the pooled result file (.txt; a .json twin beside it)")
    args = parser.parse_args()
    if len(args.files) < 2:
        parser.error("give two or more result files to pool")
    files = []
    for name in args.files:
        path = Path(name).with_suffix(".json")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            parser.error(f"{path}: not a readable result file ({error})")
        if "tasks" not in data or "stamp" not in data or data.get("carried"):
            parser.error(f"{path}: not a time_to_solve result file of its own measurements (no tasks, or carried rows)")
        files.append((str(path), data))  # as given: the table shows its name
    try:
        data = pool(files)
    except Mismatch as error:
        parser.error(str(error))
    header = stamp.header()
    lines = [f"# pooled from {entry['from']}: seeds {entry['seeds']}" for entry in data["pooled"]]
    for algo, task in data["tasks"].items():
        seeds, peers = task["seeds"], task["peers"]
        block = report(TASKS[algo], task["results"], seeds, task["comparisons"], task["episodes"], peers)
        print("\n".join(block), flush=True)
        lines += block
    stamp.write_result(args.out, header, lines, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
