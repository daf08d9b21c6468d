"""``rlpilot train adapt``'s parts: the teacher's labels turn the robust controller into each oracle; the table's
conditions start with the named ones and are seeded; DAgger labels every visited observation with the teacher's action
for the TRUE plant of its env; the fallback's envelope zeroes the actor's mean beyond its training range only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlpilot.adapt.settings import AdaptSettings, read_settings
from rlpilot.adapt.teacher import TeacherTable, draw_conditions, label
from rlpilot.common.errors import UserError
from rlpilot.conditions import Declared
from rlpilot.control.models import Envelope

pytestmark = pytest.mark.usefixtures("examples_on_path")

TANK, PID = "heated_tank.plant:HeatedTank", "heated_tank.pid:TankPID"


def built(table: TeacherTable, settings: AdaptSettings, overrides: list[str], *, horizon: int):
    """A DAgger trainable on the heated tank for ``table`` (its robust arguments as the base), and its config."""
    from rlpilot.adapt import adapt_config
    from rlpilot.adapt.dagger import DaggerTrainable
    from rlpilot.control.trainable import ControlTrainable

    config = adapt_config(TANK, PID, overrides, settings)
    config.env.base_controller_kwargs = table.robust
    inner = ControlTrainable(config, device=torch.device("cpu"), seed=0, state=None, event=lambda *a, **k: None)
    return config, DaggerTrainable(config, inner, table=table, settings=settings, horizon=horizon)


def test_a_label_turns_the_robust_gains_into_the_oracle_s():
    robust, oracle = {"kp": 0.1, "ki": 0.002, "kd": 0.0}, {"kp": 0.4, "ki": 0.0002, "kd": 0.3}
    kp, ki, kd = label(oracle, robust, ("kp", "ki", "kd"), scale=1.5)
    assert math.isclose(0.1 * 10 ** (1.5 * kp), 0.4) and math.isclose(0.002 * 10 ** (1.5 * ki), 0.0002)
    assert kd == 0.0  # a robust gain of 0: no multiplier reaches the oracle's
    assert label({"kp": 100.0}, {"kp": 0.1}, ("kp",), scale=1.0) == [1.0]  # three decades, clipped to one


def test_the_table_starts_with_the_named_conditions_and_draws_the_rest_seeded():
    declared = Declared(
        "x", {"gain": (1.0, 2.0), "delay": (0, 3)}, {"nominal": {"gain": 1.5, "delay": 1}, "slow": {"delay": 3}}
    )
    table = draw_conditions(declared, 5, seed=4)
    assert list(table)[:2] == ["nominal", "slow"] and table["slow"] == {"gain": 1.5, "delay": 3}
    drawn = [table[name] for name in list(table)[2:]]
    assert all(1.0 <= c["gain"] <= 2.0 and isinstance(c["delay"], int) for c in drawn)
    assert draw_conditions(declared, 5, seed=4) == table != draw_conditions(declared, 5, seed=5)


def test_adapt_settings_are_read_and_checked():
    assert read_settings(["adapt.conditions=3", "adapt.beta=0"]).conditions == 3
    with pytest.raises(UserError, match="adapt.KEY=VALUE"):
        read_settings(["adapt.nope=1"])
    with pytest.raises(UserError, match="adapt.conditions must be within"):
        read_settings(["adapt.conditions=0"])


def test_dagger_labels_each_observation_with_the_teacher_s_action_for_its_env_s_true_plant():
    """Two plants of distinct labels, two envs each: every visited row carries the label of the plant its env
    really runs (the plant's own parameters, read from the env), whoever acted."""
    table = TeacherTable(
        "t",
        robust={"kp": 0.1, "ki": 0.002, "kd": 0.1},
        conditions={"a": {"gain": 31.0, "dead_time": 2}, "b": {"gain": 59.0, "dead_time": 11}},
        labels={"a": [0.5, -0.5, 0.0], "b": [-0.25, 0.75, 0.1]},
    )
    settings = AdaptSettings(episodes=2, epochs=1)
    overrides = ["env.max_episode_steps=20", "env.obs_norm_frames=64", "train.eval_episodes=1"]
    config, dagger = built(table, settings, overrides, horizon=30)
    try:
        played = dagger.rollout(1.0, seed=3)
        plants = [env.unwrapped.now for env in dagger.vector_env.unwrapped.envs]
        assert [(p["gain"], p["dead_time"]) for p in plants] == [(31.0, 2), (31.0, 2), (59.0, 11), (59.0, 11)]
        rows = played["labels"].reshape(30, 4, 3)
        expected = torch.tensor([table.labels["a"]] * 2 + [table.labels["b"]] * 2)
        assert torch.equal(rows, expected.expand(30, 4, 3))
        assert len(played["returns"]) == 4  # each env's 20-step episode ended once in 30 steps, and went on
        step = dagger.step()  # iteration 0: the teacher acts, the student learns, the normaliser is the data's
        assert step.frames == 120 and step.metrics["dagger/teacher_share"] == 1.0
        assert torch.allclose(dagger.inner.state_dict()["obs_norm"]["loc"], dagger.obs_norm["loc"])
        assert dagger.envelope is not None and dagger.envelope.armed == 1.0
    finally:
        dagger.close()


def test_with_a_warmup_the_first_steps_of_every_episode_are_labelled_and_played_robust():
    """``adapt.warmup``: the robust controller (action 0) is the label, and the teacher's action, on each episode's
    first steps (before the history can tell the plant apart), the plant's oracle after them, episode after episode."""
    table = TeacherTable(
        "t",
        robust={"kp": 0.1, "ki": 0.002, "kd": 0.1},
        conditions={"a": {"gain": 31.0, "dead_time": 2}},
        labels={"a": [0.5, -0.5, 0.25]},
    )
    settings = AdaptSettings(episodes=2, epochs=1, warmup=5, excitation=0)  # every step weighs alike
    config, dagger = built(table, settings, ["env.max_episode_steps=20", "train.eval_episodes=1"], horizon=30)
    try:
        rows = dagger.rollout(1.0, seed=3)["labels"].reshape(30, 2, 3)
        robust = [step for step in range(30) if step % 20 < 5]  # steps 0-4 of the first episode and of the second
        assert torch.equal(rows[robust], torch.zeros(len(robust), 2, 3))
        later = [step for step in range(30) if step not in robust]
        assert torch.equal(rows[later], torch.tensor(table.labels["a"]).expand(len(later), 2, 3))
        dagger.rollout(1.0, seed=4)  # 30 steps: each env's second episode is 10 steps in, 5 of them the oracle's
        multipliers = dagger.vector_env.controller.multipliers()  # the gains averaged over that episode so far
        keep = 1 - 1 / config.env.gain_average  # each earlier step's weight fades by this a step
        share = sum(keep**age for age in range(5)) / sum(keep**age for age in range(10))  # the 5 latest, the oracle's
        expected = 10 ** (config.env.residual_scale * torch.tensor(table.labels["a"]) * share)
        assert torch.allclose(multipliers, expected.expand(2, 3), rtol=1e-4)
    finally:
        dagger.close()


def test_with_samples_each_iteration_regresses_as_many_draws_however_much_data_it_has():
    """``adapt.samples``: each DAgger iteration's regression takes that many draws from all the data so far (a fixed
    cost an iteration); without it, ``epochs`` passes over all of it (a cost growing with the data)."""
    table = TeacherTable(
        "t", robust={"kp": 0.1, "ki": 0.002, "kd": 0.1}, conditions={"a": {}}, labels={"a": [0.5, -0.5, 0.25]}
    )

    def adam_steps(samples: int) -> list[int]:
        settings = AdaptSettings(episodes=2, epochs=1, minibatch=16, samples=samples)
        overrides = ["env.max_episode_steps=20", "train.eval_episodes=1"]
        _, dagger = built(table, settings, overrides, horizon=40)  # 80 samples a step
        try:
            counts = []
            for _ in range(3):
                dagger.step()
                counts.append(int(next(iter(dagger.optimizer.state.values()))["step"]))
            return counts
        finally:
            dagger.close()

    assert adam_steps(0) == [5, 15, 30]  # one pass over 80, 160, then 240 samples, 16 a step
    assert adam_steps(40) == [3, 6, 9]  # 40 draws an iteration: 16, 16 and 8


def test_the_envelope_falls_back_to_zero_beyond_its_training_range_only():
    body = torch.nn.Linear(2, 3)
    envelope = Envelope(body, 2, margin=1.0)
    inside = torch.tensor([[0.0, 0.0], [1.0, -1.0]])
    assert torch.equal(envelope(inside), body(inside))  # unarmed: the body exactly
    envelope.fit(torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]))  # std 1 each: the range widened by 1
    far = torch.tensor([[2.5, 0.0], [0.0, -1.9]])
    out = envelope(torch.cat([inside, far]))
    assert torch.equal(out[:2], body(inside)) and not out[2].any() and torch.equal(out[3], body(far[1:])[0])
    assert np.array_equal(envelope.outside(far).squeeze(-1).numpy(), [True, False])


def test_under_gain_average_the_student_weighs_its_estimates_by_how_sure_it_is():
    """Rows whose label a feature gives away and rows whose label is noise the inputs cannot tell (the same few
    inputs under many labels, so that no fit memorises it): the student's weight columns come out higher on the
    first (it may be sure there), and its gains fit the first. (The weights learn from the student's errors on
    its own training data: where it can memorise noise, they cannot tell.)"""
    table = TeacherTable("t", robust={"kp": 0.1, "ki": 0.002, "kd": 0.1}, conditions={"a": {}}, labels={"a": [0, 0, 0]})
    torch.manual_seed(0)
    settings = AdaptSettings(episodes=1, epochs=100, lr=3e-3)
    overrides = ["env.max_episode_steps=20", "env.obs_norm_frames=64", "train.eval_episodes=1"]
    overrides += ["env.gain_average=100", "env.gain_weights=true"]
    config, dagger = built(table, settings, overrides, horizon=20)
    try:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(4096, config.env.history * 5 + 4, generator=generator)
        inputs[2048:] = inputs[2048:2056].repeat(256, 1)  # 8 inputs, 256 labels each: a noise none can learn
        inputs[:2048, 0], inputs[2048:, 0] = inputs[:2048, 0].abs(), -inputs[2048:, 0].abs()
        known = inputs[:, 0] > 0
        labels = torch.where(known[:, None], 0.3, 0.3 + 0.3 * torch.randn(4096, 3, generator=generator))
        dagger.inputs, dagger.labels = [inputs], [labels]
        dagger.regress()
        with torch.no_grad():
            out = dagger.algo.greedy_module(dagger.normalised(inputs))
        weights = out[:, 3:]
        assert weights[known].mean() > weights[~known].mean() + 0.5, (weights[known].mean(), weights[~known].mean())
        assert (out[known, :3] - 0.3).abs().mean() < 0.05
    finally:
        dagger.close()


def test_with_caution_an_estimate_beyond_the_label_away_from_the_robust_gains_costs_more():
    """``adapt.caution``: an estimate past the teacher's label on the far side from action 0 (the robust controller)
    weighs ``1 + caution``; one between the label and 0 weighs 1. A student that cannot tell two plants apart then
    settles nearer the robust gains than their mean, and still on the label where it can."""
    from types import SimpleNamespace

    from rlpilot.adapt.dagger import DaggerTrainable

    def loss(caution, estimate, label):
        host = SimpleNamespace(settings=AdaptSettings(caution=caution), slopes=None)
        return float(DaggerTrainable.regression_loss(host, torch.tensor(estimate), torch.tensor(label), None))

    assert loss(0.0, [0.5, 0.5], [0.7, 0.1]) == pytest.approx((0.04 + 0.16) / 2)
    assert loss(3.0, [0.5], [0.7]) == pytest.approx(0.04)  # between 0 and the label: plain
    assert loss(3.0, [0.5], [0.1]) == pytest.approx(4 * 0.16)  # beyond the label, away from 0
    assert loss(3.0, [0.2], [-0.1]) == pytest.approx(4 * 0.09)  # across 0 from it
    estimate = torch.zeros(1, requires_grad=True)  # one input, two plants it cannot tell apart: labels -0.1 and 0.7
    optimizer = torch.optim.SGD([estimate], lr=0.1)
    for _ in range(500):
        optimizer.zero_grad()
        host = SimpleNamespace(settings=AdaptSettings(caution=3.0), slopes=None)
        DaggerTrainable.regression_loss(host, estimate.expand(2), torch.tensor([-0.1, 0.7]), None).backward()
        optimizer.step()
    assert float(estimate) == pytest.approx((0.7 - 4 * 0.1) / 5, abs=1e-4)  # the mean would be 0.3


def test_shaped_an_error_weighs_as_the_cost_grows_on_its_side_for_its_plant():
    """``adapt.shaped``: the squared error weighs by the sample's plant's cost slope on the side of the label the
    estimate lies; two plants a student cannot tell apart, one that tolerates being short (slope 1) but not past
    (9) and one tolerant either way (1): it settles at the weighted point, near the intolerant plant's label."""
    from types import SimpleNamespace

    from rlpilot.adapt.dagger import DaggerTrainable

    slopes = torch.tensor([[[1.0, 9.0]], [[1.0, 1.0]]])  # 2 plants, 1 gain, [short, past]
    host = SimpleNamespace(settings=AdaptSettings(), slopes=slopes)
    plants = torch.tensor([0, 1])

    def loss(estimate, label):
        return float(
            DaggerTrainable.regression_loss(host, torch.tensor(estimate)[:, None], torch.tensor(label)[:, None], plants)
        )

    assert loss([0.5, 0.5], [0.3, 0.3]) == pytest.approx((9 * 0.04 + 0.04) / 2)  # past plant 0's: 9 times
    assert loss([0.1, 0.1], [0.3, 0.3]) == pytest.approx((0.04 + 0.04) / 2)  # short of it: once
    estimate = torch.zeros(1, 1, requires_grad=True)
    optimizer = torch.optim.SGD([estimate], lr=0.05)
    for _ in range(1000):
        optimizer.zero_grad()
        DaggerTrainable.regression_loss(host, estimate.expand(2, 1), torch.tensor([[0.0], [0.8]]), plants).backward()
        optimizer.step()
    assert float(estimate) == pytest.approx(0.8 / 10, abs=1e-3)  # 9 (e - 0) = (0.8 - e): the mean would be 0.4


def test_the_arms_adapt_preset_is_the_command_of_its_page(capsys):
    """``rlpilot train ppo-reacher-track-adaptive`` builds the student robot-arm.md's ``train adapt`` command built:
    the same PPO config, the preset's settings under the user's ``--set``; the plant and controller are the preset's."""
    from rlpilot.adapt import adapt_config
    from rlpilot.cli import main
    from rlpilot.config.load import preset_adapt

    pytest.importorskip("mujoco")
    name, arm = "ppo-reacher-track-adaptive", "rlpilot/ReacherTrack-v0"
    section = preset_adapt(name)
    assert section["controller"] == "pd-ff"
    assert section["params"] == ["kp=0.3:60:log", "kd=0.02:2:log", "ka=0.0005:0.05:log"]
    settings = read_settings([f"adapt.{key}={value}" for key, value in section["settings"].items()])
    assert settings.caution == 10 and settings.iterations == 16
    from_preset = adapt_config(arm, "pd-ff", ["train.seed=4"], settings, preset=name)
    from_command = adapt_config(arm, "pd-ff", ["train.seed=4"], settings)
    assert from_preset.preset == name
    from_preset.preset = None
    assert from_preset.to_dict() == from_command.to_dict()
    assert adapt_config(arm, "pd-ff", ["env.history=8"], settings, preset=name).env.history == 8  # --set over it
    shorter = read_settings(["adapt.history=8", "adapt.scale=1.0"])  # an adapt setting given goes over the preset too
    config = adapt_config(arm, "pd-ff", [], shorter, preset=name, chosen=frozenset({"history", "scale"}))
    assert (config.env.history, config.env.residual_scale) == (8, 1.0)
    assert preset_adapt("ppo-reacher-track-history") is None and preset_adapt("no-such-preset") is None
    assert main(["train", name, "--controller", "pd"]) == 2
    assert "the preset names its plant, controller and --param" in capsys.readouterr().err
    for verb in (["sweep", name], ["tune", name, "--param", "ppo.lr=1e-4:1e-3:log"]):  # they would train PPO alone
        assert main(verb) == 2
        assert "the preset trains by train adapt" in capsys.readouterr().err


def test_a_slopes_growth_is_bounded_where_a_cost_is_not_finite_or_the_base_is_none():
    from rlpilot.adapt import SLOPE_CAP, SLOPE_FLOOR, _growth

    assert _growth(2.0, 1.0) == pytest.approx(math.log(2.0)) and _growth(0.9, 1.0) == SLOPE_FLOOR
    assert _growth(float("inf"), 1.0) == _growth(float("nan"), 1.0) == _growth(1e9, 1.0) == SLOPE_CAP
    assert _growth(1.0, 0.0) == _growth(1.0, float("nan")) == SLOPE_FLOOR


def test_shaped_slopes_are_the_cost_growth_on_each_side_of_the_gains():
    """``adapt.shaped``'s teacher measure: with kp far below what the tank wants, a step down costs (a slope above the
    floor) and a step up does not (the floor); a gain the controller holds at 0 gets 1 either side."""
    from dataclasses import replace

    from rlpilot.adapt import SLOPE_FLOOR, SLOPE_STEP, adapt_config, cost_slopes
    from rlpilot.reference.play import Objective

    env = adapt_config(TANK, PID, ["env.max_episode_steps=100"], AdaptSettings()).env
    plain = replace(env, base_controller="none", history=0, normalize_obs=False, condition_sampled=False)
    slopes = cost_slopes(plain, PID, {"kp": 0.01, "ki": 0.002, "kd": 0.0}, ("kp", "ki", "kd"), 1.5, [0, 1], Objective())
    floor = SLOPE_FLOOR / SLOPE_STEP**2
    assert slopes[0][0] > 2 * floor and slopes[0][1] == pytest.approx(floor)
    assert slopes[2] == [1.0, 1.0]


def test_early_an_episodes_first_steps_weigh_as_much_as_the_rest_of_it():
    """``adapt.early``: the rollout records each sample's step in its episode (a new episode starts at 0 again), and
    the regression weighs the first ``early`` steps ``(horizon - early) / early`` times."""
    table = TeacherTable(
        "t", robust={"kp": 0.1, "ki": 0.002, "kd": 0.1}, conditions={"a": {}}, labels={"a": [0.5, -0.5, 0.25]}
    )
    settings = AdaptSettings(episodes=2, epochs=1, early=5)
    _, dagger = built(table, settings, ["env.max_episode_steps=20", "train.eval_episodes=1"], horizon=30)
    try:
        steps = dagger.rollout(1.0, seed=3)["steps"].reshape(30, 2)
        expected = torch.tensor([*range(20), *range(10)])
        assert torch.equal(steps, expected[:, None].expand(30, 2))
        dagger.step()
        seen = []
        original = dagger.regression_loss
        dagger.regression_loss = lambda *args: seen.append(args[3]) or original(*args)
        dagger.regress()
        weights = torch.cat(seen)
        assert set(weights.tolist()) == {1.0, 5.0}  # (30 - 5) / 5 on the early steps
        assert int((weights == 5.0).sum()) == 2 * (5 + 5)  # the step's rollout: 2 envs, 5 early steps in each episode
    finally:
        dagger.close()


def test_each_plant_and_controller_keeps_its_own_teacher(tmp_path):
    """Two controllers distilled on one plant keep two teacher tables (one file per plant evicted the other's
    at every switch); a user's ``package.module:Class`` and an env id make a plain file name."""
    from rlpilot.adapt import teacher_cache

    files = {
        teacher_cache(tmp_path, plant, controller)
        for plant in ("rlpilot/ReacherTrack-v0", "heated_tank.plant:HeatedTank")
        for controller in ("pd", "pd-ff", "heated_tank.pid:TankPID")
    }
    assert len(files) == 6 and all(path.parent == tmp_path / "adapt-teachers" for path in files)
    assert all(":" not in path.name and "/" not in path.name for path in files)
