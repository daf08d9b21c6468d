"""``env.gain_average`` (rlpilot.envs.residual.AveragedGains): the controller runs on the schedule's gains averaged
in decades over the episode so far with the schedule's own weights (earlier steps fading), exactly what the plain
schedule gives when it is sent the averaged actions by hand; a partial reset restarts the average of only those
envs; it needs a gain schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlpilot.common.errors import UserError
from rlpilot.config.load import load_config
from rlpilot.config.sections import EnvConfig
from rlpilot.envs.make import make_vector_env
from rlpilot.envs.residual import AveragedGains

pytestmark = pytest.mark.usefixtures("examples_on_path")

TANK, PID = "heated_tank.plant:HeatedTank", "heated_tank.pid:TankPID"


def tank(average: int, weighted: bool = True) -> EnvConfig:
    return EnvConfig(
        id=TANK,
        backend="sync",
        base_controller=PID,
        residual_mode="gains",
        residual_scale=0.5,
        gain_average=average,
        gain_weights=weighted,
    )


def hand_average(actions: np.ndarray, steps: int, decades: float = 0.5) -> np.ndarray:
    """The gains' actions (a gain's decades are proportional to its action), averaged with the weights the last
    three columns give (``10 ** (decades * weight action)``), earlier ones fading by ``1 - 1 / steps`` a step."""
    gains, weights = actions[..., :3], 10.0 ** (decades * actions[..., 3:])
    mean, total, out = np.zeros_like(gains[0]), np.zeros_like(gains[0]), []
    for gain, weight in zip(gains, weights):
        total = total * (1.0 - 1.0 / steps) + weight
        mean = mean + weight * (gain - mean) / total
        out.append(mean.copy())
    return np.stack(out)


@pytest.mark.parametrize("steps", [1000, 3])
def test_the_plant_receives_what_the_plain_schedule_gives_for_the_averaged_actions(steps):
    actions = np.random.default_rng(0).uniform(-1, 1, (12, 2, 6))
    averaged, plain = make_vector_env(tank(steps), 2), make_vector_env(tank(0), 2)
    assert averaged.single_action_space.shape == (6,) and plain.single_action_space.shape == (3,)
    averaged.reset(seed=5)
    plain.reset(seed=5)
    by_hand = hand_average(actions, steps)
    for action, mean in zip(actions.astype(np.float32), by_hand.astype(np.float32)):
        averaged.step(action)
        plain.step(mean)
        np.testing.assert_allclose(averaged.applied, plain.applied, atol=1e-5)
    assert not np.allclose(by_hand, actions[..., :3], atol=0.05)  # the test would see a schedule not averaged
    unweighted = hand_average(np.concatenate([actions[..., :3], np.zeros_like(actions[..., 3:])], -1), steps)
    assert not np.allclose(by_hand, unweighted, atol=0.05)  # nor one that ignored the weights
    averaged.close()
    equal = make_vector_env(tank(steps, weighted=False), 2)  # every step weighs 1: one column per gain
    assert equal.single_action_space.shape == (3,)
    equal.reset(seed=5)
    plain.reset(seed=5)
    for action, mean in zip(actions[..., :3].astype(np.float32), unweighted.astype(np.float32)):
        equal.step(action)
        plain.step(mean)
        np.testing.assert_allclose(equal.applied, plain.applied, atol=1e-5)
    equal.close()
    plain.close()


def test_a_partial_reset_restarts_the_average_of_only_those_envs():
    env = make_vector_env(tank(1000), 2)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.full((2, 6), 0.4, np.float32))
    controller = env.controller
    assert isinstance(controller, AveragedGains) and controller.state_size == 4 + 3 + 3
    before = controller.state.clone()
    np.testing.assert_allclose(controller.multipliers().numpy(), 10**0.2, rtol=1e-5)  # 3 steps at action 0.4
    env.reset(options={"reset_mask": np.array([True, False])})
    assert not controller.state[0].any() and torch.equal(controller.state[1], before[1])
    keep, weight = 1.0 - 1.0 / 1000, 10**0.2
    assert torch.allclose(before[1, -1], torch.tensor(weight * (1 + keep + keep**2)))  # the weight accumulated
    env.close()


def test_gain_average_needs_a_gain_schedule():
    with pytest.raises(UserError, match="env.gain_average averages a gain schedule"):
        load_config(algo="ppo", env_id=TANK, overrides=[f"env.base_controller={PID}", "env.gain_average=10"])
    with pytest.raises(UserError, match="env.gain_average acts on a residual policy"):
        load_config(algo="ppo", env_id=TANK, overrides=["env.residual_mode=gains", "env.gain_average=10"])
    with pytest.raises(UserError, match="set env.gain_average=STEPS too"):
        load_config(algo="ppo", env_id=TANK, overrides=[f"env.base_controller={PID}", "env.gain_weights=true"])


class Gain(torch.nn.Module):
    """A toy stateless controller: its command is the observation times its one gain."""

    gain_names = ("k",)

    def forward(self, observation, gains=None):
        return observation[:, :1] * (1.0 if gains is None else gains)


def test_under_gain_excitation_an_estimate_weighs_as_much_as_the_command_moved_lately():
    """``env.gain_excitation``: each step's estimate weighs ``e / max(e)``, ``e`` the mean absolute change of the
    command fading with that time constant: while the plant is driven the estimates average as without it; once
    the command settles, new estimates barely move the gains the transient taught."""
    window, averaged = 4, AveragedGains(Gain(), 1000, excitation=4, action_size=1)
    assert averaged.state_size == 2 + 1 + 2  # the mean and weight of the gain; the last command, e and max e
    observations = [5.0, -5.0, 5.0, -5.0] + [1.0] * 20  # a transient, then a plant at rest
    estimates = [0.2] * 4 + [2.0] * 20  # in log-gain: what the schedule says at each step
    state, level, most, last, mean, total, means = torch.zeros(1, 5), 0.0, 0.0, 0.0, 0.0, 0.0, []
    for observation, estimate in zip(observations, estimates):
        weight = level / most if most > 0 else 1.0
        total = total * (1.0 - 1.0 / 1000) + weight
        mean += weight * (estimate - mean) / total
        command, state = averaged.step(torch.tensor([[observation]]), state, torch.tensor([[math.exp(estimate)]]))
        assert float(command) == pytest.approx(observation * math.exp(mean), rel=1e-4)
        level += (abs(observation * math.exp(mean) - last) - level) / window
        most, last = max(most, level), observation * math.exp(mean)
        means.append(mean)
    assert mean < 1.3 and mean - means[13] < 0.05  # the plain mean: 1.7, and still moving
    plain = AveragedGains(Gain(), 1000)
    state = torch.zeros(1, 2)
    for observation, estimate in zip(observations, estimates):
        _, state = plain.step(torch.tensor([[observation]]), state, torch.tensor([[math.exp(estimate)]]))
    assert float(state[0, 0]) == pytest.approx(np.mean(estimates), rel=1e-2)  # (earlier steps fade a little)


def test_gain_excitation_needs_gain_average():
    with pytest.raises(UserError, match="env.gain_excitation weighs the average of env.gain_average"):
        load_config(
            algo="ppo",
            env_id=TANK,
            overrides=[f"env.base_controller={PID}", "env.residual_mode=gains", "env.gain_excitation=32"],
        )
