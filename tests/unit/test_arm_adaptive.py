"""``adaptive-pd`` (rlpilot.envs.arm.adaptive): the tracking PD retuned every step from an online identification
of the arm. Played on the real MuJoCo arm: the estimates it forms are the disturbances the env was built with."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from rlpilot.common.errors import UserError  # noqa: E402
from rlpilot.envs.arm.adaptive import (  # noqa: E402
    ADAPTIVE_GAINS,
    ADAPTIVE_GAINS_2026_12_03,
    STATE_SIZE,
    TrackAdaptivePD,
)
from rlpilot.envs.arm.controllers import TrackPD  # noqa: E402
from rlpilot.envs.arm.env import ReacherTrackEnv  # noqa: E402
from rlpilot.envs.catalogue import base_controller  # noqa: E402


def identify(
    steps: int = 60, seed: int = 3, constants: dict | None = None, **disturbances
) -> tuple[TrackAdaptivePD, torch.Tensor, float]:
    """The controller's state after ``steps`` steps on an arm with ``disturbances``; the episode's RMSE so far."""
    env = ReacherTrackEnv(**disturbances)
    observation, _ = env.reset(seed=seed)
    controller = TrackAdaptivePD(**(constants or {}))
    state = torch.zeros(1, STATE_SIZE)
    for _ in range(steps):
        action, state = controller.step(torch.as_tensor(observation[None]), state)
        observation, _, _, _, info = env.step(action[0].numpy())
    env.close()
    return controller, state, info["track_rmse"]


@pytest.mark.parametrize(
    ("disturbances", "gain", "delay"),
    [
        ({}, 1.0, 0.0),
        ({"action_delay": 1}, 1.0, 1.0),
        ({"gain": 0.6}, 0.6, 0.0),
        ({"gain": 1.3, "action_delay": 1}, 1.3, 1.0),
    ],
)
def test_it_identifies_the_arms_delay_and_actuator_strength_from_what_it_measures(disturbances, gain, delay):
    controller, state, _ = identify(**disturbances)
    estimated_gain, estimated_delay, noise = controller.estimates(state)
    assert estimated_gain.item() == pytest.approx(gain, abs=0.05)
    assert estimated_delay.item() == pytest.approx(delay, abs=0.05)
    # no measurement noise: only the model's error in hard accelerations (with noise 0.01: about 0.014); the strong
    # delayed motor, whose kp is not lowered for its strength, accelerates hardest (about 0.007)
    assert noise.item() < (1e-2 if delay and gain > 1 else 4e-3)


def test_it_measures_the_noise_and_lowers_kp_for_it_and_for_a_delay():
    controller, quiet, _ = identify()
    _, noisy, _ = identify(obs_noise=0.01)
    _, delayed, _ = identify(action_delay=1)
    assert controller.estimates(noisy)[2].item() > 5 * controller.estimates(quiet)[2].item()
    kp = {
        name: controller.adapted_gains(state)[0].item()
        for name, state in (("quiet", quiet), ("noisy", noisy), ("delayed", delayed))
    }
    assert kp["quiet"] == pytest.approx(ADAPTIVE_GAINS["kp"], rel=0.1)
    assert kp["noisy"] < 0.6 * kp["quiet"] and kp["delayed"] < 0.6 * kp["quiet"]


def test_before_the_arm_has_moved_it_runs_its_starting_gain_and_leans_to_a_delay():
    controller = TrackAdaptivePD()
    state = torch.zeros(3, STATE_SIZE)  # an episode's start
    gain, delay, _ = controller.estimates(state)
    assert torch.equal(gain, torch.ones(3)) and torch.equal(delay, torch.ones(3))
    kp, kd = controller.adapted_gains(state)
    assert torch.allclose(kp, torch.full((3, 1), ADAPTIVE_GAINS["kp_start"]))
    assert torch.allclose(kd, torch.full((3, 1), ADAPTIVE_GAINS["kd_start"]))


def test_kp_and_kd_each_follow_the_identified_delay_and_strength_as_the_retuned_pds_do():
    """The oracle's shape (benchmarks/arm_gains.py's per-condition PDs): a weak motor gets more damping, not a
    proportionally higher kp (its commands saturate); a delayed arm a lower kp and a lower kd; a strong motor both
    gains divided by its strength."""
    controller, nominal, _ = identify()
    _, weak, _ = identify(gain=0.6)
    _, delayed, _ = identify(action_delay=1)
    (kp, kd), (kp_weak, kd_weak), (kp_delayed, kd_delayed) = (
        (g.item() for g in controller.adapted_gains(state)) for state in (nominal, weak, delayed)
    )
    assert kd_weak * 0.6 == pytest.approx(kd, rel=0.25)  # the effective damping kept for a 60% motor
    assert kp_weak < 1.2 * kp  # kp not scaled up by 1 / 0.6
    assert kp_delayed < 0.3 * kp and kd_delayed < 0.8 * kd
    _, strong, _ = identify(gain=1.6)
    kp_strong, kd_strong = (g.item() for g in controller.adapted_gains(strong))
    assert kp_strong * 1.6 == pytest.approx(kp, rel=0.25)  # a strong motor: the loop's gain kp x strength held
    assert kd_strong * 1.6 == pytest.approx(kd, rel=0.25)


def test_the_first_schedule_is_its_constants_kd_neither_following_the_delay_nor_starting_apart():
    """ADAPTIVE_GAINS_2026_12_03 (the tables of 2026-12-03) gives that schedule back: kd = kd / gain ** power."""
    first = TrackAdaptivePD(**ADAPTIVE_GAINS_2026_12_03)
    for disturbances in ({}, {"action_delay": 1}, {"gain": 0.6}):
        _, state, _ = identify(constants=ADAPTIVE_GAINS_2026_12_03, **disturbances)
        gain = first.estimates(state)[0]
        expected = ADAPTIVE_GAINS_2026_12_03["kd"] / gain.pow(ADAPTIVE_GAINS_2026_12_03["kd_gain_power"])
        assert first.adapted_gains(state)[1].item() == pytest.approx(expected.item(), rel=1e-5)
    kp, kd = first.adapted_gains(torch.zeros(1, STATE_SIZE))
    assert kp.item() == pytest.approx(3.0) and kd.item() == pytest.approx(0.18)


def test_a_weak_motor_tracks_within_the_bar_of_the_pd_retuned_for_it():
    """Issue 37's bar on the weak motor (gain 0.6), on eight tuning episodes: the retuned PD is kp 10, kd 0.5."""

    def rmse(controller, episodes: int = 8) -> float:
        errors = []
        for seed in range(episodes):
            env = ReacherTrackEnv(gain=0.6)
            observation, _ = env.reset(seed=seed)
            controller.reset(None)
            for _ in range(200):
                observation, _, _, _, info = env.step(controller(torch.as_tensor(observation[None]))[0].numpy())
            env.close()
            errors.append(info["track_rmse"])
        return float(np.mean(errors))

    oracle = rmse(TrackPD(kp=10.0, kd=0.5))
    assert rmse(TrackAdaptivePD()) <= 1.2 * oracle


def test_a_delayed_arm_tracks_as_well_as_the_pd_tuned_for_the_delay_and_the_nominal_arm_as_the_nominal_pd():
    """The point of it: one controller, each arm near its own tuning (one episode each, the same seed)."""
    from rlpilot.envs.arm.controllers import TrackPD

    def pd_rmse(kp: float, **disturbances) -> float:
        env = ReacherTrackEnv(**disturbances)
        observation, _ = env.reset(seed=3)
        for _ in range(200):
            observation, _, _, _, info = env.step(TrackPD(kp=kp)(torch.as_tensor(observation[None]))[0].numpy())
        env.close()
        return info["track_rmse"]

    _, _, adaptive_nominal = identify(steps=200)
    _, _, adaptive_delayed = identify(steps=200, action_delay=1)
    assert adaptive_nominal < 1.5 * pd_rmse(10.0)  # the nominal gains (oracle on the nominal arm)
    assert adaptive_delayed < 1.5 * pd_rmse(1.0, action_delay=1)  # the delay's oracle gains
    assert pd_rmse(10.0, action_delay=1) > 10 * adaptive_delayed  # where the nominal gains fail


def test_the_state_is_per_env_and_a_reset_clears_only_the_masked_envs():
    controller = TrackAdaptivePD()
    observation = torch.as_tensor(np.stack([ReacherTrackEnv().reset(seed=s)[0] for s in range(2)]))
    for _ in range(3):
        controller(observation)
    assert controller.state.shape == (2, STATE_SIZE) and controller.state.abs().sum(dim=1).min() > 0
    controller.reset(np.array([True, False]))
    assert controller.state[0].abs().sum() == 0 and controller.state[1].abs().sum() > 0


def test_it_is_a_built_in_for_the_tracking_arm_only():
    assert isinstance(base_controller("adaptive-pd", "rlpilot/ReacherTrack-v0"), TrackAdaptivePD)
    with pytest.raises(UserError, match="rlpilot/ReacherTrack-v0"):
        base_controller("adaptive-pd", "Reacher-v5")
    with pytest.raises(UserError, match="prior"):
        base_controller("adaptive-pd", "rlpilot/ReacherTrack-v0", {"prior": 0})
