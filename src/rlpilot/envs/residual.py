"""Residual RL: a classical controller inside the vector env, the policy's action a correction to it.

``mode="add"``: ``clip(base(observation) + scale * action, low, high)`` is what the env receives; the policy
learns only the correction (Silver et al. 2018, "Residual Policy Learning"; Johannink et al. 2019).
``mode="gains"``: the policy schedules the base controller's gains instead (its ``gain_names``: the arm's kp
and kd), each times ``10 ** (scale * action)`` (a gain schedule learned by RL; the policy's action space is
then one entry in [-1, 1] per gain): the env always receives the controller's law, so an imprecise policy
costs a slightly different gain, not a torque error. Either way the policy sees the
same observations as the base controller, and action 0 is the base controller exactly. The base is computed
for the whole batch in one call per step, and a stateful base (PID) is reset for exactly the envs that start
a new episode. ``penalty`` (``env.residual_penalty``) subtracts ``penalty * |action|^2`` from each reward;
``gate`` (``env.residual_gate``) lets the action act only where an error signal is above it: observation entry
``gate_index`` where given, else the controller's ``gate_signal(observation)`` where it has one, else the arm's
error monitor. Any controller of the protocol in
:mod:`rlpilot.controllers` works here, on any env with Box observations and actions.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlpilot.controllers import RESIDUAL_MODES, apply_controller, gate_signal, residual_terms
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
        gate_index: int | None = None,
    ):
        super().__init__(env)
        space = env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise UserError("env.base_controller: residual RL needs continuous (Box) actions")
        if mode not in RESIDUAL_MODES:
            raise UserError(f"env.residual_mode: one of {', '.join(RESIDUAL_MODES)}, got {mode!r}")
        if mode == "gains":  # one action per scheduled gain, in decades / residual_scale
            gains = len(getattr(controller, "gain_names", ()))
            self.single_action_space = gym.spaces.Box(-1.0, 1.0, (gains,), np.float32)
            self.action_space = gym.vector.utils.batch_space(self.single_action_space, env.num_envs)
        self.controller, self.scale, self.mode, self.penalty = controller, float(scale), mode, float(penalty)
        self.gate = float(gate)
        self.gate_signal = gate_signal(controller, gate_index)
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
            gains, added = residual_terms(action, self.scale, self.mode, observation, self.gate, self.gate_signal)
            base = apply_controller(self.controller, observation, gains)
            total = np.clip((base + added).numpy(), self.low, self.high)
        observation, reward, terminated, truncated, info = self.env.step(total.astype(self.low.dtype))
        self._observation = np.array(observation, copy=True)
        if self.penalty:  # straying from the base controller costs (env.residual_penalty)
            reward = reward - self.penalty * np.square(np.asarray(actions, dtype=np.float64)).sum(axis=-1)
        return observation, reward, terminated, truncated, info
