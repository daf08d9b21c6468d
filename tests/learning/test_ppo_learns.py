"""Each preset reaches its threshold with a fixed seed, judged on greedy evaluation episodes.

Budgets are the presets' own (cartpole 100k frames, acrobot 200k, pendulum 200k); runs stop when
solved. Seen here: cartpole solves in 4k-16k frames, acrobot in 72k-123k, pendulum in 72k-92k.
`make test` runs one fast seed (cartpole, seed 0: ~2 s); the other seeds and presets are `slow`
(`make test-all`).
"""

import pytest

from rlpilot.config import load_config
from rlpilot.loop.trainer import train


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_ppo_cartpole_solves(seed, tmp_path):
    run = train(
        load_config("ppo-cartpole", overrides=[f"train.seed={seed}"]), run_root=str(tmp_path), show_progress=False
    )
    assert run.status == "solved", run.meta()
    assert run.last_eval >= 475
    assert run.config().train.eval_episodes >= 20


@pytest.mark.slow
def test_ppo_acrobot_reaches_minus_100(tmp_path):
    run = train(load_config("ppo-acrobot", overrides=["train.seed=0"]), run_root=str(tmp_path), show_progress=False)
    assert run.best_eval >= -100, run.meta()


@pytest.mark.slow
def test_ppo_pendulum_reaches_minus_250(tmp_path):
    run = train(load_config("ppo-pendulum", overrides=["train.seed=0"]), run_root=str(tmp_path), show_progress=False)
    assert run.best_eval >= -250, run.meta()
