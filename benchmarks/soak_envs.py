"""Envs for the fault soak (``rlpilot train ppo soak_envs:NaNBurstCartPole`` from this folder)."""

from __future__ import annotations

import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class NaNBurstCartPole(CartPoleEnv):
    """CartPole whose step returns an all-NaN observation with probability ``nan_probability`` (seeded by
    the env's own generator): a sensor glitch, for the NaN guard to catch all through a long run."""

    nan_probability = 2e-5

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._spec_max_steps = 500

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        truncated = truncated or self.steps >= self._spec_max_steps
        if self.np_random.random() < self.nan_probability:
            observation = np.full_like(observation, np.nan)
        return observation, reward, terminated, truncated, info
