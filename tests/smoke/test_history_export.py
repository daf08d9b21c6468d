"""A gain schedule on the heated tank trained with ``env.history`` (any env's history, rlpilot.envs.history) trains,
evaluates, and exports with the history as the artifact's state: the onnx artifact (examples/deploy_onnx.py's
OnnxController, onnxruntime) takes the plain tank's observation and its own state, and sends the plant what the
run's env sends it, step after step; its state's history part is the env's history columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from rlpilot.config import load_config  # noqa: E402
from rlpilot.envs.make import make_vector_env  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402
from rlpilot.play.episodes import evaluate_target  # noqa: E402
from rlpilot.play.export import export_run  # noqa: E402
from rlpilot.play.load import load_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TANK, PID = "heated_tank.plant:HeatedTank", "heated_tank.pid:TankPID"
STEPS = 4
GAINS = [f"env.base_controller={PID}", "env.residual_mode=gains", "env.residual_scale=0.5", "env.backend=sync"]
TINY = ["env.num_envs=2", "ppo.steps_per_env=32", "ppo.minibatch_size=32", "train.total_frames=64"]
TINY += ["train.eval_every_frames=64", "train.eval_episodes=1", "env.normalize_obs=true", "env.obs_norm_frames=64"]
TINY += ["env.max_episode_steps=50"]

pytestmark = pytest.mark.usefixtures("examples_on_path")


def test_a_gain_schedule_with_history_trains_evals_and_exports_with_the_history_as_state(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from deploy_onnx import OnnxController
    from heated_tank.plant import HeatedTank

    config = load_config(algo="ppo", env_id=TANK, overrides=[*GAINS, *TINY, f"env.history={STEPS}"])
    run = train(config, run_dir=str(tmp_path / "run"), show_progress=False)
    assert run.status == "finished"
    result, _, _ = evaluate_target(str(run.path), episodes=1, seed=3, csv_path=None)
    assert np.isfinite(result.returns).all()
    export_run(run.path, "onnx")
    artifact = run.path / "export" / "policy.onnx"
    signature = json.loads(Path(f"{artifact}.json").read_text())
    entry = 4 + 1  # the tank's 4 floats, then the heater power the plant received
    assert signature["inputs"][0]["shape"] == ["batch", 4]
    assert [(p["name"], p["size"]) for p in signature["state"]["layout"]] == [("controller", 4), ("history", 20)]
    assert signature["env"]["kwargs"] == {} and signature["env"]["trained_with"] == {"env.history": STEPS}

    policy = load_policy(run.path)
    env_config = load_config(config_file=run.path / "config.yaml").env
    vector_env = make_vector_env(env_config, 1)  # the run's env: the residual law and the history inside
    controller, plain = OnnxController(artifact), HeatedTank()
    moved = 0.0
    for seed in (5, 6):
        observation, _ = vector_env.reset(seed=seed)
        measured, _ = plain.reset(seed=seed)
        controller.reset()
        for _ in range(40):
            np.testing.assert_array_equal(observation[0, :4], measured)
            normalised = (torch.as_tensor(observation) - policy.obs_norm["loc"]) / policy.obs_norm["scale"]
            gains_action = policy.algo.greedy_action(normalised).numpy()
            moved = max(moved, float(np.abs(gains_action).max()))
            observation, *_ = vector_env.step(gains_action)
            sent = controller(measured)
            np.testing.assert_allclose(sent, vector_env.applied[0], atol=1e-4)
            history = controller.feed["state"][0, 4:]
            np.testing.assert_allclose(history, observation[0, 4:], atol=1e-4)  # the env's next history columns
            assert history.shape == (STEPS * entry,)
            measured, *_ = plain.step(vector_env.applied[0])  # the same plant on both sides
    assert moved > 0  # one batch moved the schedule: the artifact is not the base controller alone
    vector_env.close()
