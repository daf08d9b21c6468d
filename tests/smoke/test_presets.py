"""Every preset trains end to end with a tiny budget and leaves a complete run directory."""

import json

import pytest
import torch

from rlpilot.config import load_config, preset_names
from rlpilot.loop.trainer import train
from rlpilot.play.episodes import evaluate_target
from rlpilot.play.load import load_policy
from rlpilot.runs import load_run

# grpo presets train a language model, not an env: tests/smoke/test_llm_runs.py; mappo/ippo presets a
# group of agents: tests/smoke/test_multiagent.py
CONTROL_PRESETS = [name for name in preset_names() if load_config(name).kind == "control"]

# Presets whose env steps slowly (CarRacing: ~1 ms a frame plus a CNN) get smaller batches and short
# episodes here, so the smoke test stays under ~20 s; the pipeline is the same.
SMOKE_OVERRIDES = {
    name: ["env.num_envs=2", "ppo.steps_per_env=32", "ppo.minibatch_size=32", "env.max_episode_steps=60"]
    for name in ("ppo-carracing", "ppo-carracing-discrete")
}
# MuJoCo locomotion: 1,000-step episodes; 50 play the same pipeline, on one thread (their learner takes both cores:
# beside the other test worker two threads wait on each other, 2-10 s a preset here)
SMOKE_OVERRIDES |= {
    f"{algo}-{env}": ["env.max_episode_steps=50", "train.num_threads=1"]
    for algo in ("sac", "td3")
    for env in ("halfcheetah", "hopper", "walker2d", "ant")
}


# ppo-carracing-discrete runs the ppo-carracing pipeline with a discrete head (~17 s): in make test-all
@pytest.mark.parametrize(
    "preset",
    [
        *(p for p in CONTROL_PRESETS if p != "ppo-carracing-discrete"),
        pytest.param("ppo-carracing-discrete", marks=pytest.mark.slow),
    ],
)
def test_preset_runs_and_writes_the_run_directory(preset, tmp_path):
    shrink = SMOKE_OVERRIDES.get(preset, [])
    config = load_config(preset, overrides=["train.eval_episodes=3"] + shrink)
    tiny = config.frames_per_batch * 2
    learn_at_once = [f"{config.algo}.learning_starts=0"] if config.algo in ("dqn", "sac", "td3") else []
    overrides = [f"train.total_frames={tiny}", f"train.eval_every_frames={tiny}", "train.eval_episodes=3"]
    config = load_config(preset, overrides=overrides + learn_at_once + shrink)
    result = train(config, run_root=str(tmp_path), show_progress=False)
    run = load_run(result.path)
    assert result.frames == tiny
    for name in ("config.yaml", "meta.json", "metrics.csv", "events.jsonl", "curve.png", "checkpoints/last.pt"):
        assert (run.path / name).is_file(), name
    meta = json.loads((run.path / "meta.json").read_text())
    assert meta["status"] in ("finished", "solved")
    assert {"python", "torch", "torchrl", "tensordict", "gymnasium", "rlpilot"} <= set(meta["versions"])
    assert run.config().to_dict() == config.to_dict()
    rows = run.metrics()
    assert rows[-1]["frames"] == tiny and "eval/return_mean" in rows[-1] and "time/elapsed_s" in rows[-1]
    assert any(e["event"] == "eval" for e in run.events())
    checkpoint = torch.load(run.path / "checkpoints/last.pt", weights_only=True)
    assert checkpoint["frames"] == tiny
    policy = load_policy(run.path)
    assert policy.algo.updates == checkpoint["state"]["algo"]["updates"] > 0
    result, csv_path, _ = evaluate_target(run.path, episodes=2, seed=0)
    assert len(result.returns) == 2 and len(csv_path.read_text().splitlines()) == 3


def test_algo_on_any_env_derives_defaults(tmp_path):
    config = load_config(
        algo="ppo",
        env_id="MountainCarContinuous-v0",
        overrides=["train.total_frames=512", "train.eval_every_frames=512", "train.eval_episodes=2"],
    )
    result = train(config, run_root=str(tmp_path), show_progress=False)
    assert result.status == "finished" and result.frames == 512


def test_time_budget_stops_the_run_with_a_final_eval(tmp_path):
    overrides = ["train.max_seconds=1.5", "train.eval_every_frames=1000000", "train.eval_episodes=2"]
    config = load_config("ppo-pendulum", overrides=overrides)
    result = train(config, run_root=str(tmp_path), show_progress=False)
    assert result.status == "finished" and 0 < result.frames < config.train.total_frames
    assert any(e["event"] == "time_limit" for e in result.events())
    assert "eval/return_mean" in result.metrics()[-1]


def test_the_run_trains_on_its_threads_and_leaves_the_process_as_it_was(tmp_path):
    """``train.num_threads`` holds while the run builds and trains; the caller's count comes back after it."""
    from rlpilot import registry

    seen = []

    def recording_builder(config, **kwargs):
        seen.append(torch.get_num_threads())
        return registry.trainable_builder(config.algo)(config, **kwargs)

    overrides = ["train.total_frames=256", "train.eval_episodes=2", "train.num_threads=2"]
    result = train(
        load_config("ppo-cartpole", overrides=overrides),
        run_root=str(tmp_path),
        show_progress=False,
        builder=recording_builder,
    )
    assert result.status in ("finished", "solved") and seen == [2]
    assert torch.get_num_threads() == 1  # conftest's count, as before the run
