"""The conditions protocol (rlpilot.conditions) on the arm, and ``eval --condition`` for a controller, a run's env
and bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.conditions import OUTSIDE, Declared, UnderCondition, declared, require
from rlpilot.envs.arm.disturbances import NAMED_CONDITIONS, RANDOMIZE_RANGES
from rlpilot.play.episodes import evaluate_target
from rlpilot.registry import resolve_env

ARM = "rlpilot/ReacherTrack-v0"


@pytest.fixture(scope="module")
def arm():
    resolve_env(ARM)
    env = gym.make(ARM)
    yield env
    env.close()


def test_the_arm_declares_its_disturbances_cases_and_measures(arm):
    found = declared(arm, ARM)
    assert found.ranges == {name: tuple(bounds) for name, bounds in RANDOMIZE_RANGES.items()}
    assert found.integer("action_delay") and not found.integer("payload")
    assert found.named == {case: {k: float(v) for k, v in values.items()} for case, values in NAMED_CONDITIONS.items()}
    assert {"tracking_error", "effort"} <= set(found.measures)


def test_a_condition_is_played_and_reported_and_the_episode_is_otherwise_the_same(arm):
    """The reset's info names the condition; the reference and the start are drawn the same whatever the
    condition (paired episodes), and a payload changes how the arm moves."""
    observation, info = arm.reset(seed=3)
    assert info["condition"]["payload"] == 0.0 and info["condition"]["action_delay"] == 0
    loaded, info = arm.reset(seed=3, options={"condition": {"payload": 3.0, "action_delay": 1}})
    assert info["condition"]["payload"] == 3.0 and info["condition"]["action_delay"] == 1
    assert np.array_equal(observation, loaded)
    action = np.array([0.5, -0.5])
    free = arm.reset(seed=3)[0], arm.step(action)[0], arm.step(action)[0]
    heavy = arm.reset(seed=3, options={"condition": {"payload": 3.0}})[0], arm.step(action)[0], arm.step(action)[0]
    assert not np.allclose(free[2], heavy[2])
    with pytest.raises(ValueError, match="no disturbance 'mass'"):
        arm.reset(seed=3, options={"condition": {"mass": 1.0}})


def test_under_condition_adds_the_condition_to_every_reset_partial_ones_included():
    resolve_env(ARM)
    vector = gym.vector.SyncVectorEnv(
        [lambda: UnderCondition(gym.make(ARM), {"payload": 2.0})] * 2,
        autoreset_mode=gym.vector.AutoresetMode.DISABLED,
    )
    try:
        _, info = vector.reset(seed=0)
        assert list(info["condition"]["payload"]) == [2.0, 2.0]
        _, info = vector.reset(options={"reset_mask": np.array([False, True])})
        assert info["condition"]["payload"][1] == 2.0
    finally:
        vector.close()


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["mass=1"], "declares no condition 'mass' (it declares: payload, friction"),
        (["heavy"], "names no such condition (its named conditions: nominal, payload"),
        (["payload=nan"], "payload=nan: the value must be a finite number"),
        (["payload=x"], "payload=x: the value must be a finite number"),
        (["action_delay=0.5"], "action_delay is a whole number (0 to 1)"),
    ],
)
def test_a_condition_that_is_not_declared_is_one_line(arm, items, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        declared(arm, ARM).resolve(items)


def test_named_cases_then_values_over_them(arm):
    found = declared(arm, ARM)
    assert found.resolve(["all", "action_delay=0"]) == {**NAMED_CONDITIONS["all"], "action_delay": 0}
    assert found.outside({"action_delay": 2, "payload": 1.0}) == ["action_delay"]


def test_a_declaration_of_the_wrong_shape_is_one_line():
    class Odd(gym.Env):
        condition_ranges = {"k": (3.0, 1.0)}

    with pytest.raises(UserError, match="not the protocol's shape"):
        declared(Odd(), "Odd")
    with pytest.raises(UserError, match="CartPole-v1 declares no conditions"):
        require(gym.make("CartPole-v1"), "CartPole-v1")
    assert declared(gym.make("CartPole-v1"), "CartPole-v1") is None
    assert Declared("x", {"k": (0, 2)}).describe("k") == "0 to 2"


def test_eval_plays_a_controller_under_a_condition_flags_what_is_outside_and_keeps_the_episodes(tmp_path):
    """The same seeds under another condition: the same references (paired), a different error; a delay beyond
    the declared range is played and flagged."""
    kwargs = {"episodes": 2, "seed": 5, "controller": "pd", "csv_path": tmp_path / "rows.csv"}
    nominal, _, _ = evaluate_target(ARM, **kwargs)
    delayed, _, _ = evaluate_target(ARM, condition=["delay"], **kwargs)
    beyond, _, _ = evaluate_target(ARM, condition=["action_delay=2"], **kwargs)
    assert nominal.condition == {} and delayed.condition == {"action_delay": 1}
    assert beyond.outside == ["action_delay"] and delayed.outside == []
    assert nominal.final["tracking_error"].mean() < delayed.final["tracking_error"].mean()
    assert "tracking_error" in (tmp_path / "rows.csv").read_text().splitlines()[0]


def test_eval_condition_on_the_cli_prints_it_and_bad_input_is_one_line(capsys):
    assert main(["eval", ARM, "--controller", "pd", "--episodes", "1", "--condition", "action_delay=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"condition: action_delay=2  (action_delay: {OUTSIDE})")
    assert "tracking_error" in out
    assert main(["eval", ARM, "--controller", "pd", "--condition", "mass=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "declares no condition 'mass'" in err[0]
    assert main(["eval", "CartPole-v1", "--controller", "random", "--condition", "k=1"]) == 2
    assert "CartPole-v1 declares no conditions" in capsys.readouterr().err


@pytest.mark.parametrize("same", [True, False])
def test_evaluations_play_the_same_episodes_when_asked(same):
    """``train.eval_same_episodes``: evaluation k plays the seeds of evaluation 0 (on a randomised plant, the same
    plants), so an unchanged policy scores the same; off, every evaluation draws fresh episodes."""
    import torch

    from rlpilot.config.load import load_config
    from rlpilot.control.trainable import ControlTrainable

    sets = [f"env.id={ARM}", "env.kwargs={randomize: all}", "train.eval_episodes=2", "env.backend=sync"]
    config = load_config("ppo-pendulum", overrides=[*sets, f"train.eval_same_episodes={str(same).lower()}"])
    trainable = ControlTrainable(config, device=torch.device("cpu"), seed=0, state=None, event=lambda *a, **k: None)
    try:
        first, later = trainable.evaluate(0), trainable.evaluate(3)
    finally:
        trainable.close()
    assert (first.mean == later.mean) is same
