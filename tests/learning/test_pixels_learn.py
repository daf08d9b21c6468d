"""The small pixel task learns on a CPU: PPO + CNN on MinAtar Breakout (the pixels extra).

Threshold: a greedy mean of 5.0 over 20 episodes (a random policy scores 0.47 over 100 episodes,
`rlpilot check MinAtar/Breakout-v1 --episodes 100`), within the preset's 500k frames and 9 minutes
of wall time. Seen on 2 shared cores: seeds 0-3 solve at 50k-76k frames in 27-74 s; this test
(seed 1) took 31 s.
"""

import pytest

from rlpilot.config import load_config
from rlpilot.train import train

pytest.importorskip("minatar", reason="the pixels extra: pip install 'rlpilot[pixels]'")

RANDOM_POLICY_RETURN = 0.47


@pytest.mark.slow
def test_ppo_minatar_breakout_reaches_5_from_pixels(tmp_path):
    config = load_config("ppo-minatar-breakout", overrides=["train.seed=1", "train.max_seconds=540"])
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert config.train.solved_at == 5.0 and config.train.solved_at > 10 * RANDOM_POLICY_RETURN
    assert run.status == "solved", run.meta()
    assert run.best_eval >= 5.0
