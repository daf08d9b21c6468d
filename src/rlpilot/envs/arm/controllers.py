"""The arm's classical controllers (``env.base_controller`` / ``--controller`` ``pd``, ``pid`` and ``adaptive-pd``: the
last in :mod:`rlpilot.envs.arm.adaptive`; which class a name is: :mod:`rlpilot.envs.catalogue`), instances of
the controller protocol (:class:`rlpilot.controllers.Controller`): batched torch, exportable with a policy.
Imports torch, never MuJoCo: building a controller does not load the simulator.

``ReacherPD`` (``Reacher-v5``): the controller an RL policy for MuJoCo's two-link ``Reacher`` is meant to
replace. Each step it solves the arm's inverse kinematics for the target (read from the observation), then
applies a joint-space PD law towards those joint angles, clipped to the torque bounds::

    q_des = IK(target)                      # elbow branch nearest the current elbow angle
    torque = clip(kp * wrap(q_des - q) - kd * dq, -1, 1)

No integral term: the arm moves in the horizontal plane (gravity is along the joint axes) and the
joints' only resistance is viscous damping, so holding a pose needs no torque and a PD law has no
steady-state error to integrate away (an I term only adds overshoot here). Gains come from
``benchmarks/tune_pid.py`` (a grid on training seeds disjoint from the evaluation seeds; see
docs/robot-arm.md).

``TrackPD`` / ``TrackPID`` (``rlpilot/ReacherTrack-v0``, :mod:`rlpilot.envs.arm.env`): IK of the moving
reference plus velocity feed-forward through the arm's Jacobian, and (PID) an anti-windup integral.
``TrackPDFF`` (``pd-ff``): the PD plus acceleration feed-forward, a control law beyond gains (docs/adapt.md).
"""

from __future__ import annotations

import math

import torch

from rlpilot.controllers import Controller
from rlpilot.envs.arm.geometry import ELBOW_LIMIT, LINK_1, LINK_2

# Tuned by benchmarks/tune_pid.py on seeds 0-99 (evaluation uses 12345+): the best mean return of the
# kp x kd grid. See docs/robot-arm.md for the grid, the scores and the reasoning.
PID_GAINS = {"kp": 0.3, "kd": 0.05}

REACHER_IDS = ("Reacher-v5",)
TRACK_IDS = ("rlpilot/ReacherTrack-v0",)
ARM_IDS = (*REACHER_IDS, *TRACK_IDS)
"""The envs ``pd`` and ``pid`` are built for (``adaptive-pd``: the tracking arm's only)."""

ARM_ERROR_MONITOR = -1
"""The error monitor's column in a ``rlpilot/ReacherTrack-v0`` observation: the last float, with
``env.kwargs.obs_error_peak``. What ``env.residual_gate`` reads on the arm where ``env.residual_gate_index`` is
unset and the controller has no ``gate_signal``: the arm's controllers name it as their ``gate_index``."""


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


def scheduled_gains(gains: torch.Tensor | None, *values: float):
    """The controller's gains ``values`` (in the order of its ``gain_names``) times a gain-scheduling policy's
    multipliers (``gains[:, i]`` for the i-th, one row per env; ``None``: the fixed gains)."""
    if gains is None:
        return values
    return tuple(value * gains[:, index : index + 1] for index, value in enumerate(values))


class ReacherPD(Controller):
    """Joint-space PD towards the IK solution; works on a batch of raw Reacher-v5 observations.

    Observation layout (gymnasium ``reacher_v5.py``): cos q1, cos q2, sin q1, sin q2, target x, target y,
    dq1, dq2, fingertip - target (x, y).
    """

    gain_names = ("kp", "kd")
    gate_index = ARM_ERROR_MONITOR
    """The observation entry ``env.residual_gate`` reads (:func:`rlpilot.envs.residual.gate_signal`)."""

    def __init__(self, kp: float = PID_GAINS["kp"], kd: float = PID_GAINS["kd"]):
        super().__init__()
        self.kp = kp
        """Torque (action units, gear 200) per radian of joint-angle error."""
        self.kd = kd
        """Torque per rad/s of joint velocity (damping injected on top of the joints' own)."""

    def forward(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        q1 = torch.atan2(observation[:, 2], observation[:, 0])
        q2 = torch.atan2(observation[:, 3], observation[:, 1])
        q1_des, q2_des = inverse_kinematics(observation[:, 4], observation[:, 5], elbow_hint=q2)
        error = torch.stack([wrap_angle(q1_des - q1), q2_des - q2], dim=-1)
        kp, kd = scheduled_gains(gains, self.kp, self.kd)
        torque = kp * error - kd * observation[:, 6:8]
        return torque.clamp(-1.0, 1.0)


# Tracking observation (rlpilot/ReacherTrack-v0): cos q1, cos q2, sin q1, sin q2, dq1, dq2, reference x, y,
# reference vx, vy, fingertip - reference (x, y). Gains: benchmarks/arm_gains.py's grid on the nominal arm
# (kp 0.3-30 x kd 0.05-1, then ki 0-20), seeds 0-31 (evaluation: 12345+), best mean return; see
# docs/robot-arm.md and benchmarks/results/arm_gains-2026-11-30.json.
TRACK_GAINS = {"kp": 10.0, "kd": 0.2}
TRACK_PID_GAINS = {**TRACK_GAINS, "ki": 1.0}
TRACK_FF_GAINS = {**TRACK_GAINS, "ka": 0.005}
"""``ka`` 0.005: the arm's inertia at a joint is mostly its motor's armature (1 kg·m², Reacher-v5's model), and one
action unit is 200 N·m (gear 200): 1/200 action per rad/s² (not searched; ``--param ka=...`` searches it)."""


class TrackPD(Controller):
    """Joint-space PD with velocity feed-forward: towards IK(reference), at the joint velocity that moves the
    fingertip with the reference (``joint_velocity``); batched, stateless."""

    gate_index = ARM_ERROR_MONITOR
    """The observation entry ``env.residual_gate`` reads: the error monitor (:data:`ARM_ERROR_MONITOR`)."""
    gain_names = ("kp", "kd")

    def __init__(self, kp: float = TRACK_GAINS["kp"], kd: float = TRACK_GAINS["kd"]):
        super().__init__()
        self.kp = kp
        """Action per radian of joint-angle error (gear 200: 1 action unit is 200 N·m)."""
        self.kd = kd
        """Action per rad/s of joint-velocity error (desired from the reference's velocity)."""

    def errors(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle, dq_des = self.desired(observation)
        return angle, dq_des - observation[:, 4:6]

    @staticmethod
    def desired(observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The joint-angle error towards IK(reference) and the joint velocity that moves the fingertip with it."""
        q1 = torch.atan2(observation[:, 2], observation[:, 0])
        q2 = torch.atan2(observation[:, 3], observation[:, 1])
        q1_des, q2_des = inverse_kinematics(observation[:, 6], observation[:, 7], elbow_hint=q2)
        dq_des = joint_velocity(q1_des, q2_des, observation[:, 8:10])
        return torch.stack([wrap_angle(q1_des - q1), q2_des - q2], dim=-1), dq_des

    def forward(self, observation: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
        angle, rate = self.errors(observation)
        kp, kd = scheduled_gains(gains, self.kp, self.kd)
        return (kp * angle + kd * rate).clamp(-1.0, 1.0)


class TrackPID(TrackPD):
    """:class:`TrackPD` plus an integral of the joint-angle error, with anti-windup: the integral stops
    growing while the output is saturated in the error's direction (conditional integration) and is held
    within ``integral_limit``. Stateful per env (the protocol's ``state``, here ``integral``): ``reset(mask)``
    clears the envs that start an episode."""

    state_size = 2
    """Numbers of state per env: the integral of each joint's angle error."""

    def __init__(
        self,
        kp: float = TRACK_PID_GAINS["kp"],
        kd: float = TRACK_PID_GAINS["kd"],
        ki: float = TRACK_PID_GAINS["ki"],
        integral_limit: float = 1.0,
        dt: float = 0.02,
    ):
        super().__init__(kp, kd)
        self.ki = ki
        """Action per radian-second of accumulated joint-angle error."""
        self.integral_limit = integral_limit
        """|ki * integral| never exceeds this (action units)."""
        self.dt = dt

    @property
    def integral(self) -> torch.Tensor | None:
        return self.state

    def step(
        self, observation: torch.Tensor, integral: torch.Tensor, gains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step as a pure function: ``(action, next integral)`` from the observation and the integral so
        far (zeros at the start of an episode). What calling it does, and what an exported artifact runs with
        the integral as an input and an output."""
        angle, rate = self.errors(observation)
        kp, kd = scheduled_gains(gains, self.kp, self.kd)  # a gain schedule scales kp and kd; ki stays
        unsaturated = kp * angle + kd * rate + self.ki * integral
        winding = (unsaturated.abs() >= 1.0) & (torch.sign(unsaturated) == torch.sign(angle))
        integral = torch.where(winding, integral, integral + angle * self.dt)
        if self.ki > 0:
            limit = self.integral_limit / self.ki
            integral = integral.clamp(-limit, limit)
        return (kp * angle + kd * rate + self.ki * integral).clamp(-1.0, 1.0), integral

    forward = Controller.forward


class TrackPDFF(TrackPD):
    """:class:`TrackPD` plus acceleration feed-forward: ``ka`` times the desired joint acceleration, the change of
    the desired joint velocity over the last step (``dt``), so the motors supply the torque the reference's
    acceleration takes instead of the PD waiting for the error it leaves. Stateful (the protocol's ``state``):
    the desired joint velocities of the step before and a 1 once there was one (zeros at an episode's start: its
    first step is the PD's; a kick then, from the arm at rest to the reference's speed, tracked worse on the
    delayed arm). A gain schedule scales kp, kd and ka."""

    gain_names = ("kp", "kd", "ka")
    state_size = 3
    """Numbers of state per env: the desired velocity of each joint at the step before, then 1 after a step."""

    def __init__(
        self,
        kp: float = TRACK_FF_GAINS["kp"],
        kd: float = TRACK_FF_GAINS["kd"],
        ka: float = TRACK_FF_GAINS["ka"],
        dt: float = 0.02,
    ):
        super().__init__(kp, kd)
        self.ka = ka
        """Action per rad/s² of desired joint acceleration."""
        self.dt = dt

    def step(
        self, observation: torch.Tensor, state: torch.Tensor, gains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step as a pure function: ``(action, next state)`` from the observation and the state (zeros at the
        start of an episode)."""
        angle, dq_des = self.desired(observation)
        kp, kd, ka = scheduled_gains(gains, self.kp, self.kd, self.ka)
        acceleration = state[:, 2:3] * (dq_des - state[:, :2]) / self.dt
        action = kp * angle + kd * (dq_des - observation[:, 4:6]) + ka * acceleration
        return action.clamp(-1.0, 1.0), torch.cat([dq_des, torch.ones_like(dq_des[:, :1])], dim=-1)

    forward = Controller.forward
