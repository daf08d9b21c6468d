"""The control algorithms' protocol; ``ControlTrainable`` knows algorithms only through it.

An algorithm owns its networks, optimisers, buffers and counters (one implementation each: where a
hand-written update is faster than TorchRL's loss module, the TorchRL module lives in the tests as the
reference it must equal). On-policy algorithms run their epochs inside ``learn``; off-policy ones
extend their replay buffer there. ``rlpilot.registry.ALGORITHMS`` names the class of each.
"""

from __future__ import annotations

from typing import Protocol

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.envs import EnvBase

from rlpilot import registry
from rlpilot.config.schema import Config
from rlpilot.guard import Guard


class Algorithm(Protocol):
    guard: Guard
    """Every optimiser step goes through ``guard.step`` (non-finite or exploding updates are skipped)."""
    on_policy: bool
    """True: learns only from data of its current weights (collected synchronously on Ray actors); False: from
    a replay of older data too (actors collect asynchronously)."""
    greedy_module: nn.Module
    """Plain module: normalised observation tensor -> env action (argmax / squashed mean); export wraps it."""

    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Exploration action for a batch of observations, plus entries stored with the transition.
        The hot path: plain tensors, no TensorDict, nothing that waits on the device."""

    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        """Deterministic action (argmax / distribution mode) for a batch of observations."""

    # Optional: ``batch_steps(frames) -> int``, the env steps per env of the next batch collected in the learner's
    # process (default: the run's ``steps_per_env``); SAC and TD3 collect their random warm-up in longer batches.

    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        """Learns from one collected batch of shape ``[num_envs, steps]`` (``frames``: collected so far);
        returns scalar metrics."""

    def state_dict(self) -> dict:
        """Everything a resume needs, as tensors and plain data."""

    def load_state_dict(self, state: dict) -> None: ...

    def acting_state(self) -> dict:
        """What ``act`` reads (the acting network's weights, counters such as frames or epsilon), as plain
        data: what the learner sends to collection actors (``rlpilot.control.distributed``)."""

    def load_acting_state(self, state: dict) -> None:
        """Takes an ``acting_state`` from the learner (on a collection actor)."""


def build(config: Config, env: EnvBase, device: torch.device) -> Algorithm:
    """The algorithm of ``config.algo`` for ``env``'s specs."""
    entry = registry.algorithm(config.algo)
    if entry.kind != "control":
        raise ValueError(f"{config.algo} is not a control algorithm")
    return registry.load_object(entry.implementation)(config, env, device)
