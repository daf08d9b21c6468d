"""``MyEnv`` of docs/check.md and docs/train.md: walk to the end of a corridor of ``size`` cells (Discrete(2))."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class MyEnv(gym.Env):
    def __init__(self, size: int = 5):
        self.size = int(size)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, self.size - 1))
        self.steps = 0
        return np.array([self.position / (self.size - 1)], dtype=np.float32), {}

    def step(self, action):
        self.position = int(np.clip(self.position + (1 if int(action) == 1 else -1), 0, self.size - 1))
        self.steps += 1
        done = self.position == self.size - 1
        observation = np.array([self.position / (self.size - 1)], dtype=np.float32)
        return observation, (1.0 if done else -0.01), done, self.steps >= 100, {}


gym.register("MyEnv-v0", entry_point=MyEnv, max_episode_steps=100)
