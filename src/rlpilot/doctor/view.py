"""A run's data shaped for doctor's rules, and the helpers the rules share.

Reading a run here never executes code: ``config.yaml`` is parsed as data (no module named in it is
imported), and nothing imports torch; a rule that needs the checkpoint loads it itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import numpy as np

from rlpilot import registry
from rlpilot.common.findings import Finding
from rlpilot.config.schema import Config
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

    @property
    def origin(self) -> dict:
        """How the run was asked for (``meta.json``'s ``origin``, :func:`rlpilot.runs.train_origin`). A run from
        before it was recorded: its config's preset, else its algorithm and env, with no overrides."""
        origin = self.meta.get("origin")
        if isinstance(origin, dict) and (origin.get("config_file") or origin.get("preset") or origin.get("algo")):
            return origin
        if self.config.preset:
            return {"preset": self.config.preset, "overrides": []}
        return {"algo": self.config.algo, "env": self.config.env.id, "overrides": []}

    @property
    def target(self) -> str:
        """What ``rlpilot train`` was given: ``--config FILE``, the preset, or ``ALGO ENV``."""
        origin = self.origin
        if origin.get("config_file"):
            return f"--config {shlex.quote(str(origin['config_file']))}"
        return str(origin.get("preset") or f"{origin['algo']} {origin.get('env') or self.config.env.id}")

    def cmd(self, *overrides: str, target: str | None = None) -> str:
        """The ``rlpilot train`` command that retrains this run as it was started (its preset, ALGO ENV or
        ``--config FILE``, then its own ``--set`` overrides) with ``overrides`` (``key=value``) applied last; an
        override of the run's that ``overrides`` changes is left out. ``target``: another preset or ALGO ENV."""
        changed = {override.partition("=")[0].strip() for override in overrides}
        kept = [o for o in self.origin.get("overrides") or [] if str(o).partition("=")[0].strip() not in changed]
        sets = " ".join(f"--set {shlex.quote(str(override))}" for override in (*kept, *overrides))
        return f"rlpilot train {target or self.target} {sets}".strip()

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
