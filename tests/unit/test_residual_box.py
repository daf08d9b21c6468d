"""Residual RL on an asymmetric action box (examples/heated_tank: heater power in [0, 1]): the policy's
corrections sit around the controller's action, so an untrained policy plays the controller exactly, bit for
bit, as on a symmetric box; the symmetric case keeps the env's own box; a run and its artifact play the same."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpilot.config import load_config
from rlpilot.envs.residual import correction_box

TANK = "heated_tank.plant:HeatedTank"
PID = "heated_tank.pid:TankPID"


pytestmark = pytest.mark.usefixtures("examples_on_path")


def test_the_correction_box_is_the_action_box_centred_at_zero():
    heater = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    centred = correction_box(heater)
    assert centred.low.tolist() == [-0.5] and centred.high.tolist() == [0.5] and centred.dtype == np.float32
    mixed = gym.spaces.Box(np.array([0.0, -2.0, 0.0], np.float32), np.array([1.0, 4.0, np.inf], np.float32))
    assert correction_box(mixed).low.tolist() == [-0.5, -3.0, 0.0]  # an unbounded dimension keeps its bounds
    assert correction_box(mixed).high.tolist() == [0.5, 3.0, np.inf]
    symmetric = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
    assert correction_box(symmetric) is symmetric  # the arm's and every [-1, 1] plant's runs are unchanged


@pytest.mark.parametrize("algo,mode", [("ppo", "add"), ("sac", "add"), ("ppo", "gains")])
def test_an_untrained_residual_policy_plays_the_tank_pid_bit_for_bit(algo, mode):
    """On the [0, 1] heater a zero policy output is the PID's action: the same returns as the PID alone."""
    from heated_tank.pid import TankPID

    from rlpilot.control.algos import build
    from rlpilot.control.evaluate import evaluate
    from rlpilot.envs import make_env

    overrides = [f"env.base_controller={PID}", "env.backend=sync", f"env.residual_mode={mode}"]
    config = load_config(algo=algo, env_id=TANK, overrides=overrides)
    residual_env = make_env(config.env, num_envs=2, seed=7)
    algorithm = build(config, residual_env, torch.device("cpu"))
    actions = 3 if mode == "gains" else 1
    assert torch.equal(algorithm.greedy_action(torch.randn(16, 4)), torch.zeros(16, actions))
    learned = evaluate(residual_env, algorithm.greedy_action, episodes=2, seed=7)
    residual_env.close()
    plain_env = make_env(load_config(algo=algo, env_id=TANK, overrides=["env.backend=sync"]).env, num_envs=2, seed=7)
    alone = evaluate(plain_env, TankPID(), episodes=2, seed=7)
    plain_env.close()
    assert np.array_equal(learned.returns, alone.returns)  # the same episodes, bit for bit


def test_the_heater_gets_the_pid_action_plus_the_correction_clipped():
    """Stepped by hand: action 0 sends the PID's power; +-0.5 (the box's half-width) times residual_scale is
    added to it and clipped to [0, 1]; the policy's box is [-0.5, 0.5]."""
    from heated_tank.pid import TankPID

    from rlpilot.envs.make import make_vector_env

    config = load_config(algo="ppo", env_id=TANK, overrides=[f"env.base_controller={PID}", "env.backend=sync"])
    sent = {}
    for action in (0.0, -0.5, 0.5):
        vector_env = make_vector_env(config.env, 1)
        assert vector_env.single_action_space.low.tolist() == [-0.5]
        assert vector_env.single_action_space.high.tolist() == [0.5]
        plant = vector_env.env.envs[0].unwrapped
        observation, _ = vector_env.reset(seed=3)
        pid = TankPID()
        pid.reset(None)
        for _ in range(60):  # the cold start saturates the PID; past it the power is inside the box
            with torch.no_grad():
                expected = pid(torch.as_tensor(observation))[0, 0].item()
            observation, *_ = vector_env.step(np.array([[0.0]], np.float32))
        with torch.no_grad():
            expected = pid(torch.as_tensor(observation))[0, 0].item()
        vector_env.step(np.array([[action]], np.float32))
        sent[action] = plant.heater
        vector_env.close()
        if action == 0.0:
            assert sent[0.0] == np.float32(expected)  # the PID's power, exactly
    scale = config.env.residual_scale
    assert 0.0 < sent[0.0] < 1.0 - scale * 0.5
    assert sent[0.5] == pytest.approx(sent[0.0] + scale * 0.5, abs=1e-6)
    assert sent[-0.5] == pytest.approx(max(sent[0.0] - scale * 0.5, 0.0), abs=1e-6)


def test_a_symmetric_box_keeps_the_envs_own_action_space():
    from rlpilot.envs.make import make_vector_env

    overrides = ["env.base_controller=tests.controller_fixture:AxisPID", "env.backend=sync"]
    config = load_config(algo="ppo", env_id="tests.controller_fixture:Axis", overrides=overrides)
    vector_env = make_vector_env(config.env, 2)
    assert vector_env.single_action_space is vector_env.env.single_action_space
    assert vector_env.action_space is vector_env.env.action_space
    vector_env.close()


def test_a_tank_residual_run_and_its_artifact_play_the_same(tmp_path, capsys):
    """``rlpilot export`` traces the same law (the correction in the centred box, added, clipped to [0, 1]):
    eval of the run and of its artifact give the same returns."""
    from rlpilot.cli import main

    run = tmp_path / "run"
    tiny = [
        *("--set", f"env.base_controller={PID}", "--set", "env.backend=sync", "--set", "env.num_envs=4"),
        *("--set", "ppo.steps_per_env=64", "--set", "ppo.minibatch_size=64", "--set", "train.loggers=[]"),
        *("--set", "train.eval_episodes=2", "--frames", "256", "-q"),
    ]
    assert main(["train", "ppo", TANK, *tiny, "--run-dir", str(run)]) == 0
    assert main(["export", str(run), "--format", "pt2", "--trust-code"]) == 0
    capsys.readouterr()
    played = {}
    for what in (run, run / "export" / "policy.pt2"):
        assert main(["eval", str(what), "--episodes", "2", "--trust-code"]) == 0
        played[what] = capsys.readouterr().out.splitlines()[0].split(":")[1]
    first, second = played.values()
    assert first == second, played
