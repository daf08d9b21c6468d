"""The Reacher baseline: inverse kinematics by hand-checkable geometry, the PD law in the real MuJoCo env,
and the effort / smoothness measures every continuous-action evaluation reports."""

import math

import numpy as np
import pytest
import torch

from rlpilot.config import EnvConfig
from rlpilot.control.evaluate import evaluate
from rlpilot.envs import make_env
from rlpilot.envs.arm.controllers import ReacherPD, forward_kinematics, inverse_kinematics, wrap_angle
from rlpilot.envs.arm.geometry import LINK_1, LINK_2


def test_inverse_kinematics_recovers_the_joint_angles():
    q1, q2 = torch.meshgrid(
        torch.linspace(-3.1, 3.1, 25, dtype=torch.float64),
        torch.cat([torch.linspace(-2.9, -0.1, 8), torch.linspace(0.1, 2.9, 8)]).double(),
        indexing="ij",
    )
    x, y = forward_kinematics(q1, q2)
    q1_ik, q2_ik = inverse_kinematics(x, y, elbow_hint=q2)  # the hint picks the elbow branch
    assert torch.allclose(wrap_angle(q1_ik - q1), torch.zeros_like(q1), atol=1e-6)
    assert torch.allclose(q2_ik, q2, atol=1e-6)


def test_inverse_kinematics_by_hand():
    # straight arm along +y: q1 = pi/2, q2 = 0 (float64: at full stretch acos amplifies float32 rounding)
    q1, q2 = inverse_kinematics(
        torch.tensor(0.0, dtype=torch.float64), torch.tensor(LINK_1 + LINK_2, dtype=torch.float64)
    )
    assert math.isclose(float(q1), math.pi / 2, abs_tol=1e-6) and abs(float(q2)) < 1e-6
    # the other elbow branch reaches the same point
    x, y = torch.tensor(0.12), torch.tensor(-0.05)
    up, down = inverse_kinematics(x, y, torch.tensor(1.0)), inverse_kinematics(x, y, torch.tensor(-1.0))
    assert float(up[1]) > 0 > float(down[1])
    for q in (up, down):
        fx, fy = forward_kinematics(*q)
        assert math.isclose(float(fx), 0.12, abs_tol=1e-6) and math.isclose(float(fy), -0.05, abs_tol=1e-6)


def test_pd_controller_reaches_the_target_in_the_real_env():
    pytest.importorskip("mujoco")
    env = make_env(EnvConfig(id="Reacher-v5", num_envs=10), seed=0)
    try:
        pd = evaluate(env, ReacherPD(), episodes=10, seed=500)
        still = evaluate(env, lambda obs: torch.zeros(obs.shape[0], 2), episodes=10, seed=500)
    finally:
        env.close()
    assert pd.final["final_distance"].max() < 0.01  # within 1 cm after 50 steps (1 s), every episode
    assert still.final["final_distance"].mean() > 0.05  # the targets are not where the arm starts
    assert pd.mean > still.mean + 2


def test_effort_and_smoothness_of_a_constant_action():
    env = make_env(EnvConfig(id="Pendulum-v1", num_envs=3), seed=0)
    try:
        constant = evaluate(env, lambda obs: torch.full((obs.shape[0], 1), 0.5), episodes=3, seed=0)
        flipping = {"sign": 1.0}

        def alternate(obs):
            flipping["sign"] *= -1
            return torch.full((obs.shape[0], 1), flipping["sign"])

        alternating = evaluate(env, alternate, episodes=3, seed=0)
    finally:
        env.close()
    np.testing.assert_allclose(constant.action_effort, 0.25)
    np.testing.assert_allclose(constant.action_smoothness, 0.0)
    np.testing.assert_allclose(alternating.action_smoothness, 4.0)  # (1 - (-1))^2 every step
    assert "eval/action_effort" in constant.metrics() and constant.final == {}


def test_discrete_actions_have_no_effort_measure():
    env = make_env(EnvConfig(id="CartPole-v1", num_envs=2), seed=0)
    try:
        result = evaluate(env, lambda obs: torch.zeros(obs.shape[0], dtype=torch.int64), episodes=2, seed=0)
    finally:
        env.close()
    assert result.action_effort is None and "eval/action_effort" not in result.metrics()
