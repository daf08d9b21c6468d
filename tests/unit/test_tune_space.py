"""The search space and the scores of `rlpilot tune`, without training."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from rlpilot.common.errors import UserError

optuna = pytest.importorskip("optuna")
from rlpilot.tune import AGGREGATES, Param, TuneSpec, interval, parse_param, parse_space, run_score  # noqa: E402


def test_ranges_take_the_settings_type():
    lr = parse_param("ppo-cartpole", "ppo.lr=1e-4:3e-3:log")
    assert (lr.low, lr.high, lr.log, lr.integer) == (1e-4, 3e-3, True, False)
    epochs = parse_param("ppo-cartpole", "ppo.epochs=2:10")
    assert (epochs.low, epochs.high, epochs.integer) == (2, 10, True)
    choices = parse_param("ppo-cartpole", "ppo.minibatch_size=128,256")
    assert choices.choices == ["128", "256"]


def test_sampled_values_are_what_the_space_says():
    space = parse_space("ppo-cartpole", ["ppo.lr=1e-4:3e-3:log", "ppo.epochs=2:10", "ppo.minibatch_size=128,256"], None)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(20):
        trial = study.ask()
        values = {p.key: p.suggest(trial) for p in space}
        assert 1e-4 <= values["ppo.lr"] <= 3e-3
        assert isinstance(values["ppo.epochs"], int) and 2 <= values["ppo.epochs"] <= 10
        assert values["ppo.minibatch_size"] in ("128", "256")
        study.tell(trial, 0.0)


def test_space_file(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        "ppo.lr: {low: 1.0e-4, high: 1.0e-3, log: true}\nppo.epochs: '2:6'\nppo.minibatch_size: [128, 256]\n"
    )
    space = parse_space("ppo-cartpole", [], str(path))
    assert [p.key for p in space] == ["ppo.lr", "ppo.epochs", "ppo.minibatch_size"]
    assert space[0].log and space[1].integer and space[2].choices == [128, 256]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("ppo.nope=1:2", "unknown config key"),
        ("ppo.epochs=2.5:6", "integer setting"),
        ("ppo.lr=0:1e-3:log", "a log range needs low > 0"),
        ("ppo.lr=1e-3:1e-4", "must be below high"),
        ("ppo.lr=1e-4:1e-3:lin", "a range is low:high or low:high:log"),
        ("ppo.lr=5", "a range is low:high"),
        ("ppo.lr_schedule=0:1", "is not a number; give choices"),
        ("ppo.lr_schedule=linear,cosine-ish", "ppo.lr_schedule"),
        ("dqn.lr=1e-4:1e-3", "has no 'dqn' section"),
        ("ppo.lr=-1:1e-3", "ppo.lr"),
    ],
)
def test_bad_space_is_one_line(item, message):
    with pytest.raises(UserError, match=None) as info:
        parse_param("ppo-cartpole", item)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_key_twice_and_an_empty_space_are_refused():
    with pytest.raises(UserError, match="names a key twice: ppo.lr"):
        parse_space("ppo-cartpole", ["ppo.lr=1e-4:1e-3", "ppo.lr=1e-4:2e-3"], None)
    with pytest.raises(UserError, match="needs a search space"):
        parse_space("ppo-cartpole", [], None)


def test_scores_unsolved_at_the_budget():
    config = SimpleNamespace(train=SimpleNamespace(total_frames=200_000))
    solved = SimpleNamespace(solved_at_frames=51_200, config=lambda: config, elapsed_s=7.5, last_eval=-80.0, path="r")
    unsolved = SimpleNamespace(solved_at_frames=None, config=lambda: config, elapsed_s=25.0, last_eval=-500.0, path="r")
    assert run_score(solved, "frames") == 51_200 and run_score(unsolved, "frames") == 200_000
    assert run_score(solved, "time") == 7.5 and run_score(unsolved, "time") == 25.0
    assert run_score(unsolved, "return") == -500.0
    with pytest.raises(UserError, match="without a greedy evaluation"):
        run_score(SimpleNamespace(last_eval=None, path="r"), "return")


def test_spec_direction_seeds_and_identity():
    spec = TuneSpec(preset="ppo-acrobot", space=[Param(key="ppo.lr", low=1e-4, high=1e-3, log=True)], seeds_per_trial=3)
    assert spec.seeds == [0, 1, 2] and spec.direction == "minimize"
    assert TuneSpec(preset="x", space=[], objective="return").direction == "maximize"
    assert spec.identity()["space"] == [
        {"key": "ppo.lr", "low": 1e-4, "high": 1e-3, "log": True, "integer": False, "choices": None}
    ]
    assert AGGREGATES["iqm"](np.array([1.0, 2.0, 3.0, 100.0])) == pytest.approx(2.5)
    assert all(math.isnan(v) for v in interval([5.0], "iqm"))
