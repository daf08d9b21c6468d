"""Greedy evaluation: all episodes of an evaluation run side by side as one vector env."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.envs import observation_reader, to_numpy


@dataclass
class EvalResult:
    returns: np.ndarray
    lengths: np.ndarray
    actions_seen: int
    """Distinct greedy actions over the evaluation (discrete); 1 means the policy never varies."""

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        return float(self.returns.std())

    def metrics(self) -> dict[str, float]:
        return {
            "eval/return_mean": self.mean,
            "eval/return_std": self.std,
            "eval/return_min": float(self.returns.min()),
            "eval/return_max": float(self.returns.max()),
            "eval/episode_length": float(self.lengths.mean()),
        }


def evaluate(
    env: TransformedEnv,
    greedy_action: Callable[[torch.Tensor], torch.Tensor],
    *,
    episodes: int,
    seed: int,
) -> EvalResult:
    """Runs ``episodes`` greedy episodes, ``env.batch_size`` at a time (one episode per env per round).

    Round ``k`` resets with ``seed + k * num_envs``, so the same seed gives the same episodes.
    """
    vector_env = env.base_env.vector_env
    read = observation_reader(env)
    n = vector_env.num_envs
    returns, lengths, seen = [], [], set()
    for round_index in range((episodes + n - 1) // n):
        raw, _ = vector_env.reset(seed=seed + round_index * n)
        observation = read(raw, reset=True)
        episode_return = np.zeros(n)
        episode_length = np.zeros(n, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        while active.any():
            env_action = env.base_env.env_action(greedy_action(observation))
            action_array = to_numpy(env_action)
            if action_array.dtype.kind in "iu":  # actions as the env receives them
                seen.update(action_array[active].reshape(-1).tolist())
            raw, reward, terminated, truncated, _ = vector_env.step(env_action)
            reward, terminated, truncated = to_numpy(reward), to_numpy(terminated), to_numpy(truncated)
            episode_return += reward * active
            episode_length += active
            done = terminated | truncated
            active &= ~done
            observation = read(raw)
            if done.any():  # reset every finished env (vector envs refuse to step them), ignore them from now on
                raw, _ = vector_env.reset(options={"reset_mask": done})
                observation = read(raw, reset=done)
        returns.append(episode_return)
        lengths.append(episode_length)
    keep = slice(0, episodes)
    return EvalResult(np.concatenate(returns)[keep], np.concatenate(lengths)[keep], len(seen))
