"""Residual RL: a classical controller inside the vector env, the policy's action a correction to it.

``mode="add"``: ``clip(base(observation) + scale * action, low, high)`` is what the env receives; the policy
learns only the correction (Silver et al. 2018, "Residual Policy Learning"; Johannink et al. 2019).
``mode="gains"``: the policy schedules the base controller's gains instead, kp and kd times
``10 ** (scale * action)`` (a gain schedule learned by RL): the env always receives a PD/PID law's action,
so an imprecise policy costs a slightly different gain, not a torque error. Either way the policy sees the
same observations as the base controller, and action 0 is the base controller exactly. The base is computed
for the whole batch in one call per step, and a stateful base (PID) is reset for exactly the envs that start
a new episode. ``penalty`` (``env.residual_penalty``) subtracts ``penalty * |action|^2`` from each reward;
``gate`` (``env.residual_gate``) lets the action act only where the error monitor is above it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlpilot.controllers import RESIDUAL_MODES, residual_terms
from rlpilot.errors import UserError


class ResidualVectorEnv(gym.vector.VectorWrapper):
    def __init__(
        self,
        env: gym.vector.VectorEnv,
        controller,
        scale: float,
        mode: str = "add",
        penalty: float = 0.0,
        gate: float = 0.0,
    ):
        super().__init__(env)
        space = env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise UserError("env.base_controller: residual RL needs continuous (Box) actions")
        if mode not in RESIDUAL_MODES:
            raise UserError(f"env.residual_mode: one of {', '.join(RESIDUAL_MODES)}, got {mode!r}")
        if mode == "gains" and space.shape != (2,):
            raise UserError(
                f"env.residual_mode=gains: the policy's 2 actions scale kp and kd; this env has {space.shape}"
            )
        self.controller, self.scale, self.mode, self.penalty = controller, float(scale), mode, float(penalty)
        self.gate = float(gate)
        self.low, self.high = env.action_space.low, env.action_space.high
        self._observation: np.ndarray | None = None

    def reset(self, *, seed=None, options=None):
        observation, info = self.env.reset(seed=seed, options=options)
        mask = None if options is None else options.get("reset_mask")
        reset = getattr(self.controller, "reset", None)
        if reset is not None:
            reset(mask)
        if mask is None or self._observation is None:
            self._observation = np.array(observation, copy=True)
        else:
            self._observation[mask] = observation[mask]
        return observation, info

    def step(self, actions):
        observation = torch.as_tensor(self._observation, dtype=torch.float32)
        action = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        with torch.no_grad():  # the base for the whole batch, from the observations the policy acted on
            gains, added = residual_terms(action, self.scale, self.mode, observation, self.gate)
            total = np.clip((self.controller(observation, gains) + added).numpy(), self.low, self.high)
        observation, reward, terminated, truncated, info = self.env.step(total.astype(self.low.dtype))
        self._observation = np.array(observation, copy=True)
        if self.penalty:  # straying from the base controller costs (env.residual_penalty)
            reward = reward - self.penalty * np.square(np.asarray(actions, dtype=np.float64)).sum(axis=-1)
        return observation, reward, terminated, truncated, info
