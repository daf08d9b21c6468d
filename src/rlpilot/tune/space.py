"""The search space of ``rlpilot tune``: its dimensions (:class:`Param`), the settings that define a study
(:class:`TuneSpec`), and ``--param`` / ``--space`` read into ranges every sampler can draw from."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlpilot.common.errors import UserError
from rlpilot.config import safe_yaml
from rlpilot.config.load import field_type, load_config
from rlpilot.stats import iqm

OBJECTIVES = ("frames", "time", "return")
AGGREGATES = {"iqm": iqm, "median": lambda v: float(np.median(v)), "mean": lambda v: float(np.mean(v))}


@dataclass
class Param:
    """One search dimension: a numeric range (``low``/``high``, ``log``) or a list of ``choices``."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: list | None = None

    def suggest(self, trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.key, self.choices)
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)

    def describe(self) -> str:
        if self.choices is not None:
            return f"{self.key} in {{{', '.join(map(str, self.choices))}}}"
        return (
            f"{self.key} in [{self.low:g}, {self.high:g}]{' log' if self.log else ''}{' int' if self.integer else ''}"
        )


@dataclass
class TuneSpec:
    """What defines a study; stored in ``STUDY/tune.json`` and in the study's user attributes, so a rerun
    with other settings is refused instead of mixing two searches in one study."""

    preset: str
    space: list[Param]
    overrides: list[str] = field(default_factory=list)
    seeds_per_trial: int = 3
    seed_start: int = 0
    objective: str = "frames"
    aggregate: str = "iqm"
    pruner: str = "percentile"

    @property
    def direction(self) -> str:
        return "maximize" if self.objective == "return" else "minimize"

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.seeds_per_trial))

    def identity(self) -> dict:
        data = asdict(self)
        data["space"] = [asdict(p) for p in self.space]
        return data


# -- the search space ----------------------------------------------------------------------------
MAX_INTEGER_BOUND = 2**53  # an integer range's bounds stay exact as floats (Optuna's distributions hold floats)


def _number(text: str, key: str, integer: bool) -> float | int:
    """A range's bound: a finite number (an integer setting's: a whole one, at most 2^53 from 0)."""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--param {key}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"--param {key}: a range's bounds are finite numbers (got {text.strip()})")
    if integer:
        if not value.is_integer() or abs(value) > MAX_INTEGER_BOUND:
            raise UserError(f"--param {key}: {key} is an integer setting; give integer bounds (got {text.strip()})")
        return int(value)
    return value


def parse_range(key: str, value: str, *, integer: bool = False) -> Param:
    """``low:high`` or ``low:high:log`` as a :class:`Param` every sampler can draw from: finite bounds, low below
    high, a width that is a finite number too (uniform draws over -1e308:1e308 overflow), low > 0 for a log range."""
    parts = str(value).split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise UserError(f"--param {key}={value}: a range is low:high or low:high:log; choices are a,b,c")
    low, high = (_number(part, key, integer) for part in parts[:2])
    log = len(parts) == 3
    if not low < high:
        raise UserError(f"--param {key}: low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise UserError(f"--param {key}: a log range needs low > 0 (got {low})")
    if not math.isfinite(float(high) - float(low)):
        raise UserError(f"--param {key}: the range {low:g}:{high:g} is wider than a float holds; narrow it")
    return Param(key=key, low=low, high=high, log=log, integer=integer)


def _number_kind(preset: str, key: str) -> type | None:
    """int or float for a numeric setting, else None (an unknown key: one line with close matches)."""
    tp = field_type(load_config(preset), key)
    return tp if tp in (int, float) else None


def parse_param(preset: str, item: str, overrides: list[str] | tuple = ()) -> Param:
    """``key=low:high[:log]`` (a range) or ``key=a,b,c`` (choices)."""
    key, sep, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise UserError(f"--param expects key=low:high[:log] or key=a,b,c, got '{item}'")
    return param_from(preset, key, value, overrides)


def param_from(preset: str, key: str, value: Any, overrides: list[str] | tuple = ()) -> Param:
    """One dimension of the space; each of its bounds or choices must be a value the setting takes, with the
    start's ``overrides`` (else every trial would be refused)."""
    if isinstance(value, list):
        choices = value
    elif isinstance(value, dict):
        unknown = set(value) - {"low", "high", "log"}
        if unknown or not {"low", "high"} <= set(value):
            raise UserError(f"space {key}: a range is {{low: .., high: .., log: true|false}}, got {value}")
        value = f"{value['low']}:{value['high']}" + (":log" if value.get("log") else "")
        choices = None
    elif "," in str(value):
        choices = [c.strip() for c in str(value).split(",") if c.strip()]
    else:
        choices = None
    if choices is not None:
        if len(choices) < 2:
            raise UserError(f"--param {key}: give at least two choices (a,b), got {value!r}")
        choices = [c if isinstance(c, (bool, int, float, str)) else yaml.safe_dump(c).strip() for c in choices]
        for choice in choices:  # an unknown key, or a choice the setting does not take: one line
            load_config(preset, overrides=[*overrides, f"{key}={choice}"])
        return Param(key=key, choices=choices)
    if len(str(value).split(":")) not in (2, 3):
        raise UserError(f"--param {key}={value}: a range is low:high or low:high:log; choices are a,b,c")
    kind = _number_kind(preset, key)
    if kind is None:
        raise UserError(f"--param {key}: {key} is not a number; give choices instead ({key}=a,b)")
    param = parse_range(key, value, integer=kind is int)
    for bound in (param.low, param.high):  # outside what the setting accepts (e.g. a negative learning rate)
        load_config(preset, overrides=[*overrides, f"{key}={bound}"])
    return param


def parse_space(
    preset: str, params: list[str], space_file: str | None, overrides: list[str] | tuple = ()
) -> list[Param]:
    space: list[Param] = []
    if space_file:
        try:
            data = safe_yaml.load(Path(space_file).read_text(), source=f"--space {space_file}")
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"--space {space_file}: cannot read it ({str(exc).splitlines()[0]})") from None
        if not isinstance(data, dict) or not data:
            raise UserError(f"--space {space_file}: expected a mapping key: low:high | [a, b] | {{low, high, log}}")
        space += [param_from(preset, str(key), value, overrides) for key, value in data.items()]
    space += [parse_param(preset, item, overrides) for item in params]
    if not space:
        raise UserError("rlpilot tune needs a search space: --param key=low:high[:log] (repeatable) or --space FILE")
    return once_each(space)


def once_each(space: list[Param]) -> list[Param]:
    """``space``, refused in one line where it names a key twice (the later range would silently win)."""
    keys = [p.key for p in space]
    if len(set(keys)) != len(keys):
        raise UserError(
            f"the search space names a key twice: {', '.join(sorted({k for k in keys if keys.count(k) > 1}))}"
        )
    return space
