"""The batched collector and evaluator against plain gymnasium loops."""

import gymnasium as gym
import numpy as np
import torch

from rlpilot.config import EnvConfig
from rlpilot.control.collect import BatchCollector
from rlpilot.control.evaluate import evaluate
from rlpilot.envs import make_env


def lean_right(obs: torch.Tensor) -> torch.Tensor:
    """A deterministic CartPole policy: push towards the side the pole leans to."""
    return (obs[:, 2] > 0).long()


def test_evaluate_matches_sequential_gymnasium_episodes():
    seed, episodes = 7, 6
    env = make_env(EnvConfig(id="CartPole-v1", backend="sync"), num_envs=4)  # 2 rounds, 2 envs idle in round 2
    result = evaluate(env, lean_right, episodes=episodes, seed=seed)
    expected = []
    for round_index in range(2):
        for i in range(4):
            single = gym.make("CartPole-v1")
            obs, _ = single.reset(seed=seed + round_index * 4 + i)
            total, done = 0.0, False
            while not done:
                obs, reward, terminated, truncated, _ = single.step(int(obs[2] > 0))
                total += reward
                done = terminated or truncated
            expected.append(total)
    np.testing.assert_array_equal(result.returns, np.array(expected[:episodes]))
    assert len(set(result.returns.tolist())) > 1  # episodes ended at different steps
    assert result.actions_seen == 2


def test_evaluate_survives_envs_that_finish_many_times():
    """Short episodes end several times while a long one runs: every finished env must be reset."""
    env = make_env(EnvConfig(id="Acrobot-v1", max_episode_steps=50), num_envs=3)
    result = evaluate(env, lambda obs: torch.zeros(obs.shape[0], dtype=torch.long), episodes=3, seed=0)
    assert result.lengths.tolist() == [50, 50, 50]
    assert (result.returns == -50).all()


def test_collector_layout_and_episode_boundaries():
    env = make_env(EnvConfig(id="CartPole-v1"), num_envs=3)

    def act(obs):
        return torch.zeros(obs.shape[0], dtype=torch.long), {"action_log_prob": torch.zeros(obs.shape[0])}

    collector = BatchCollector(env, act, steps=40, seed=0)  # always pushing left: episodes end in ~10 steps
    batch = collector.collect()
    assert batch.batch_size == (3, 40)
    done = batch["next", "done"].squeeze(-1)
    assert done.any() and not batch["next", "truncated"].any()
    env_i, t = [int(x) for x in done.nonzero()[0]]
    final = batch["next", "observation"][env_i, t]
    following = batch["observation"][env_i, t + 1]
    assert final[2].abs() > 12 * 2 * np.pi / 360 or final[0].abs() > 2.4  # the true terminal state
    assert following.abs().max() <= 0.05  # a fresh reset, not the terminal state
    not_done = ~done[:, :-1]
    torch.testing.assert_close(batch["next", "observation"][:, :-1][not_done], batch["observation"][:, 1:][not_done])
    returns, lengths = collector.episodes.drain()
    assert len(returns) == int(done.sum()) and returns == [float(n) for n in lengths]
