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

    def __call__(self, observation: torch.Tensor) -> torch.Tensor:
        q1 = torch.atan2(observation[:, 2], observation[:, 0])
        q2 = torch.atan2(observation[:, 3], observation[:, 1])
        q1_des, q2_des = inverse_kinematics(observation[:, 4], observation[:, 5], elbow_hint=q2)
        error = torch.stack([wrap_angle(q1_des - q1), q2_des - q2], dim=-1)
        torque = self.kp * error - self.kd * observation[:, 6:8]
        return torque.clamp(-1.0, 1.0)


def random_policy(vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """Uniform samples of the vector env's (batched) action space, seeded with the env."""

    def act(observation: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(vector_action_space.sample())

    return act


CONTROLLERS = ("pid", "random")


def build_controller(name: str, env_id: str, vector_action_space) -> Callable[[torch.Tensor], torch.Tensor]:
    """The named controller for ``env_id``; a clear error where it does not apply."""
    if name == "random":
        return random_policy(vector_action_space)
    if name == "pid":
        if env_id not in REACHER_IDS:
            raise UserError(
                f"--controller pid is the inverse-kinematics PD baseline for {', '.join(REACHER_IDS)}; "
                f"'{env_id}' has none (try --controller random)"
            )
        return ReacherPD()
    raise UserError(f"--controller {name}: choose one of {', '.join(CONTROLLERS)}")
