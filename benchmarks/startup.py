"""Start-up: how long a user waits before the first frame, against the import floor, and for a typo.

Each measurement is a fresh process, one at a time, the kinds interleaved round by round so a drift in
the machine's state touches all of them alike:

- ``floor``: ``python -c "import torch, tensordict, torchrl"`` (the issue's floor: nothing TorchRL-based
  starts faster), ``floor + envs``: also ``torchrl.envs`` and ``torchrl.data`` (what any TorchRL env
  and replay buffer user imports; it pulls in Ray and MuJoCo when they are installed), and the same with
  Ray and MuJoCo hidden from TorchRL, as rlpilot's CLI imports it (``rlpilot.common.torchrl_import``). For each:
  the process age when the imports are done (``/proc``: from the process start, interpreter included)
  and the whole process.
- ``rlpilot train ppo-cartpole`` (the CLI a user runs, ``--quiet``, seeds from 100): ``startup_s`` from
  its ``meta.json`` (the process age when the loop is about to collect its first frame: imports, config,
  envs, networks; the loggers open at the first logged row) and the whole process (to the shell prompt:
  training, the final evaluation, the curve, doctor's line, exit).
- ``import stable_baselines3`` (beside, for scale) and the typo lines a user meets: a misspelt preset, a
  misspelt setting, an unknown env id for ``check``; each must answer in under a second.

Per round, first frame minus floor is a paired difference; the report gives its median with a 95%
bootstrap interval.

    python benchmarks/startup.py --rounds 10 --out benchmarks/results/startup-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

PY = sys.executable
AGE = (
    "import os\n"
    "def age():\n"
    "    s = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]\n"
    "    return float(open('/proc/uptime').read().split()[0]) - int(s) / os.sysconf('SC_CLK_TCK')\n"
)
IMPORTS = {
    "floor": "import torch, tensordict, torchrl",
    "floor + envs": "import torch, tensordict, torchrl, torchrl.envs, torchrl.data",
    # what rlpilot's CLI imports (rlpilot.common.torchrl_import): the same, with Ray and MuJoCo hidden from TorchRL
    "floor + envs, Ray and MuJoCo hidden": (
        "import sys\nsys.modules['ray'] = sys.modules['mujoco'] = None\n"
        "import torch, tensordict, torchrl, torchrl.envs, torchrl.data"
    ),
    "import stable_baselines3": "import stable_baselines3",
}
TYPOS = {
    "train ppo-cartpol (misspelt preset)": ["train", "ppo-cartpol"],
    "train ppo-cartpole --set ppo.lr=abc": ["train", "ppo-cartpole", "--set", "ppo.lr=abc"],
    "check NoSuchEnv-v9": ["check", "NoSuchEnv-v9"],
}
RLPILOT = [PY, "-m", "rlpilot.cli"]


def timed(cmd: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    return time.perf_counter() - start, out


def measure_import(code: str) -> dict:
    whole, out = timed([PY, "-c", AGE + code + "\nprint(age())"])
    if out.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{out.stderr[-1000:]}")
    return {"ready_s": float(out.stdout.split()[-1]), "process_s": whole}


def measure_train(seed: int, root: Path) -> dict:
    run_dir = root / f"s{seed}"
    whole, out = timed([*RLPILOT, "train", "ppo-cartpole", "--seed", str(seed), "--run-dir", str(run_dir), "--quiet"])
    if out.returncode != 0:
        raise SystemExit(f"rlpilot train failed:\n{out.stderr[-1000:]}")
    meta = json.loads((run_dir / "meta.json").read_text())
    return {
        "ready_s": meta["startup_s"],
        "process_s": whole,
        "train_s": meta["elapsed_s"],
        "status": meta["status"],
        "frames": meta["frames"],
    }


def measure_typo(args: list[str]) -> dict:
    whole, out = timed([*RLPILOT, *args])
    lines = out.stderr.strip().splitlines()
    if out.returncode != 2 or len(lines) != 1:
        raise SystemExit(f"rlpilot {' '.join(args)}: expected one line and exit 2, got {out.returncode}:\n{out.stderr}")
    return {"process_s": whole, "line": lines[0]}


def median_interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    data = np.array(values)
    medians = np.median(rng.choice(data, size=(10_000, len(data))), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(np.median(data)), float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--out", help="result file (stamped, JSON beside it); default: print only")
    args = parser.parse_args()
    header = stamp.header()
    rows: dict[str, list[dict]] = {name: [] for name in [*IMPORTS, "rlpilot train ppo-cartpole", *TYPOS]}
    root = Path(tempfile.mkdtemp(prefix="rlpilot-startup-"))
    try:
        measure_import(IMPORTS["floor"])  # one unrecorded round: the file cache warm for every kind alike
        for i in range(args.rounds):
            for name, code in IMPORTS.items():
                rows[name].append(measure_import(code))
            rows["rlpilot train ppo-cartpole"].append(measure_train(args.first_seed + i, root))
            for name, argv in TYPOS.items():
                rows[name].append(measure_typo(argv))
            print(f"round {i + 1}/{args.rounds} done", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[name])

    summary = {
        name: {key: med(name, key) for key in ("ready_s", "process_s", "train_s") if key in runs[0]}
        for name, runs in rows.items()
    }
    train = rows["rlpilot train ppo-cartpole"]
    gaps = {
        floor: median_interval([t["ready_s"] - f["ready_s"] for t, f in zip(train, rows[floor], strict=True)])
        for floor in ("floor", "floor + envs", "floor + envs, Ray and MuJoCo hidden")
    }
    report = ["", f"{args.rounds} rounds, medians [min-max] in seconds", ""]
    for name, runs in rows.items():
        parts = []
        for key, what in (("ready_s", "ready"), ("train_s", "training"), ("process_s", "whole process")):
            if key in runs[0]:
                values = [r[key] for r in runs]
                parts.append(f"{what} {statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]")
        report.append(f"{name:<40} " + "  ".join(parts))
    solved = sum(r["status"] == "solved" for r in train)
    report.append(
        f"rlpilot train: {solved}/{len(train)} solved, seeds {args.first_seed}-{args.first_seed + args.rounds - 1}"
    )
    for floor, (mid, low, high) in gaps.items():
        report.append(f"first frame - {floor}: median {mid:+.2f} s [95% CI {low:+.2f}, {high:+.2f}] (paired per round)")
    report += ["", "typo lines:", *(f"  rlpilot {' '.join(TYPOS[n])}: {rows[n][0]['line']}" for n in TYPOS)]
    print("\n".join(report))
    if args.out:
        data = {"rounds": args.rounds, "rows": rows, "summary": summary, "first_frame_minus": gaps}
        stamp.write_result(args.out, header, report, data)


if __name__ == "__main__":
    main()
