"""Controllers: the protocol a classical controller follows in rlpilot, building one by name (rlpilot's or a
user's), and checking it against an env and for export.

**The protocol** (:class:`Controller`, public; docs/your-controller.md). A controller is a ``torch.nn.Module``
built with keyword arguments (``env.base_controller_kwargs``) that maps a batch of raw observations
``[batch, obs_dim]`` to actions ``[batch, *action_shape]`` in the env's action units:

- ``forward(observation, gains=None) -> action``. Torch operations only, so it exports with a policy
  (ONNX, pt2, TorchScript): no numpy, no ``.item()``, no Python ``if`` on tensor values.
- ``gain_names = ("kp", "kd")``: the gains a gain schedule may scale (``env.residual_mode=gains``); ``gains``
  is then a ``[batch, len(gain_names)]`` tensor of multipliers, ones meaning the gains as commissioned.
- A stateful controller (an integral) declares ``state_size`` (numbers per env) and implements
  ``step(observation, state, gains=None) -> (action, next_state)`` as a pure function, zeros at the start of
  an episode; subclassing :class:`Controller` then gives ``forward`` (the state carried between calls) and
  ``reset(mask)``.

Users name theirs ``package.module:Class`` (``env.base_controller``, ``rlpilot eval --controller``); rlpilot's
``pd`` and ``pid`` (the arm's inverse kinematics + PD / PID, :mod:`rlpilot.envs.arm.controllers`) are instances
of the same protocol. How a residual policy's action enters a controller: :mod:`rlpilot.envs.residual`.

``random``: uniform actions from the action space, the floor every learned policy must clear.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np
import torch

from rlpilot.errors import UserError
from rlpilot.registry import import_user_module


class Controller(torch.nn.Module):
    """Base of the controller protocol (module docstring; docs/your-controller.md). Subclasses set
    ``gain_names`` (schedulable gains) and, when stateful, ``state_size`` with a pure :meth:`step`."""

    gain_names: tuple[str, ...] = ()
    """The gains a gain schedule scales, in the order of the ``gains`` columns (empty: not schedulable)."""
    state_size: int = 0
    """Numbers of state per env (0: stateless); a stateful controller implements :meth:`step`."""

    def __init__(self) -> None:
        super().__init__()
        self.state: torch.Tensor | None = None

    def step(
        self, observation: torch.Tensor, state: torch.Tensor, gains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A stateful controller's step as a pure function: ``(action, next state)``."""
        raise NotImplementedError(f"{type(self).__name__} declares state_size but implements no step()")

    def forward(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        """Stateful controllers: :meth:`step` with the state carried from call to call (zeros for a new batch
        size or after :meth:`reset`). Stateless ones override this."""
        if not self.state_size:
            raise NotImplementedError(f"{type(self).__name__} implements no forward(observation, gains=None)")
        if self.state is None or self.state.shape != (observation.shape[0], self.state_size):
            self.state = observation.new_zeros(observation.shape[0], self.state_size)
        action, self.state = self.step(observation, self.state, gains)
        return action

    def reset(self, mask: torch.Tensor | np.ndarray | None = None) -> None:
        """A new episode for the envs in ``mask`` (all: ``None``): their state back to zeros."""
        if self.state is None or mask is None:
            self.state = None
            return
        mask = torch.as_tensor(np.asarray(mask), dtype=torch.bool, device=self.state.device)
        self.state = torch.where(mask[:, None], torch.zeros_like(self.state), self.state)


def apply_controller(controller, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
    """``controller(observation)``, with ``gains`` only where a schedule gives some (a controller without
    ``gain_names`` may take the observation alone)."""
    return controller(observation) if gains is None else controller(observation, gains)


class ControllerModule(torch.nn.Module):
    """A controller as a pure module (what ``rlpilot export`` traces into a residual run's artifact).

    Stateless controllers: ``forward(observation) -> action``. Stateful ones (the PID's integral):
    ``forward(observation, state) -> (action, next state)``, the controller's ``step`` as a pure function,
    so the artifact carries no hidden state: the caller feeds each output state back in and starts every
    episode from zeros (``state_size`` numbers per env). ``gains`` (optional, last): a gain schedule's
    multipliers per env and gain (:func:`rlpilot.envs.residual.gain_multipliers`)."""

    def __init__(self, controller):
        super().__init__()
        self.controller = controller
        self.state_size = int(getattr(controller, "state_size", 0))  # a stateful controller has step()

    @property
    def stateful(self) -> bool:
        return self.state_size > 0

    def forward(self, observation: torch.Tensor, state: torch.Tensor | None = None, gains: torch.Tensor | None = None):
        if not self.stateful:
            return apply_controller(self.controller, observation, gains)
        if gains is None:
            return self.controller.step(observation, state)
        return self.controller.step(observation, state, gains)


def random_policy(vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """Uniform samples of the vector env's (batched) action space, seeded with the env."""

    def act(observation: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(vector_action_space.sample())

    return act


BUILT_IN = ("pd", "pid", "adaptive-pd")
CONTROLLERS = (*BUILT_IN, "random")
GUIDE = "docs/your-controller.md"
ARM_CONTROLLERS = "rlpilot.envs.arm.catalogue"
"""Where the built-in names are looked up (the arm's ``pd``, ``pid`` and ``adaptive-pd``,
:mod:`rlpilot.envs.arm.catalogue`), imported by name when one is asked for: they subclass :class:`Controller` from
here, so an import statement back would be a cycle."""


def is_user_controller(name: str) -> bool:
    """``package.module:Class``: a user's controller (importing it runs the user's code)."""
    return ":" in name


def base_controller(name: str, env_id: str, kwargs: dict | None = None):
    """The controller ``name`` for ``env_id``, on raw observations: ``pd`` / ``pid`` (the arm's), or a user's
    ``package.module:Class`` built with ``kwargs`` (``env.base_controller_kwargs``); one line where it cannot
    be built."""
    kwargs = dict(kwargs or {})
    if is_user_controller(name):
        return user_controller(name, kwargs)
    arm = importlib.import_module(ARM_CONTROLLERS)
    cls = arm.built_in(name, env_id)
    if cls is None:
        raise UserError(
            f"{name} is the inverse-kinematics controller of the arm envs ({', '.join(arm.built_for(name))}); "
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
    controller = _construct(cls, spec, kwargs)
    if int(getattr(controller, "state_size", 0)) and not isinstance(controller, Controller):
        raise UserError(
            f"controller '{spec}' declares state_size: subclass rlpilot.controllers.Controller, whose forward "
            f"carries the state of your step(observation, state, gains) between steps ({GUIDE})"
        )
    return controller


def _construct(cls: type, name: str, kwargs: dict):
    try:
        return cls(**kwargs)
    except Exception as exc:
        raise UserError(
            f"cannot build controller '{name}' with env.base_controller_kwargs={kwargs}: {type(exc).__name__}: {exc}"
        ) from None


def check_controller(controller, name: str, observation_space, action_space, *, gains: bool = False) -> None:
    """Refuses, in one line, a controller that does not fit the env: it must take a batch of the env's
    observations and return one action per row in the env's action shape; for a gain schedule (``gains``) it
    must declare ``gain_names`` and, given gains of ones, act as commissioned. Tried on zero observations (no
    env step, no random draw); the controller's state is cleared afterwards."""
    import gymnasium as gym

    if not isinstance(observation_space, gym.spaces.Box) or not isinstance(action_space, gym.spaces.Box):
        raise UserError(
            f"controller '{name}' needs Box observations and Box actions (a vector in, a vector out); "
            f"this env has {observation_space} -> {action_space}"
        )
    observation = torch.zeros(2, *observation_space.shape)
    expected = (2, *action_space.shape)
    action = _try(controller, name, observation, None, "")
    shape = tuple(action.shape) if isinstance(action, torch.Tensor) else None
    if shape != expected:
        got = f"shape {shape}" if shape is not None else f"a {type(action).__name__}"
        raise UserError(
            f"controller '{name}' returns {got} for 2 observations; the env's action space needs a tensor of shape "
            f"{expected} ([batch, *{tuple(action_space.shape)}], in the env's action units)"
        )
    if gains:
        names = getattr(controller, "gain_names", ())
        if not names or not all(isinstance(n, str) for n in names):
            raise UserError(
                f"env.residual_mode=gains schedules the controller's gain_names; '{name}' declares none: add "
                f"gain_names = ('kp', ...), each scaled by gains[:, i] in forward(observation, gains) ({GUIDE})"
            )
        ones = torch.ones(2, len(names))
        scheduled = _try(controller, name, observation, ones, f" with gains of shape {tuple(ones.shape)} ({names})")
        if not isinstance(scheduled, torch.Tensor) or scheduled.shape != action.shape:
            got = tuple(scheduled.shape) if isinstance(scheduled, torch.Tensor) else type(scheduled).__name__
            raise UserError(
                f"controller '{name}' given gains of shape {tuple(ones.shape)} (gain_names {names}) returns {got}, "
                f"not {tuple(action.shape)}: gains[:, i] scales gain_names[i], for those names only"
            )
        if not torch.allclose(scheduled, action, atol=1e-6, equal_nan=True):
            raise UserError(
                f"controller '{name}' acts differently with gains of ones than without: gains[:, i] multiplies "
                f"gain_names[i] of {names} (ones: as commissioned)"
            )
    reset = getattr(controller, "reset", None)
    if reset is not None:
        reset(None)


def _try(controller, name: str, observation: torch.Tensor, gains: torch.Tensor | None, how: str):
    try:
        with torch.no_grad():
            if int(getattr(controller, "state_size", 0)):
                controller.reset(None)
            return apply_controller(controller, observation, gains)
    except Exception as exc:
        raise UserError(
            f"controller '{name}' raised on 2 observations of shape {tuple(observation.shape[1:])}{how}: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def check_gate_signal(controller, name: str, observation_space) -> None:
    """Refuses, in one line, a controller ``gate_signal`` that does not give one number per observation row."""
    observation = torch.zeros(2, *observation_space.shape)
    try:
        with torch.no_grad():
            signal = controller.gate_signal(observation)
    except Exception as exc:
        raise UserError(
            f"controller '{name}': gate_signal raised on 2 observations of shape {tuple(observation.shape[1:])}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(signal, torch.Tensor) or signal.numel() != 2:
        got = f"shape {tuple(signal.shape)}" if isinstance(signal, torch.Tensor) else f"a {type(signal).__name__}"
        raise UserError(
            f"controller '{name}': gate_signal returns {got} for 2 observations; env.residual_gate needs one number "
            f"per row (a tensor of shape (2,) or (2, 1)) ({GUIDE})"
        )


class _GateSignalModule(torch.nn.Module):
    def __init__(self, controller):
        super().__init__()
        self.controller = controller

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.controller.gate_signal(observation)


def exportable(controller, name: str, observation_dim: int, gains: int = 0, gate_signal: bool = False) -> None:
    """Refuses, in one line, a controller that cannot go into an artifact with the policy: ``torch.export``
    of it alone (numpy, ``.item()`` or Python control flow on tensor values inside fail here, where a trace
    would silently bake in one branch or one number), and of its ``gate_signal`` where the gate reads it."""
    module = ControllerModule(controller).eval()
    examples: tuple = (torch.zeros(4, observation_dim),)
    if module.stateful:
        examples += (torch.zeros(4, module.state_size),)
    kwargs = {"gains": torch.ones(4, gains)} if gains else {}
    if gains and not module.stateful:
        kwargs["state"] = None
    _export_or_refuse(module, examples, kwargs, name, "")
    if gate_signal:
        _export_or_refuse(_GateSignalModule(controller).eval(), examples[:1], {}, name, " (its gate_signal)")


def _export_or_refuse(module: torch.nn.Module, examples: tuple, kwargs: dict, name: str, what: str) -> None:
    try:
        torch.export.export(module, examples, kwargs=kwargs, strict=False)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"controller '{name}'{what} cannot be exported with the policy: use torch operations only (no numpy, "
            f".item() or Python if on tensor values: torch.where) ({GUIDE}); torch: {reason[:60]}"
        ) from None


def build_controller(
    name: str, env_id: str, vector_env, kwargs: dict | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The named controller (``random``, ``pd``, ``pid``, ``adaptive-pd`` or ``package.module:Class``) for the
    vector env ``vector_env`` of ``env_id``, checked against its spaces; a clear error where it does not apply."""
    if name == "random":
        return random_policy(vector_env.action_space)
    if name in BUILT_IN or is_user_controller(name):
        controller = base_controller(name, env_id, kwargs)
        check_controller(controller, name, vector_env.single_observation_space, vector_env.single_action_space)
        return controller
    raise UserError(f"--controller {name}: choose one of {', '.join(CONTROLLERS)} or package.module:Class")
