"""DQN reaches its thresholds with fixed seeds (greedy evaluation, 20 episodes).

dqn-cartpole: budget 50k frames; seen here solving in 8k-25k frames (uniform) and 4k-23k (prioritised).
dqn-acrobot: budget 100k frames.
`make test` runs one fast seed (uniform replay, seed 0: ~9 s); the others are `slow` (`make test-all`).
"""

import pytest

from rlpilot.config import load_config
from rlpilot.loop.trainer import train


@pytest.mark.parametrize(
    ("seed", "prioritized"),
    [(0, False)]
    + [pytest.param(s, p, marks=pytest.mark.slow) for s in (0, 1, 2) for p in (False, True) if (s, p) != (0, False)],
)
def test_dqn_cartpole_solves(seed, prioritized, tmp_path):
    overrides = [f"train.seed={seed}", f"dqn.prioritized={str(prioritized).lower()}"]
    run = train(load_config("dqn-cartpole", overrides=overrides), run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved", run.meta()
    assert run.last_eval >= 475


@pytest.mark.slow
def test_dqn_acrobot_reaches_minus_100(tmp_path):
    run = train(load_config("dqn-acrobot", overrides=["train.seed=0"]), run_root=str(tmp_path), show_progress=False)
    assert run.best_eval >= -100, run.meta()
