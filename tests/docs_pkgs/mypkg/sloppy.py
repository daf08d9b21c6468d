"""The sloppy heater of docs/your-env.md ("Mistakes `check` finds"): numpy's global RNG, centi-degrees."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class SloppyHeater(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        self.temp = np.random.uniform(10, 30) * 100.0  # numpy's global RNG; centi-degrees
        self.steps = 0
        return np.array([self.temp, 2100.0 - self.temp]), {}

    def step(self, action):
        self.temp += 50.0 * float(np.asarray(action).reshape(-1)[0]) - 10.0
        self.steps += 1
        return np.array([self.temp, 2100.0 - self.temp]), -abs(self.temp - 2100.0), False, self.steps >= 100, {}
