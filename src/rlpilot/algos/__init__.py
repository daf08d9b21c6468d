"""Algorithm registry: ``train.py`` knows algorithms only through :class:`Algorithm` and :func:`build`."""

from __future__ import annotations

from typing import Protocol

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs import EnvBase

from rlpilot.config import Config


class Algorithm(Protocol):
    explore_policy: TensorDictModuleBase
    """TensorDict policy used for exploration (TorchRL users' collectors can run it)."""
    greedy_policy: TensorDictModuleBase
    """TensorDict policy used for evaluation (TorchRL users)."""
    greedy_module: nn.Module
    """Plain module: normalised observation tensor -> env action (argmax / squashed mean); export wraps it."""

    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Exploration action for a batch of observations, plus entries stored with the transition."""

    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        """Deterministic action (argmax / distribution mode) for a batch of observations."""

    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        """Learns from one collected batch of shape ``[num_envs, steps]``; returns scalar metrics."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


def build(config: Config, env: EnvBase, device: torch.device) -> Algorithm:
    if config.algo == "ppo":
        from rlpilot.algos.ppo import PPO

        return PPO(config, env, device)
    if config.algo == "dqn":
        from rlpilot.algos.dqn import DQN

        return DQN(config, env, device)
    raise ValueError(f"unknown algorithm {config.algo}")
