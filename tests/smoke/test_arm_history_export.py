"""An arm run trained with ``env.kwargs.obs_history`` exports with the history as the artifact's state: the
artifact takes only the current measurement (the observation without the history columns) and its own state,
and acts as the run acts on the env's full observation, step after step, across resets; ``rlpilot eval`` and
``examples/deploy_onnx.py`` carry the state and start every episode from zeros; the manifest says the layout."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
pytest.importorskip("onnxruntime")

from cli_runner import cli_env  # noqa: E402
from rlpilot.config import load_config  # noqa: E402
from rlpilot.control.evaluate import evaluate  # noqa: E402
from rlpilot.envs.arm.env import register_envs  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402
from rlpilot.play.export import export_run  # noqa: E402
from rlpilot.play.load import StatefulArtifact, load_artifact, load_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from deploy_onnx import OnnxController  # noqa: E402

ENV_ID = "rlpilot/ReacherTrack-v0"
STEPS = 4
KWARGS = f"env.kwargs={{randomize: all, obs_last_action: true, obs_history: {STEPS}}}"
TINY = ["env.num_envs=2", "train.total_frames=64", "train.eval_every_frames=64", "train.eval_episodes=1"]
TINY += ["sac.learning_starts=1000"]  # no update: the policy is untrained, the artifact is real


def tiny_run(path: Path, preset: str, overrides: list[str], formats: tuple[str, ...]) -> Path:
    run = train(load_config(preset, overrides=[*overrides, *TINY]), run_dir=str(path), show_progress=False)
    for fmt in formats:
        export_run(run.path, fmt)
    return run.path


# one worker takes this file's tests, so its module fixture (a run, exported: ~10-15 s) is built once, not once per
# worker
pytestmark = pytest.mark.xdist_group("arm_history_export")


@pytest.fixture(scope="module")
def history_run(tmp_path_factory) -> Path:
    """SAC on the arm under randomised dynamics (noise, delay) with a 4-step history, exported as onnx and pt2
    into RUN/export (~8 s)."""
    return tiny_run(tmp_path_factory.mktemp("history") / "run", "sac-reacher-track", [KWARGS], ("onnx", "pt2"))


@pytest.fixture(scope="module")
def pid_history_run(tmp_path_factory) -> Path:
    """A PID gain schedule with a 2-step history: the state is the integral, then the history (~6 s)."""
    overrides = ["env.base_controller=pid", KWARGS.replace(f"obs_history: {STEPS}", "obs_history: 2")]
    return tiny_run(tmp_path_factory.mktemp("pid") / "run", "sac-reacher-track-gains", overrides, ("onnx",))


def run_actions(run_dir: Path):
    """The run's greedy action from the env's full observation (normalised as the run normalises)."""
    policy = load_policy(run_dir)

    def act(observation: np.ndarray) -> np.ndarray:
        observation = torch.as_tensor(observation, dtype=torch.float32)[None]
        if policy.obs_norm:
            observation = (observation - policy.obs_norm["loc"]) / policy.obs_norm["scale"]
        with torch.no_grad():
            return policy.algo.greedy_action(observation)[0].numpy()

    return act


def reduced(observation: np.ndarray) -> np.ndarray:
    """The observation a deployed controller measures: without the history columns."""
    return np.concatenate([observation[:14], observation[14 + 4 * STEPS :]])


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_the_artifact_acts_as_the_run_from_the_current_measurement_and_its_own_state(history_run, fmt):
    """Two episodes (a reset between them) on the run's env: the artifact, fed the observation without the
    history and its own state back (onnx: examples/deploy_onnx.py's OnnxController; pt2: what eval loads), gives
    the run's greedy action from the full observation; its state is the env's history columns; and the env
    without the history (the signature's kwargs) measures exactly the reduced observation."""
    artifact = history_run / "export" / f"policy.{fmt}"
    controller = OnnxController(artifact) if fmt == "onnx" else load_artifact(artifact)[0]
    act = run_actions(history_run)
    signature = json.loads(Path(f"{artifact}.json").read_text())
    register_envs()
    env = gym.make(ENV_ID, **load_config_kwargs(history_run))
    deployed = gym.make(ENV_ID, **signature["env"]["kwargs"])
    worst = 0.0
    for seed in (3, 4):
        observation, _ = env.reset(seed=seed)
        measured, _ = deployed.reset(seed=seed)
        controller.reset()
        for _ in range(200):
            assert np.array_equal(reduced(observation), measured)
            action = controller(measured) if fmt == "onnx" else controller(measured[None])[0]
            worst = max(worst, float(np.abs(action - act(observation)).max()))
            state = controller.feed["state"] if fmt == "onnx" else controller.state
            assert np.array_equal(state[0], next_history(observation))  # what the env shows at the next step
            observation, *_ = env.step(action)
            measured, *_ = deployed.step(action)
    assert worst <= 1e-5, worst


def next_history(observation: np.ndarray) -> np.ndarray:
    """The history the env shows at the next step: this step's [dq, last command] in front, the oldest out."""
    history = observation[14 : 14 + 4 * STEPS]
    return np.concatenate([observation[4:6], observation[12:14], history[:-4]])


def load_config_kwargs(run_dir: Path) -> dict:
    from rlpilot.runs import load_run

    return load_run(run_dir).config().env.kwargs


def test_eval_and_deploy_start_every_episode_from_zero_state(history_run, tmp_path):
    """The state is zeros for a batch the artifact has not seen, a partial reset zeroes only its rows, and
    eval's loop resets it each round: two rounds of two envs play the run's episodes; examples/deploy_onnx.py
    (without torch) plays the run's returns over two episodes."""
    artifact = history_run / "export" / "policy.onnx"
    stateful, _ = load_artifact(artifact)
    assert isinstance(stateful, StatefulArtifact) and stateful.state_size == 4 * STEPS
    rows = np.random.default_rng(0).normal(size=(2, 14)).astype(np.float32)
    stateful(rows)
    assert not stateful.state[:, 4:].any()  # one step from zeros: only the newest entry is filled
    assert np.array_equal(stateful.state[:, :2], rows[:, 4:6]) and np.array_equal(
        stateful.state[:, 2:4], rows[:, 12:14]
    )
    stateful.reset([True, False])
    assert not stateful.state[0].any() and stateful.state[1].any()
    controller = OnnxController(artifact)
    controller(rows[0])
    controller.reset()
    assert not controller.feed["state"].any() and controller.feed["state"].shape == (1, 4 * STEPS)

    target, run = playable(artifact), playable(history_run)
    results = []
    for side in (run, target):
        env = side.make_env(num_envs=2, seed=11)
        results.append(evaluate(env, side.policy_for(env), episodes=4, seed=11).returns)
        env.close()
    np.testing.assert_allclose(results[1], results[0], rtol=1e-4, atol=1e-3)

    script = (
        "import runpy, sys\n"
        f"sys.argv = ['deploy_onnx.py', {str(artifact)!r}, '--episodes', '2', '--seed', '5']\n"
        f"runpy.run_path({str(ROOT / 'examples' / 'deploy_onnx.py')!r}, run_name='__main__')\n"
        "assert 'torch' not in sys.modules and 'torchrl' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr[-2000:]
    deployed = [float(value) for value in re.findall(r"episode \d: return (-?[\d.]+)", out.stdout)]
    act, env = run_actions(history_run), gym.make(ENV_ID, **load_config_kwargs(history_run))
    expected = []
    for seed in (5, 6):
        observation, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(act(observation))
            total, done = total + float(reward), terminated or truncated
        expected.append(total)
    np.testing.assert_allclose(deployed, expected, atol=0.011)


def test_the_manifest_describes_the_state_layout(history_run, pid_history_run):
    signature = json.loads((history_run / "export" / "policy.onnx.json").read_text())
    size = 4 * STEPS
    assert [i["shape"] for i in signature["inputs"]] == [["batch", 14], ["batch", size]]
    assert [o["name"] for o in signature["outputs"]] == ["action", "next_state"]
    layout = signature["state"]["layout"]
    assert signature["state"]["size"] == size and signature["state"]["initial"] == 0.0
    assert layout == [
        {
            "name": "history",
            "size": size,
            "steps": STEPS,
            "entry": ["dq1", "dq2", "command1", "command2"],
            "order": "newest first: the previous step's entry, then the one before it",
        }
    ]
    assert signature["env"]["kwargs"]["obs_history"] == 0 and signature["env"]["trained_with"] == {"obs_history": 4}
    assert signature["parity"]["max_abs_diff"] <= 1e-5 and "full observations" in signature["parity"]["reference"]
    # a PID schedule with a history: the integral first, then the history, in one state
    pid = json.loads((pid_history_run / "export" / "policy.onnx.json").read_text())
    assert [(part["name"], part["size"]) for part in pid["state"]["layout"]] == [("controller", 2), ("history", 8)]
    assert pid["state"]["size"] == 10 and pid["inputs"][0]["shape"] == ["batch", 14]
    assert "controller (2 floats), then history (8 floats)" in pid["inputs"][1]["note"]
    assert pid["parity"]["max_abs_diff"] <= 1e-4  # export.BASE_TOLERANCE
