"""Controllers: the protocol a classical controller follows in rlpilot, and checking one against an env and for
export. Building one by name (rlpilot's or a user's) is the catalogue's, :mod:`rlpilot.envs.catalogue`, which
sits above the arm: the arm's controllers subclass :class:`Controller` from here, and this module imports neither.

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

**Checked on every call path**: the protocol's attributes when a controller is built (:func:`check_protocol`),
its output on two zero observations then (:func:`check_controller`), and every call after that, per batch
(:class:`CheckedController`: eval ``--controller``, ``check``, the residual env in training and evaluation): what
it raises, an output of another shape or type, a NaN or inf (its ``gate_signal`` too) is one line naming it.

Users name theirs ``package.module:Class`` (``env.base_controller``, ``rlpilot eval --controller``); rlpilot's
``pd`` and ``pid`` (the arm's inverse kinematics + PD / PID, :mod:`rlpilot.envs.arm.controllers`) are instances
of the same protocol. How a residual policy's action enters a controller: :mod:`rlpilot.envs.residual`.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from rlpilot.common.errors import UserError

GUIDE = "docs/your-controller.md"


class Controller(torch.nn.Module):
    """Base of the controller protocol (module docstring; docs/your-controller.md). Subclasses set
    ``gain_names`` (schedulable gains) and, when stateful, ``state_size`` with a pure ``step``."""

    gain_names: tuple[str, ...] = ()
    """The gains a gain schedule scales, in the order of the ``gains`` columns (empty: not schedulable)."""
    state_size: int = 0
    """Numbers of state per env (0: stateless); a stateful controller implements ``step``."""

    def __init__(self) -> None:
        super().__init__()
        self.state: torch.Tensor | None = None

    def step(
        self, observation: torch.Tensor, state: torch.Tensor, gains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A stateful controller's step as a pure function: ``(action, next state)``."""
        raise NotImplementedError(f"{type(self).__name__} declares state_size but implements no step()")

    def forward(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        """Stateful controllers: ``step`` with the state carried from call to call (zeros for a new batch
        size or after ``reset``). Stateless ones override this."""
        if not self.state_size:
            raise NotImplementedError(f"{type(self).__name__} implements no forward(observation, gains=None)")
        if self.state is None or self.state.shape != (observation.shape[0], self.state_size):
            self.state = observation.new_zeros(observation.shape[0], self.state_size)
        action, state = self.step(observation, self.state, gains)
        if not isinstance(state, torch.Tensor) or state.shape != self.state.shape:  # else reset to zeros next call
            got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
            raise ValueError(f"step returned a next state of {got}, not {tuple(self.state.shape)} (state_size per row)")
        self.state = state
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


def is_user_controller(name: str) -> bool:
    """``package.module:Class``: a user's controller (importing it runs the user's code)."""
    return ":" in name


def check_protocol(controller, name: str) -> None:
    """Refuses, in one line, a controller whose protocol attributes are malformed, before anything calls it:
    ``state_size`` a whole number >= 0 (and then a :class:`Controller`, whose ``forward`` carries the state),
    ``gain_names`` a tuple of distinct non-empty strings, ``gate_signal``, ``reset`` and ``step`` methods where
    present."""
    state_size = getattr(controller, "state_size", 0)
    if isinstance(state_size, bool) or not isinstance(state_size, numbers.Integral) or state_size < 0:
        raise UserError(
            f"controller '{name}': state_size must be a whole number >= 0 (numbers of state per env; 0: stateless), "
            f"got {state_size!r} ({type(state_size).__name__}) ({GUIDE})"
        )
    if state_size and not isinstance(controller, Controller):
        raise UserError(
            f"controller '{name}' declares state_size: subclass rlpilot.controllers.Controller, whose forward "
            f"carries the state of your step(observation, state, gains) between steps ({GUIDE})"
        )
    names = getattr(controller, "gain_names", ())
    if (
        not isinstance(names, (tuple, list))
        or not all(isinstance(n, str) and n for n in names)
        or len(set(names)) != len(names)
    ):
        raise UserError(
            f"controller '{name}': gain_names must be a tuple of distinct names, one per column of gains "
            f"(gain_names = ('kp', 'kd')), got {names!r} ({GUIDE})"
        )
    for method in ("gate_signal", "reset", "step"):
        value = getattr(controller, method, None)
        if value is not None and not callable(value):
            raise UserError(
                f"controller '{name}': {method} must be a method ({GUIDE}), got {type(value).__name__} {value!r}"
            )


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
    check_protocol(controller, name)
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
    checked_output(action, observation, f"controller '{name}'", expected, "actions", "for 2 zero observations")
    if gains:
        names = tuple(getattr(controller, "gain_names", ()))
        if not names:
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
    try:
        reset = getattr(controller, "reset", None)
        if reset is not None:
            reset(None)
    except Exception as exc:
        raise UserError(f"controller '{name}': reset raised after its check: {type(exc).__name__}: {exc}") from exc


def _try(controller, name: str, observation: torch.Tensor, gains: torch.Tensor | None, how: str):
    try:
        with torch.no_grad():
            if getattr(controller, "state_size", 0):
                controller.reset(None)
            return apply_controller(controller, observation, gains)
    except Exception as exc:
        raise UserError(
            f"controller '{name}' raised on 2 observations of shape {tuple(observation.shape[1:])}{how}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


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
        ) from exc
    checked_signal(signal, observation, name, call="for 2 observations")


_NUMPY_DTYPES = (torch.float32, torch.float64)


def all_finite(value: torch.Tensor) -> bool:
    """Whether every number of ``value`` is finite (integers always are). A CPU float tensor is tested in numpy
    (it shares the array's memory): measured on this project's 2-core Xeon, 3 us for a batch of 16 actions where
    ``bool(torch.isfinite(value).all())`` takes 13 us, as much as a PID's whole step."""
    if value.is_cpu and value.dtype in _NUMPY_DTYPES and value.layout is torch.strided and not value.requires_grad:
        return bool(np.isfinite(value.numpy()).all())
    return not value.is_floating_point() or bool(torch.isfinite(value).all())


def checked_output(value, observation: torch.Tensor, who: str, shape: tuple | None, what: str, call: str = ""):
    """``value`` when it is a tensor of ``shape`` (``None``: any with one row per observation) holding only finite
    numbers; else one line saying what ``who`` returned instead (``call``: which call, e.g. ``on step 7``) and,
    for NaN or inf, in which rows and whether the env's observations there were finite already."""
    rows = observation.shape[0]
    if not isinstance(value, torch.Tensor) or (tuple(value.shape) if shape else value.shape[:1]) != (shape or (rows,)):
        got = f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"
        need = f"a tensor of shape {shape}" if shape else f"one row per observation ({rows})"
        raise UserError(f"{who} returned {got} {call or f'for {rows} observations'}; its {what} must be {need}")
    if not all_finite(value):
        bad = (~torch.isfinite(value.reshape(rows, -1))).any(-1)
        where = bad.nonzero().view(-1).tolist()
        env_bad = not bool(torch.isfinite(observation.reshape(rows, -1)[bad]).all())
        cause = (
            "the env's observations in those rows were non-finite already: fix the env (rlpilot check shows it)"
            if env_bad
            else "its observations there were finite: fix it (a NaN or inf gain or kwarg, a division by zero)"
        )
        when = f" {call}" if call else ""
        raise UserError(f"{who} returned non-finite {what} (NaN or inf) in row(s) {where[:5]} of {rows}{when}; {cause}")
    return value


def checked_signal(signal, observation: torch.Tensor, name: str, call: str) -> torch.Tensor:
    """A controller's ``gate_signal`` output when it is one finite number per observation row; else one line
    naming the gate signal as the culprit (not the env's reward, which a NaN gate would turn NaN)."""
    rows = observation.shape[0]
    if not isinstance(signal, torch.Tensor) or signal.numel() != rows:
        got = f"shape {tuple(signal.shape)}" if isinstance(signal, torch.Tensor) else f"a {type(signal).__name__}"
        raise UserError(
            f"controller '{name}': gate_signal returns {got} {call}; env.residual_gate needs one number per row "
            f"(a tensor of shape ({rows},) or ({rows}, 1)) ({GUIDE})"
        )
    return checked_output(signal.reshape(rows), observation, f"controller '{name}': gate_signal", None, "values", call)


class CheckedController:
    """A controller as rlpilot calls it in an env's loop (``eval --controller``, ``check``, the residual env in
    training and evaluation): every call checked for what :func:`check_controller` saw once on zero
    observations, per batch and cheaply (a shape compare and :func:`all_finite`; measured on the 2-core Xeon,
    6 us a call on top of the test PID's 23; messages are built only when something is wrong). Whatever the
    controller (its ``gate_signal``, its ``reset``) raises, an output of another shape or type, a NaN or inf: one
    line naming the controller and the step (the traceback on the exception's cause, shown with ``--debug``).
    ``controller``: the module itself (what ``rlpilot export`` traces, without these checks)."""

    def __init__(self, controller, name: str, action_shape: tuple):
        self.controller, self.name, self.action_shape = controller, name, tuple(action_shape)
        self.gain_names = tuple(getattr(controller, "gain_names", ()))
        self.state_size = int(getattr(controller, "state_size", 0))
        self.calls = 0
        if callable(getattr(controller, "gate_signal", None)):
            self.gate_signal = self._gate_signal

    def __call__(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        self.calls += 1
        action = self._run(apply_controller, (self.controller, observation, gains), observation, "")
        shape = (observation.shape[0], *self.action_shape)
        if not (isinstance(action, torch.Tensor) and action.shape == shape and all_finite(action)):
            checked_output(action, observation, f"controller '{self.name}'", shape, "actions", self._call())
        return action

    def _gate_signal(self, observation: torch.Tensor) -> torch.Tensor:  # read before the step's action
        signal = self._run(self.controller.gate_signal, (observation,), observation, ": gate_signal", 1)
        if isinstance(signal, torch.Tensor) and signal.numel() == observation.shape[0] and all_finite(signal):
            return signal
        return checked_signal(signal, observation, self.name, self._call(1))

    def reset(self, mask=None) -> None:
        reset = getattr(self.controller, "reset", None)
        if reset is not None:
            self._run(reset, (mask,), None, ": reset", 1)

    def _call(self, ahead: int = 0) -> str:
        return f"on step {self.calls + ahead} (after its check when built)"

    def _run(self, function, args: tuple, observation: torch.Tensor | None, what: str, ahead: int = 0):
        try:
            if not torch.is_grad_enabled():  # the residual env's step already runs without autograd
                return function(*args)
            with torch.no_grad():
                return function(*args)
        except UserError:
            raise
        except Exception as exc:
            batch = "" if observation is None else f" on a batch of {observation.shape[0]} observations"
            raise UserError(
                f"controller '{self.name}'{what} raised{batch} {self._call(ahead)}: {type(exc).__name__}: {exc} "
                "(--debug shows the traceback)"
            ) from exc


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
