"""Classical baselines that ``rlpilot eval --controller NAME`` runs like a trained policy.

``pid``: the controller an RL policy for MuJoCo's two-link ``Reacher`` is meant to replace. Each step
it solves the arm's inverse kinematics for the target (read from the observation), then applies a
joint-space PD law towards those joint angles, clipped to the torque bounds::

    q_des = IK(target)                      # elbow branch nearest the current elbow angle
    torque = clip(kp * wrap(q_des - q) - kd * dq, -1, 1)

No integral term: the arm moves in the horizontal plane (gravity is along the joint axes) and the
joints' only resistance is viscous damping, so holding a pose needs no torque and a PD law has no
steady-state error to integrate away (an I term only adds overshoot here). Gains come from
``benchmarks/tune_pid.py`` (a grid on training seeds disjoint from the evaluation seeds; see
docs/robot-arm.md).

``random``: uniform actions from the action space, the floor every learned policy must clear.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlpilot.errors import UserError

# Reacher's geometry (gymnasium/envs/mujoco/assets/reacher.xml): link0 is 0.1 m; the fingertip sits
# 0.11 m along link1. The elbow (joint1) is limited to +-3.0 rad.
LINK_1 = 0.1
LINK_2 = 0.11
ELBOW_LIMIT = 3.0

# Tuned by benchmarks/tune_pid.py on seeds 0-99 (evaluation uses 12345+): the best mean return of the
# kp x kd grid. See docs/robot-arm.md for the grid, the scores and the reasoning.
PID_GAINS = {"kp": 0.3, "kd": 0.05}

REACHER_IDS = ("Reacher-v5",)


def forward_kinematics(q1: torch.Tensor, q2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fingertip (x, y) for shoulder angle ``q1`` and elbow angle ``q2`` (radians)."""
    x = LINK_1 * torch.cos(q1) + LINK_2 * torch.cos(q1 + q2)
    y = LINK_1 * torch.sin(q1) + LINK_2 * torch.sin(q1 + q2)
    return x, y


def inverse_kinematics(
    x: torch.Tensor, y: torch.Tensor, elbow_hint: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint angles (q1, q2) that put the fingertip at (x, y); analytic two-link solution.

    Two elbow branches reach the same point (q2 and -q2); the one nearer ``elbow_hint`` (the current
    elbow angle) is taken, so the arm does not swing its elbow through to the other side. Targets out
    of reach (closer than |l1 - l2| or farther than l1 + l2) get the nearest reachable pose.
    """
    r2 = x * x + y * y
    cos_q2 = ((r2 - LINK_1**2 - LINK_2**2) / (2 * LINK_1 * LINK_2)).clamp(-1.0, 1.0)
    q2 = torch.acos(cos_q2).clamp(max=ELBOW_LIMIT)
    if elbow_hint is not None:
        q2 = torch.where(elbow_hint < 0, -q2, q2)
    q1 = torch.atan2(y, x) - torch.atan2(LINK_2 * torch.sin(q2), LINK_1 + LINK_2 * torch.cos(q2))
    return wrap_angle(q1), q2


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Angle in [-pi, pi)."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


@dataclass
class ReacherPD:
    """Joint-space PD towards the IK solution; works on a batch of raw Reacher-v5 observations.

    Observation layout (gymnasium ``reacher_v5.py``): cos q1, cos q2, sin q1, sin q2, target x, target y,
    dq1, dq2, fingertip - target (x, y).
    """

    kp: float = PID_GAINS["kp"]
    """Torque (action units, gear 200) per radian of joint-angle error."""
    kd: float = PID_GAINS["kd"]
    """Torque per rad/s of joint velocity (damping injected on top of the joints' own)."""

    def __call__(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        q1 = torch.atan2(observation[:, 2], observation[:, 0])
        q2 = torch.atan2(observation[:, 3], observation[:, 1])
        q1_des, q2_des = inverse_kinematics(observation[:, 4], observation[:, 5], elbow_hint=q2)
        error = torch.stack([wrap_angle(q1_des - q1), q2_des - q2], dim=-1)
        kp, kd = scheduled_gains(self.kp, self.kd, gains)
        torque = kp * error - kd * observation[:, 6:8]
        return torque.clamp(-1.0, 1.0)


def scheduled_gains(kp: float, kd: float, gains: torch.Tensor | None):
    """``(kp, kd)`` times a gain-scheduling policy's multipliers (``gains[:, 0]`` for kp, ``gains[:, 1]`` for
    kd, one row per env; ``None``: the fixed gains)."""
    if gains is None:
        return kp, kd
    return kp * gains[:, 0:1], kd * gains[:, 1:2]


RESIDUAL_FORMULAS = {
    "add": "clip(base(observation) + residual_scale * policy(observation))",
    "gains": "the base controller with kp and kd times 10 ** (residual_scale * policy(observation))",
}
RESIDUAL_MODES = tuple(RESIDUAL_FORMULAS)
"""How a residual policy's action enters the base controller (``env.residual_mode``): ``add``: added to its
output, ``clip(base(obs) + scale * action)``; ``gains``: its kp and kd multiplied by ``10 ** (scale * action)``
(``scale`` in decades), a gain schedule. Both are the base controller exactly at action 0."""


def gain_multipliers(action: torch.Tensor, decades: float) -> torch.Tensor:
    """``10 ** (decades * action)``, per env and gain: exactly 1 where the action is 0."""
    return torch.exp(action * (decades * math.log(10.0)))


def residual_gate(observation: torch.Tensor, gate: float) -> torch.Tensor:
    """``env.residual_gate``: how much of the residual acts, from the error monitor (the observation's last
    float, ``obs_error_peak``): 0 while the recent worst tracking error is under ``gate`` metres, rising
    linearly to 1 at twice that. One column per env."""
    return torch.clamp(observation[:, -1:] / gate - 1.0, 0.0, 1.0)


def residual_terms(
    action: torch.Tensor, scale: float, mode: str, observation: torch.Tensor | None = None, gate: float = 0.0
) -> tuple[torch.Tensor | None, torch.Tensor | float]:
    """How a residual policy's ``action`` enters the base controller: ``(gains, added)``, the env receiving
    ``clip(base(observation, gains) + added)``. ``add``: no gains, ``scale * action`` added; ``gains``: the
    multipliers of kp and kd (:func:`gain_multipliers`), nothing added. ``gate`` > 0: the action times
    :func:`residual_gate` of the raw ``observation`` first (below the gate: the base controller exactly). One
    place for both users: the residual vector env (training, evaluation) and the exported artifact."""
    if gate > 0:
        action = action * residual_gate(observation, gate)
    if mode == "gains":
        return gain_multipliers(action, scale), 0.0
    return None, scale * action


def joint_velocity(q1: torch.Tensor, q2: torch.Tensor, velocity: torch.Tensor, damping: float = 0.01) -> torch.Tensor:
    """Joint velocities that move the fingertip at ``velocity`` (m/s) from pose (q1, q2): the damped
    least-squares inverse of the arm's Jacobian, ``J^T (J J^T + damping^2 I)^-1 v`` (finite at full reach)."""
    s1, c1 = torch.sin(q1), torch.cos(q1)
    s12, c12 = torch.sin(q1 + q2), torch.cos(q1 + q2)
    jacobian = torch.stack(
        [
            torch.stack([-LINK_1 * s1 - LINK_2 * s12, -LINK_2 * s12], dim=-1),
            torch.stack([LINK_1 * c1 + LINK_2 * c12, LINK_2 * c12], dim=-1),
        ],
        dim=-2,
    )
    inner = jacobian @ jacobian.transpose(-1, -2)
    a, b = inner[..., 0, 0] + damping**2, inner[..., 0, 1]
    c, d = inner[..., 1, 0], inner[..., 1, 1] + damping**2
    det = a * d - b * c  # > 0: J J^T is positive semi-definite, plus damping^2 on the diagonal
    vx, vy = velocity[..., 0], velocity[..., 1]
    solved = torch.stack([(d * vx - b * vy) / det, (a * vy - c * vx) / det], dim=-1)  # 2x2 inverse, exportable
    return (jacobian.transpose(-1, -2) @ solved.unsqueeze(-1)).squeeze(-1)


# Tracking observation (rlpilot/ReacherTrack-v0): cos q1, cos q2, sin q1, sin q2, dq1, dq2, reference x, y,
# reference vx, vy, fingertip - reference (x, y). Gains: benchmarks/arm_gains.py's grid on the nominal arm
# (kp 0.3-30 x kd 0.05-1, then ki 0-20), seeds 0-31 (evaluation: 12345+), best mean return; see
# docs/robot-arm.md and benchmarks/results/arm_gains-2026-11-30.json.
TRACK_GAINS = {"kp": 10.0, "kd": 0.2}
TRACK_PID_GAINS = {**TRACK_GAINS, "ki": 1.0}


@dataclass
class TrackPD:
    """Joint-space PD with velocity feed-forward: towards IK(reference), at the joint velocity that moves the
    fingertip with the reference (``joint_velocity``); batched, stateless."""

    kp: float = TRACK_GAINS["kp"]
    """Action per radian of joint-angle error (gear 200: 1 action unit is 200 N·m)."""
    kd: float = TRACK_GAINS["kd"]
    """Action per rad/s of joint-velocity error (desired from the reference's velocity)."""

    def errors(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q1 = torch.atan2(observation[:, 2], observation[:, 0])
        q2 = torch.atan2(observation[:, 3], observation[:, 1])
        q1_des, q2_des = inverse_kinematics(observation[:, 6], observation[:, 7], elbow_hint=q2)
        dq_des = joint_velocity(q1_des, q2_des, observation[:, 8:10])
        angle = torch.stack([wrap_angle(q1_des - q1), q2_des - q2], dim=-1)
        return angle, dq_des - observation[:, 4:6]

    def __call__(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        angle, rate = self.errors(observation)
        kp, kd = scheduled_gains(self.kp, self.kd, gains)
        return (kp * angle + kd * rate).clamp(-1.0, 1.0)


@dataclass
class TrackPID(TrackPD):
    """:class:`TrackPD` plus an integral of the joint-angle error, with anti-windup: the integral stops
    growing while the output is saturated in the error's direction (conditional integration) and is held
    within ``integral_limit``. Stateful per env: ``reset(mask)`` clears the envs that start an episode."""

    ki: float = TRACK_PID_GAINS["ki"]
    """Action per radian-second of accumulated joint-angle error."""
    integral_limit: float = 1.0
    """|ki * integral| never exceeds this (action units)."""
    dt: float = 0.02
    integral: torch.Tensor | None = None

    def reset(self, mask: torch.Tensor | np.ndarray | None = None) -> None:
        if self.integral is None or mask is None:
            self.integral = None
            return
        mask = torch.as_tensor(np.asarray(mask), dtype=torch.bool, device=self.integral.device)
        self.integral[mask] = 0.0

    state_size = 2
    """Numbers of state per env: the integral of each joint's angle error."""

    def step(
        self, observation: torch.Tensor, integral: torch.Tensor, gains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step as a pure function: ``(action, next integral)`` from the observation and the integral so
        far (zeros at the start of an episode). What :meth:`__call__` does, and what an exported artifact
        runs with the integral as an input and an output."""
        angle, rate = self.errors(observation)
        kp, kd = scheduled_gains(self.kp, self.kd, gains)  # a gain schedule scales kp and kd; ki stays
        unsaturated = kp * angle + kd * rate + self.ki * integral
        winding = (unsaturated.abs() >= 1.0) & (torch.sign(unsaturated) == torch.sign(angle))
        integral = torch.where(winding, integral, integral + angle * self.dt)
        if self.ki > 0:
            limit = self.integral_limit / self.ki
            integral = integral.clamp(-limit, limit)
        return (kp * angle + kd * rate + self.ki * integral).clamp(-1.0, 1.0), integral

    def __call__(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        if self.integral is None or self.integral.shape != (observation.shape[0], self.state_size):
            self.integral = observation.new_zeros(observation.shape[0], self.state_size)
        action, self.integral = self.step(observation, self.integral, gains)
        return action


class ControllerModule(torch.nn.Module):
    """A base controller as a module (what ``rlpilot export`` traces into a residual run's artifact).

    Stateless controllers (PD): ``forward(observation) -> action``. Stateful ones (the PID's integral):
    ``forward(observation, state) -> (action, next state)``, the controller's :meth:`step` as a pure function,
    so the artifact carries no hidden state: the caller feeds each output state back in and starts every
    episode from zeros (``state_size`` numbers per env). ``gains`` (optional, last): a gain schedule's kp and kd
    multipliers per env (:func:`gain_multipliers`)."""

    def __init__(self, controller):
        super().__init__()
        self.controller = controller
        self.state_size = int(getattr(controller, "state_size", 0))  # a stateful controller has step()

    @property
    def stateful(self) -> bool:
        return self.state_size > 0

    def forward(self, observation: torch.Tensor, state: torch.Tensor | None = None, gains: torch.Tensor | None = None):
        if not self.stateful:
            return self.controller(observation, gains)
        return self.controller.step(observation, state, gains)


def random_policy(vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """Uniform samples of the vector env's (batched) action space, seeded with the env."""

    def act(observation: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(vector_action_space.sample())

    return act


CONTROLLERS = ("pd", "pid", "random")
TRACK_IDS = ("rlpilot/ReacherTrack-v0",)


def base_controller(name: str, env_id: str):
    """The classical controller ``name`` (``pd`` or ``pid``) for the arm env ``env_id``, on raw observations;
    a clear error where it does not apply."""
    if env_id in TRACK_IDS:
        return TrackPD() if name == "pd" else TrackPID(**TRACK_PID_GAINS)
    if env_id in REACHER_IDS:
        return ReacherPD()  # reaching a fixed target: a PD has no steady-state error to integrate (see above)
    raise UserError(
        f"--controller {name} / env.base_controller={name} is the inverse-kinematics controller of the arm envs "
        f"({', '.join((*REACHER_IDS, *TRACK_IDS))}); '{env_id}' has none (try --controller random)"
    )


def build_controller(name: str, env_id: str, vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """The named controller for ``env_id``; a clear error where it does not apply."""
    if name == "random":
        return random_policy(vector_action_space)
    if name in ("pd", "pid"):
        return base_controller(name, env_id)
    raise UserError(f"--controller {name}: choose one of {', '.join(CONTROLLERS)}")
