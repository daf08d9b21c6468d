"""Small user-style gymnasium envs used by the tests (importable as ``envs_for_tests:Class``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class DictObsEnv(gym.Env):
    """Dict observation (position + velocity), float64, 2 discrete actions; 20-step episodes."""

    def __init__(self):
        self.observation_space = gym.spaces.Dict(
            {
                "position": gym.spaces.Box(-10, 10, (2,), np.float64),
                "velocity": gym.spaces.Box(-1, 1, (1,), np.float64),
            }
        )
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return {"position": self.position.copy(), "velocity": np.array([self.velocity])}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2)
        self.velocity = 0.0
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.velocity = float(np.clip(self.velocity + (0.1 if action == 1 else -0.1), -1, 1))
        self.position = self.position + self.velocity
        self.t += 1
        return self._obs(), float(-np.abs(self.position).sum()), False, self.t >= 20, {}


class UnseededEnv(gym.Env):
    """Draws from numpy's global RNG instead of ``self.np_random``: seeding cannot reproduce it."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.random.uniform(-1, 1, 2).astype(np.float32)
        return obs, float(action), False, self.t >= 10, {}


class IgnoresActionEnv(gym.Env):
    """Observations that no action can change, and a wide unnormalised scale."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, 500.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, 500.0 * self.np_random.normal()], np.float32), 0.0, False, self.t >= 10, {}


class NaNAfterK(gym.Env):
    """CartPole-like scales; env instance 1 of a vector starts returning NaN observations after K steps."""

    observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    instances = 0

    def __init__(self, k: int = 30):
        self.k = k
        self.index = NaNAfterK.instances
        NaNAfterK.instances += 1
        self.total_steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        self.total_steps += 1
        obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        if self.index % 4 == 1 and self.total_steps > self.k:
            obs[:] = np.nan
        return obs, float(action), False, self.t >= 20, {}


class RaisesOnStep(gym.Env):
    """A user env whose ``step`` raises after ``fail_after`` steps (per env instance): a bug in user code."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    fail_after = 3

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = getattr(self, "steps", 0)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps > self.fail_after:
            raise RuntimeError("boom")
        return np.zeros(2, np.float32), 1.0, False, False, {}


class RaisesLater(RaisesOnStep):
    """Raises once training is well under way (after the first checkpoint)."""

    fail_after = 400


class InitRaises(gym.Env):
    """A user env whose constructor raises (a bug, or a missing resource)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        raise RuntimeError("cannot open the simulator")


class WrongShapeReset(gym.Env):
    """Declares 2-dim observations but ``reset`` returns 3 numbers."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


class Steps(gym.Env):
    """2 discrete actions, 2 float observations, 10-step episodes: the base of the faulty envs below."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, 0.1 * (self.t % 3), np.float32), float(action), False, self.t >= 10, {}

    def render(self):
        return np.zeros((8, 8, 3), np.uint8)


class MultiBinaryEnv(Steps):
    """A ``MultiBinary`` action space: no rlpilot algorithm acts in it."""

    action_space = gym.spaces.MultiBinary(3)

    def step(self, action):
        observation, _, terminated, truncated, info = super().step(0)
        return observation, 0.0, terminated, truncated, info


class NaNReward(Steps):
    """Every reward is NaN (a division by zero in a user's reward function)."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


class ShortStepTuple(Steps):
    """``step`` returns gym's old 4-tuple (obs, reward, done, info)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class NestedDictObs(Steps):
    """A Dict observation holding a Dict: rlpilot reads one level of keys."""

    observation_space = gym.spaces.Dict(
        {"arm": gym.spaces.Dict({"angle": gym.spaces.Box(-1, 1, (2,), np.float32)}), "t": gym.spaces.Discrete(11)}
    )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"arm": {"angle": np.zeros(2, np.float32)}, "t": 0}, {}

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        return {"arm": {"angle": np.zeros(2, np.float32)}, "t": self.t}, reward, terminated, truncated, info


class RenderNone(Steps):
    """``render()`` returns None although ``render_mode='rgb_array'`` was asked for."""

    def render(self):
        return None


class RenderFlat(Steps):
    """``render()`` returns a 1-D array, not an image."""

    def render(self):
        return np.zeros(12, np.uint8)
