"""The small pixel task learns on a CPU: PPO + CNN on MinAtar Breakout (the pixels extra).

Threshold: the preset's greedy mean of 5.0 over 20 episodes, which must be far above what a random
policy scores (measured here on 100 episodes, as `rlpilot check MinAtar/Breakout-v1 --episodes 100`
does: 0.47), within the preset's 500k frames and 9 minutes of wall time. Seen on 2 shared cores: seeds
0-3 solve at 50k-76k frames in 27-74 s; this test (seed 1) took 31 s.
"""

import importlib.util

import pytest

from rlpilot.config import load_config
from rlpilot.control.evaluate import evaluate
from rlpilot.envs import make_env
from rlpilot.loop.trainer import train

if importlib.util.find_spec("minatar") is None:  # looked up, not imported here (it imports seaborn, scipy, pandas)
    pytest.skip("the pixels extra: pip install 'rlpilot[pixels]'", allow_module_level=True)


@pytest.mark.slow
def test_ppo_minatar_breakout_learns_far_above_random_from_pixels(tmp_path):
    config = load_config("ppo-minatar-breakout", overrides=["train.seed=1", "train.max_seconds=540"])
    env = make_env(config.env, num_envs=20, seed=123)
    spec = env.action_spec
    random_return = evaluate(env, lambda obs: spec.rand(), episodes=100, seed=123).mean
    env.close()
    threshold = config.train.solved_at
    assert threshold > 5 * max(random_return, 0.1), (threshold, random_return)
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved", run.meta()
    assert run.best_eval >= threshold
