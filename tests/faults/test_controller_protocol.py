"""Faults (issue 55, class 3): the controller protocol holds on every call, not only on the zero-observation check
when a controller is built. A user's controller (tests/controller_fixture.py) that starts to raise, to change its
action's shape or to act NaN or inf at a random step, its ``gate_signal`` going NaN, malformed protocol attributes,
non-finite kwargs and an exported artifact acting NaN: each is one line naming the controller (or the artifact),
exit 2, on every path (eval ``--controller``, the residual env in training, ``check``, ``tune --controller``,
playing an artifact)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.config import load_config
from rlpilot.envs.catalogue import base_controller

PLANT = "tests.controller_fixture:Axis"
LATE = "tests.controller_fixture:LateFault"
EPISODE_STEPS = 60  # the Axis's episodes: one controller call per step for the whole batch
TINY = [
    *("--set", "env.backend=sync", "--set", "env.num_envs=4", "--set", "ppo.steps_per_env=64"),
    *("--set", "ppo.minibatch_size=64", "--set", "train.loggers=[]", "--set", "train.eval_episodes=2"),
    *("--frames", "256", "-q"),
]
FAULT_SAYS = {
    "raise": "raised on a batch of 4 observations",
    "nan": "returned non-finite actions (NaN or inf) in row(s)",
    "inf": "returned non-finite actions (NaN or inf) in row(s)",
    "shape": "returned shape (4, 2)",
    "tuple": "returned a tuple",
}
QUICK = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def rlpilot(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, *args) -> str:
    code, out, err = rlpilot(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error: "), (args, code, out, err)
    return lines[0]


def flow(mapping: dict) -> str:
    return yaml.safe_dump(mapping, default_flow_style=True).strip()


# -- every call checked, whenever it goes wrong -------------------------------------------------------------
@QUICK
@given(after=st.integers(1, EPISODE_STEPS + 10), fault=st.sampled_from(sorted(FAULT_SAYS)), row=st.integers(0, 3))
def test_eval_refuses_a_controller_that_goes_wrong_at_any_step(capsys, after, fault, row):
    """Right for ``after`` calls (the check when it is built is the first), wrong from then on: one line naming
    the controller and the step; right for the whole episode: it plays, every return finite."""
    kwargs = flow({"after": after, "fault": fault, "row": row})
    args = ["eval", PLANT, "--controller", LATE, "--controller-kwargs", kwargs, "--episodes", 4]
    if after > EPISODE_STEPS:
        code, out, err = rlpilot(capsys, *args)
        assert code == 0 and "nan" not in out and "inf" not in out, err
        return
    line = one_line_error(capsys, *args)
    assert f"controller '{LATE}'" in line and FAULT_SAYS[fault] in line, line
    assert f"on step {after} " in line, line
    if fault in ("nan", "inf"):
        assert f"row(s) [{row}] of 4" in line and "its observations there were finite" in line


def test_an_exception_keeps_its_traceback_for_debug(capsys):
    """Without --debug: one line with what the controller raised; with it, the controller's own traceback."""
    args = ["eval", PLANT, "--controller", LATE, "--controller-kwargs", "{fault: raise, after: 3}", "--episodes", 2]
    line = one_line_error(capsys, *args)
    assert "RuntimeError: sensor bus timeout" in line and "Traceback" not in line
    with pytest.raises(UserError) as raised:
        main(["--debug", *map(str, args)])
    assert isinstance(raised.value.__cause__, RuntimeError)


@QUICK
@given(after=st.integers(1, 40), fault=st.sampled_from(["raise", "nan", "inf", "shape"]))
def test_the_residual_env_checks_the_controller_on_every_step(after, fault):
    """The env a residual policy trains in calls the controller every step: a fault at any step is one line
    naming it, never a NaN reward blamed on the env."""
    from rlpilot.envs import make_env

    overrides = [f"env.base_controller={LATE}", f"env.base_controller_kwargs={flow({'after': after, 'fault': fault})}"]
    env_cfg = load_config(algo="ppo", env_id=PLANT, overrides=[*overrides, "env.backend=sync"]).env
    vector_env = make_env(env_cfg, num_envs=2, seed=0).base_env.vector_env
    try:
        vector_env.reset(seed=0)
        for _ in range(after - 1):  # the controller's call 1 was the check when it was built
            vector_env.step(torch.zeros(2, 1).numpy())
        with pytest.raises(UserError, match=f"controller '{LATE}'.*on step {after} "):
            vector_env.step(torch.zeros(2, 1).numpy())
    finally:
        vector_env.close()


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(["add", "gains"]), row=st.integers(0, 2), bad=st.sampled_from([float("nan"), float("inf")]))
def test_a_non_finite_policy_action_is_blamed_on_the_policy_not_the_controller(mode, row, bad):
    """A diverged residual policy's NaN (a gain schedule's too: NaN gains make the PID's action NaN) is named as
    the policy's, before the controller is called, not as the controller's output or the env's reward."""
    from rlpilot.envs import make_env

    pid = "tests.controller_fixture:AxisPID"
    overrides = [f"env.base_controller={pid}", f"env.residual_mode={mode}", "env.backend=sync"]
    vector_env = make_env(load_config(algo="ppo", env_id=PLANT, overrides=overrides).env, num_envs=3, seed=0)
    vector_env = vector_env.base_env.vector_env
    try:
        vector_env.reset(seed=0)
        action = torch.zeros(vector_env.action_space.shape)
        vector_env.step(action.numpy())
        action[row] = bad
        with pytest.raises(UserError, match=rf"residual policy's actions .* in env\(s\) \[{row}\], before controller"):
            vector_env.step(action.numpy())
    finally:
        vector_env.close()


@pytest.mark.parametrize("fault", ["raise", "nan"])
def test_training_on_a_controller_that_goes_wrong_is_one_line_naming_it(capsys, tmp_path, fault):
    sets = [
        "--set",
        f"env.base_controller={LATE}",
        "--set",
        f"env.base_controller_kwargs={{after: 20, fault: {fault}}}",
    ]
    line = one_line_error(capsys, "train", "ppo", PLANT, *sets, *TINY, "--run-dir", tmp_path / "run")
    says = {"raise": "raised on a batch of 4 observations on step 20", "nan": "returned non-finite actions"}[fault]
    assert f"controller '{LATE}'" in line and says in line and "reward" not in line, line


def test_a_nan_gate_signal_is_named_as_such_not_the_envs_reward(capsys, tmp_path):
    gate = ["--set", "env.residual_gate=0.1", "--set", f"env.base_controller={LATE}"]
    gate += ["--set", "env.base_controller_kwargs={where: gate_signal, fault: nan, after: 5}"]
    line = one_line_error(capsys, "train", "ppo", PLANT, *gate, *TINY, "--run-dir", tmp_path / "run")
    assert f"controller '{LATE}': gate_signal returned non-finite values" in line and "reward" not in line
    gate[-1] = "env.base_controller_kwargs={where: gate_signal, fault: raise, after: 5}"
    line = one_line_error(capsys, "train", "ppo", PLANT, *gate, *TINY, "--run-dir", tmp_path / "raised")
    assert f"controller '{LATE}': gate_signal raised" in line and "sensor bus timeout" in line


def test_check_plays_the_controller_checked(capsys):
    sets = ["--set", f"env.base_controller={LATE}", "--set", "env.base_controller_kwargs={after: 30, fault: shape}"]
    code, _, err = rlpilot(capsys, "check", PLANT, *sets, "--set", "env.backend=sync", "--episodes", 2)
    errors = [line for line in err.splitlines() if not line.startswith("[check]")]  # check's progress lines
    assert code == 2 and len(errors) == 1 and errors[0].startswith("rlpilot: error: "), err
    assert f"controller '{LATE}' returned shape (2, 2) on step 30" in errors[0] and "(2, 1)" in errors[0]


def test_a_stateful_controller_whose_state_changes_shape_is_one_line(capsys):
    forgetful = "tests.controller_fixture:ForgetfulPID"
    line = one_line_error(capsys, "eval", PLANT, "--controller", forgetful, "--episodes", 4)
    assert f"controller '{forgetful}' raised" in line and "next state of (1, 1), not (2, 1)" in line


def test_a_reset_that_raises_is_one_line(capsys):
    resets = "tests.controller_fixture:ResetRaises"
    line = one_line_error(capsys, "eval", PLANT, "--controller", resets, "--episodes", 2)
    assert f"controller '{resets}': reset raised" in line and "RuntimeError: bus reset failed" in line


# -- the protocol's attributes, refused before any call ---------------------------------------------------------
MALFORMED = {
    "state_size": st.one_of(
        st.text(min_size=1, max_size=4), st.floats(allow_nan=True), st.integers(-5, -1), st.booleans(), st.none()
    ),
    "gain_names": st.one_of(
        st.text(min_size=1, max_size=4),
        st.lists(st.integers(), min_size=1, max_size=3),
        st.just(["kp", "kp"]),
        st.just(["kp", ""]),
        st.integers(),
    ),
    "gate_signal": st.one_of(st.integers(), st.floats(), st.text(max_size=4)),
    "reset": st.one_of(st.integers(), st.text(max_size=4)),
    "step": st.one_of(st.integers(), st.text(max_size=4)),
}


@st.composite
def malformed_attributes(draw) -> tuple[str, object]:
    name = draw(st.sampled_from(sorted(MALFORMED)))
    return name, draw(MALFORMED[name])


@settings(max_examples=150, deadline=None)
@given(attribute=malformed_attributes())
def test_malformed_protocol_attributes_are_refused_when_built(attribute):
    name, value = attribute
    with pytest.raises(UserError, match=f"controller 'tests.controller_fixture:Declares'.*{name}"):
        base_controller("tests.controller_fixture:Declares", PLANT, {name: value})


@settings(max_examples=30, deadline=None)
@given(state_size=st.integers(1, 8), gain_names=st.lists(st.sampled_from(["kp", "ki", "kd"]), unique=True))
def test_well_formed_attributes_pass(state_size, gain_names):
    controller = base_controller("tests.controller_fixture:Declares", PLANT, {"state_size": state_size})
    assert controller.state_size == state_size
    base_controller("tests.controller_fixture:Declares", PLANT, {"gain_names": tuple(gain_names)})


def test_a_string_state_size_is_one_line_on_every_path(capsys, tmp_path):
    kwargs = "{state_size: '1'}"
    declares = "tests.controller_fixture:Declares"
    expected = f"controller '{declares}': state_size must be a whole number >= 0"
    assert expected in one_line_error(capsys, "eval", PLANT, "--controller", declares, "--controller-kwargs", kwargs)
    sets = ["--set", f"env.base_controller={declares}", "--set", f"env.base_controller_kwargs={kwargs}"]
    assert expected in one_line_error(capsys, "train", "ppo", PLANT, *sets, *TINY, "--run-dir", tmp_path / "r")


# -- non-finite kwargs, refused when parsed -------------------------------------------------------------------
NON_FINITE = st.sampled_from([".nan", ".inf", "-.inf", ".NaN", ".Inf"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["kp", "kd", "ki"]), bad=NON_FINITE, nested=st.booleans())
def test_non_finite_controller_kwargs_are_refused_when_parsed(capsys, key, bad, nested):
    """``--controller-kwargs`` and ``env.base_controller_kwargs``: a NaN or inf anywhere in them (a gain, an entry
    of a list) is one line naming the key, before anything is built."""
    value = f"[1.0, {bad}]" if nested else bad
    kwargs = f"{{kp: 2.0, {key}: {value}}}"
    pd = "tests.controller_fixture:AxisPD"
    line = one_line_error(capsys, "eval", PLANT, "--controller", pd, "--controller-kwargs", kwargs)
    assert f"--controller-kwargs.{key}{'.1' if nested else ''} must be a finite number" in line
    with pytest.raises(UserError, match=f"env.base_controller_kwargs.{key}.* must be a finite number"):
        load_config(algo="ppo", env_id=PLANT, overrides=[f"env.base_controller_kwargs={kwargs}"])


def test_adaptive_pd_with_a_nan_gain_is_refused_when_parsed(capsys):
    line = one_line_error(
        capsys, "eval", "rlpilot/ReacherTrack-v0", "--controller", "adaptive-pd", "--controller-kwargs", "{kp: .nan}"
    )
    assert "--controller-kwargs.kp must be a finite number (got nan)" in line
    sets = ["--set", "env.base_controller=adaptive-pd", "--set", "env.base_controller_kwargs={kp: .nan}"]
    line = one_line_error(capsys, "train", "ppo-reacher-track-gains", *sets, "--frames", 256, "-q")
    assert "env.base_controller_kwargs.kp must be a finite number" in line


@pytest.mark.parametrize(
    "param, says",
    [("kp=1:inf", "a range's bounds are finite numbers"), ("kp=nan:1", "a range's bounds are finite numbers"),
     ("kp=1,.nan", "--param kp.1 must be a finite number"), ("kp=-1.7e308:1.7e308", "wider than a float holds")],
)  # fmt: skip
def test_tune_refuses_non_finite_search_ranges(capsys, tmp_path, param, says):
    args = ["tune", PLANT, "--controller", "tests.controller_fixture:AxisPD", "--param", param, "--trials", 1]
    assert says in one_line_error(capsys, *args, "--episodes", 2, "--check-episodes", 0, "--out", tmp_path)


def test_tune_fails_the_trials_a_controller_breaks_and_says_so_when_all_do(capsys, tmp_path):
    """A controller that raises at some arguments fails those trials (one line each) and the search goes on;
    when every trial fails, one line with the first failure, not Optuna's traceback."""
    args = ["tune", PLANT, "--controller", LATE, "--controller-kwargs", "{fault: raise}", "--episodes", 2]
    args += ["--check-episodes", 0, "--trials", 4, "--param", "after=1:90"]
    code, out, err = rlpilot(capsys, *args, "--out", tmp_path / "some")
    failed = [line for line in out.splitlines() if ": failed: " in line]
    assert code == 0 and "best of 4 trials" in out and len(failed) < 4, err
    assert all(f"controller '{LATE}' raised" in line for line in failed)
    line = one_line_error(capsys, *args[:-1], "after=1:20", "--out", tmp_path / "none")
    assert "no trial of 4 completed; the first: controller" in line and "sensor bus timeout" in line


# -- an exported artifact, when it is played ------------------------------------------------------------------
def test_an_artifact_whose_controller_acts_nan_is_refused_when_played(capsys, tmp_path):
    """A residual run on a controller that breaks down past a speed the nominal axis never reaches, exported
    (parity holds), then played on a plant 100 times lighter, which reaches it: one line naming the artifact and
    its controller, not ``mean nan`` and exit 0."""
    fragile = "tests.controller_fixture:FragilePD"
    run = tmp_path / "run"
    sets = ["--set", f"env.base_controller={fragile}"]
    assert rlpilot(capsys, "train", "ppo", PLANT, *sets, *TINY, "--run-dir", run)[0] == 0
    assert rlpilot(capsys, "export", run, "--format", "pt2", "--trust-code")[0] == 0
    artifact = run / "export" / "policy.pt2"
    code, out, _ = rlpilot(capsys, "eval", artifact, "--episodes", 4, "--trust-code")
    assert code == 0 and "nan" not in out
    signature_path = artifact.with_name("policy.pt2.json")
    signature = json.loads(signature_path.read_text())
    signature["env"]["kwargs"] = {"load": 0.01}
    signature_path.write_text(json.dumps(signature))
    line = one_line_error(capsys, "eval", artifact, "--episodes", 4, "--trust-code")
    assert f"policy.pt2 (controller {fragile} + policy) returned non-finite actions (NaN or inf)" in line
    assert "when played" in line
