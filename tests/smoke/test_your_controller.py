"""A user's plant and controller (tests/controller_fixture.py, outside src/) through every controller feature:
``eval --controller``, ``check``, residual and gain-schedule training that starts exactly at the controller,
the gate on a user-named error signal, export with parity, ``--trust-code``, and the bad-input lines."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.controller_fixture import Axis, AxisPID

from rlpilot.cli import main
from rlpilot.config import load_config

PLANT = "tests.controller_fixture:Axis"
PID = "tests.controller_fixture:AxisPID"
TINY = [
    *("--set", "env.backend=sync", "--set", "env.num_envs=4", "--set", "ppo.steps_per_env=64"),
    *("--set", "ppo.minibatch_size=64", "--set", "train.loggers=[]", "--set", "train.eval_episodes=4"),
    *("--frames", "256", "-q"),
]


def rlpilot(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, *args) -> str:
    code, _, err = rlpilot(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error: "), (args, code, err)
    return lines[0]


def mean_return(stdout: str) -> float:
    return float(stdout.split("mean ")[1].split()[0])


def hand_played_returns(controller, episodes: int, seed: int) -> np.ndarray:
    """The controller stepped by hand on one plant at a time (episode i: seed + i): no rlpilot in the loop."""
    returns = []
    for i in range(episodes):
        env = Axis()
        observation, _ = env.reset(seed=seed + i)
        controller.reset(None)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                action = controller(torch.as_tensor(observation)[None])[0].numpy()
            observation, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return np.array(returns)


def test_eval_plays_a_user_controller_as_written(capsys, tmp_path):
    csv = tmp_path / "pid.csv"
    code, out, _ = rlpilot(capsys, "eval", PLANT, "--controller", PID, "--episodes", 6, "--seed", 3, "--csv", csv)
    assert code == 0, out
    played = np.loadtxt(csv, delimiter=",", skiprows=1, usecols=2)
    assert np.allclose(played, hand_played_returns(AxisPID(), 6, 3), rtol=0, atol=1e-4)
    # built with the user's arguments: other gains, other returns
    code, softer, _ = rlpilot(
        capsys, "eval", PLANT, "--controller", PID, "--controller-kwargs", "{kp: 0.5}", "--episodes", 6, "--seed", 3
    )
    expected = hand_played_returns(AxisPID(kp=0.5), 6, 3).mean()
    assert code == 0 and mean_return(softer) == pytest.approx(expected, abs=0.01)
    assert mean_return(softer) != pytest.approx(played.mean(), abs=0.01)


def test_bad_controllers_are_one_line(capsys):
    line = one_line_error(capsys, "eval", PLANT, "--controller", "tests.controller_fixture:TwoOutputs")
    assert "returns shape (2, 2)" in line and "(2, 1)" in line
    line = one_line_error(capsys, "eval", PLANT, "--controller", "no_such_package.ctrl:PID")
    assert "cannot import module 'no_such_package.ctrl'" in line
    line = one_line_error(capsys, "eval", PLANT, "--controller", PID, "--controller-kwargs", "{kq: 1}")
    assert "cannot build controller" in line and "kq" in line
    gains = ["--set", "env.base_controller=tests.controller_fixture:GainsMismatch", "--set", "env.residual_mode=gains"]
    line = one_line_error(capsys, "train", "ppo", PLANT, *gains, *TINY)
    assert "gains of shape (2, 1)" in line and "('kp',)" in line
    plain = ["--set", "env.base_controller=tests.controller_fixture:AxisPD", "--set", "env.residual_mode=gains"]
    line = one_line_error(capsys, "train", "ppo", PLANT, *plain, *TINY)
    assert "declares none" in line and "gain_names" in line
    line = one_line_error(capsys, "train", "ppo", PLANT, "--set", "env.base_controller=pd", *TINY)
    assert "name your own" in line and "package.module:Class" in line
    line = one_line_error(capsys, "train", "ppo", PLANT, "--set", "env.base_controller=not a class", *TINY)
    assert "package.module:Class" in line


@pytest.mark.parametrize("algo,mode", [("ppo", "add"), ("ppo", "gains"), ("sac", "gains")])
def test_an_untrained_residual_policy_plays_the_users_controller_exactly(algo, mode):
    from rlpilot.control.algos import build
    from rlpilot.control.evaluate import evaluate
    from rlpilot.envs import make_env

    overrides = [f"env.base_controller={PID}", "env.backend=sync", f"env.residual_mode={mode}"]
    config = load_config(algo=algo, env_id=PLANT, overrides=overrides)
    residual_env = make_env(config.env, num_envs=4, seed=7)
    policy_actions = 2 if mode == "gains" else 1  # a gain schedule acts on kp and kd, not on the motor
    assert residual_env.action_spec.shape[-1] == policy_actions
    algorithm = build(config, residual_env, torch.device("cpu"))
    assert torch.equal(algorithm.greedy_action(torch.randn(16, 3)), torch.zeros(16, policy_actions))
    learned = evaluate(residual_env, algorithm.greedy_action, episodes=6, seed=7)
    plain_env = make_env(load_config(algo=algo, env_id=PLANT, overrides=["env.backend=sync"]).env, num_envs=4, seed=7)
    alone = evaluate(plain_env, AxisPID(), episodes=6, seed=7)
    assert np.array_equal(learned.returns, alone.returns)  # the same episodes, bit for bit
    assert np.allclose(alone.returns, hand_played_returns(AxisPID(), 6, 7), rtol=0, atol=1e-4)


def test_the_gate_reads_the_error_signal_the_user_names():
    """env.residual_gate_index=0 (the position error): inside the envelope the plant gets the controller's
    command whatever the policy says; without the gate the same action reschedules it."""
    from rlpilot.envs import make_env

    overrides = [f"env.base_controller={PID}", "env.backend=sync", "env.residual_mode=gains", "env.residual_scale=1.0"]
    gated = [*overrides, "env.residual_gate=0.1", "env.residual_gate_index=0"]

    def command_after_settling(extra: list[str], action: list[float]) -> tuple[float, float]:
        """40 steps of the PID alone, then ``action``: (the position error then, the command the plant got)."""
        env = make_env(load_config(algo="ppo", env_id=PLANT, overrides=extra).env, num_envs=1, seed=5)
        vector_env = env.base_env.vector_env
        vector_env.reset(seed=5)
        for _ in range(40):
            observation, *_ = vector_env.step(np.zeros((1, 2), np.float32))
        vector_env.step(np.array([action], np.float32))
        plant = vector_env.env.envs[0].unwrapped
        env.close()
        return float(observation[0, 0]), plant.queue[-1]

    error, pid_command = command_after_settling(gated, [0.0, 0.0])
    assert abs(error) < 0.1  # the PID has settled inside the envelope
    assert command_after_settling(gated, [1.0, -1.0])[1] == pid_command  # the gate holds the schedule off
    assert command_after_settling(overrides, [0.0, 0.0])[1] == pid_command
    assert command_after_settling(overrides, [1.0, -1.0])[1] != pid_command  # ungated, it acts
    unnamed = load_config(algo="ppo", env_id=PLANT, overrides=[*overrides, "env.residual_gate=0.05"]).env
    with pytest.raises(Exception, match="residual_gate_index"):  # no entry named, no gate_signal on AxisPID
        make_env(unnamed, num_envs=1, seed=5)


def test_the_gate_reads_a_signal_the_users_controller_computes(capsys, tmp_path):
    """A controller's gate_signal(observation) is the gate's error signal where no entry is named: in the
    env (the schedule held off inside the envelope, acting outside it), in the export (traced with the
    controller, parity held), and refused in one line where it is the wrong shape or cannot be exported."""
    from tests.controller_fixture import PredictiveAxisPID

    from rlpilot.envs import make_env

    predictive = "tests.controller_fixture:PredictiveAxisPID"
    gated = [f"env.base_controller={predictive}", "env.backend=sync", "env.residual_mode=gains"]
    gated += ["env.residual_scale=1.0", "env.residual_gate=0.1"]
    env = make_env(load_config(algo="ppo", env_id=PLANT, overrides=gated).env, num_envs=2, seed=5)
    vector_env = env.base_env.vector_env
    assert vector_env.law.signal.__func__ is PredictiveAxisPID.gate_signal
    observation = torch.tensor([[0.05, 1.0, 0.0], [0.5, 0.0, 0.0]])  # signal 0.0 (inside), 0.5 (outside)
    assert vector_env.law.gate_weight(observation).flatten().tolist() == [0.0, 1.0]
    env.close()

    run = tmp_path / "gated"
    sets = [a for o in gated for a in ("--set", o)]
    code, _, err = rlpilot(capsys, "train", "ppo", PLANT, *sets, *TINY, "--run-dir", run)
    assert code == 0, err
    code, _, err = rlpilot(capsys, "export", run, "--format", "pt2", "--trust-code")
    assert code == 0, err
    signature = json.loads((run / "export" / "policy.pt2.json").read_text())
    assert "base.gate_signal(observation)" in signature["controller"]["note"]
    assert signature["parity"]["max_abs_diff"] <= 1e-4
    assert_plays_like_the_run(capsys, run, run / "export" / "policy.pt2")

    from rlpilot.check.env import check_env

    report = check_env(load_config(algo="ppo", env_id=PLANT, overrides=gated).env, episodes=2, progress=None)
    assert any(f"|{predictive}.gate_signal(observation)| reads above 0.1" in line for line in report.dynamics)
    wide = [*sets, "--set", "env.base_controller=tests.controller_fixture:WideGateSignal"]
    assert "one number per row" in one_line_error(
        capsys, "train", "ppo", PLANT, *wide, *TINY, "--run-dir", tmp_path / "w"
    )
    plain = [*sets, "--set", f"env.base_controller={PID}"]
    line = one_line_error(capsys, "train", "ppo", PLANT, *plain, *TINY, "--run-dir", tmp_path / "p")
    assert "gate_signal(observation)" in line and "residual_gate_index" in line
    numpy_run = tmp_path / "numpy-signal"
    numpy_sets = [*sets, "--set", "env.base_controller=tests.controller_fixture:NumpyGateSignal"]
    code, _, err = rlpilot(capsys, "train", "ppo", PLANT, *numpy_sets, *TINY, "--run-dir", numpy_run)
    assert code == 0, err  # live, numpy inside works
    line = one_line_error(capsys, "export", numpy_run, "--trust-code")
    assert "gate_signal" in line and "cannot be exported" in line


def test_check_reports_the_controller_alone():
    from rlpilot.check.env import check_env
    from rlpilot.config import EnvConfig
    from rlpilot.control.evaluate import evaluate
    from rlpilot.envs import make_env

    env_cfg = EnvConfig(id=PLANT, base_controller=PID, residual_mode="gains", backend="sync")
    report = check_env(env_cfg, episodes=4, progress=None)
    text = report.render()
    assert f"Controller {PID} alone over 4 episodes" in text
    assert "action box [-1, 1]" in text and "saturated" in text
    plain = make_env(EnvConfig(id=PLANT, backend="sync"), num_envs=4, seed=0)
    alone = evaluate(plain, AxisPID(), episodes=4, seed=0)
    assert f"return  mean {alone.mean:.2f}" in report.controller[1]
    share = float(report.controller[3].split("saturated ")[1].split("%")[0])
    assert 0 < share < 100  # the steps saturate the motor, then it settles


@pytest.fixture(scope="module")
def schedule_run(tmp_path_factory) -> Path:
    """A PPO gain schedule on the user's PID (2 updates), exported as pt2."""
    run = tmp_path_factory.mktemp("schedule") / "run"
    schedule = [*("--set", f"env.base_controller={PID}", "--set", "env.residual_mode=gains")]
    assert main(["train", "ppo", PLANT, *schedule, *map(str, TINY), "--run-dir", str(run)]) == 0
    assert main(["export", str(run), "--format", "pt2", "--trust-code"]) == 0
    return run


def assert_plays_like_the_run(capsys, run: Path, artifact: Path) -> None:
    code, out, _ = rlpilot(capsys, "eval", run, "--episodes", 4, "--trust-code")
    assert code == 0
    code, played, _ = rlpilot(capsys, "eval", artifact, "--episodes", 4, "--trust-code")
    assert code == 0 and played.splitlines()[0].split(":")[1] == out.splitlines()[0].split(":")[1]


def test_a_gain_schedule_run_exports_with_its_controller_and_needs_trust(capsys, schedule_run, tmp_path):
    run = schedule_run
    for args in (["eval", run], ["export", run], ["train", "--resume", run, "--frames", 512, "-q"]):
        assert "builds env" in one_line_error(capsys, *args)  # the env module is named first; both need trust
    artifact = run / "export" / "policy.pt2"
    signature = json.loads((run / "export" / "policy.pt2.json").read_text())
    assert signature["state"] == {"size": 1, "initial": 0.0}  # the PID's integral in and out
    assert signature["controller"]["base"] == PID and signature["outputs"][0]["shape"] == ["batch", 1]
    assert signature["parity"]["max_abs_diff"] <= 1e-4 and signature["parity"]["observations"] == 1000
    assert_plays_like_the_run(capsys, run, artifact)
    # the one guard a stateful artifact carries is read as data; anything added to it is refused
    crafted = tmp_path / "policy.pt2"
    with zipfile.ZipFile(artifact) as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    model = next(name for name in contents if name.endswith("models/model.json"))
    program = json.loads(contents[model])
    assert program["guards_code"]  # observation and state batches agree
    program["guards_code"] = [program["guards_code"][0] + " or open('x', 'w')"]
    contents[model] = json.dumps(program).encode()
    with zipfile.ZipFile(crafted, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    (tmp_path / "policy.pt2.json").write_text((run / "export" / "policy.pt2.json").read_text())
    assert "guards code" in one_line_error(capsys, "eval", crafted, "--trust-code")


@pytest.mark.slow  # two more formats, ~40 s on this machine
@pytest.mark.parametrize("fmt,name", [("onnx", "policy.onnx"), ("torchscript", "policy.ts.pt")])
def test_the_schedule_exports_in_every_format(capsys, schedule_run, tmp_path, fmt, name):
    code, _, err = rlpilot(capsys, "export", schedule_run, "--format", fmt, "--out", tmp_path, "--trust-code")
    assert code == 0, err
    assert_plays_like_the_run(capsys, schedule_run, tmp_path / name)


def test_a_controller_that_cannot_be_exported_is_refused_in_one_line(capsys, tmp_path):
    run = tmp_path / "numpy"
    base = ["--set", "env.base_controller=tests.controller_fixture:NumpyPD"]
    code, _, err = rlpilot(capsys, "train", "ppo", PLANT, *base, *TINY, "--run-dir", run)
    assert code == 0, err  # live, numpy inside works
    line = one_line_error(capsys, "export", run, "--trust-code")
    assert "cannot be exported" in line and "no numpy" in line
    assert not (run / "export").exists()


def test_a_run_naming_a_user_controller_needs_trust_code(tmp_path):
    """The env is gymnasium's; only the controller is the user's code: eval, export, resume refuse it."""
    from rlpilot.common.files import atomic_write
    from rlpilot.play.trust import target_code

    config = load_config(algo="sac", env_id="Pendulum-v1", overrides=["env.base_controller=mypkg.ctrl:MyPID"])
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    atomic_write(tmp_path / "meta.json", "{}")
    found = target_code(tmp_path)
    assert found is not None and "controller 'mypkg.ctrl:MyPID'" in found and "mypkg.ctrl" in found


def test_the_example_plant_and_its_pid_follow_the_protocol(monkeypatch):
    """examples/dc_motor (docs/your-controller.md): the PID fits the axis (one command, three schedulable
    gains, an integral) and exports; the plant's disturbances act."""
    from rlpilot.controllers import check_controller, exportable

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    from dc_motor.pid import AxisPID as ExamplePID
    from dc_motor.plant import ConveyorAxis, RandomizedConveyorAxis

    plant = ConveyorAxis()
    pid = ExamplePID()
    check_controller(pid, "dc_motor.pid:AxisPID", plant.observation_space, plant.action_space, gains=True)
    exportable(pid, "dc_motor.pid:AxisPID", 4, gains=3)
    finals = []
    for dynamics in ({}, {"load_torque": 1.5}, {"friction": 1.5}, {"delay": 2}):
        env = ConveyorAxis(**dynamics)
        observation, _ = env.reset(seed=0)
        pid.reset(None)
        errors = 0.0
        for _ in range(80):  # a hold, then a move
            with torch.no_grad():
                action = pid(torch.as_tensor(observation)[None])[0].numpy()
            observation, *_ = env.step(action)
            errors += abs(float(observation[0]))
        finals.append(round(errors, 6))
    assert len(set(finals)) == 4, finals  # each disturbance changes the motion
    drawn = RandomizedConveyorAxis()
    assert drawn.reset(seed=1)[1]["dynamics"] != drawn.reset(seed=2)[1]["dynamics"]


@pytest.mark.slow  # Optuna storage and 10 evaluations: 12-40 s on this 2-core machine, by its load
def test_tune_searches_the_users_controller_gains_and_checks_them_on_fresh_episodes(capsys, tmp_path):
    pytest.importorskip("optuna")
    out = tmp_path / "tune"
    args = ["tune", PLANT, "--controller", PID, "--param", "kp=0.3:30:log", "--controller-kwargs", "{ki: 0.0}"]
    args += ["--trials", 3, "--episodes", 4, "--check-episodes", 4, "--out", out]
    code, text, err = rlpilot(capsys, *args)
    assert code == 0, err
    result = json.loads((out / "tune.json").read_text())
    best = result["best"]
    assert set(best) == {"kp", "ki"} and best["ki"] == 0.0 and 0.3 <= best["kp"] <= 30
    # the tuning score is the controller's mean return on episodes 0-3, played by hand here
    assert result["tuning"]["mean_return"] == pytest.approx(hand_played_returns(AxisPID(**best), 4, 0).mean(), abs=1e-3)
    assert "check (4 fresh episodes from 1000, the same for both)" in text and "commissioned" in text
    # the check is paired: the two controllers on the same episodes, the mean difference and a verdict
    check = result["check"]
    assert len(check["differences"]) == 4 and check["mean"] == pytest.approx(
        result["check_tuned"]["mean_return"] - result["check_commissioned"]["mean_return"]
    )
    assert check["verdict"].startswith(("tuning helped", "tuning hurt", "no significant difference"))
    assert check["verdict"] in text
    summary = (out / "summary.md").read_text()
    assert "tuned - commissioned, per episode" in summary and check["verdict"] in summary and "best.yaml" in summary
    config = __import__("yaml").safe_load((out / "best.yaml").read_text())
    assert config["env"] == {"base_controller": PID, "base_controller_kwargs": best}
    code, again, _ = rlpilot(capsys, *args)  # the same command continues the study: nothing left to run
    assert code == 0 and json.loads((out / "tune.json").read_text())["trials"] == 3
    assert "--param" in one_line_error(capsys, "tune", PLANT, "--controller", PID, "--out", out)
