"""Building a :class:`~rlpilot.config.schema.Config` from data: type coercion, strict ``--set`` overrides,
presets and YAML files. ``load_config`` is the one way a Config is made.
This module imports no torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from rlpilot import registry
from rlpilot.common.errors import UserError
from rlpilot.config import safe_yaml
from rlpilot.config.fields import section_problems
from rlpilot.config.schema import Config
from rlpilot.config.sections import EnvConfig


# -- building from data ------------------------------------------------------------------------
@functools.cache  # typing.get_type_hints is slow (~1 ms a call, ~130 calls a config): once per class
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Checks ``value`` against the field type ``tp``; ints are accepted where floats are expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(key, value, arg)
            except UserError:
                pass
        raise UserError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise UserError(f"{key}: {value} is too large for a float") from None
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (bool, str, list, dict) and isinstance(value, tp):
        return value
    if tp is str and isinstance(value, bool):  # YAML 1.1 reads on/off (and yes/no) as booleans: train.compile=off
        return "on" if value else "off"
    raise UserError(f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})")


def _unknown_key(key: str, known: list[str]) -> UserError:
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else f" Known keys: {', '.join(known)}."
    return UserError(f"unknown config key '{key}'.{hint}")


def all_keys(config: Config) -> list[str]:
    types_ = _field_types(Config)
    keys = [name for name in types_ if not dataclasses.is_dataclass(types_[name])]
    for name in config.sections:
        keys += [f"{name}.{sub}" for sub in _field_types(types_[name])]
    return keys


def from_dict(data: dict, *, drop_other_sections: bool = False) -> Config:
    """Builds a Config from nested plain data, strictly: unknown keys, wrong types and sections the
    algorithm does not read are errors (``drop_other_sections``: ignored, for configs saved by older versions)."""
    config = Config()
    if "algo" in data:
        set_value(config, "algo", data["algo"])
    for name, value in data.items():
        if name == "algo":
            continue
        if drop_other_sections and name in _field_types(Config) and name not in (*config.sections, "preset"):
            continue
        set_value(config, name, value)
    return config


def section_from_dict(cls: type, data: dict, *, prefix: str) -> Any:
    """A config section (``EnvConfig``) from plain data that arrives outside a config, e.g. an exported policy's
    signature, under the config's own rules: unknown keys, each field's type and its declared valid values.
    A problem is a :class:`UserError` naming ``prefix.field``."""
    types_ = _field_types(cls)
    values = {}
    for name, value in data.items():
        if name not in types_:
            raise _unknown_key(f"{prefix}.{name}", [f"{prefix}.{known}" for known in types_])
        values[name] = _coerce(f"{prefix}.{name}", value, types_[name])
    section = cls(**values)
    problems = section_problems(section, prefix)
    if problems:
        raise UserError("; ".join(problems))
    return section


def set_value(config: Config, key: str, value: Any) -> None:
    """Sets ``section.field`` (or a top-level field, or a whole section from a dict) with checks."""
    types_ = _field_types(Config)
    if not isinstance(key, str):
        raise UserError(f"config key {key!r} is not a name: keys are section names or section.field")
    section, _, sub = key.partition(".")
    if section not in types_:
        raise _unknown_key(key, all_keys(config))
    section_type = types_[section]
    if not dataclasses.is_dataclass(section_type):
        if sub:
            raise _unknown_key(key, all_keys(config))
        value = _coerce(key, value, section_type)
        if section == "algo":
            registry.algorithm(value)
        setattr(config, section, value)
        return
    _require_section(config, key, section)
    target = getattr(config, section)
    if not sub:
        if not isinstance(value, dict):
            raise UserError(f"{key}: expected a mapping of {section}.* keys, got {value!r}")
        for name, item in value.items():
            set_value(config, f"{section}.{name}", item)
        return
    setattr(target, sub, _coerce(key, value, _declared_type(config, key, section_type, sub)))


def _require_section(config: Config, key: str, section: str) -> None:
    if section not in config.sections:
        raise UserError(
            f"'{key}': a {config.algo} run has no '{section}' section (its sections: {', '.join(config.sections)})"
        )


def _declared_type(config: Config, key: str, section_type: type, sub: str) -> Any:
    sub_types = _field_types(section_type)
    if sub not in sub_types:
        raise _unknown_key(key, all_keys(config))
    return sub_types[sub]


def field_type(config: Config, key: str) -> Any:
    """The declared type of the setting ``section.field`` (``X | None`` gives ``X``); an unknown key, or a
    section the algorithm does not read, is one line (with close matches)."""
    section, _, sub = key.partition(".")
    types_ = _field_types(Config)
    if section not in types_ or not sub or not dataclasses.is_dataclass(types_[section]):
        raise _unknown_key(key, all_keys(config))
    _require_section(config, key, section)
    tp = _declared_type(config, key, types_[section], sub)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(args) == 1:
            tp = args[0]
    return tp


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """Applies ``section.key=value`` strings; values are parsed as YAML (``1e-3``, ``true``, ``[64,64]``)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects section.key=value, got '{item}'")
        if key.strip() == "algo":
            raise UserError("--set algo=...: choose the algorithm with a preset or `rlpilot train ALGO ENV`")
        try:
            value = safe_yaml.load(raw, source=f"--set {key.strip()}") if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str) and _looks_numeric(value):
            value = float(value)
        set_value(config, key.strip(), value)
    return config


def _looks_numeric(text: str) -> bool:
    # YAML 1.1 reads "1e-3" as a string (it wants "1.0e-3"); users mean a number.
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- presets and files -----------------------------------------------------------------------
preset_names = registry.preset_names


ADAPT_SECTION = "adapt"
"""A preset's section for ``rlpilot train adapt`` (docs/adapt.md): with it, ``rlpilot train PRESET`` runs the adapt
command on the preset's env (``controller``, ``params``: ``--param`` items, ``settings``: ``adapt.*``), and the other
sections are the student's PPO run."""


def load_preset_data(name: str) -> dict:
    """A preset's config sections (its ``adapt`` section left out: :func:`preset_adapt`)."""
    data = _parse_yaml(registry.preset_text(name), source=f"preset {name}")
    data.pop(ADAPT_SECTION, None)
    return data


def preset_adapt(name: str) -> dict | None:
    """The ``adapt`` section of preset ``name`` (None where it has none, or ``name`` is not a preset), checked:
    ``controller`` a name, ``params`` a list of ``KEY=LOW:HIGH[:log]``, ``settings`` a mapping of ``adapt.*``."""
    if name not in registry.preset_names():
        return None
    section = _parse_yaml(registry.preset_text(name), source=f"preset {name}").get(ADAPT_SECTION)
    if section is None:
        return None
    where = f"preset {name}: {ADAPT_SECTION}"
    if not isinstance(section, dict) or set(section) - {"controller", "params", "settings"}:
        raise UserError(f"{where} is a mapping of controller, params and settings")
    if not isinstance(section.get("controller"), str):
        raise UserError(f"{where}.controller: the controller's name or module:Class")
    params = section.get("params")
    if not isinstance(params, list) or not params or not all(isinstance(p, str) for p in params):
        raise UserError(f"{where}.params: a list of KEY=LOW:HIGH[:log]")
    if not isinstance(section.get("settings", {}), dict):
        raise UserError(f"{where}.settings: a mapping of adapt settings (KEY: VALUE)")
    return section


def _parse_yaml(text: str, *, source: str) -> dict:
    try:
        data = safe_yaml.load(text, source=source) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise UserError(f"{source} is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source} must be a mapping of config sections")
    return data


def read_config_file(path: str | Path, *, drop_other_sections: bool = False) -> Config:
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config file {path}: {exc}") from None
    return from_dict(_parse_yaml(text, source=str(path)), drop_other_sections=drop_other_sections)


def load_config(
    preset: str | None = None,
    *,
    algo: str | None = None,
    env_id: str | None = None,
    overrides: list[str] | None = None,
    config_file: str | Path | None = None,
) -> Config:
    """The one way a Config is made: a preset, or ``algo`` + ``env_id``, or a config file (a run's
    ``config.yaml`` or ``--config FILE``); then ``--set`` overrides; then validation."""
    if config_file is not None:
        config = read_config_file(config_file, drop_other_sections=True)
    elif preset is not None:
        config = from_dict(load_preset_data(preset))
        config.preset = preset
    else:
        entry = registry.algorithm(algo)
        if entry.kind == "llm":
            raise UserError(f"{algo} does not train on an env: start from a preset (rlpilot presets)")
        config = Config(algo=algo, env=EnvConfig(id=env_id or "CartPole-v1"))
    apply_overrides(config, overrides or [])
    return config.validate()
