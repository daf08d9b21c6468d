"""What ``rlpilot check`` (an env) and ``rlpilot doctor`` (a run) report: a :class:`Finding`, and how one reads.

A finding names its rule, a severity, what was seen (``evidence``: names mapped to values), the
likely cause and a concrete fix. Both commands print findings through :func:`render_finding`, so they
read the same. Standard library only: importing this never loads numpy, torch or an env.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SEVERITIES = ("error", "warning", "info")
SEVERITY_ORDER = {severity: rank for rank, severity in enumerate(SEVERITIES)}
LIST_SHOWN = 8  # values of a list printed before "..." (the JSON output keeps them all)


@dataclass(kw_only=True)
class Finding:
    """One thing found wrong (or worth knowing), with the evidence that raised it and the fix."""

    rule: str
    """Short stable id, e.g. ``rewards_zero`` (the key scripts match on)."""
    severity: str
    """``error`` (the command exits 1), ``warning`` or ``info``."""
    title: str
    """One line in the user's words: what is wrong."""
    evidence: dict[str, Any]
    """Names (a metric, a config key, a derived quantity) mapped to numbers, lists or strings."""
    cause: str = ""
    """The likely cause; empty when the title says it all."""
    fix: str
    """A concrete command or action."""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_ORDER:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)} (got {self.severity!r})")


def by_severity(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then infos; the order within a severity is kept."""
    return sorted(findings, key=lambda finding: SEVERITY_ORDER[finding.severity])


def count(findings: Iterable[Finding], severity: str) -> int:
    return sum(finding.severity == severity for finding in findings)


def format_value(value: Any) -> str:
    """Floats to 4 significant digits, long lists cut after ``LIST_SHOWN`` values, anything else as ``str``."""
    if isinstance(value, (list, tuple)):
        shown = ", ".join(format_value(item) for item in value[:LIST_SHOWN])
        return f"[{shown}{', ...' if len(value) > LIST_SHOWN else ''}]"
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{float(value):.4g}"
    return str(value)


def evidence_text(evidence: dict[str, Any]) -> str:
    return "; ".join(f"{name}={format_value(value)}" for name, value in evidence.items())


def render_finding(finding: Finding, *, short: bool = False) -> list[str]:
    """The lines of one finding: ``[severity] title``, then evidence and cause (unless ``short``), then fix."""
    lines = [f"  [{finding.severity}] {finding.title}"]
    if not short:
        lines.append(f"      evidence: {evidence_text(finding.evidence)}")
        if finding.cause:
            lines.append(f"      cause:    {finding.cause}")
    lines.append(f"      fix:      {finding.fix}")
    return lines
