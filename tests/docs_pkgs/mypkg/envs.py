"""The heater of docs/your-env.md: a room's temperature driven by a heater's power in [0, 1]."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class Heater(gym.Env):
    """Temperature error and outside temperature observed; reward minus the absolute error; 200 steps."""

    def __init__(self, target: float = 21.0):
        self.target = float(target)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.steps = 0

    def _observation(self):
        return np.array([self.temperature - self.target, self.outside], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.outside = float(self.np_random.uniform(0.0, 15.0))
        self.temperature = float(self.np_random.uniform(10.0, 25.0))
        self.steps = 0
        return self._observation(), {}

    def step(self, action):
        power = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], 0.0, 1.0))
        self.temperature += 0.1 * (self.outside - self.temperature) + 3.0 * power
        self.steps += 1
        reward = -abs(self.temperature - self.target)
        return self._observation(), reward, False, self.steps >= 200, {}


gym.register("Heater-v0", entry_point=Heater, max_episode_steps=200)
