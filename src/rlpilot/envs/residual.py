"""Residual RL: a classical controller inside the vector env, the policy's action a correction to it.

``mode="add"``: ``clip(base(observation) + scale * action, low, high)`` is what the env receives; the policy
learns only the correction (Silver et al. 2018, "Residual Policy Learning"; Johannink et al. 2019). Its actions
are the env's box moved to be centred at zero (:func:`correction_box`: ``[0, 1]`` becomes ``[-0.5, 0.5]``, a
symmetric box stays as it is), so a correction of 0 sits in the middle of the policy's space whatever the env's
box: an untrained policy (greedy action 0) is the controller on a ``[0, 1]`` heater too, not the controller
plus half the box.
``mode="gains"``: the policy schedules the base controller's gains instead (its ``gain_names``: the arm's kp
and kd), each times ``10 ** (scale * action)`` (a gain schedule learned by RL; the policy's action space is
then one entry in [-1, 1] per gain): the env always receives the controller's law, so an imprecise policy
costs a slightly different gain, not a torque error. Either way the policy sees the
same observations as the base controller, and action 0 is the base controller exactly. The base is computed
for the whole batch in one call per step, and a stateful base (PID) is reset for exactly the envs that start
a new episode. ``penalty`` (``env.residual_penalty``) subtracts ``penalty * |action|^2`` from each reward;
``gate`` (``env.residual_gate``) lets the action act only where an error signal is above it: observation entry
``gate_index`` where given, else the controller's ``gate_signal(observation)`` where it has one, else the entry the
controller names (``gate_index``: the arm's error monitor). Any controller of the protocol in
:mod:`rlpilot.controllers` works here, on any env with Box observations and actions.

:class:`ResidualLaw` is that formula as one value, read from the config once: the residual vector env applies
it in training and evaluation, and the exported artifact (:class:`rlpilot.play.export.DeployedPolicy`) traces
the same object.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np
import torch

from rlpilot.common.errors import UserError
from rlpilot.config.sections import EnvConfig
from rlpilot.controllers import (
    CheckedController,
    Controller,
    all_finite,
    apply_controller,
    check_gate_signal,
    is_user_controller,
)

RESIDUAL_FORMULAS = {
    "add": "clip(base(observation) + residual_scale * policy(observation)), the policy's actions in the action "
    "box centred at zero",
    "gains": "the base controller with its gain_names times 10 ** (residual_scale * policy(observation))",
}
RESIDUAL_MODES = tuple(RESIDUAL_FORMULAS)
"""How a residual policy's action enters the base controller (``env.residual_mode``): ``add``: added to its
output, ``clip(base(obs) + scale * action)``, the action in the env's box centred at zero; ``gains``: its
``gain_names`` (the arm's kp and kd) multiplied by ``10 ** (scale * action)`` (``scale`` in decades, one action
per gain), a gain schedule. Both are the base controller exactly at action 0."""

LAST_ENTRY = -1
"""The gate's observation entry for a controller that names none (``gate_index``): the observation's last."""

GateSignal = int | Callable[[torch.Tensor], torch.Tensor]
"""Where ``env.residual_gate`` reads its error signal: an observation entry (``env.residual_gate_index``) or a
function of the observation batch returning one number per row (the base controller's ``gate_signal``)."""


def gain_multipliers(action: torch.Tensor, decades: float) -> torch.Tensor:
    """``10 ** (decades * action)``, per env and gain: exactly 1 where the action is 0."""
    return torch.exp(action * (decades * math.log(10.0)))


def correction_box(space: gym.spaces.Box) -> gym.spaces.Box:
    """The policy's actions under ``residual_mode=add``: ``space`` moved to be centred at zero, its width kept
    (``[low, high]`` becomes ``[-(high - low) / 2, (high - low) / 2]`` per dimension), so that action 0, a
    correction of 0, is the middle of the policy's space: what an untrained policy plays (its last layer starts
    at zero, its greedy action the middle of the box). A symmetric box is returned as it is, the same object:
    the arm's and every ``[-1, 1]`` plant's residual runs are unchanged. A dimension with an infinite bound
    keeps its bounds (an unbounded policy output is 0 at the start already)."""
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    finite = np.isfinite(low) & np.isfinite(high)
    if np.array_equal(low[finite], -high[finite]):
        return space
    half = np.where(finite, (high - low) / 2.0, high)
    return gym.spaces.Box(np.where(finite, -half, low).astype(space.dtype), half.astype(space.dtype), dtype=space.dtype)


def gate_signal(controller, index: int | None) -> GateSignal:
    """The gate's error signal for a run: ``env.residual_gate_index`` where set, else the controller's own
    ``gate_signal(observation)`` method where it has one (a user's plant: the signal their controller computes,
    e.g. a filtered error), else the observation entry the controller names as its error monitor (``gate_index``:
    the arm's controllers name the arm's, the observation's last float), else :data:`LAST_ENTRY`."""
    if index is not None:
        return int(index)
    method = getattr(controller, "gate_signal", None)
    return method if callable(method) else getattr(controller, "gate_index", LAST_ENTRY)


@dataclass(frozen=True)
class ResidualLaw:
    """How a residual policy's action enters the base controller: ``env.residual_mode``, ``residual_scale``,
    ``residual_gate`` and the gate's error signal, read once from the config (:meth:`from_config`). One value
    for both users: the residual vector env (training, evaluation) and the exported artifact, which traces
    :meth:`terms` (torch operations only: torch.export, ONNX and TorchScript take it as it is).
    ``penalty`` is the env's alone (a reward term, nothing the artifact computes)."""

    mode: str = "add"
    """``env.residual_mode``: ``add`` or ``gains`` (:data:`RESIDUAL_MODES`)."""
    scale: float = 1.0
    """``env.residual_scale``: action units added per policy action (``add``), decades per action (``gains``)."""
    gate: float = 0.0
    """``env.residual_gate``: the error signal's level below which the base controller acts alone (0: no gate)."""
    signal: GateSignal = LAST_ENTRY
    """The gate's error signal (:func:`gate_signal`): an observation entry, or the controller's ``gate_signal``."""
    penalty: float = 0.0
    """``env.residual_penalty``: the reward's cost per squared policy action (the env's; not in the artifact)."""

    def __post_init__(self) -> None:
        if self.mode not in RESIDUAL_MODES:
            raise UserError(f"env.residual_mode: one of {', '.join(RESIDUAL_MODES)}, got {self.mode!r}")

    @classmethod
    def from_config(
        cls, env_cfg: EnvConfig, controller, observation_space: gym.Space, *, appended: int = 0
    ) -> ResidualLaw:
        """The law of ``env_cfg``'s five residual fields for ``controller`` on an env with ``observation_space``;
        one line where the gate has no signal to read (a user's controller with neither
        ``env.residual_gate_index`` nor a ``gate_signal`` method, a ``gate_signal`` of the wrong shape, an
        entry outside the observation). ``appended``: columns rlpilot appends after the env's own observation
        (``env.history``): an entry the controller names from the end (the arm's error monitor, the last float)
        counts from the end of the env's own observation, before them."""
        index = env_cfg.residual_gate_index
        if env_cfg.residual_gate and index is None and is_user_controller(env_cfg.base_controller):
            if not callable(getattr(controller, "gate_signal", None)):
                raise UserError(
                    f"env.residual_gate reads an error signal: name its observation entry with "
                    f"env.residual_gate_index=I, or give controller '{env_cfg.base_controller}' a "
                    "gate_signal(observation) method returning one number per row (docs/your-controller.md)"
                )
            check_gate_signal(controller, env_cfg.base_controller, observation_space)
        width = int(np.prod(observation_space.shape))
        if env_cfg.residual_gate and index is not None and not -width <= index < width:
            raise UserError(
                f"env.residual_gate_index={index}: the observation has {width} entries (0 to {width - 1}, or "
                "negative from the end)"
            )
        signal = gate_signal(controller, index)
        if index is None and isinstance(signal, int) and signal < 0:
            signal -= appended
        return cls(
            mode=env_cfg.residual_mode,
            scale=float(env_cfg.residual_scale),
            gate=float(env_cfg.residual_gate),
            signal=signal,
            penalty=float(env_cfg.residual_penalty),
        )

    @property
    def gate_reads_controller(self) -> bool:
        """The gate reads the controller's ``gate_signal``: the artifact must trace it too."""
        return bool(self.gate) and callable(self.signal)

    def read_signal(self, observation: torch.Tensor) -> torch.Tensor:
        """The error signal, ``[batch]``: an observation entry, or the controller's output flattened to one per row."""
        if callable(self.signal):
            return self.signal(observation).reshape(observation.shape[0])
        return observation[:, self.signal]

    def gate_weight(self, observation: torch.Tensor) -> torch.Tensor:
        """How much of the residual acts, from the error signal: 0 while ``|signal|`` is under ``gate``, rising
        linearly to 1 at twice that. One column per env."""
        return torch.clamp(self.read_signal(observation).abs().unsqueeze(-1) / self.gate - 1.0, 0.0, 1.0)

    def terms(
        self, action: torch.Tensor, observation: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | float]:
        """How the policy's ``action`` enters the base controller: ``(gains, added)``, the env receiving
        ``clip(base(observation, gains) + added)``. ``add``: no gains, ``scale * action`` added; ``gains``: the
        multipliers of the controller's gains (:func:`gain_multipliers`), nothing added. ``gate`` > 0: the
        action times :meth:`gate_weight` of the raw ``observation`` first (below the gate: the base controller
        exactly)."""
        if self.gate > 0:
            action = action * self.gate_weight(observation)
        if self.mode == "gains":
            return gain_multipliers(action, self.scale), 0.0
        return None, self.scale * action

    def describe(self) -> str:
        """The formula in words, for an artifact's signature."""
        text = RESIDUAL_FORMULAS[self.mode]
        if self.gate:
            read = "base.gate_signal(observation)" if callable(self.signal) else f"observation[{self.signal}]"
            text += (
                f", policy(observation) first times clamp(|{read}| / {self.gate:g} - 1, 0, 1) "
                "(residual_gate: the error signal)"
            )
        return text


LEAST_SHARE = 1e-6
"""The least weight ``env.gain_excitation`` gives a step: a settled plant's estimates count, barely."""


class AveragedGains(Controller):
    """``controller`` run on an average of a gain schedule's multipliers (``env.gain_average``). ``weighted``
    (``env.gain_weights``): the schedule's action is two columns per gain, the gains (decades / ``residual_scale``,
    as without it), then each gain's weight (``10 ** (residual_scale * action)``: action 0 weighs 1); else every
    step weighs 1. Per env, the controller runs on
    ``exp`` of the weighted mean of ``log(gain)`` over the episode so far, each earlier step's weight fading by
    ``1 - 1 / steps`` a step (``steps`` larger than the episode: nearly the plain weighted mean of the episode).
    A schedule whose every step is a noisy estimate of one plant's gains (``rlpilot train adapt``'s student) then
    acts on its estimates fused over the episode: the plant is one plant for the whole episode.

    ``excitation`` (``env.gain_excitation``, steps): each step's weight is also scaled by how much the plant was
    driven lately, ``e / max(e)``: ``e`` the mean absolute change of the command between steps (all ``action_size``
    columns summed), fading with that time constant, over its largest value this episode (1 at the first step). A
    settled plant tells little about itself, so what was learnt from the last transient holds.

    A stateful controller of its own (the protocol's ``step``): its state is the wrapped controller's, then the
    averaged log-gains, then the weight accumulated (one each per gain), then (``excitation``) the last command, ``e``
    and its largest value, zeros at an episode's start, so the residual env resets it per env and ``rlpilot export``
    carries it in the artifact's state like the PID's integral.
    Without a schedule (the base controller alone) it is ``controller``, its state left as it was."""

    def __init__(self, controller, steps: int, *, weighted: bool = False, excitation: int = 0, action_size: int = 1):
        super().__init__()
        self.controller, self.keep, self.weighted = controller, 1.0 - 1.0 / int(steps), bool(weighted)
        self.excitation, self.action_size = int(excitation), int(action_size)
        self.gain_names = tuple(controller.gain_names)
        self.schedule_width = (2 if weighted else 1) * len(self.gain_names)
        """The schedule's columns: each gain, then (``weighted``) each gain's weight: the residual env's action box."""
        self.inner_size = int(getattr(controller, "state_size", 0))
        self.state_size = self.inner_size + 2 * len(self.gain_names) + (self.action_size + 2 if excitation else 0)
        for name in ("gate_index", "gate_signal"):  # what the residual gate reads, as the controller gives it
            if hasattr(controller, name):
                setattr(self, name, getattr(controller, name))

    def step(self, observation, state, gains=None):
        count = len(self.gain_names)
        inner, mean = state[:, : self.inner_size], state[:, self.inner_size : self.inner_size + count]
        total = state[:, self.inner_size + count : self.inner_size + 2 * count]
        driven = state[:, self.inner_size + 2 * count :]  # (excitation) the last command, e, max e: none without
        if gains is not None:
            weight = gains[:, count:] if self.weighted else torch.ones_like(mean)
            if self.excitation:
                weight = weight * self._driven_share(driven)
            total = total * self.keep + weight
            mean = mean + weight * (gains[:, :count].log() - mean) / total
            gains = mean.exp()
        if self.inner_size:
            action, inner = self.controller.step(observation, inner, gains)
        else:
            action = apply_controller(self.controller, observation, gains)
        if self.excitation:
            driven = self._drive(driven, action)
        return action, torch.cat([inner, mean, total, driven], dim=1)

    def _driven_share(self, driven: torch.Tensor) -> torch.Tensor:
        """``e / max(e)`` (module docstring), 1 before the plant has been driven at all, at least :data:`LEAST_SHARE`
        (a plant at rest for ever never leaves the average without a weight); one column."""
        level, most = driven[:, -2:-1], driven[:, -1:]
        share = torch.where(most > 0, level / most.clamp_min(1e-12), torch.ones_like(level))
        return share.clamp_min(LEAST_SHARE)

    def _drive(self, driven: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The excitation columns after the command ``action``: it, ``e`` updated with its change, and the max."""
        last, level, most = driven[:, : self.action_size], driven[:, -2:-1], driven[:, -1:]
        command = action.flatten(1).to(driven.dtype)
        change = (command - last).abs().sum(dim=1, keepdim=True)
        level = level + (change - level) / self.excitation
        return torch.cat([command, level, torch.maximum(most, level)], dim=1)

    def multipliers(self) -> torch.Tensor | None:
        """The multipliers the controller runs on now, per env and gain (``None`` before the first step)."""
        if self.state is None:
            return None
        count = len(self.gain_names)
        return self.state[:, self.inner_size : self.inner_size + count].exp()

    def reset(self, mask=None) -> None:
        super().reset(mask)
        if callable(getattr(self.controller, "reset", None)):  # whatever the controller keeps of its own
            self.controller.reset(mask)


def schedule_width(controller) -> int:
    """The columns of a gain schedule's action for ``controller``: one per gain, two under ``env.gain_average``."""
    return int(getattr(controller, "schedule_width", len(getattr(controller, "gain_names", ()))))


def averaged(controller, steps: int, *, weighted: bool = False, excitation: int = 0, action_size: int = 1):
    """``controller`` under ``env.gain_average=steps`` (:class:`AveragedGains`); itself where ``steps`` is 0."""
    if not steps:
        return controller
    return AveragedGains(controller, steps, weighted=weighted, excitation=excitation, action_size=action_size)


class ResidualVectorEnv(gym.vector.VectorWrapper):
    """The vector env with ``controller`` (named ``name``) inside, the policy's action entering it by ``law``.
    ``controller`` and ``law`` are kept as configured (what ``rlpilot export`` traces); each step calls them
    through a :class:`~rlpilot.controllers.CheckedController`, so a controller (or its ``gate_signal``) that
    raises, changes its shape or returns NaN or inf is one line naming it, never a NaN reward blamed on the env."""

    def __init__(self, env: gym.vector.VectorEnv, controller, law: ResidualLaw, name: str = "base"):
        super().__init__(env)
        space = env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise UserError("env.base_controller: residual RL needs continuous (Box) actions")
        if law.mode == "gains":  # one action per scheduled gain, in decades / residual_scale
            policy_box = gym.spaces.Box(-1.0, 1.0, (schedule_width(controller),), np.float32)
        else:  # a correction: the env's box centred at zero, so that action 0 is the controller
            policy_box = correction_box(space)
        if policy_box is not space:  # a symmetric box under add: the env's own spaces, as they were
            self.single_action_space = policy_box
            self.action_space = gym.vector.utils.batch_space(policy_box, env.num_envs)
        self.controller, self.law = controller, law
        self.checked = CheckedController(controller, name, space.shape)
        self._law = replace(law, signal=self.checked.gate_signal) if callable(law.signal) else law
        self.low, self.high = env.action_space.low, env.action_space.high
        self._observation: np.ndarray | None = None
        self.applied: np.ndarray | None = None
        """The command the env last received, ``[num_envs, *action shape]``: the controller's with the policy's
        action entered and clipped (``rlpilot check`` reads it to tell saturation from an action with no effect)."""

    def reset(self, *, seed=None, options=None):
        mask = None if options is None else options.get("reset_mask")  # read first: gymnasium's vector env pops it
        observation, info = self.env.reset(seed=seed, options=None if options is None else dict(options))
        self.checked.reset(mask)
        if mask is None or self._observation is None:
            self._observation = np.array(observation, copy=True)
        else:
            self._observation[mask] = observation[mask]
        return observation, info

    def step(self, actions):
        observation = torch.as_tensor(self._observation, dtype=torch.float32)
        action = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        with torch.no_grad():  # the base for the whole batch, from the observations the policy acted on
            gains, added = self._law.terms(action, observation)
            if not all_finite(added if gains is None else gains):  # the policy's, before the controller sees it
                raise UserError(self._policy_problem(added if gains is None else gains))
            base = self.checked(observation, gains)
            total = np.clip((base + added).numpy(), self.low, self.high)
        self.applied = total.astype(self.low.dtype)
        observation, reward, terminated, truncated, info = self.env.step(self.applied)
        self._observation = np.array(observation, copy=True)
        if self.law.penalty:  # straying from the base controller costs (env.residual_penalty)
            reward = reward - self.law.penalty * np.square(np.asarray(actions, dtype=np.float64)).sum(axis=-1)
        return observation, reward, terminated, truncated, info

    def _policy_problem(self, terms: torch.Tensor) -> str:
        """Non-finite gains or corrections come from the residual policy's actions, not the controller."""
        envs = (~torch.isfinite(terms.reshape(len(terms), -1))).any(-1).nonzero().view(-1).tolist()
        what = "gain multipliers" if self.law.mode == "gains" else "corrections"
        return (
            f"the residual policy's actions give non-finite {what} (NaN or inf) in env(s) {envs[:5]}, before "
            f"controller '{self.checked.name}' is called: the policy diverged (rlpilot doctor RUN says why); "
            "retrain, or use --checkpoint best"
        )
