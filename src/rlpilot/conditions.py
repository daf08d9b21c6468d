"""Conditions and measures: how a plant says what is uncertain about it, runs under a chosen condition, and reports
what a control engineer scores it on. Any gymnasium env may follow the protocol; no base class is needed.

**What the env declares** (attributes, read through ``env.unwrapped``):

- ``condition_ranges: dict[str, tuple[float, float]]``: each uncertain parameter and the range the randomised
  plant draws it from. Integer bounds (``(0, 2)``) make a whole-number parameter (a delay in control periods).
- ``named_conditions: dict[str, dict[str, float]]`` (optional): cases worth naming (``nominal``, ``heavy``,
  ``delay``): what ``--condition NAME`` plays and what ``rlpilot compare`` plays by default. Values a case does
  not name are the env's nominal ones.
- ``measures: dict[str, str]`` (optional): per-episode measures, name -> one line saying what it is (with its
  unit). ``info[name]`` at every step is the episode's value so far (a running mean, an RMSE), read at the step
  the episode ends. ``tracking_error`` and ``effort`` (the plant's own actuator, whatever the policy's action
  was) are the two ``rlpilot compare`` scores on.

- ``trace: tuple[str, ...]`` (optional): step info entries (numbers) worth plotting step by step (a set-point,
  the measured output, the actuator): what ``rlpilot compare`` draws for one episode per condition.

**What the env does**: ``reset(options={"condition": {...}})`` runs the episode under those values (parameters not
given are drawn or nominal as usual), and the reset's ``info["condition"]`` is the condition the episode runs
under, whatever chose it.

rlpilot plays an env under a condition through :class:`UnderCondition` (a wrapper that adds the condition to every
reset's options, the partial resets of a vector env included). Torch-free: any layer may import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlpilot.common.errors import UserError

OUTSIDE = "outside the declared range"
"""How a value beyond its declared range is flagged (it is played: a plant is tested beyond what it was tuned on)."""


@dataclass(frozen=True)
class Declared:
    """What an env declares (:mod:`rlpilot.conditions`)."""

    env_id: str
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    named: dict[str, dict[str, float]] = field(default_factory=dict)
    measures: dict[str, str] = field(default_factory=dict)
    trace: tuple[str, ...] = ()

    def integer(self, name: str) -> bool:
        low, high = self.ranges[name]
        return isinstance(low, int) and isinstance(high, int)

    def outside(self, condition: dict[str, float]) -> list[str]:
        """The names of ``condition``'s values beyond their declared range."""
        return [
            name
            for name, value in condition.items()
            if name in self.ranges and not self.ranges[name][0] <= value <= self.ranges[name][1]
        ]

    def resolve(self, items: list[str] | None, *, option: str = "--condition") -> dict[str, float]:
        """``k=v`` items and case names (``nominal``, ``heavy load=3``: a case, then values over it) as one
        condition; an unknown name, a value that is not a finite number, a fraction for a whole-number
        parameter: one line."""
        condition: dict[str, float] = {}
        for item in items or []:
            key, sep, text = (part.strip() for part in item.partition("="))
            if not sep:
                if key == SAMPLED:
                    continue  # the caller asks sampled() for it
                if key not in self.named:
                    cases = ", ".join([*self.named, SAMPLED])
                    raise UserError(
                        f"{option} {item}: {self.env_id} names no such condition (its named conditions: {cases}; "
                        f"or give values, {option} name=value)"
                    )
                condition.update(self.named[key])
                continue
            condition[key] = text
        return self.checked(condition, option=option)

    def checked(self, condition: dict[str, Any], *, option: str = "env.condition") -> dict[str, float]:
        """``condition`` with its names declared and its values numbers (whole ones where the range is whole);
        else one line naming what is wrong."""
        out = {}
        for key, value in condition.items():
            if key not in self.ranges:
                raise UserError(
                    f"{option} {key}: {self.env_id} declares no condition '{key}' "
                    f"(it declares: {', '.join(self.ranges)})"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise UserError(f"{option} {key}={value!r}: the value must be a finite number")
            out[key] = self._value(key, str(value), option)
        return out

    def _value(self, key: str, text: str, option: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise UserError(f"{option} {key}={text}: the value must be a finite number")
        if self.integer(key):
            if not value.is_integer():
                raise UserError(f"{option} {key}={text}: {key} is a whole number ({self.describe(key)})")
            return int(value)
        return value

    def describe(self, name: str) -> str:
        low, high = self.ranges[name]
        return f"{low:g}" if low == high else f"{low:g} to {high:g}"


def declared(env: gym.Env | gym.vector.VectorEnv, env_id: str) -> Declared | None:
    """What ``env`` (a gymnasium env, or one sub-env of a vector env) declares, None when it declares no
    conditions or measures; a declaration that is not the protocol's shape: one line naming the env."""
    single = _single(env)
    ranges = getattr(single, "condition_ranges", None)
    measures = getattr(single, "measures", None)
    if ranges is None and measures is None:
        return None
    try:
        checked = {str(name): _bounds(bounds) for name, bounds in dict(ranges or {}).items()}
        named = {
            str(case): {str(k): float(v) for k, v in dict(values).items()}
            for case, values in dict(getattr(single, "named_conditions", None) or {}).items()
        }
        measures = {str(name): str(text) for name, text in dict(measures or {}).items()}
        trace = tuple(str(name) for name in (getattr(single, "trace", None) or ()))
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"{env_id}: condition_ranges, named_conditions or measures is not the protocol's shape ({exc}); "
            "see docs/conditions.md"
        ) from None
    for case, values in named.items():
        if unknown := set(values) - set(checked):
            raise UserError(f"{env_id}: named condition '{case}' sets {', '.join(sorted(unknown))}, not declared")
    return Declared(env_id, checked, named, measures, trace)


def _bounds(bounds: Any) -> tuple[float, float]:
    low, high = bounds
    if isinstance(low, bool) or isinstance(high, bool):
        raise TypeError("a range is two numbers")
    if not (isinstance(low, int) and isinstance(high, int)):
        low, high = float(low), float(high)
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"a range is two finite numbers, low <= high, got {bounds!r}")
    return low, high


def _single(env: Any) -> Any:
    envs = getattr(getattr(env, "unwrapped", env), "envs", None)  # a SyncVectorEnv (or a wrapper of one)
    if envs:
        env = envs[0]
    return getattr(env, "unwrapped", env)


def require(env: gym.Env | gym.vector.VectorEnv, env_id: str, *, option: str = "--condition") -> Declared:
    """:func:`declared`, or one line saying that ``env_id`` declares no conditions and how to declare them."""
    found = declared(env, env_id)
    if found is None or not found.ranges:
        raise UserError(
            f"{option}: {env_id} declares no conditions; give the env a condition_ranges attribute and read "
            "reset(options={'condition': ...}) (docs/conditions.md), or pass constructor arguments with "
            "--set env.kwargs.NAME=VALUE"
        )
    return found


SAMPLED = "sampled"
"""The condition name (``--condition sampled``, ``env.condition_sampled``) that draws every declared parameter an
episode does not fix from its declared range, as a function of the episode's seed: every row of a comparison
plays the same plants on the same episodes."""


class UnderCondition(gym.Wrapper):
    """An env whose every reset runs under ``condition`` (added to the reset's options; the env draws or keeps
    nominal what the condition does not name). With ``sample`` (the declared ranges), each reset first draws
    every sampled parameter uniformly in its range (whole numbers where the range is whole) from a generator
    seeded by the reset's seed (a reset without a seed goes on from the last one's)."""

    def __init__(self, env: gym.Env, condition: dict[str, float], sample: dict[str, tuple[float, float]] | None = None):
        super().__init__(env)
        self.condition = dict(condition)
        self.sample = dict(sample or {})
        self._draws = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        drawn: dict[str, float] = {}
        if self.sample:
            if seed is not None:
                self._draws = np.random.default_rng([int(seed), 0x5A3])  # apart from the env's own stream
            for name, (low, high) in self.sample.items():
                if isinstance(low, int) and isinstance(high, int):
                    drawn[name] = int(self._draws.integers(low, high + 1))
                else:
                    drawn[name] = float(self._draws.uniform(low, high))
        options["condition"] = {**drawn, **self.condition, **options.get("condition", {})}
        return self.env.reset(seed=seed, options=options)
