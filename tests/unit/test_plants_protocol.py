"""The example plants follow the conditions protocol (rlpilot.conditions): examples/heated_tank and
examples/dc_motor declare their conditions and measures, run under a condition given at reset and report it; the
tank's SIMC settings match a hand computation and its PID, so tuned, holds the nominal tank."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpilot.conditions import UnderCondition, declared

pytestmark = pytest.mark.usefixtures("examples_on_path")


def plants():
    from dc_motor.plant import NOMINAL as AXIS_NOMINAL
    from dc_motor.plant import ConveyorAxis, RandomizedConveyorAxis
    from heated_tank.plant import NOMINAL as TANK_NOMINAL
    from heated_tank.plant import HeatedTank, RandomizedHeatedTank

    return {
        "dc_motor.plant:ConveyorAxis": (ConveyorAxis, RandomizedConveyorAxis, AXIS_NOMINAL),
        "heated_tank.plant:HeatedTank": (HeatedTank, RandomizedHeatedTank, TANK_NOMINAL),
    }


PLANTS = ["dc_motor.plant:ConveyorAxis", "heated_tank.plant:HeatedTank"]


def play(env, seed, condition=None, steps=None, act=None):
    """One episode (or its first ``steps``): the reset's info and every step's (observation, reward, info)."""
    observation, reset_info = env.reset(seed=seed, options={"condition": condition} if condition else None)
    rng = np.random.default_rng(seed)
    trace, done = [], False
    while not done and (steps is None or len(trace) < steps):
        low, high = env.action_space.low, env.action_space.high
        action = act(observation) if act else rng.uniform(low, high).astype(np.float32)
        observation, reward, terminated, truncated, info = env.step(action)
        trace.append((observation, reward, info))
        done = terminated or truncated
    return reset_info, trace


@pytest.mark.parametrize("env_id", PLANTS)
def test_the_declaration_is_read_and_its_named_conditions_lie_in_the_declared_ranges(env_id):
    fixed, _, nominal = plants()[env_id]
    found = declared(fixed(), env_id)
    assert found is not None and set(found.ranges) == set(nominal)
    assert {"tracking_error", "effort"} <= set(found.measures)
    assert found.named["nominal"] == {name: float(value) for name, value in nominal.items()}
    for case, values in found.named.items():
        assert set(values) <= set(found.ranges), case
        assert found.outside(values) == [], case
    integer = {"dc_motor.plant:ConveyorAxis": ["delay"], "heated_tank.plant:HeatedTank": ["dead_time"]}[env_id]
    assert [name for name in found.ranges if found.integer(name)] == integer


@pytest.mark.parametrize("env_id", PLANTS)
def test_an_episode_runs_under_the_condition_given_at_reset_and_reports_it(env_id):
    fixed, randomized, nominal = plants()[env_id]
    named = fixed.named_conditions
    for case, values in named.items():
        info, _ = play(fixed(), 0, values, steps=1)
        assert info["condition"] == {**nominal, **values}, case
    # on the randomised plant the named values hold and the rest is drawn within the declared ranges
    case = next(name for name in named if name != "nominal")
    info, _ = play(randomized(), 3, named[case], steps=1)
    assert {k: info["condition"][k] for k in named[case]} == named[case]
    for name, value in info["condition"].items():
        low, high = fixed.condition_ranges[name]
        assert low <= value <= high, name
    # a condition changes the plant, not the episode drawn: the same reference / set-points under every one
    plain = play(fixed(), 5, steps=30)[1]
    under = play(UnderCondition(fixed(), named[case]), 5, steps=30)[1]
    reference = 2
    assert [o[reference] for o, _, _ in plain] == [o[reference] for o, _, _ in under]
    assert [o[0] for o, _, _ in plain] != [o[0] for o, _, _ in under]
    with pytest.raises(ValueError, match="no condition 'mass'"):
        fixed().reset(seed=0, options={"condition": {"mass": 1.0}})


@pytest.mark.parametrize("env_id", PLANTS)
def test_the_randomised_plant_draws_every_condition_within_its_range(env_id):
    fixed, randomized, _ = plants()[env_id]
    env = randomized()
    drawn = [env.reset(seed=seed)[1]["condition"] for seed in range(40)]
    for name, (low, high) in fixed.condition_ranges.items():
        values = [condition[name] for condition in drawn]
        assert all(low <= value <= high for value in values), name
        assert len(set(values)) > 2, name  # drawn, not fixed
        if isinstance(low, int):
            assert all(isinstance(value, int) for value in values), name


@pytest.mark.parametrize("env_id", PLANTS)
def test_every_step_reports_the_measures_and_the_same_seed_plays_the_same_episode(env_id):
    fixed, randomized, _ = plants()[env_id]
    env = randomized()
    info, trace = play(env, 7)
    for _, _, step_info in trace:
        assert set(fixed.measures) <= set(step_info)
        assert all(np.isfinite(step_info[name]) for name in fixed.measures)
    again_info, again = play(randomized(), 7)
    assert again_info == info
    assert all(np.array_equal(a[0], b[0]) and a[1] == b[1] and a[2] == b[2] for a, b in zip(trace, again))
    assert play(randomized(), 8)[0] != info


def test_the_axis_measures_are_its_rmse_and_the_commands_the_motor_received():
    from dc_motor.plant import ConveyorAxis

    _, trace = play(ConveyorAxis(delay=1), 0, steps=20, act=lambda observation: np.array([2.0], np.float32))
    errors = np.array([observation[0] for observation, _, _ in trace], dtype=np.float64)
    last = trace[-1][2]
    assert last["tracking_error"] == last["track_rmse"] == pytest.approx(np.sqrt(np.mean(errors**2)), rel=1e-5)
    assert last["effort"] == pytest.approx(19 / 20)  # clipped to 1, the first period's command still on its way


def test_the_tank_heater_is_the_box_0_1_and_its_measures_are_what_it_applied():
    from heated_tank.plant import HeatedTank

    env = HeatedTank()
    assert env.action_space.low.tolist() == [0.0] and env.action_space.high.tolist() == [1.0]
    commands = iter([1.5, -0.5, 0.5, 0.5])  # clipped to 1, 0, 0.5, 0.5
    _, trace = play(env, 0, steps=4, act=lambda observation: np.array([next(commands)], np.float32))
    info = trace[-1][2]
    assert [i["heater"] for _, _, i in trace] == [1.0, 0.0, 0.5, 0.5]
    assert info["effort"] == pytest.approx((1 + 0 + 0.25 + 0.25) / 4)
    assert info["moves"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert trace[-1][0][3] == 0.5  # the observation shows the power last applied


def test_simc_matches_a_hand_computation():
    from heated_tank.pid import NOMINAL_MODEL, TankPID, simc
    from heated_tank.plant import NOMINAL

    assert NOMINAL_MODEL == {"K": NOMINAL["gain"], "tau": NOMINAL["time_constant"], "theta": NOMINAL["dead_time"]}
    # Kc = tau / (K (tau_c + theta)), tau_I = min(tau, 4 (tau_c + theta)), tau_c = theta
    assert simc(40, 60, 4) == pytest.approx({"kp": 60 / (40 * 8), "ki": 60 / (40 * 8) / 32, "kd": 0.0})
    assert simc(40, 20, 12) == pytest.approx({"kp": 20 / (40 * 24), "ki": 20 / (40 * 24) / 20, "kd": 0.0})
    assert simc(40, 60, 4, tau_c=8) == pytest.approx({"kp": 60 / (40 * 12), "ki": 60 / (40 * 12) / 48, "kd": 0.0})
    assert simc(40, 60, 0) == pytest.approx({"kp": 60 / (40 * 6), "ki": 60 / (40 * 6) / 24, "kd": 0.0})  # tau/10
    kc = 0.1875 * (1 + 10 / 32)  # tau2 = 10: series (0.1875, 32, 10) -> parallel (kc, 42, 320 / 42)
    assert simc(40, 60, 4, tau2=10) == pytest.approx({"kp": kc, "ki": kc / 42, "kd": kc * 320 / 42})
    with pytest.raises(ValueError):
        simc(40, 60, 0, tau_c=0)
    pid = TankPID()
    assert (pid.kp, pid.ki, pid.kd) == pytest.approx((0.1875, 0.1875 / 32, 0.0))


def test_the_tank_pid_fits_the_plant_and_its_integral_does_not_wind_up_while_saturated():
    from heated_tank.pid import TankPID
    from heated_tank.plant import HeatedTank

    from rlpilot.controllers import check_controller

    env = HeatedTank()
    pid = TankPID(kd=0.5)
    check_controller(pid, "heated_tank.pid:TankPID", env.observation_space, env.action_space, gains=True)

    def hold(error, measured, steps, state):
        observation = torch.tensor([[error, measured, measured + error, 0.0]])
        actions = []
        for _ in range(steps):
            action, state = pid.step(observation, state)
            actions.append(float(action))
        return actions, state

    state = torch.zeros(1, pid.state_size)
    actions, state = hold(2.0, 12.0, 10, state)  # integrate a little, unsaturated (the measurement held:
    assert 0 < actions[-1] < 1  # no derivative; the set-point moves instead)
    integral = float(state[0, 0])
    assert integral == pytest.approx(pid.ki * 20.0)  # the integral term: ki times the integrated error
    actions, state = hold(30.0, 12.0, 200, state)  # far below the set-point: full power, the integral stands
    assert set(actions) == {1.0} and float(state[0, 0]) == integral
    actions, state = hold(-30.0, 12.0, 200, state)  # far above: the heater off (it cannot cool), it stands
    assert set(actions) == {0.0} and float(state[0, 0]) == integral
    actions, _ = hold(1.0, 12.0, 1, state)  # the error small again: out of saturation at once, as before
    assert actions[0] == pytest.approx(pid.kp * 1.0 + integral + pid.ki * 1.0)


def test_a_changing_ki_scales_what_is_integrated_from_then_on_not_what_is_held():
    """Bumpless: the integral term is integrated after ki, so doubling ki leaves the held power where it was (the
    next step adds twice the increment); ``ki * integral(e)`` would have doubled it at once."""
    from heated_tank.pid import TankPID

    pid = TankPID(kd=0.0)
    observation = torch.tensor([[2.0, 12.0, 14.0, 0.0]])
    state = torch.zeros(1, pid.state_size)
    for _ in range(10):
        _, state = pid.step(observation, state)
    held = float(state[0, 0])
    _, doubled = pid.step(observation, state, torch.tensor([[1.0, 2.0, 1.0]]))
    assert float(doubled[0, 0]) == pytest.approx(held + 2 * pid.ki * 2.0)


def test_the_pid_under_simc_holds_the_nominal_tank():
    """Measured (20 episodes, seeds 0-19): settled error 0.195 K (the worst 0.289), mean |error| 1.20 K."""
    from heated_tank.pid import TankPID
    from heated_tank.plant import HeatedTank

    pid = TankPID()

    def act(observation):
        with torch.no_grad():
            return pid(torch.as_tensor(observation)[None])[0].numpy()

    settled = []
    for seed in range(3):
        pid.reset(None)
        _, trace = play(HeatedTank(), seed, act=act)
        settled.append(trace[-1][2]["tracking_error"])
    assert max(settled) < 0.45, settled
    heater_off = play(HeatedTank(), 0, act=lambda observation: np.zeros(1, np.float32))[1][-1][2]
    assert heater_off["tracking_error"] > 10 * max(settled)
