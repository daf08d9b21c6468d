"""docs/robot-arm.md's answer table (tools/gen_results.py ``robot_arm_answer``): issue 37's bar per condition and per
deployable row, the tracking ratio to the oracle and the effort clause, from a comparison's result file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from benchmark_loader import BENCHMARKS, load_benchmark

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gen_results", ROOT / "tools" / "gen_results.py")
gen_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_results)  # puts tools/ on sys.path
results_arm = sys.modules["results_arm"]


def cell(rmse: float, effort: float = 0.01) -> dict:
    return {"RMSE (mm)": rmse, "effort": effort}


def compared(error_mm: float, effort: float = 0.01) -> dict:
    """A cell of ``rlpilot compare``'s compare.json (errors in metres)."""
    return {"error": error_mm / 1000, "effort": effort}


def test_the_bar_is_asked_of_each_deployable_row_with_its_effort(tmp_path):
    """The rows of the benchmark script's file, each as a ratio to the fine oracle of compare's answer on the same
    episodes, verdicts against compare's robust PD; a condition compare did not play (the script's randomised arm)
    is left out."""
    oracle, robust = results_arm.ORACLE_ROW, results_arm.ROBUST_ROW
    adaptive, on_adaptive = results_arm.ANSWER_ADAPTIVE, results_arm.ANSWER_RL_ADAPTIVE
    data = {
        "episodes": 100,
        "stamp": ["# commit: 0123456789abcdef", "# date: 2026-12-05", "# load at start: 0 0 0", "# command: x"],
        "conditions": {  # the script's own oracle and robust rows (a grid's) are not what the bar is asked against
            "nominal": {oracle: cell(9.0), robust: cell(0.1), adaptive: cell(1.25), on_adaptive: cell(1.2, 0.011)},
            "delay": {oracle: cell(9.0), robust: cell(9.0), adaptive: cell(1.5), on_adaptive: cell(2.1, 0.03)},
            "random": {oracle: cell(9.0), robust: cell(9.0), adaptive: cell(0.1), on_adaptive: cell(0.1)},
        },
    }
    path = tmp_path / "robot_arm_track-2026-12-05b.json"
    path.write_text(json.dumps(data))
    answer = tmp_path / "compare-arm-2026-12-06" / "compare.json"
    answer.parent.mkdir()
    answer.write_text(
        json.dumps(
            {
                "conditions": {
                    # within 1.2x the oracle and below the robust PD: yes; effort 1.1x the oracle's
                    "nominal": {"cells": {"oracle": compared(1.0), "robust": compared(4.0)}},
                    # within 1.2x but not below the robust PD (the robust PD is the oracle here): no
                    "delay": {"cells": {"oracle": compared(2.0), "robust": compared(2.0)}},
                    "sampled": {"cells": {"oracle": compared(1.0), "robust": compared(1.0)}},
                }
            }
        )
    )
    lines = results_arm.robot_arm_answer(path, answer).splitlines()
    table = {line.split(" | ")[0].lstrip("| "): line for line in lines}
    assert lines[0] == "| | nominal | delay |"
    assert table["robust PD (compare's)"].endswith("| 4.00x | 1.00x |")
    assert table["RL student on adaptive-pd (PPO refining its gains)"].endswith("| 1.20x | 1.05x |")
    assert table["RL on adaptive-pd replaces the tuning (<= 1.2x oracle, < robust)?"].endswith("| **yes** | no |")
    assert table["RL on adaptive-pd's motor effort / oracle's"].endswith("| 1.10x | 3.00x |")
    assert table["adaptive-pd meets the bar (<= 1.2x oracle, < robust)?"].endswith("| no | **yes** |")
    # the PD student was not measured in this file: no row, no verdict
    assert not any(key.startswith("RL student replaces") for key in table)


def test_the_ratio_spread_is_paired_per_block_and_typical():
    """benchmarks/arm_ratio_spread.py: the ratio of means, a paired interval around it, one ratio per block of
    100 episodes, and the median per-episode ratio, which a few bad oracle episodes do not move."""
    spread = load_benchmark(BENCHMARKS / "arm_ratio_spread.py")
    rng = np.random.default_rng(0)
    oracle = rng.uniform(0.2, 0.6, 300)
    oracle[250:253] = 20.0  # three episodes where the fixed PD rings, all in the third block
    adaptive = oracle * 1.3
    adaptive[250:253] = 2.0  # the adaptive controller does not ring
    out = spread.compare(adaptive, oracle)
    assert np.isclose(out["ratio"], adaptive.mean() / oracle.mean())
    assert out["ratio_ci"][0] < out["ratio"] < out["ratio_ci"][1]
    assert len(out["blocks"]) == 3
    assert np.isclose(out["blocks"][0], 1.3) and np.isclose(out["blocks"][1], 1.3) and out["blocks"][2] < 0.7
    assert np.isclose(out["median_episode_ratio"], 1.3)
