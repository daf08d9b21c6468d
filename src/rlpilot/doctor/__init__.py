"""``rlpilot doctor RUN``: what is wrong with a run, the evidence, the likely cause, and the fix.

Rules read ``config.yaml``, ``meta.json``, ``metrics.csv`` and ``events.jsonl`` (and, for runs that
normalise observations, the checkpoint's statistics). A rule only fires on evidence it can quote; most
warnings also require that the run did not do well (greedy evaluation below the threshold at the
end), so a healthy run is not nagged. Which rules a run gets depends on its algorithm
(:data:`RULES_BY_ALGO`). Thresholds and their reasoning are in docs/doctor.md; the JSON schema is
``Diagnosis.to_json``.

Layers: ``view`` (the run shaped for rules) <- ``common`` (rules for every run) <- ``control`` and
``llm`` (rules per kind of run) <- ``offpolicy`` (SAC's and TD3's) and ``multiagent`` (MAPPO's and IPPO's),
added to the control rules <- this
module (the registry and the report). Reading a run never imports torch or a module named in its config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlpilot.common.findings import Finding, by_severity, count, render_finding
from rlpilot.doctor import control, llm, multiagent, offpolicy
from rlpilot.doctor.view import Rule, RunView
from rlpilot.runs import load_run

SCHEMA_VERSION = 1

RULES_BY_ALGO: dict[str, list[Rule]] = {
    "ppo": control.RULES,
    "dqn": control.RULES,
    "sac": offpolicy.RULES,  # the control rules, then temperature, critics against returns, saturated actions
    "td3": offpolicy.RULES,
    "grpo": llm.RULES,  # a language model: rules about envs and critics do not apply
    "mappo": multiagent.RULES,  # the control rules, then one agent's collapse, blind critics, unequal agents
    "ippo": multiagent.RULES,
}
"""The rules each algorithm's runs get; an algorithm not listed gets the control rules."""


def rules_for(algo: str) -> list[Rule]:
    return RULES_BY_ALGO.get(algo, control.RULES)


@dataclass
class Diagnosis:
    """Doctor's report on one run: its findings, errors first."""

    run: str
    status: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return count(self.findings, "error")

    @property
    def warnings(self) -> int:
        return count(self.findings, "warning")

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run": self.run,
            "status": self.status,
            "summary": {"errors": self.errors, "warnings": self.warnings, "infos": count(self.findings, "info")},
            "findings": [asdict(finding) for finding in self.findings],
        }

    def render(self, *, short: bool = False) -> str:
        """``short`` (the block printed after training): title and fix only."""
        if not self.findings:
            return "doctor: no findings (nothing looks wrong in this run's metrics)"
        lines = [f"doctor: {self.errors} error(s), {self.warnings} warning(s)"]
        for finding in self.findings:
            lines += render_finding(finding, short=short)
        return "\n".join(lines)


def diagnose(path: str | Path) -> Diagnosis:
    run = load_run(path)
    view = RunView(run)
    findings = [finding for rule in rules_for(view.config.algo) for finding in rule(view)]
    return Diagnosis(str(run.path), view.meta.get("status", "unknown"), by_severity(findings))
