"""An exported policy's signature (``<artifact>.json``, written by ``rlpilot export``), read as data.

Someone may have sent it, or edited it; eval builds an env and feeds an artifact from what it says. So it is
read within bounds and checked before anything else is: a regular file of at most
:data:`MAX_SIGNATURE_BYTES` (a pipe or ``/dev/zero`` under its name is one line, never a hang), strict JSON
(no ``NaN``) nested at most as deep as a config may be; then what eval reads from it:

- ``inputs`` are ``observation`` (and ``state``), ``outputs`` ``action`` (and ``next_state``), each with a
  ``['batch', sizes...]`` shape of positive integers and a dtype, agreeing with ``state.size`` and ``action``
  (an index per row, a one-hot row, or a box of ``low``/``high``'s shape);
- ``env`` (id, kwargs, ``max_episode_steps``, ``action_encoding``) passes the config's own rules for those
  fields (:func:`rlpilot.config.load.section_from_dict`): a time limit a config refuses is refused here too.

Each problem is a :class:`UserError` naming the file. :func:`declared` gives the checked shapes, which
:mod:`rlpilot.play.load` then holds the artifact's graph and every step's outputs to. Torch-free.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlpilot.common.errors import UserError
from rlpilot.common.files import read_regular
from rlpilot.config.safe_yaml import MAX_DEPTH

SIGNATURE_FORMATS = ("onnx", "pt2", "torchscript")
MAX_SIGNATURE_BYTES = 2**20
"""An export's signature is 1-5 KB (a box's bounds and an arm's state layout are its longest parts)."""
MAX_STATE_SIZE = 65_536
"""Floats of state per row (a PID's integral: 2; an arm's history of 8 steps: 32)."""
MAX_ROW = 2**20
"""Numbers per row of a declared input or output (an observation, an action)."""
MAX_ACTIONS = 2**20
"""Actions of a discrete space."""
DTYPES = ("float32", "int64")
AGAIN = "export the run again (rlpilot export RUN)"
ENV_FIELDS = ("id", "kwargs", "max_episode_steps", "action_encoding")
"""What eval builds the env from; the rest of ``env`` (``trained_with``, ``note``) is information."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def loads_bounded(text: str, source: str) -> Any:
    """``json.loads(text)``, strict (``NaN`` and ``Infinity`` are not JSON) and nested at most
    :data:`MAX_DEPTH` deep, measured before parsing (deep nesting is a RecursionError inside ``json``)."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            raise UserError(f"{source} nests values more than {MAX_DEPTH} deep: it is not a file rlpilot wrote")
    return json.loads(text, parse_constant=_not_json)


def _not_json(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_signature(path: Path) -> dict:
    """The JSON signature ``rlpilot export`` writes beside an artifact, read within bounds and checked for what
    eval reads (module docstring)."""
    data = read_regular(path, MAX_SIGNATURE_BYTES, advice=AGAIN)
    try:
        signature = loads_bounded(data.decode(), str(path))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path} is not valid JSON (truncated or overwritten: {exc}); {AGAIN}") from None
    except UserError as exc:  # nested too deep
        raise UserError(f"{exc}; {AGAIN}") from None
    env = signature.get("env") if isinstance(signature, dict) else None
    if (
        not isinstance(env, dict)
        or signature.get("format") not in SIGNATURE_FORMATS
        or not isinstance(env.get("id"), str)
        or not isinstance(env.get("kwargs", {}), dict)
    ):
        raise UserError(f"{path} is not an rlpilot export signature (needs format and env.id, env.kwargs); {AGAIN}")
    try:
        _check(signature)
    except UserError as exc:
        raise UserError(f"{path}: {exc}; {AGAIN}") from None
    return signature


@dataclass(frozen=True)
class Declared:
    """What a checked signature says the artifact takes and returns: per name, the shape after the batch
    dimension and the dtype, in the signature's order."""

    inputs: dict[str, tuple[tuple[int, ...], str]]
    outputs: dict[str, tuple[tuple[int, ...], str]]
    state_size: int
    actions: int | None
    """A discrete space's number of actions (an index is within ``[0, actions)``); None for a box."""
    one_hot: bool


def declared(signature: dict) -> Declared:
    """The checked shapes of ``signature`` (one :func:`read_signature` returned)."""

    def shapes(entries: list) -> dict:
        return {entry["name"]: (tuple(entry["shape"][1:]), entry["dtype"]) for entry in entries}

    action = signature["action"]
    discrete = action["type"] == "discrete"
    return Declared(
        shapes(signature["inputs"]),
        shapes(signature["outputs"]),
        _state_size(signature),
        action["n"] if discrete else None,
        discrete and action.get("encoding", "index") == "one_hot",
    )


def _count(value: Any, low: int = 1, high: int = MAX_ROW) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _state_size(signature: dict) -> int:
    state = signature.get("state")
    if state is None:
        return 0
    size = state.get("size") if isinstance(state, dict) else None
    if not _count(size, 1, MAX_STATE_SIZE):
        raise UserError(f"state.size must be a whole number of floats within [1, {MAX_STATE_SIZE:,}] (got {size!r})")
    return size


def _tensors(entries: Any, names: list[str], where: str) -> dict[str, tuple[list, str]]:
    """``inputs`` or ``outputs``: exactly ``names``, in order, each with a ``['batch', sizes...]`` shape."""
    found = (
        [entry.get("name") if isinstance(entry, dict) else entry for entry in entries]
        if isinstance(entries, list)
        else entries
    )
    if found != names:
        raise UserError(f"{where} must be {', '.join(names)} (got {str(found)[:80]})")
    tensors = {}
    for entry in entries:
        shape, dtype = entry.get("shape"), entry.get("dtype")
        if not (isinstance(shape, list) and 1 <= len(shape) <= 8 and shape[0] == "batch") or not all(
            _count(size) for size in shape[1:]
        ):
            raise UserError(f"{where} '{entry['name']}' has shape {str(shape)[:60]}: ['batch', positive sizes...]")
        if math.prod(shape[1:]) > MAX_ROW:
            raise UserError(
                f"{where} '{entry['name']}' has {math.prod(shape[1:]):,} numbers a row (more than {MAX_ROW:,})"
            )
        if dtype not in DTYPES:
            raise UserError(f"{where} '{entry['name']}' has dtype {str(dtype)[:30]!r}: {' or '.join(DTYPES)}")
        tensors[entry["name"]] = (shape[1:], dtype)
    return tensors


def _nested_shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a nested list of numbers (``null``: an infinite bound), or None if it is not one."""
    if not isinstance(value, list):
        return () if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)) else None
    inner = [_nested_shape(item) for item in value]
    if not inner or any(shape is None or shape != inner[0] for shape in inner):
        return None if inner else (0,)
    return (len(value), *inner[0])


def _check(signature: dict) -> None:
    """The rules of the module docstring; a :class:`UserError` saying which one ``signature`` breaks."""
    from rlpilot.config.load import section_from_dict
    from rlpilot.config.sections import EnvConfig

    env = signature["env"]
    env_config = section_from_dict(EnvConfig, {k: env[k] for k in ENV_FIELDS if k in env}, prefix="env")
    state_size = _state_size(signature)
    stateful = ["state"] if state_size else []
    inputs = _tensors(signature.get("inputs"), ["observation", *stateful], "inputs")
    outputs = _tensors(signature.get("outputs"), ["action", *(["next_state"] if state_size else [])], "outputs")
    if inputs["observation"][1] != "float32":
        raise UserError("inputs 'observation' must be float32")
    for name, where in (("state", "inputs"), ("next_state", "outputs")):
        if state_size and (inputs if where == "inputs" else outputs)[name] != ([state_size], "float32"):
            raise UserError(f"{where} '{name}' must be float32 ['batch', {state_size}], the state.size")
    action = signature.get("action")
    if not isinstance(action, dict) or action.get("type") not in ("discrete", "box"):
        raise UserError(f"action.type must be discrete or box (got {str(action)[:60]})")
    shape, dtype = outputs["action"]
    rows = inputs["observation"][0][:-1]  # a group's agents: one action per agent
    if action["type"] == "discrete":
        n, encoding = action.get("n"), action.get("encoding", "index")
        if not _count(n, 1, MAX_ACTIONS) or encoding not in ("index", "one_hot"):
            raise UserError(f"a discrete action needs n within [1, {MAX_ACTIONS:,}] and encoding index or one_hot")
        wanted = [*rows, n] if encoding == "one_hot" else rows
        if shape != wanted or dtype != "int64":
            raise UserError(f"outputs 'action' must be int64 ['batch'{''.join(f', {s}' for s in wanted)}] ({encoding})")
        if (encoding == "one_hot") != (env_config.action_encoding == "one_hot"):
            raise UserError(
                f"action.encoding {encoding} disagrees with env.action_encoding {env_config.action_encoding}"
            )
    else:
        bounds = [_nested_shape(action.get(key)) for key in ("low", "high")]
        if dtype != "float32" or any(bound != tuple(shape) for bound in bounds):
            raise UserError(f"a box action is float32 with low and high of its shape {shape} (got {bounds})")


def check_signature_fits(signature: dict, signature_name: str, observation_space, action_space=None) -> None:
    """The artifact's declared input (``[batch, n]``) must be the size of the env's flat observation, and its
    action the env's: as many discrete actions, or a box of the same shape."""
    import gymnasium as gym

    width = signature["inputs"][0]["shape"][1:]
    image = isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) > 1
    env_id = signature["env"]["id"]
    if len(width) == 1 and not image:
        expected = gym.spaces.flatdim(observation_space)
        if width[0] != expected:
            raise UserError(
                f"{signature_name} says env '{env_id}', whose observations have {expected} numbers, "
                f"but the policy takes {width[0]}: the signature does not belong to this artifact; export the run again"
            )
    action = signature["action"]
    if isinstance(action_space, gym.spaces.Discrete):
        fits, env_has = action["type"] == "discrete" and action["n"] == int(action_space.n), f"{action_space.n} actions"
    elif isinstance(action_space, gym.spaces.Box):
        shape = signature["outputs"][0]["shape"][1:]
        fits, env_has = (
            action["type"] == "box" and tuple(shape) == action_space.shape,
            f"box actions {action_space.shape}",
        )
    else:
        return
    if not fits:
        says = (
            f"{action['n']} actions"
            if action["type"] == "discrete"
            else f"box actions {signature['outputs'][0]['shape'][1:]}"
        )
        raise UserError(
            f"{signature_name} says env '{env_id}', which takes {env_has}, but the policy gives {says}: the "
            "signature does not belong to this artifact; export the run again"
        )
