"""What ``rlpilot train adapt`` costs per plant, teacher tuning included: each plant's documented command run from a
fresh runs folder (nothing cached: the robust reference and every oracle are searched), in its own process, one
after the other, timed whole (start-up, teacher, DAgger, the run's last evaluation). Run it on an idle machine: the
teacher's searches take every core (``adapt.workers``), DAgger's loop one.

    python benchmarks/adapt_cost.py --out benchmarks/results/adapt_cost-DATE.txt
    python benchmarks/adapt_cost.py --plant tank --set adapt.conditions=2 --out /tmp/cost.txt   # any --set added
    python benchmarks/adapt_cost.py --plant arm --keep runs/cost --out ...   # the timed run kept as runs/cost/arm

The plants' commands are the ones docs/adapt.md, docs/replace-pid.md and docs/robot-arm.md give (the tank's and the
motor's modules from ``examples/``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TANK_SPACE = ["--param", "kp=0.005:2:log", "--param", "ki=0.00001:0.1:log", "--param", "kd=0.01:10:log"]
MOTOR_SPACE = ["--param", "kp=0.3:1000:log", "--param", "ki=0.001:100000:log", "--param", "kd=0.01:100:log"]
PLANTS = {
    "arm": ["train", "ppo-reacher-track-adaptive"],
    "tank": [
        *("train", "adapt", "heated_tank.plant:HeatedTank", "--controller", "heated_tank.pid:TankPID", *TANK_SPACE),
        *("--set", "adapt.conditions=24", "--set", "adapt.tuning_episodes=8", "--set", "adapt.search=fine"),
    ],
    "dc-motor": [
        *("train", "adapt", "dc_motor.plant:ConveyorAxis", "--controller", "dc_motor.pid:AxisPID", *MOTOR_SPACE),
        *("--set", "adapt.shaped=true", "--set", "adapt.scale=2", "--set", "adapt.search=fine"),
        *("--set", "adapt.conditions=24"),
    ],
}
"""Each plant's command as its page gives it (``rlpilot`` and the run folder added here)."""


def cost(plant: str, extra: list[str], folder: Path, keep: Path | None = None) -> dict:
    """One plant's command in a fresh ``folder``: the whole process's seconds and what its run's meta.json says;
    with ``keep``, its run folder is moved to ``keep/PLANT`` afterwards (to measure the student that was timed)."""
    run = folder / "run"
    rlpilot = str(Path(sys.executable).with_name("rlpilot"))  # the console script beside this Python
    command = [rlpilot, *PLANTS[plant], *extra, "--runs", str(folder), "--run-dir", str(run)]
    paths = [str(ROOT / "examples"), *filter(None, [os.environ.get("PYTHONPATH")])]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    started = time.perf_counter()
    subprocess.run([*command, "-q"], check=True, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    meta = json.loads((run / "meta.json").read_text())
    teacher = float(meta["adapt"]["teacher_s"])
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run), str(keep / plant))
    return {
        "command": " ".join(["rlpilot", *PLANTS[plant], *extra]),
        "whole_s": seconds,
        "teacher_s": teacher,
        "training_s": float(meta["elapsed_s"]),
        "frames": int(meta["frames"]),
        "conditions": int(meta["adapt"]["conditions"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plant", action="append", choices=sorted(PLANTS), help="default: every plant")
    parser.add_argument("--set", action="append", default=[], help="added to every plant's command")
    parser.add_argument("--keep", type=Path, help="move each timed run to KEEP/PLANT (refused if one is there)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plants = args.plant or list(PLANTS)
    if args.keep is not None and any((args.keep / plant).exists() for plant in plants):
        parser.error(f"{args.keep} already holds a run of one of {plants}: choose an empty --keep folder")
    header = stamp.header()
    extra = [arg for item in args.set for arg in ("--set", item)]
    results = {}
    for plant in plants:
        with tempfile.TemporaryDirectory(prefix=f"adapt-cost-{plant}-") as folder:
            results[plant] = cost(plant, extra, Path(folder), args.keep)
        found = results[plant]
        print(f"{plant}: {found['whole_s']:.0f} s (teacher {found['teacher_s']:.0f} s)", file=sys.stderr, flush=True)
    body = [
        "",
        "| plant | whole process | teacher (robust + oracles) | DAgger (the run's loop) | plants | frames |",
        "|---|---|---|---|---|---|",
    ]
    for plant, found in results.items():
        body.append(
            f"| {plant} | {found['whole_s']:.0f} s ({found['whole_s'] / 60:.1f} min) | {found['teacher_s']:.0f} s "
            f"| {found['training_s']:.0f} s | {found['conditions']} | {found['frames']:,} |"
        )
    body += ["", *(f"{plant}: `{found['command']}`" for plant, found in results.items())]
    stamp.write_result(args.out, header, body, {"plants": results, "cores": os.cpu_count()})


if __name__ == "__main__":
    main()
