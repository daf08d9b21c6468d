"""The arm's relay auto-tune (rlpilot.envs.arm.relay): the relay finds a limit cycle on the nominal arm, the
gains it derives are positive and sane, and a different arm (a step of delay, a payload) measures differently."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("mujoco")

from rlpilot.envs.arm.relay import RULES, autotune, gains_from, relay_experiment  # noqa: E402


@pytest.fixture(scope="module")
def nominal():
    return relay_experiment({})


def test_relay_on_the_nominal_arm_finds_a_limit_cycle(nominal):
    for joint in nominal.joints:
        assert joint.periods >= 3  # several full periods: a sustained oscillation, not a transient
        assert math.isfinite(joint.ku) and 0.05 < joint.ku < 5.0  # action per rad
        assert math.isfinite(joint.tu) and 0.2 < joint.tu < 3.0  # s; about 0.85 s (phase -180 near 7 rad/s)
        assert 0.02 < joint.amplitude < 1.5  # rad: beyond the hysteresis band, short of swinging around
    assert nominal.simulated_s == pytest.approx(12.0)


def test_a_step_of_delay_lowers_ku_and_lengthens_tu(nominal):
    delayed = relay_experiment({"action_delay": 1})
    assert delayed.ku < 0.8 * nominal.ku  # more phase lag: -180 degrees at a lower frequency, larger swing
    assert delayed.tu > 1.1 * nominal.tu


def test_a_payload_changes_the_measurement(nominal):
    loaded = relay_experiment({"payload": 3.0})
    change = [abs(a.ku - b.ku) / b.ku + abs(a.tu - b.tu) / b.tu for a, b in zip(loaded.joints, nominal.joints)]
    assert max(change) > 0.02


def test_rules_convert_to_the_controllers_convention():
    gains = gains_from(1.0, 0.8, "ziegler-nichols PID")  # Kp 0.6, Ti 0.4, Td 0.1
    assert gains == pytest.approx({"kp": 0.6, "kd": 0.06, "ki": 1.5})
    assert gains_from(1.0, 0.8, "ziegler-nichols PD")["ki"] == 0.0
    assert set(RULES) >= {"ziegler-nichols PID", "tyreus-luyben PID"}


def test_autotune_gains_are_positive_and_sane():
    tuned = autotune({})
    pd, pid = tuned["pd"], tuned["pid"]
    assert 0.1 < pd["kp"] < 30.0 and 0.01 < pd["kd"] < 1.0  # inside the grid's span (arm_gains.KP, KD)
    assert 0.0 < pid["ki"] < 20.0 and pid["kp"] == pd["kp"]
    # the second relay (derivative in the loop) allows more gain than the first's ZN rule
    assert pd["kp"] > 2 * tuned["rules"]["ziegler-nichols PID"]["kp"]
    assert tuned["second"]["derivative_time"] == pytest.approx(tuned["first"]["joints"][0]["tu"] / 8, rel=0.5)
