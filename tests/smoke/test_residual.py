"""Residual RL end to end on rlpilot/ReacherTrack-v0: train on top of the PD, export the whole controller
(base + residual) with its parity check, and play the artifact on the plain env exactly as the run plays."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
ort = pytest.importorskip("onnxruntime")

from tests.cli_runner import cli_env, run_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

from rlpilot.cli import main  # noqa: E402
from rlpilot.envs.arm.controllers import TrackPD  # noqa: E402
from rlpilot.play.load import load_policy  # noqa: E402
from rlpilot.runs import load_run  # noqa: E402

TINY = [
    *("--set", "env.base_controller=pd", "--set", "env.backend=sync", "--set", "env.num_envs=4"),
    *("--set", "train.eval_every_frames=512", "--set", "train.eval_episodes=4", "--frames", "1024"),
]


@pytest.mark.slow  # ~54 s of CLI processes (train, export, play) on this machine; make test must stay under 10 minutes
def test_residual_run_exports_base_plus_residual_and_plays_the_same(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli("train", "sac", "rlpilot/ReacherTrack-v0", *TINY, "--run-dir", run_dir, "-q", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    result = run_cli("export", run_dir, "--format", "onnx", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "max |exported - live|" in result.stdout
    artifact = run_dir / "export" / "policy.onnx"
    # the artifact is clip(PD(obs) + scale * greedy(normalised obs)), computed here independently
    policy = load_policy(run_dir)
    config = load_run(run_dir).config()
    observations = torch.as_tensor(make_observations(256), dtype=torch.float32)
    normalised = (observations - policy.obs_norm["loc"]) / policy.obs_norm["scale"] if policy.obs_norm else observations
    with torch.no_grad():
        expected = (TrackPD()(observations) + config.env.residual_scale * policy.algo.greedy_action(normalised)).clamp(
            -1, 1
        )
    session = ort.InferenceSession(str(artifact))
    (exported,) = session.run(None, {"observation": observations.numpy()})
    assert np.abs(exported - expected.numpy()).max() < 1e-4  # export.BASE_TOLERANCE
    assert np.abs(expected.numpy() - TrackPD()(observations).numpy()).max() > 0  # the residual is not zero
    # the run (residual env) and the artifact (plain env) play the same episodes the same way
    assert_artifact_plays_like_the_run(run_dir, artifact)
    # and examples/deploy_onnx.py runs the whole controller on the arm env with onnxruntime, without torch
    assert "mean return over 2 episodes" in deploy_onnx(artifact, episodes=2)


def run_here(capsys, *args) -> SimpleNamespace:
    """The CLI in this process (``rlpilot.cli.main``): what ``run_cli`` returns, without a new interpreter's start."""
    capsys.readouterr()
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def assert_artifact_plays_like_the_run(run_dir: Path, artifact: Path, cli=run_cli) -> None:
    """The run (residual env) and the artifact (plain env) play the same episodes the same way."""
    run_eval = cli("eval", run_dir, "--episodes", "2")
    artifact_eval = cli("eval", artifact, "--episodes", "2", "--trust-code")
    assert run_eval.returncode == artifact_eval.returncode == 0, run_eval.stderr + artifact_eval.stderr
    assert run_eval.stdout.splitlines()[0].split(":")[1] == artifact_eval.stdout.splitlines()[0].split(":")[1]
    # the effort of the motors (the env's measure) is the same whichever plays: the run's residual env or the
    # artifact's controller + policy on the plain env (the policy's own action, a gain schedule's, is not it); an
    # exported graph computes in float32 as the live policy does not, so the printed digits may part at the last
    efforts = [
        [
            [float(word) for word in line.split()[2::2]]
            for line in out.stdout.splitlines()
            if line.split()[:1] == ["effort"]
        ]
        for out in (run_eval, artifact_eval)
    ]
    assert efforts[0] and np.allclose(efforts[0], efforts[1], rtol=1e-3, atol=1e-7), efforts


def deploy_onnx(artifact: Path, *, episodes: int) -> str:
    """examples/deploy_onnx.py on ``artifact``, checked not to import torch; its output."""
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['deploy_onnx.py', {str(artifact)!r}, '--episodes', '{episodes}', '--seed', '5']\n"
        f"runpy.run_path({str(ROOT / 'examples' / 'deploy_onnx.py')!r}, run_name='__main__')\n"
        "assert 'torch' not in sys.modules and 'torchrl' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow  # 3 formats, eval and deploy, ~80 s; the PD residual's export is fast (make test-all)
def test_a_pid_gain_schedule_exports_with_its_integral_as_state_and_plays_the_same(tmp_path):
    """The PID base keeps an integral: the artifact takes (observation, state) and returns (action,
    next_state) in every format; eval carries the state (zeros each episode) and plays the run's episodes the
    same way; examples/deploy_onnx.py feeds the state back, without torch. The policy schedules the PID's gains
    (env.residual_mode=gains): the artifact is the PID with kp and kd times 10 ** (scale * policy), checked
    against that formula computed here."""
    from rlpilot.envs.arm.controllers import TrackPID
    from rlpilot.envs.residual import gain_multipliers
    from rlpilot.play.load import StatefulArtifact, load_artifact

    run_dir = tmp_path / "run"
    tiny = [a.replace("env.base_controller=pd", "env.base_controller=pid") for a in TINY]
    tiny += ["--set", "env.residual_mode=gains", "--set", "env.residual_scale=1.0"]
    result = run_cli("train", "sac", "rlpilot/ReacherTrack-v0", *tiny, "--run-dir", run_dir, "-q", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    for fmt, name in (("onnx", "policy.onnx"), ("pt2", "policy.pt2"), ("torchscript", "policy.ts.pt")):
        result = run_cli("export", run_dir, "--format", fmt, "--out", tmp_path / fmt, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        artifact = tmp_path / fmt / name
        run_artifact, signature = load_artifact(artifact, trusted=True)  # this test wrote it (TorchScript: code)
        assert isinstance(run_artifact, StatefulArtifact) and signature["state"] == {"size": 2, "initial": 0.0}
        assert [i["name"] for i in signature["inputs"]] == ["observation", "state"]
        assert [o["name"] for o in signature["outputs"]] == ["action", "next_state"]
        assert signature["parity"]["max_abs_diff"] < 1e-4, fmt
        assert_artifact_plays_like_the_run(run_dir, artifact)
    policy, config = load_policy(run_dir), load_run(run_dir).config()
    observations = torch.as_tensor(make_observations(64), dtype=torch.float32)
    state = torch.as_tensor(np.random.default_rng(1).normal(scale=0.05, size=(64, 2)), dtype=torch.float32)
    normalised = (observations - policy.obs_norm["loc"]) / policy.obs_norm["scale"] if policy.obs_norm else observations
    with torch.no_grad():
        gains = gain_multipliers(policy.algo.greedy_action(normalised), config.env.residual_scale)
        expected, expected_state = TrackPID().step(observations, state, gains)
    session = ort.InferenceSession(str(tmp_path / "onnx" / "policy.onnx"))
    exported, exported_state = session.run(None, {"observation": observations.numpy(), "state": state.numpy()})
    assert (
        np.abs(exported - expected.numpy()).max() < 1e-4
        and np.abs(exported_state - expected_state.numpy()).max() < 1e-5
    )
    assert not torch.equal(gains, torch.ones_like(gains))  # the schedule moved the gains
    assert "mean return over 1 episodes" in deploy_onnx(tmp_path / "onnx" / "policy.onnx", episodes=1)


def make_observations(rows: int) -> np.ndarray:
    """Arm observations with valid cos/sin pairs and modest velocities."""
    observations = np.random.default_rng(0).normal(size=(rows, 12))
    observations[:, :4] = np.concatenate([np.cos(observations[:, :2]), np.sin(observations[:, :2])], -1)
    observations[:, 6:8] = observations[:, 6:8].clip(-1, 1) * 0.1
    return observations


def test_an_adaptive_pd_gain_schedule_exports_with_its_identification_as_state_and_plays_the_same(tmp_path, capsys):
    """adaptive-pd (rlpilot.envs.arm.adaptive) identifies the arm as it runs: its regression is the artifact's
    state (27 numbers, zeros at an episode's start), carried by eval and by the exported graph alike; the ONNX
    artifact is the controller's step with the schedule's multipliers, checked against it computed here over a
    stretch of real states."""
    from rlpilot.envs.arm.adaptive import STATE_SIZE, TrackAdaptivePD
    from rlpilot.envs.arm.env import ReacherTrackEnv
    from rlpilot.envs.residual import gain_multipliers
    from rlpilot.play.load import StatefulArtifact, load_artifact

    run_dir = tmp_path / "run"
    tiny = [a.replace("env.base_controller=pd", "env.base_controller=adaptive-pd") for a in TINY]
    tiny += ["--set", "env.residual_mode=gains", "--set", "env.residual_scale=1.0", "--set", "train.compile=off"]
    cli = functools.partial(run_here, capsys)  # in this process: the CLI's own processes are tested above
    result = cli("train", "sac", "rlpilot/ReacherTrack-v0", *tiny, "--run-dir", run_dir, "-q")
    assert result.returncode == 0, result.stderr[-2000:]
    result = cli("export", run_dir, "--format", "onnx")
    assert result.returncode == 0, result.stderr[-2000:]
    artifact = run_dir / "export" / "policy.onnx"
    run_artifact, signature = load_artifact(artifact)
    assert isinstance(run_artifact, StatefulArtifact) and signature["state"] == {"size": STATE_SIZE, "initial": 0.0}
    assert signature["parity"]["max_abs_diff"] < 1e-4
    assert_artifact_plays_like_the_run(run_dir, artifact, cli)
    # the artifact against the controller's step, along a real episode's states (the regression filled in)
    policy, config = load_policy(run_dir), load_run(run_dir).config()
    controller, session = TrackAdaptivePD(), ort.InferenceSession(str(artifact))
    env = ReacherTrackEnv(action_delay=1)
    observation, _ = env.reset(seed=4)
    state = np.zeros((1, STATE_SIZE), dtype=np.float32)
    worst = 0.0
    for _ in range(60):
        obs = torch.as_tensor(observation[None])
        normalised = (obs - policy.obs_norm["loc"]) / policy.obs_norm["scale"] if policy.obs_norm else obs
        with torch.no_grad():
            gains = gain_multipliers(policy.algo.greedy_action(normalised), config.env.residual_scale)
            expected, _ = controller.step(obs, torch.as_tensor(state), gains)
        action, state = session.run(None, {"observation": observation[None], "state": state})
        worst = max(worst, float(np.abs(action - expected.numpy()).max()))
        observation, *_ = env.step(action[0])
    env.close()
    assert worst < 1e-4
    assert controller.estimates(torch.as_tensor(state))[1].item() > 0.9  # it found the delay, inside the artifact
