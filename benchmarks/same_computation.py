"""Does a change keep the computation? The same short runs trained at two commits, compared bit for bit.

For each ``--run PRESET`` (an rlpilot preset, with ``--set`` overrides if given after ``:``), train it at the
``--old`` commit (checked out into a temporary git worktree) and at the working tree, with the same seed and
frames, then compare:

- ``metrics.csv``: every column except wall-clock ones (``time/...``, ``collect/...`` rates, ``compile/..._s``
  seconds), value for value;
- the final checkpoint: every tensor of the algorithm's state (networks, optimisers, normalisation), exactly;
- ``rlpilot eval RUN --episodes E``'s printed returns.

Used when a refactor says "no behaviour change" (issue 40's controller protocol, issue 37's arm package): a
run that reproduces bit for bit reproduces every table built from such runs. Exit 1 on any difference.

    python benchmarks/same_computation.py --old 96d4da2 --run ppo-reacher-track-gated --frames 8192 \\
        --out benchmarks/results/same_computation-DATE.txt
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import ROOT, header, write_result  # noqa: E402

CLOCK_COLUMNS = ("collect/fps", "collect/actor_fps", "collect/wait_share")
"""Wall-clock columns besides ``time/...`` (elapsed seconds, frames per second): they differ run to run."""


def rlpilot(src: Path, *args: str) -> str:
    """``rlpilot ARGS`` with the package of ``src`` (the old worktree's or this tree's); its stdout."""
    command = [sys.executable, "-m", "rlpilot.cli", *args]
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout


def train(src: Path, preset: str, overrides: list[str], frames: int, seed: int, run_dir: Path) -> None:
    sets = [item for override in overrides for item in ("--set", override)]
    rlpilot(
        src,
        "train",
        preset,
        "--seed",
        str(seed),
        "--frames",
        str(frames),
        "--run-dir",
        str(run_dir),
        "-q",
        "--set",
        "train.loggers=[]",
        *sets,
    )


def evaluate(src: Path, run_dir: Path, episodes: int) -> str:
    out = rlpilot(src, "eval", str(run_dir), "--episodes", str(episodes)).strip()
    return out.splitlines()[0] if out else ""


def clock(column: str) -> bool:
    return (
        column.startswith("time/")
        or column in CLOCK_COLUMNS
        or (column.startswith("compile/") and column.endswith("_s"))
    )


def metrics(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return [{key: value for key, value in row.items() if not clock(key)} for row in csv.DictReader(f)]


def tensors(state, prefix: str = "", rows: int | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's state by path; a replay storage's rows past its length (``_len``: memory
    ``torch.empty`` left uninitialised, different from process to process) left out."""
    found = {}
    if isinstance(state, torch.Tensor):
        found[prefix] = state if rows is None or state.dim() == 0 else state[:rows]
    elif isinstance(state, dict):
        filled = state.get("_len") if "_storage" in state else None
        for key, value in state.items():
            inner = int(filled) if key == "_storage" and filled is not None else rows
            found.update(tensors(value, f"{prefix}/{key}", inner))
    elif isinstance(state, (list, tuple)):
        for index, value in enumerate(state):
            found.update(tensors(value, f"{prefix}/{index}", rows))
    return found


def compare(old: Path, new: Path) -> list[str]:
    """What differs between two runs (empty: nothing)."""
    differences = []
    old_rows, new_rows = metrics(old), metrics(new)
    if len(old_rows) != len(new_rows):
        differences.append(f"metrics.csv: {len(old_rows)} rows against {len(new_rows)}")
    for index, (a, b) in enumerate(zip(old_rows, new_rows, strict=False)):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                differences.append(f"metrics.csv row {index} {key}: {a.get(key)} against {b.get(key)}")
    old_state = tensors(torch.load(old / "checkpoints" / "last.pt", weights_only=True)["state"])
    new_state = tensors(torch.load(new / "checkpoints" / "last.pt", weights_only=True)["state"])
    if set(old_state) != set(new_state):
        differences.append(f"checkpoint keys differ: {sorted(set(old_state) ^ set(new_state))[:5]}")
    for key in sorted(set(old_state) & set(new_state)):
        if not torch.equal(old_state[key], new_state[key]):
            differences.append(f"checkpoint {key}: differs")
    return differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the commit to compare the working tree against")
    parser.add_argument("--run", action="append", required=True, metavar="PRESET[:key=value,...]")
    parser.add_argument("--frames", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", help="result file (stamped, JSON beside it); default: print only")
    args = parser.parse_args()
    stamp = header()
    body, results, failed = [], {}, False
    with tempfile.TemporaryDirectory(prefix="same-computation-") as tmp:
        worktree = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.old], cwd=ROOT, check=True)
        sources = {"old": worktree / "src", "new": ROOT / "src"}
        try:
            for number, spec in enumerate(args.run):
                preset, _, rest = spec.partition(":")
                overrides = [item for item in rest.split(",") if item]
                runs = {side: Path(tmp) / f"{number}-{preset}-{side}" for side in sources}
                for side, src in sources.items():
                    train(src, preset, overrides, args.frames, args.seed, runs[side])
                returns = {side: evaluate(src, runs[side], args.episodes) for side, src in sources.items()}
                differences = compare(runs["old"], runs["new"])
                if returns["old"] != returns["new"]:
                    differences.append(f"eval: {returns['old']!r} against {returns['new']!r}")
                rows = len(metrics(runs["new"]))
                verdict = "identical" if not differences else f"{len(differences)} differences"
                body.append(f"{spec}: {verdict} ({rows} metric rows, checkpoint, eval {returns['new']})")
                body += [f"  {line}" for line in differences[:20]]
                results[spec] = {"identical": not differences, "differences": differences[:50], "eval": returns}
                failed |= bool(differences)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    body.insert(0, f"old {args.old} against the working tree; seed {args.seed}, {args.frames} frames")
    print("\n".join(body))
    if args.out:
        write_result(args.out, stamp, body, {"old": args.old, "frames": args.frames, "seed": args.seed, **results})
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
