"""``env.history``: the last steps of any plant appended to its observation, and carried as an exported policy's state.

A policy that must tell one plant from another (a gain, a dead time it was not told) needs to see how the plant
answered what it was sent. :class:`ObservationHistory` appends, after the env's own observation, the last ``steps``
entries of ``[the observation the env gave at that step, the action the plant received at that step]``, newest
first, zeros at an episode's start. It wraps the vector env itself, under any residual base controller, so the
action it records is what the plant received (the controller's law with the policy's action entered, clipped to
the box), and a partial reset zeroes exactly the envs that reset. The columns go at the end: a base controller
reads the observation from its front and sees the env's own columns where they were.

``rlpilot export`` moves those columns out of the artifact's input into its state (:class:`HistoryState`, the
generic sibling of the arm's ``obs_history``, :mod:`rlpilot.envs.arm.history`): the deployed controller takes the
env's observation alone and keeps its own history, the action it returned joining the next step's entry.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlpilot.common.errors import UserError


def history_problem(observation_space: gym.Space, action_space: gym.Space) -> str | None:
    """Why ``env.history`` cannot apply to an env of these spaces (one line), or None."""
    boxes = isinstance(observation_space, gym.spaces.Box) and isinstance(action_space, gym.spaces.Box)
    if not boxes or len(observation_space.shape) != 1:
        return (
            f"env.history appends past observations and actions to a flat Box observation of a Box-action env; "
            f"this env's are {observation_space} and {action_space}: set env.history=0"
        )
    return None


class ObservationHistory(gym.vector.VectorWrapper):
    """``env`` (a vector env with autoreset disabled) with its last ``steps`` [observation, action] entries appended
    to each observation (module docstring)."""

    def __init__(self, env: gym.vector.VectorEnv, steps: int):
        super().__init__(env)
        space, action_space = env.single_observation_space, env.single_action_space
        if problem := history_problem(space, action_space):
            raise UserError(problem)
        self.steps = int(steps)
        self.observation_size = int(space.shape[0])
        self.action_size = int(np.prod(action_space.shape))
        self.entry_size = self.observation_size + self.action_size
        self.appended = self.steps * self.entry_size
        """Columns after the env's own observation."""
        dtype = space.dtype
        entry_low = np.concatenate([space.low, action_space.low.reshape(-1)]).astype(dtype)
        entry_high = np.concatenate([space.high, action_space.high.reshape(-1)]).astype(dtype)
        low = np.concatenate([space.low, np.tile(np.minimum(entry_low, 0), self.steps)])  # zeros at a start
        high = np.concatenate([space.high, np.tile(np.maximum(entry_high, 0), self.steps)])
        self.single_observation_space = gym.spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, env.num_envs)
        self.history = np.zeros((env.num_envs, self.steps * self.entry_size), dtype)
        self._last = np.zeros((env.num_envs, self.observation_size), dtype)

    def _observe(self, observation: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(observation, self.history.dtype), self.history], axis=1)

    def reset(self, *, seed=None, options=None):
        options = dict(options or {})
        mask = options.get("reset_mask")  # read first: gymnasium's vector env takes it out of the options
        observation, info = self.env.reset(seed=seed, options=options)
        if mask is None:
            self.history[:] = 0
            self._last[:] = observation
        else:
            self.history[mask] = 0
            self._last[mask] = np.asarray(observation)[mask]
        return self._observe(observation), info

    def step(self, actions):
        entry = np.concatenate([self._last, np.asarray(actions, self.history.dtype).reshape(self.num_envs, -1)], 1)
        observation, reward, terminated, truncated, info = self.env.step(actions)
        self.history[:, self.entry_size :] = self.history[:, : -self.entry_size].copy()
        self.history[:, : self.entry_size] = entry
        self._last[:] = observation
        return self._observe(observation), reward, terminated, truncated, info


class HistoryState(nn.Module):
    """``env.history``'s columns carried as an exported artifact's state: what ``rlpilot export`` reads through
    :func:`rlpilot.play.export.carried_state` (the arm's ``obs_history`` has the same face). The history is the
    observation's last ``state_size`` floats: ``steps`` entries of the env's own observation
    (``reduced_size`` floats) then the action the plant received (``action_size``), newest first."""

    kwarg = "env.history"
    """The setting that appends the history (a config field, not one of the env's keyword arguments)."""
    in_env_kwargs = False
    """The env to play the artifact on is the run's as it is: the history is rlpilot's, not the env's."""
    records_actions = True
    """Each entry holds the action the plant received: in the artifact, the action it returned itself."""

    def __init__(self, steps: int, observation_size: int, action_size: int):
        super().__init__()
        self.steps, self.action_size = int(steps), int(action_size)
        self.reduced_size = (observation_size - self.steps * action_size) // (self.steps + 1)
        self.entry_size = self.reduced_size + self.action_size
        self.state_size = self.steps * self.entry_size
        self.observation_size = observation_size
        self.start = self.reduced_size
        if self.reduced_size + self.state_size != observation_size or self.reduced_size < 1:
            raise UserError(
                f"env.history={steps}: an observation of {observation_size} floats is not the env's own observation "
                f"and {steps} entries of it and a {action_size}-float action"
            )

    def reduce(self, observation: torch.Tensor) -> torch.Tensor:
        """The env's observation without its history columns: what the deployed controller measures."""
        return observation[:, : self.start]

    def carried(self, observation: torch.Tensor) -> torch.Tensor:
        """The history columns of the env's observation: the state that reproduces them."""
        return observation[:, self.start :]

    def forward(self, observation: torch.Tensor, history: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """(the reduced observation, the history, the action returned for it) -> the history of the next step."""
        entry = torch.cat([observation, action.reshape(action.shape[0], -1).to(observation.dtype)], dim=-1)
        if self.steps == 1:
            return entry
        return torch.cat([entry, history[:, : self.state_size - self.entry_size]], dim=-1)

    def full(self, observation: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """The env's observation: its own columns, then the history."""
        return torch.cat([observation, history], dim=-1)

    def advance(self, observation: torch.Tensor, history: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The history of the next step (:meth:`forward`)."""
        return self(observation, history, action)

    def wrap(self, policy: nn.Module) -> nn.Module:
        """``policy`` with the history as its state (:class:`HistoryPolicy`)."""
        return HistoryPolicy(policy, self)

    def layout(self) -> dict:
        """The manifest's description of the history part of the state."""
        names = [f"observation[{i}]" for i in range(self.reduced_size)]
        return {
            "name": "history",
            "size": self.state_size,
            "steps": self.steps,
            "entry": names + [f"action[{i}]" for i in range(self.action_size)],
            "order": "newest first: the previous step's observation and the action returned for it, then the one "
            "before it",
        }


class HistoryPolicy(nn.Module):
    """``policy`` (a :class:`rlpilot.play.export.DeployedPolicy` of the full observation) with a history as state:
    ``(observation without history, state) -> (action, next state)``. The state is the policy's own (a PID's
    integral, ``policy.state_size`` floats) first, then the history. ``history`` says where its columns sit in the
    env's observation (``full``) and how a step moves it on (``advance``): ``env.history``'s :class:`HistoryState`,
    or the arm's ``obs_history`` (:mod:`rlpilot.envs.arm.history`)."""

    def __init__(self, policy: nn.Module, history: nn.Module):
        super().__init__()
        self.policy, self.history = policy, history
        self.base_size = int(getattr(policy, "state_size", 0))
        self.state_size = self.base_size + history.state_size

    def forward(self, observation: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        past = state[:, self.base_size :]
        full = self.history.full(observation, past)
        if not self.base_size:
            action = self.policy(full)
            return action, self.history.advance(observation, past, action)
        action, next_base = self.policy(full, state[:, : self.base_size])
        return action, torch.cat([next_base, self.history.advance(observation, past, action)], dim=-1)
