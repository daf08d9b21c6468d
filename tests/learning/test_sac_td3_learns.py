"""SAC and TD3 swing Pendulum up (greedy mean over 20 episodes >= -200, the issue's and the benchmark's
threshold) through the real training loop; SAC and TD3 reach the Reacher-v5 threshold (slow).

Seed 100: the presets were tuned on seeds 0-2, so the test runs a seed they never saw (benchmarks use
100+ too). Measured frames and seconds to solve (-200) per seed are in docs/sac-td3.md.
"""

import pytest

from rlpilot.config import load_config
from rlpilot.doctor import diagnose
from rlpilot.loop.trainer import train


@pytest.mark.parametrize("preset", ["sac-pendulum", "td3-pendulum"])
def test_pendulum_swings_up(preset, tmp_path):
    # the preset's own rule (solved at -200), which benchmarks/time_to_solve.py measures on seeds 100-109
    # (seed 100: SAC 4,000 frames / ~15 s, TD3 8,000 / ~22 s of training on this 2-core machine)
    run = train(load_config(preset, overrides=["train.seed=100"]), run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved", run.meta()
    assert run.best_eval >= -200
    # a solved run gets no warnings or errors (most rules wait for a run not doing well; the guard and
    # non-finite rules do not)
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == diagnosis.warnings == 0, diagnosis.render()
    assert "action/at_bound" in run.metrics()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["sac-reacher", "td3-reacher"])
def test_reaches_the_reacher_threshold(preset, tmp_path):
    """sac-reacher and td3-reacher on seed 100 (tuned on seed 0 only) reach gymnasium's Reacher-v5 threshold, a
    greedy mean of -3.75 over 20 episodes, within their 200k-frame budget, and the fingertip ends within 2 cm of
    the target (ppo-reacher's final distance: 2 cm; docs/results.md "Reacher"). ~8-15 minutes each on this 2-core
    machine."""
    pytest.importorskip("mujoco")
    run = train(load_config(preset, overrides=["train.seed=100"]), run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved", run.meta()
    last = [row for row in run.metrics() if "eval/final_distance" in row][-1]
    assert last["eval/return_mean"] >= -3.75 and last["eval/final_distance"] < 0.02, last
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0, diagnosis.render()
