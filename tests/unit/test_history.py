"""``env.history`` (rlpilot.envs.history): the columns it appends are what a hand loop over the plain env computes
(the observation then, the action the plant received then, newest first, zeros at a start); a partial reset zeroes
exactly the envs that reset; under a gain schedule the action recorded is the controller's, as the plant got it;
the export's state step (HistoryState) computes the env's next columns."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from rlpilot.common.errors import UserError
from rlpilot.config.sections import EnvConfig
from rlpilot.envs.history import HistoryState
from rlpilot.envs.make import make_vector_env

pytestmark = pytest.mark.usefixtures("examples_on_path")

TANK = "heated_tank.plant:HeatedTank"
STEPS = 3


def hand_history(observations: list[np.ndarray], actions: list[np.ndarray], steps: int) -> np.ndarray:
    """The history after ``len(actions)`` steps of one episode, from its observations (the reset's first) and the
    actions the plant received: the newest entry first, zeros where the episode has no earlier step."""
    entries = [np.concatenate([o, a]) for o, a in zip(observations, actions)][::-1]
    width = len(entries[0]) if entries else observations[0].size + 1
    entries += [np.zeros(width, np.float32)] * steps
    return np.concatenate(entries[:steps])


def test_the_history_is_what_a_hand_loop_computes_and_a_partial_reset_zeroes_its_envs():
    from heated_tank.plant import HeatedTank

    vector_env = make_vector_env(EnvConfig(id=TANK, num_envs=2, backend="sync", history=STEPS), 2)
    plain = [HeatedTank(), HeatedTank()]
    assert vector_env.single_observation_space.shape == (4 + STEPS * 5,)
    observation, _ = vector_env.reset(seed=7)
    seen = [[p.reset(seed=7 + i)[0]] for i, p in enumerate(plain)]
    assert not observation[:, 4:].any()  # an episode's start: zeros
    actions: list[list[np.ndarray]] = [[], []]
    rng = np.random.default_rng(0)
    for _ in range(6):
        action = rng.uniform(0, 1, (2, 1)).astype(np.float32)
        observation, *_ = vector_env.step(action)
        for i, p in enumerate(plain):
            actions[i].append(action[i])
            seen[i].append(p.step(action[i])[0])
            np.testing.assert_array_equal(observation[i, :4], seen[i][-1])
            np.testing.assert_array_equal(observation[i, 4:], hand_history(seen[i][:-1], actions[i], STEPS))
    observation, _ = vector_env.reset(options={"reset_mask": np.array([True, False])})
    assert not observation[0, 4:].any() and observation[1, 4:].any()  # only the env that reset
    kept = observation[1].copy()
    action = np.full((2, 1), 0.5, np.float32)
    observation, *_ = vector_env.step(action)
    assert not observation[0, 4 + 5 :].any() and observation[0, 4:9].any()  # one entry since its reset
    np.testing.assert_array_equal(observation[1, 9:], kept[4:-5])  # the other env's history moved on by one
    vector_env.close()


def test_under_a_gain_schedule_the_history_records_the_action_the_plant_received():
    config = EnvConfig(
        id=TANK,
        num_envs=2,
        backend="sync",
        history=2,
        base_controller="heated_tank.pid:TankPID",
        residual_mode="gains",
        residual_scale=0.5,
    )
    vector_env = make_vector_env(config, 2)
    assert vector_env.single_action_space.shape == (3,)  # the policy schedules kp, ki, kd
    assert vector_env.single_observation_space.shape == (4 + 2 * 5,)
    vector_env.reset(seed=3)
    for _ in range(4):
        observation, *_ = vector_env.step(np.full((2, 3), 0.3, np.float32))
        np.testing.assert_array_equal(observation[:, 8], vector_env.applied[:, 0])  # the newest entry's action
    vector_env.close()


def test_a_gate_on_the_controllers_last_entry_reads_the_env_s_own_last_column_under_a_history():
    """The arm's PD names its gate's entry from the end (the error monitor, the observation's last float): under
    ``env.history`` that is still the env's own last column, not the history's last."""
    pytest.importorskip("mujoco")
    config = EnvConfig(
        id="rlpilot/ReacherTrack-v0",
        num_envs=2,
        backend="sync",
        base_controller="pd",
        residual_gate=0.01,
        kwargs={"obs_error_peak": 0.9},
    )
    own = make_vector_env(config, 2)
    width = own.single_observation_space.shape[0]
    own.close()
    vector_env = make_vector_env(replace(config, history=2), 2)
    vector_env.reset(seed=3)
    observation, *_ = vector_env.step(np.zeros((2, 2), np.float32))
    assert observation.shape[1] > width
    read = vector_env.law.read_signal(torch.as_tensor(observation))
    np.testing.assert_array_equal(read.numpy(), observation[:, width - 1])  # the error monitor
    vector_env.close()


def test_the_export_state_step_gives_the_env_s_next_columns():
    """HistoryState: the env's full observation split into (observation, history), and the next history from the
    observation and the action returned for it, as the env builds it."""
    vector_env = make_vector_env(EnvConfig(id=TANK, num_envs=1, backend="sync", history=STEPS), 1)
    history = HistoryState(STEPS, vector_env.single_observation_space.shape[0], 1)
    assert (history.reduced_size, history.state_size) == (4, STEPS * 5)
    observation, _ = vector_env.reset(seed=1)
    for t in range(5):
        action = np.array([[0.1 * (t + 1)]], np.float32)
        full = torch.as_tensor(observation)
        expected = history(history.reduce(full), history.carried(full), torch.as_tensor(action))
        observation, *_ = vector_env.step(action)
        np.testing.assert_array_equal(history.carried(torch.as_tensor(observation)).numpy(), expected.numpy())
    vector_env.close()


def test_history_needs_box_spaces_and_a_vector_backend():
    with pytest.raises(UserError, match="env.history appends"):
        make_vector_env(EnvConfig(id="CartPole-v1", num_envs=1, backend="sync", history=2), 1)
    with pytest.raises(UserError, match="env.backend=native has no history"):
        make_vector_env(replace(EnvConfig(id="Pendulum-v1", backend="native"), history=2), 1)


def test_a_partial_reset_resets_only_those_envs_base_controller_state():
    """The residual env reads the reset mask before gymnasium's vector env takes it out of the options: the PID of
    an env that did not reset keeps its integral."""
    config = EnvConfig(id=TANK, num_envs=2, backend="sync", base_controller="heated_tank.pid:TankPID")
    vector_env = make_vector_env(config, 2)
    vector_env.reset(seed=0)
    for _ in range(3):
        vector_env.step(np.zeros((2, 1), np.float32))
    before = vector_env.controller.state.clone()
    vector_env.reset(options={"reset_mask": np.array([True, False])})
    assert not vector_env.controller.state[0].any() and torch.equal(vector_env.controller.state[1], before[1])
    vector_env.close()
