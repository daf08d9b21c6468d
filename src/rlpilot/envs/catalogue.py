"""The controllers by name: ``pd``, ``pid``, ``pd-ff`` and ``adaptive-pd`` (the arm's,
:mod:`rlpilot.envs.arm.controllers` and :mod:`rlpilot.envs.arm.adaptive`), a user's ``package.module:Class``, and
``random``; each built with its keyword arguments and checked against the protocol (:mod:`rlpilot.controllers`),
and, for ``--controller``, against the vector env it acts on.

The catalogue sits above the arm and imports it: the arm's controllers subclass the protocol's
:class:`~rlpilot.controllers.Controller`, so the protocol stays below both and imports neither. Importing this
module loads the arm's controllers (torch), never its env (MuJoCo).

``random``: uniform actions from the action space, the floor every learned policy must clear.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlpilot.common.errors import UserError
from rlpilot.controllers import GUIDE, CheckedController, check_controller, check_protocol, is_user_controller
from rlpilot.envs.arm.adaptive import TrackAdaptivePD
from rlpilot.envs.arm.controllers import ARM_IDS, TRACK_IDS, ReacherPD, TrackPD, TrackPDFF, TrackPID
from rlpilot.registry import import_user_module


def random_policy(vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """Uniform samples of the vector env's (batched) action space, seeded with the env."""

    def act(observation: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(vector_action_space.sample())

    return act


BUILT_IN = ("pd", "pid", "pd-ff", "adaptive-pd")
"""The built-in names: the arm's controllers (:func:`built_in` says which class each is, for which env)."""
CONTROLLERS = (*BUILT_IN, "random")


def built_in(name: str, env_id: str) -> type | None:
    """The class of the arm's controller ``name`` for ``env_id``, None for an env it is not built for
    (:func:`built_for`). Reaching a fixed target (``Reacher-v5``) ``pd`` and ``pid`` are both :class:`ReacherPD`: a
    PD has no steady-state error to integrate there (:mod:`rlpilot.envs.arm.controllers`)."""
    if env_id not in built_for(name):
        return None
    if env_id in TRACK_IDS:
        return {"pd": TrackPD, "pid": TrackPID, "pd-ff": TrackPDFF, "adaptive-pd": TrackAdaptivePD}[name]
    return ReacherPD


def built_for(name: str) -> tuple[str, ...]:
    """The env ids the arm's controller ``name`` is built for: ``adaptive-pd`` identifies the tracking arm's
    dynamics (:mod:`rlpilot.envs.arm.adaptive`) and ``pd-ff`` feeds its reference's acceleration forward (the
    tracking arm's observation carries the reference's velocity); ``pd`` and ``pid`` serve both arms."""
    return TRACK_IDS if name in ("adaptive-pd", "pd-ff") else ARM_IDS


def base_controller(name: str, env_id: str, kwargs: dict | None = None):
    """The controller ``name`` for ``env_id``, on raw observations: ``pd`` / ``pid`` (the arm's), or a user's
    ``package.module:Class`` built with ``kwargs`` (``env.base_controller_kwargs``); one line where it cannot
    be built."""
    kwargs = dict(kwargs or {})
    if is_user_controller(name):
        return user_controller(name, kwargs)
    cls = built_in(name, env_id)
    if cls is None:
        raise UserError(
            f"{name} is the inverse-kinematics controller of the arm envs ({', '.join(built_for(name))}); "
            f"for '{env_id}' name your own, package.module:Class ({GUIDE}), or try --controller random"
        )
    return _construct(cls, name, kwargs)


def user_controller(spec: str, kwargs: dict) -> torch.nn.Module:
    """``package.module:Class`` imported and built with ``kwargs``; one line for each way it can fail."""
    module, attr = import_user_module(spec, f"controller '{spec}'")
    cls = getattr(module, attr, None)
    if cls is None:
        raise UserError(f"controller '{spec}': module '{module.__name__}' has no '{attr}'")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise UserError(
            f"controller '{spec}' is not a torch.nn.Module class: subclass rlpilot.controllers.Controller "
            f"(forward(observation, gains=None) -> action; {GUIDE})"
        )
    return _construct(cls, spec, kwargs)


def _construct(cls: type, name: str, kwargs: dict):
    try:
        controller = cls(**kwargs)
    except Exception as exc:
        raise UserError(
            f"cannot build controller '{name}' with env.base_controller_kwargs={kwargs}: {type(exc).__name__}: {exc}"
        ) from None
    check_protocol(controller, name)
    return controller


def build_controller(
    name: str, env_id: str, vector_env, kwargs: dict | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The named controller (``random``, ``pd``, ``pid``, ``pd-ff``, ``adaptive-pd`` or ``package.module:Class``)
    for the vector env ``vector_env`` of ``env_id``, checked against its spaces; a clear error where it does not
    apply."""
    if name == "random":
        return random_policy(vector_env.action_space)
    if name in BUILT_IN or is_user_controller(name):
        controller = base_controller(name, env_id, kwargs)
        check_controller(controller, name, vector_env.single_observation_space, vector_env.single_action_space)
        return CheckedController(controller, name, vector_env.single_action_space.shape)
    raise UserError(f"--controller {name}: choose one of {', '.join(CONTROLLERS)} or package.module:Class")
