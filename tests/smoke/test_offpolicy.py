"""SAC and TD3 end to end with tiny budgets: native batched envs, export with the parity check, and a
resumed run that keeps its replay buffer and temperature."""

import json

import numpy as np
import pytest

from rlpilot.config import load_config
from rlpilot.envs import make_env
from rlpilot.envs.native import NativeEnv
from rlpilot.loop.trainer import resume, train
from rlpilot.play.episodes import evaluate_target
from rlpilot.play.export import export_run
from rlpilot.play.load import load_artifact
from rlpilot.play.write import FORMATS

TINY = ["model.hidden_sizes=[32, 32]", "train.eval_episodes=2"]


def tiny_run(root, *, preset=None, algo=None, env_id=None, frames: int, overrides=()):
    config = load_config(
        preset,
        algo=algo,
        env_id=env_id,
        overrides=[*TINY, f"train.total_frames={frames}", f"train.eval_every_frames={frames}", *overrides],
    )
    return train(config, run_root=str(root), show_progress=False)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0"])
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_native_backend_trains(algo, env_id, tmp_path):
    overrides = ["env.backend=native", "env.num_envs=4", f"{algo}.learning_starts=64"]
    config = load_config(algo=algo, env_id=env_id, overrides=overrides)
    env = make_env(config.env, seed=0)
    assert isinstance(env.base_env, NativeEnv)  # the native dynamics, not gymnasium behind a wrapper
    env.close()
    run = tiny_run(tmp_path, algo=algo, env_id=env_id, frames=512, overrides=overrides)
    assert run.meta()["status"] == "finished"
    last = run.metrics()[-1]
    assert last["frames"] == 512 and last["buffer/size"] == 512
    assert np.isfinite([last["loss/critic"], last["q/mean"], last["eval/return_mean"]]).all()
    assert 0.0 <= last["action/at_bound"] <= 1.0


@pytest.fixture(scope="module")
def exported_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    learn_now = {"sac-pendulum": ["sac.learning_starts=256"], "td3-pendulum": ["td3.learning_starts=256"]}
    return {preset: tiny_run(root, preset=preset, frames=1024, overrides=o) for preset, o in learn_now.items()}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("preset", ["sac-pendulum", "td3-pendulum"])
def test_export_deterministic_actor_with_parity(exported_runs, preset, fmt, tmp_path, trusted_code):
    run = exported_runs[preset]
    result = export_run(run.path, fmt, tmp_path / "out")
    signature = json.loads(result.signature.read_text())
    assert signature["action"]["type"] != "discrete" and result.max_abs_diff <= 1e-5
    assert signature["parity"]["observations"] == 1000
    policy, _ = load_artifact(result.artifact, trusted=True)  # this test wrote it (TorchScript is code)
    observations = np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32)
    action = policy(observations)
    assert action.shape == (7, 1) and (np.abs(action) <= 2.0 + 1e-6).all()  # Pendulum's Box: [-2, 2]
    np.testing.assert_array_equal(policy(observations), action)  # deterministic: the greedy actor
    live, _, _ = evaluate_target(run.path, episodes=3, seed=5, csv_path=tmp_path / "live.csv")
    artifact, _, _ = evaluate_target(
        result.artifact, episodes=3, seed=5, csv_path=tmp_path / "art.csv"
    )  # trusted_code: as `eval ARTIFACT --trust-code`
    np.testing.assert_allclose(artifact.returns, live.returns, rtol=1e-4, atol=1e-3)


def test_resumed_sac_keeps_its_replay_buffer_and_temperature(tmp_path):
    """A run stopped at 1,024 frames and resumed to 2,048: the buffer grows on from 1,024 (not from 0) and
    the temperature goes on from where it was (not from ``sac.alpha_init``)."""
    overrides = ["sac.learning_starts=128", "sac.lr=3e-3", "train.log_every_frames=128"]
    run = tiny_run(tmp_path, preset="sac-pendulum", frames=1024, overrides=overrides)
    before = run.metrics()
    assert before[-1]["buffer/size"] == 1024
    alpha_before = before[-1]["sac/alpha"]
    assert alpha_before < 0.5 * run.config().sac.alpha_init  # it moved: a reset would be visible
    # last.pt holds the 1,024 rows written (not the preset's 100,000-row capacity); best.pt, played and never
    # resumed, no replay
    last, best = (run.load_checkpoint(name)["state"]["algo"]["buffer"] for name in ("last", "best"))
    assert {len(column) for column in last["_storage"]["_storage"].values()} == {1024} and best is None

    resumed = resume(run.path, total_frames=2048, show_progress=False)
    rows = resumed.metrics()
    after = [row for row in rows if row["frames"] > 1024]
    assert [row for row in rows if row["frames"] <= 1024] == before  # the same curve up to the stop
    first = after[0]
    assert first["buffer/size"] == first["frames"] > 1024
    assert after[-1]["buffer/size"] == 2048
    # one learning phase (8 updates at lr 3e-3) moves log alpha by at most ~0.03
    assert abs(np.log(first["sac/alpha"]) - np.log(alpha_before)) < 0.1
    assert resumed.meta()["resumes"] == 1
