"""The arm's disturbances (``rlpilot/ReacherTrack-v0``'s keyword arguments), numpy only: what each may be, how
a value is read, and what a reset draws. :class:`rlpilot.envs.arm.env.ReacherTrackEnv` applies the drawn
values through the MuJoCo model.

Each disturbance is a number (fixed for every episode) or ``[low, high]`` (drawn uniformly at every reset):

| kwarg | what it changes | nominal |
|---|---|---|
| ``payload`` | kg added to the fingertip body (a point mass 0.21 m from the shoulder at full reach) | 0 |
| ``friction`` | Coulomb friction (``dof_frictionloss``) of both arm joints, N·m | 0 |
| ``damping`` | viscous damping (``dof_damping``) of both arm joints, N·m·s/rad | 1.0 |
| ``gain`` | actuator strength: ``actuator_gear`` scaled by this factor (motor not as on the datasheet) | 1.0 |
| ``obs_noise`` | std of Gaussian noise on measured joint angles (rad) and velocities (rad/s) | 0 |
| ``action_delay`` | steps between the action and its effect (an integer, 0 or more) | 0 |

``randomize`` names disturbances to draw from :data:`RANDOMIZE_RANGES` where no value is given:
``"all"``, or a list such as ``["payload", "friction"]`` (training under randomised dynamics).
``randomize_prob=p`` (default 1) makes each of them present at a reset with probability p only (nominal
otherwise, independently): with "all" and p = 0.5 the nominal arm comes up at about 1 reset in 32 (a present
delay still draws 0 or 1 step) and each disturbance alone about as often, where p = 1 (every disturbance drawn
at once) practically never trains on the nominal arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

NOMINAL = {"payload": 0.0, "friction": 0.0, "damping": 1.0, "gain": 1.0, "obs_noise": 0.0, "action_delay": 0}
# Ranges for `randomize` and the "disturbed" evaluation conditions' scale: each about what moves a fixed-gain
# PD's tracking error visibly on this arm (benchmarks/robot_arm_track.py reports what they do).
RANDOMIZE_RANGES: dict[str, tuple[float, float]] = {
    "payload": (0.0, 4.0),
    "friction": (0.0, 8.0),
    "damping": (0.5, 3.0),
    "gain": (0.6, 1.4),
    "obs_noise": (0.0, 0.01),
    "action_delay": (0, 1),
}
NAMED_CONDITIONS: dict[str, dict[str, float]] = {
    "nominal": dict(NOMINAL),
    "payload": {"payload": 3.0},
    "friction": {"friction": 6.0},
    "gain": {"gain": 0.6},
    "noise": {"obs_noise": 0.01},
    "delay": {"action_delay": 1},
    "all": {"payload": 3.0, "friction": 6.0, "gain": 0.7, "obs_noise": 0.005, "action_delay": 1},
}
"""The arm's named conditions (``--condition NAME``; :mod:`rlpilot.conditions`): each disturbance alone near the
top of its range, and all of them at once; what a case does not name is nominal (the ``nominal`` case's value)."""
# The largest value each disturbance may take: ten times the top of its randomisation range (a stress test
# still fits), a bound that keeps MuJoCo's integration finite (gain inf or a NaN payload gave NaN states).
LIMITS = {"payload": 40.0, "friction": 80.0, "damping": 30.0, "gain": 14.0, "obs_noise": 0.1, "action_delay": 10}
PRIVILEGED = tuple(NOMINAL)
"""The true dynamics a privileged observation carries (``obs_privileged``), in this order."""


def normalised(name: str, value: float) -> float:
    """A disturbance's value as a privileged observation sees it: 0 at nominal, 1 at the top of its
    randomisation range (below nominal: negative; beyond the range: above 1)."""
    nominal, top = NOMINAL[name], RANDOMIZE_RANGES[name][1]
    return (float(value) - nominal) / (top - nominal)


UNITS = {
    "payload": "kg at the fingertip",
    "friction": "N·m Coulomb friction per joint",
    "damping": "N·m·s/rad viscous damping per joint",
    "gain": "x actuator strength (gear 200)",
    "obs_noise": "rad (rad/s) std of measurement noise",
    "action_delay": "step(s) of action delay",
}
"""How ``rlpilot check`` names each disturbance's unit."""


def disturbance_range(name: str, spec: Any) -> tuple[float, float]:
    """(low, high) for a disturbance given as a number or [low, high]; a clear error otherwise."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        low = high = float(spec)
    elif isinstance(spec, (list, tuple)) and len(spec) == 2 and all(isinstance(v, (int, float)) for v in spec):
        low, high = float(spec[0]), float(spec[1])
    else:
        raise ValueError(f"{name}: give a number or [low, high], got {spec!r}")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name}: a finite number, got {spec!r}")
    if low > high:
        raise ValueError(f"{name}: low {low} is above high {high}")
    floor = 0.0 if name != "gain" else 1e-3
    if low < floor:
        raise ValueError(f"{name}: must be >= {floor:g} (got {low})")
    if high > LIMITS[name]:
        raise ValueError(f"{name}: at most {LIMITS[name]:g} (got {high:g})")
    if name == "action_delay" and not (low.is_integer() and high.is_integer()):
        raise ValueError(f"action_delay: a whole number of steps, got {spec!r}")
    return low, high


@dataclass(frozen=True)
class DisturbanceSpec:
    """What each disturbance may be in an env: its (low, high) (equal: fixed), and which of them ``randomize``
    drew from :data:`RANDOMIZE_RANGES` (``optional``: those ``randomize_prob`` < 1 may leave nominal)."""

    ranges: dict[str, tuple[float, float]]
    """Every disturbance's (low, high), in :data:`NOMINAL`'s order (the order of the draws)."""
    optional: tuple[str, ...] = ()
    """The randomised disturbances given no value, in ``randomize``'s order."""
    probability: float = 1.0
    """``randomize_prob``: how often each optional disturbance is present at a reset."""

    @classmethod
    def from_kwargs(cls, given: dict[str, Any], randomize: Any, randomize_prob: float) -> DisturbanceSpec:
        """The env's keyword arguments read and checked: ``given`` (each disturbance's value or None),
        ``randomize`` (None, ``"all"`` or a list of names) and ``randomize_prob``; a clear error otherwise."""
        if randomize in (None, "", "none"):
            randomized: list[str] = []
        elif randomize == "all":
            randomized = list(RANDOMIZE_RANGES)
        elif isinstance(randomize, (list, tuple)) and all(name in RANDOMIZE_RANGES for name in randomize):
            randomized = list(randomize)
        else:
            raise ValueError(f"randomize: 'all' or a list of {', '.join(RANDOMIZE_RANGES)}, got {randomize!r}")
        if (
            isinstance(randomize_prob, bool)
            or not isinstance(randomize_prob, (int, float))
            or not 0 < randomize_prob <= 1
        ):
            raise ValueError(f"randomize_prob: a probability in (0, 1] (1: always drawn), got {randomize_prob!r}")
        ranges = {}
        for name in NOMINAL:
            spec = given.get(name)
            if spec is None:
                spec = list(RANDOMIZE_RANGES[name]) if name in randomized else NOMINAL[name]
            ranges[name] = disturbance_range(name, spec)
        optional = tuple(name for name in randomized if given.get(name) is None)
        return cls(ranges, optional, float(randomize_prob))

    def draw(self, rng: np.random.Generator) -> dict[str, Any]:
        """One reset's values: each range drawn uniformly (the delay a whole number of steps); with
        ``probability`` < 1, each optional disturbance first left nominal with probability 1 - p (so the
        nominal arm and each disturbance alone are seen in training; p = 1 draws no extra numbers)."""
        absent = [name for name in self.optional if rng.random() >= self.probability] if self.probability < 1 else []
        drawn: dict[str, Any] = {}
        for name, (low, high) in self.ranges.items():
            if name in absent:
                drawn[name] = NOMINAL[name]
            elif name == "action_delay":
                drawn[name] = int(rng.integers(int(low), int(high) + 1))
            else:
                drawn[name] = float(rng.uniform(low, high)) if high > low else low
        return drawn

    def describe(self) -> list[str]:
        """A line per disturbance for ``rlpilot check``: fixed or drawn per episode, and its unit."""
        lines = []
        for name, (low, high) in self.ranges.items():
            value = f"{low:g}" if low == high else f"[{low:g}, {high:g}]"
            note = " (drawn at each reset)" if low != high else " (nominal)" if low == NOMINAL[name] else ""
            if low != high and name in self.optional and self.probability < 1:
                note = f" (drawn at {self.probability:g} of resets, nominal otherwise)"
            lines.append(f"{name:<13} {value} {UNITS[name]}{note}")
        return lines
