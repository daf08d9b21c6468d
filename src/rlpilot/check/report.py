"""What ``rlpilot check`` prints about one env (:class:`CheckReport`, its ``render``), and how much of the env the
check steps to say it (:class:`Budget`, :func:`plan_budget`: sized to a time budget)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rlpilot.common.findings import Finding, by_severity, count, render_finding

SCALE_COLUMN = {"dimension": "dim", "channel": "channel"}
"""Heading of the observation-scale table's first column, per ``CheckReport.scale_unit``."""


@dataclass
class CheckReport:
    """What ``rlpilot check`` found about one env; ``render`` is the printed report."""

    env_id: str
    specs: dict[str, str] = field(default_factory=dict)
    layout: list[str] = field(default_factory=list)
    random_policy: dict[str, float] = field(default_factory=dict)
    observation_scale: list[dict[str, float]] = field(default_factory=list)
    check_env_specs: str = ""
    findings: list[Finding] = field(default_factory=list)
    """The pitfalls found, in the order they were checked (``render`` lists errors first)."""
    budget: Budget | None = None
    """How many episodes and steps the check used (fitted to its time budget)."""
    scale_unit: str = "dimension"
    """``dimension`` for vector observations; ``channel`` for images (statistics over all pixels)."""
    frame_png: str | None = None
    """Image observations: where the sample frame (raw, then the network's input) was written."""
    dynamics: list[str] = field(default_factory=list)
    """What the env says about its own dynamics settings (e.g. the arm's disturbances), and a residual base."""
    controller: list[str] = field(default_factory=list)
    """``env.base_controller`` alone on the env (no policy): its return, action range and saturation."""

    @property
    def healthy(self) -> bool:
        return count(self.findings, "error") == 0

    def _budget_note(self) -> str:
        budget = self.budget
        if budget is None or budget.episode_steps is None and budget.episodes == DEFAULT_EPISODES:
            return ""
        cut = f", each cut at {budget.episode_steps} steps" if budget.episode_steps else ""
        return (
            f" (fitted to the time budget{cut}: one step takes {budget.step_ms:.2g} ms; "
            "--episodes N runs N whole episodes)"
        )

    def render(self) -> str:
        lines = [f"rlpilot check: {self.env_id}", "", "Specs"]
        lines += [f"  {key:<12} {text}" for key, text in self.specs.items()]
        if self.dynamics:
            lines += ["", "Dynamics"] + [f"  {line}" for line in self.dynamics]
        lines += [
            "",
            f"TorchRL check_env_specs: {self.check_env_specs}",
            "",
            "Tensordict of a 3-step rollout (1 env): key, shape, dtype",
        ]
        lines += [f"  {line}" for line in self.layout]
        rp = self.random_policy
        lines += [
            "",
            f"Random policy over {int(rp['episodes'])} episodes" + self._budget_note(),
            f"  return  mean {rp['return_mean']:.2f}  std {rp['return_std']:.2f}  "
            f"min {rp['return_min']:.2f}  max {rp['return_max']:.2f}",
            f"  length  mean {rp['length_mean']:.1f}  min {rp['length_min']:.0f}  max {rp['length_max']:.0f}",
            *([""] + self.controller if self.controller else []),
            "",
            f"Observation scale under the random policy (per {self.scale_unit})",
        ]
        lines += self._scale_table()
        if self.frame_png:
            lines += ["", f"Sample frame (raw | each stacked frame the network sees): {self.frame_png}"]
        lines += ["", "Pitfalls"]
        if not self.findings:
            lines.append("  none found")
        for finding in by_severity(self.findings):
            lines += render_finding(finding)
        verdict = "healthy" if self.healthy else "NOT healthy (errors above)"
        lines += ["", f"Verdict: {verdict}"]
        return "\n".join(lines)

    def _scale_table(self) -> list[str]:
        """Mean, std, min and max per dimension (or channel), the first column as wide as its heading."""
        heading = SCALE_COLUMN[self.scale_unit]
        width = max(4, len(heading))
        lines = [f"  {heading:<{width}} {'mean':>10} {'std':>10} {'min':>11} {'max':>11}"]
        lines += [
            f"  {i:<{width}} {s['mean']:>10.3g} {s['std']:>10.3g} {s['min']:>11.3g} {s['max']:>11.3g}"
            for i, s in enumerate(self.observation_scale)
        ]
        return lines


DEFAULT_EPISODES = 20


@dataclass
class Budget:
    """How much of the env a check steps, sized so a preflight answers in about ``max_seconds``."""

    episodes: int
    episode_steps: int | None
    """Random-policy episodes are cut at this many steps (None: the env's own time limit)."""
    rollout_steps: int
    """Steps per env (8 envs) of the observation-scale rollout."""
    seeding_steps: int
    """Steps per env (2 envs, 3 rollouts) of the seeding check."""
    step_ms: float

    def describe(self) -> str:
        cut = f", cut at {self.episode_steps} steps" if self.episode_steps else ""
        return f"{self.episodes} random-policy episode(s){cut}; one env step takes {self.step_ms:.2g} ms"


def plan_budget(
    step_seconds: float, time_limit: int | None, *, episodes: int | None, max_seconds: float | None, steps: int
) -> Budget:
    """Episodes and rollout lengths that fit ``max_seconds`` at ``step_seconds`` per env step. ``episodes``
    given by the user is kept whole (no cut): they asked for it. Shares of the time: 55% episodes, 25%
    the scale rollout, 10% the seeding check."""
    available = math.inf if max_seconds is None else max_seconds / max(step_seconds, 1e-7)
    length = time_limit or 1000
    rollout = int(min(steps, max(8, 0.25 * available / 8)))
    seeding = int(min(64, max(8, 0.10 * available / 6)))
    if episodes is not None:
        return Budget(episodes, None, rollout, seeding, 1000 * step_seconds)
    share = 0.55 * available
    count = int(max(1, min(DEFAULT_EPISODES, share // length)))
    cut = None if share >= length else int(max(10, share))
    return Budget(count, cut, rollout, seeding, 1000 * step_seconds)
