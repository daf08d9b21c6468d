"""The teacher of ``rlpilot train adapt``: a table of plants drawn from the declared ranges, each with the controller
retuned for it (the oracle), and the action a gain schedule must take to turn the robust controller into that oracle.

The label of a condition is, per scheduled gain, ``log10(oracle gain / robust gain) / residual_scale`` clipped to
``[-1, 1]``: under ``env.residual_mode=gains`` the base controller (built with the robust arguments) then runs with
that condition's oracle gains exactly (within the clip). A gain the search did not tune keeps label 0. The table is
a JSON file (``RUNS/adapt-teachers/PLANT--CONTROLLER.json``, copied into the run as ``teacher.json``), written as
each oracle is tuned and read back when the same settings ask again (a repeated ``train adapt`` tunes nothing
twice)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, dumps, read_json
from rlpilot.conditions import Declared

TABLE_FILE = "teacher.json"
DRAWN = "drawn-"
"""The prefix of a condition drawn from the declared ranges (``drawn-7``); the others are the plant's named ones."""


def draw_conditions(declared: Declared, count: int, seed: int) -> dict[str, dict]:
    """``count`` complete conditions (label -> values): the named ones first (each over ``nominal``), then
    draws uniform in every declared range (whole numbers where the range is whole), seeded."""
    nominal = declared.named.get("nominal", {})
    table = {name: {**nominal, **values} for name, values in list(declared.named.items())[:count]}
    rng = np.random.default_rng([int(seed), 0xADA])
    while len(table) < count:
        drawn = {}
        for name, (low, high) in declared.ranges.items():
            drawn[name] = int(rng.integers(low, high + 1)) if declared.integer(name) else float(rng.uniform(low, high))
        table[f"{DRAWN}{len(table)}"] = drawn
    return table


def named_plants(conditions: dict) -> list[str]:
    """The named conditions of a table's ``conditions`` (label -> values), in its order: not the drawn ones."""
    return [name for name in conditions if not name.startswith(DRAWN)]


def label(oracle: dict, robust: dict, gain_names: tuple[str, ...], scale: float) -> list[float]:
    """The gain schedule's action that turns the controller built with ``robust`` into the one built with
    ``oracle``: per gain, ``log10(oracle / robust) / scale``, clipped to [-1, 1]; 0 for a gain either lacks or
    holds at 0 or below (nothing a multiplier can reach)."""
    out = []
    for name in gain_names:
        new, old = oracle.get(name), robust.get(name)
        if new is None or old is None or not new > 0 or not old > 0:
            out.append(0.0)
            continue
        out.append(float(np.clip(math.log10(new / old) / scale, -1.0, 1.0)))
    return out


@dataclass
class TeacherTable:
    """The oracle per condition and its label (:func:`label`), with what the tuning cost."""

    identity: str
    """What the table was tuned with (plant, controller, search, robust arguments): a cache with another is stale."""
    robust: dict = field(default_factory=dict)
    """The robust reference's constructor arguments (plants sampled over the declared ranges)."""
    conditions: dict[str, dict] = field(default_factory=dict)
    oracles: dict[str, dict] = field(default_factory=dict)
    """Condition label -> the oracle's constructor arguments."""
    labels: dict[str, list[float]] = field(default_factory=dict)
    slopes: dict[str, list[list[float]]] = field(default_factory=dict)
    """Condition label -> per gain, [short, past]: how fast the plant's cost grows with the gain below and above its
    oracle's (``adapt.shaped``: :func:`rlpilot.adapt.cost_slopes`)."""
    slope_step: float = 0.0
    """Decades the slopes' step moved each gain (``env.residual_scale`` x :data:`rlpilot.adapt.SLOPE_STEP`): slopes
    measured with another are measured again."""
    seconds: float = 0.0
    """Seconds spent tuning the oracles (cached ones count what they cost when tuned)."""

    def save(self, path: Path) -> None:
        atomic_write(path, dumps(vars(self), indent=1))

    @classmethod
    def load(cls, path: Path, identity: str) -> TeacherTable:
        """The table at ``path`` when tuned with ``identity``; else an empty one to fill."""
        if not path.exists():
            return cls(identity)
        data = read_json(path, "it is not a table rlpilot train adapt wrote: remove it to tune again")
        if not isinstance(data, dict) or data.get("identity") != identity:
            return cls(identity)
        try:
            return cls(**data)
        except TypeError:
            raise UserError(f"{path}: not a table rlpilot train adapt wrote; remove it to tune again") from None


def identity(**settings) -> str:
    """A short hash of the settings a table is tuned with."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
