"""tools/results_speed.py's time-to-solve table on a locomotion file: the task named by its algorithm and env, one
seed shown without an interval it does not have, and the thread budget of a whole-machine file said."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gen_results", ROOT / "tools" / "gen_results.py")
gen_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_results)  # puts tools/ on sys.path
results_speed = sys.modules["results_speed"]

STAMP = ["# date: 2026-12-07 22:00:00 +0000", "# commit: 0123456789abcdef", "# command: python x.py"]
STAMP += ["# load at start: 0.1"]


def mujoco_file(tmp_path: Path, seeds: list[int], cores: int) -> Path:
    def run(train_s: float, solved: bool = True) -> dict:
        return {"solved": solved, "frames": 160_000, "train_s": train_s, "process_s": train_s + 5}

    ours, peer = "rlpilot-sac-halfcheetah-preset", "sbx-sac-halfcheetah-zoo"
    results = {ours: [run(100.0 + s) for s in seeds], peer: [run(150.0 + s) for s in seeds]}
    ratio = (1.5, 1.4, 1.6)
    comparison = {"ours": ours, "peer": peer, "both_solved": len(seeds), "seeds": len(seeds)}
    comparison.update(train_s=ratio, process_s=ratio, frames=(1.0, 1.0, 1.0))
    task = {"algo": "sac", "env_id": "HalfCheetah-v5", "seeds": seeds, "peers": [peer], "results": results}
    task["comparisons"] = {"preset/sbx-sac-halfcheetah-zoo": comparison}
    path = tmp_path / "time_to_solve_mujoco-2026-12-07.json"
    path.write_text(json.dumps({"tasks": {"sac-halfcheetah": task}, "stamp": STAMP, "cores": cores}))
    return path


def test_one_seed_has_no_interval_and_the_task_reads_as_algorithm_on_env(tmp_path):
    table = results_speed.time_to_solve_table(mujoco_file(tmp_path, [100], cores=1))
    assert "| SAC on HalfCheetah-v5 | preset vs preset (what a user gets) | SBX + Zoo | 1/1 |" in table
    assert "1.50x (one seed: no interval)" in table and "[1.40-1.60]" not in table
    assert "seed 100 (no preset was tuned on it)" in table and "pinned to" not in table


def test_several_seeds_show_their_interval_and_a_whole_machine_file_its_cores(tmp_path):
    table = results_speed.time_to_solve_table(mujoco_file(tmp_path, [100, 101, 102], cores=2))
    assert "1.50x [1.40-1.60]" in table and "seeds 100-102" in table
    assert "Every run pinned to 2 CPUs and computing on 2 threads" in table
