"""A run's data shaped for doctor's rules, and the helpers the rules share.

Reading a run here never executes code: ``config.yaml`` is parsed as data (no module named in it is
imported), and nothing imports torch; a rule that needs the checkpoint loads it itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlpilot import registry
from rlpilot.config.schema import Config
from rlpilot.findings import Finding
from rlpilot.runs import Run


class RunView:
    """The run's data, shaped for rules: columns as arrays (NaN where a row has no value)."""

    def __init__(self, run: Run):
        self.run = run
        self.config: Config = run.config()
        self.meta = run.meta()
        self.rows = run.metrics()
        self.events = run.events()
        self.frames = self.column("frames")
        self.threshold = self.meta.get("solved_at")
        self.budget = self.config.train.total_frames

    def column(self, key: str) -> np.ndarray:
        return np.array([row.get(key, np.nan) for row in self.rows], dtype=float)

    def logged(self, key: str) -> np.ndarray:
        """Every value written for ``key``, NaN and inf included (``column`` cannot tell NaN from absent)."""
        return np.array([row[key] for row in self.rows if key in row], dtype=float)

    def present(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Frames and values of the rows where ``key`` has a value that is not NaN."""
        values = self.column(key)
        keep = ~np.isnan(values)
        return self.frames[keep], values[keep]

    def events_of(self, kind: str) -> list[dict]:
        return [event for event in self.events if event["event"] == kind]

    @property
    def evals(self) -> np.ndarray:
        return self.present("eval/return_mean")[1]

    @property
    def did_well(self) -> bool:
        """Solved, or the last greedy evaluation reached the threshold.

        Without a threshold there is no yardstick, so this is False: rules that wait for a run not to do
        well stay on and speak only on their own evidence. An improvement without a threshold can still
        be poor, and taking it for success would hide the very findings that explain why.
        """
        if self.meta.get("status") == "solved":
            return True
        evals = self.evals
        return self.threshold is not None and len(evals) > 0 and bool(evals[-1] >= self.threshold)

    @property
    def settings(self) -> str:
        """The config section of the algorithm's hyperparameters (``ppo`` for mappo and ippo)."""
        return registry.settings_section(self.config.algo)

    @property
    def is_ppo(self) -> bool:
        """PPO's update (ppo, mappo, ippo): the PPO rules apply."""
        return self.settings == "ppo"

    def cmd(self, *overrides: str) -> str:
        """The ``rlpilot train`` command that reruns this run with ``overrides`` (``key=value``)."""
        target = self.config.preset or f"{self.config.algo} {self.config.env.id}"
        sets = " ".join(f"--set {override}" for override in overrides)
        return f"rlpilot train {target} {sets}".strip()

    def cmd_lower_lr(self) -> str:
        """The rerun command with the algorithm's learning rate divided by 10."""
        return self.cmd(f"{self.settings}.lr={self.config.algo_config.lr / 10:.3g}")


Rule = Callable[[RunView], list[Finding]]
"""A rule reads a run and returns its findings (none when its evidence is absent)."""


def tail(values: np.ndarray, share: float = 0.25) -> np.ndarray:
    """The last ``share`` of ``values`` (the "last quarter" of the rules)."""
    return values[int(len(values) * (1 - share)) :] if len(values) else values


def head(values: np.ndarray, share: float = 0.25) -> np.ndarray:
    """The first ``share`` of ``values``, at least one."""
    return values[: max(1, int(len(values) * share))] if len(values) else values
