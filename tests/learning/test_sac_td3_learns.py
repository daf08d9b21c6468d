"""SAC and TD3 swing Pendulum up (greedy mean over 20 episodes >= -200, the issue's and the benchmark's
threshold) through the real training loop; SAC and TD3 reach the Reacher-v5 threshold, SAC solves
MountainCarContinuous and LunarLanderContinuous (slow).

Seed 100: the presets were tuned on seeds 0-2, so the test runs a seed they never saw (benchmarks use
100+ too). Measured frames and seconds to solve (-200) per seed are in docs/sac-td3.md.
"""

import pytest

from rlpilot.config import load_config
from rlpilot.doctor import diagnose
from rlpilot.loop.trainer import train


# TD3 learning (~50 s with two test processes) runs in make test-all; its pipeline is in the smoke tests
@pytest.mark.parametrize("preset", ["sac-pendulum", pytest.param("td3-pendulum", marks=pytest.mark.slow)])
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
def test_sac_reaches_the_reacher_threshold(tmp_path):
    """sac-reacher on seed 100 (tuned on seed 0 only) reaches gymnasium's Reacher-v5 threshold, a greedy mean
    of -3.75 over 20 episodes, within its 200k-frame budget, and the fingertip ends within 2 cm of the target
    (ppo-reacher's final distance: 2 cm; docs/results.md "Reacher"). ~8 minutes on this 2-core machine."""
    pytest.importorskip("mujoco")
    run = train(load_config("sac-reacher", overrides=["train.seed=100"]), run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved", run.meta()
    last = [row for row in run.metrics() if "eval/final_distance" in row][-1]
    assert last["eval/return_mean"] >= -3.75 and last["eval/final_distance"] < 0.02, last
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0, diagnosis.render()


@pytest.mark.slow
def test_td3_learns_reacher(tmp_path):
    """td3-reacher (256-256 networks, tuned on seeds 0 and 1) solves held-out seed 100: a greedy mean of -3.75 or
    better within its 200k frames, the arm ending within 3 cm of the target. Seen 2026-12-01: -3.47 at 60k frames,
    729 s of one core (docs/sac-td3.md). With the earlier 64-64 networks it did not (best -4.06)."""
    pytest.importorskip("mujoco")
    run = train(load_config("td3-reacher", overrides=["train.seed=100"]), run_root=str(tmp_path), show_progress=False)
    evals = [row for row in run.metrics() if "eval/final_distance" in row]
    best = max(evals, key=lambda row: row["eval/return_mean"])
    assert best["eval/return_mean"] >= -3.75 and best["eval/final_distance"] < 0.03, (best, run.meta())
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0, diagnosis.render()


@pytest.mark.slow
def test_sac_solves_mountaincar_continuous(tmp_path):
    """sac-mountaincar-continuous (sparse: +100 at the flag) solves held-out seed 100, a greedy mean >= 90 over 10
    episodes, within its 50k frames. Its correlated warm-up (uniform forces held 50 steps) puts the flag in the
    replay; with fresh forces every step it never solved (docs/sac-td3.md). Seen 2026-12-01 with this preset: solved at
    15,008 frames (benchmarks/results/stays_solved-mcc-2026-12-01-a.txt); slow for its training time."""
    run = train(
        load_config("sac-mountaincar-continuous", overrides=["train.seed=100"]),
        run_root=str(tmp_path),
        show_progress=False,
    )
    assert run.status == "solved" and run.best_eval >= 90, run.meta()
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0, diagnosis.render()


@pytest.mark.slow
def test_sac_learns_lunarlander_continuous(tmp_path):
    """sac-lunarlander-continuous on seed 100 (tuned on seed 0 only) solves (greedy mean >= 200 over the preset's
    evaluation) within the preset's 500k-frame budget. Seen 2026-12-01: not solved at 254k frames (best 161 at
    170k), solved at 300k frames (229.8) in 2,885 s of one core with the other busy; docs/sac-td3.md. The longest
    test of make test-all (up to about an hour)."""
    pytest.importorskip("Box2D")
    config = load_config("sac-lunarlander-continuous", overrides=["train.seed=100"])
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert run.best_eval >= 200, run.meta()
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0, diagnosis.render()
