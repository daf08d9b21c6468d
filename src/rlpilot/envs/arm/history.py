"""The arm's observation history (``env.kwargs.obs_history=k``) carried as an exported controller's state.

In training the env appends the k previous steps' [measured dq1, dq2, last command 1, 2] to the observation
(newest first; :mod:`rlpilot.envs.arm.env`). A deployed controller gets only the current measurement, so
``rlpilot export`` moves those 4k floats out of the artifact's observation into its state:
:class:`HistoryPolicy` takes the observation without them and the state, rebuilds the env's full observation,
runs the policy and returns, as the next state, the history with this step's entry in front, exactly as the env
does it (the entry joins after the observation is read; zeros at an episode's start). The env's class hands it to
the export (``ReacherTrackEnv.export_state``), so it is imported only when an arm run is exported.
"""

from __future__ import annotations

import torch
from torch import nn

from rlpilot.envs.history import HistoryPolicy

# ``obs_history``'s place in the env's observation (it needs ``obs_last_action``: it starts after the 14 base floats)
# and what each step's entry is made of: that step's observed joint velocities and last command (the observation's
# columns, measured: with ``obs_noise``; :mod:`rlpilot.envs.arm.env` writes them there).
HISTORY_START = 14
VELOCITY_COLUMNS = slice(4, 6)
COMMAND_COLUMNS = slice(12, 14)

ENTRY = ("dq1", "dq2", "command1", "command2")
"""One step of the history: the joint velocities measured then (rad/s) and the command the motors had then."""


class HistoryState(nn.Module):
    """Where the history sits in the env's observation (``observation_size`` floats, ``steps`` entries of
    :data:`ENTRY` from column :data:`HISTORY_START`), and the step that carries it: what ``rlpilot export`` reads
    through its hook (:func:`rlpilot.play.export.carried_state`)."""

    kwarg = "obs_history"
    in_env_kwargs = True
    """The env's own keyword argument: the artifact is played on the env with it set to 0."""
    records_actions = False
    """Its entries are read from the observation (the last command is one of its columns)."""
    """The env's keyword argument that appends the history (0: the env without it, to play the artifact on)."""

    def __init__(self, steps: int, observation_size: int):
        super().__init__()
        self.steps = steps
        self.start = HISTORY_START
        self.state_size = len(ENTRY) * steps
        self.observation_size = observation_size
        self.reduced_size = observation_size - self.state_size

    def reduce(self, observation: torch.Tensor) -> torch.Tensor:
        """The env's observation without its history columns: what the deployed controller measures."""
        end = HISTORY_START + self.state_size
        return torch.cat([observation[:, :HISTORY_START], observation[:, end:]], dim=-1)

    def carried(self, observation: torch.Tensor) -> torch.Tensor:
        """The history columns of the env's observation: the state that reproduces them."""
        return observation[:, HISTORY_START : HISTORY_START + self.state_size]

    def forward(self, observation: torch.Tensor, history: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(reduced observation, history) -> (the env's full observation, the history of the next step)."""
        full = torch.cat([observation[:, :HISTORY_START], history, observation[:, HISTORY_START:]], dim=-1)
        entry = torch.cat([observation[:, VELOCITY_COLUMNS], observation[:, COMMAND_COLUMNS]], dim=-1)
        if self.steps == 1:
            return full, entry
        return full, torch.cat([entry, history[:, : self.state_size - len(ENTRY)]], dim=-1)

    def full(self, observation: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """The env's full observation (:meth:`forward`)."""
        return self(observation, history)[0]

    def advance(self, observation: torch.Tensor, history: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The history of the next step (:meth:`forward`; the command is in the observation, not read from
        ``action``)."""
        return self(observation, history)[1]

    def wrap(self, policy: nn.Module) -> nn.Module:
        """``policy`` with the history as its state (:class:`HistoryPolicy`)."""
        return HistoryPolicy(policy, self)

    def layout(self) -> dict:
        """The manifest's description of the history part of the state."""
        return {
            "name": "history",
            "size": self.state_size,
            "steps": self.steps,
            "entry": list(ENTRY),
            "order": "newest first: the previous step's entry, then the one before it",
        }
