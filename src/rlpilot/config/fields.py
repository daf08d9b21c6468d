"""The valid values of a config field, declared where the field is defined (``positive(...)``, ``fraction(...)``,
``one_of(...)``: a dataclass field whose metadata holds its rule), and the checks that read those rules back
(:func:`field_problems`, :func:`section_problems`): one error line per problem, naming the key. Imports nothing
of rlpilot, and no torch."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import field
from typing import Any

CONTROLLER_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
"""A user's controller, ``package.module:Class`` (``env.base_controller``)."""


# -- valid values, declared with each field ----------------------------------------------------
def checked(default: Any = dataclasses.MISSING, *, factory: Any = None, **rule: Any) -> Any:
    """A field with ``default`` (or ``factory``) whose metadata is ``rule`` (what :func:`field_problems` reads)."""
    if factory is not None:
        return field(default_factory=factory, metadata=rule)
    return field(default=default, metadata=rule)


def positive(default: Any = dataclasses.MISSING, *, factory: Any = None, at_most: float | None = None) -> Any:
    """> 0 (``None`` allowed where the type allows it); ``at_most``: and no larger than that."""
    if at_most is not None:
        return checked(default, factory=factory, gt=0, le=at_most)
    return checked(default, factory=factory, gt=0)


def at_least(default: Any, low: float) -> Any:
    return checked(default, ge=low)


def between(default: Any, low: float, high: float) -> Any:
    return checked(default, ge=low, le=high)


def fraction(default: Any) -> Any:
    """Within [0, 1]."""
    return checked(default, ge=0.0, le=1.0)


def one_of(default: str, *choices: str) -> Any:
    return checked(default, choices=choices)


def positive_items(*, factory: Any) -> Any:
    """A list of positive integers (layer widths)."""
    return checked(factory=factory, items_gt=0)


def int_items(*, factory: Any) -> Any:
    """A list of integers (observation indices; negative counts from the end)."""
    return checked(factory=factory, items_int=True)


def field_problems(key: str, value: Any, rule: dict) -> list[str]:
    """What is wrong with ``value`` under a field's declared rule (type already checked)."""
    if value is None:
        return []
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{key} must be a finite number (got {value})"]
    if rule.get("finite_items") and (bad := _first_nonfinite(value, key)):
        return [f"{bad[0]} must be a finite number (got {bad[1]}): a controller computes with it"]
    if "controller" in rule and value not in rule["controller"] and not CONTROLLER_PATH.fullmatch(str(value)):
        return [f"{key} must be one of {', '.join(rule['controller'])} or package.module:Class (got '{value}')"]
    if "choices" in rule and value not in rule["choices"]:
        return [f"{key} must be one of {', '.join(rule['choices'])} (got '{value}')"]
    if "gt" in rule and value <= rule["gt"]:
        return [f"{key} must be > {rule['gt']:g} (got {value})"]
    if "ge" in rule and "le" in rule and not rule["ge"] <= value <= rule["le"]:
        return [f"{key} must be within [{rule['ge']:g}, {rule['le']:g}] (got {value})"]
    if "ge" in rule and value < rule["ge"]:
        return [f"{key} must be >= {rule['ge']:g} (got {value})"]
    if "le" in rule and value > rule["le"]:
        return [f"{key} must be <= {rule['le']:,} (got {value})"]
    if "items_gt" in rule and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        return [f"{key} must be a list of positive integers (got {value})"]
    if "items_int" in rule and not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [f"{key} must be a list of integers (got {value})"]
    if "items_int" in rule and len(set(value)) != len(value):
        return [f"{key} names an entry twice (got {value})"]
    return []


def section_problems(section: Any, prefix: str) -> list[str]:
    """What is wrong with each field of a config section under its declared rule (``prefix``: the section's name)."""
    return [
        problem
        for f in dataclasses.fields(section)
        for problem in field_problems(f"{prefix}.{f.name}", getattr(section, f.name), f.metadata)
    ]


def _first_nonfinite(value: Any, key: str) -> tuple[str, float] | None:
    """The first NaN or inf inside mappings and lists, as ``(key.path, value)``."""
    if isinstance(value, float) and not math.isfinite(value):
        return key, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((bad for k, item in items if (bad := _first_nonfinite(item, f"{key}.{k}"))), None)
