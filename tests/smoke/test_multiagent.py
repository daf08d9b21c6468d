"""Multi-agent runs through every verb: train (both presets, both backends), resume, eval with per-agent
returns, reference controllers, export with parity (ONNX on onnxruntime), check, doctor, sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cli_runner import run_cli
from rlpilot.config import load_config, preset_names
from rlpilot.loop.trainer import resume, train
from rlpilot.play.export import export_run
from rlpilot.play.group import evaluate_group
from rlpilot.play.load import load_artifact
from rlpilot.play.write import FORMATS
from rlpilot.runs import load_run

# MPE presets here; the VMAS preset (vmas extra): tests/smoke/test_vmas.py
MULTIAGENT_PRESETS = [name for name in preset_names() if load_config(name).env.id.startswith("mpe2.")]
TINY = ["env.num_envs=8", "ppo.steps_per_env=25", "ppo.minibatch_size=100", "train.eval_episodes=4"]


def _tiny(preset: str, *extra: str):
    frames = 8 * 25 * 2
    return load_config(
        preset, overrides=TINY + [f"train.total_frames={frames}", f"train.eval_every_frames={frames}", *extra]
    )


@pytest.fixture(scope="module")
def mappo_run(tmp_path_factory):
    return train(_tiny("mappo-spread"), run_root=str(tmp_path_factory.mktemp("runs")), show_progress=False)


def test_multiagent_presets_exist():
    assert {"mappo-spread", "ippo-spread"} <= set(MULTIAGENT_PRESETS)


@pytest.mark.parametrize("preset", MULTIAGENT_PRESETS)
def test_preset_trains_and_logs_each_agent(preset, tmp_path):
    result = train(_tiny(preset), run_root=str(tmp_path), show_progress=False)
    run = load_run(result.path)
    assert run.meta()["status"] == "finished" and result.frames == 400
    last = run.metrics()[-1]
    n = len(run.meta()["env_facts"]["agents"]["names"])
    for i in range(n):
        assert f"eval/return_agent{i}" in last and f"ppo/entropy_agent{i}" in last
    assert np.isclose(last["eval/return_mean"], np.mean([last[f"eval/return_agent{i}"] for i in range(n)]))
    assert 0.0 <= last["eval/landmarks_covered"] <= 1.0
    checkpoint = torch.load(run.path / "checkpoints/last.pt", weights_only=True)
    assert checkpoint["state"]["algo"]["updates"] > 0


def test_pettingzoo_backend_trains_through_torchrl_wrapper(tmp_path):
    config = load_config(
        "ippo-spread",
        overrides=TINY
        + ["env.backend=pettingzoo", "env.num_envs=2", "ppo.minibatch_size=50"]
        + ["train.total_frames=100", "train.eval_every_frames=100", "train.eval_episodes=2"],
    )
    result = train(config, run_root=str(tmp_path), show_progress=False)
    assert load_run(result.path).metrics()[-1]["frames"] == 100


def test_resume_continues_from_the_checkpoint(mappo_run):
    before = load_run(mappo_run.path).meta()
    run = resume(mappo_run.path, total_frames=800, show_progress=False)
    assert run.frames == 800 and load_run(run.path).meta()["resumes"] == (before.get("resumes") or 0) + 1


def test_eval_per_agent_and_reference_controllers(mappo_run, tmp_path):
    per_agent, task, csv_path, video = evaluate_group(
        str(mappo_run.path), episodes=5, seed=3, csv_path=tmp_path / "e.csv", video=tmp_path / "ep.gif"
    )
    assert per_agent.shape == (5, 3) and video.stat().st_size > 0
    assert csv_path.read_text().splitlines()[0] == "episode,seed,return,return_agent0,return_agent1,return_agent2"
    random, _, _, _ = evaluate_group(
        "mpe2.simple_spread_v3", episodes=50, seed=0, controller_name="random", csv_path=tmp_path / "r.csv"
    )
    heuristic, task, _, _ = evaluate_group(
        "mpe2.simple_spread_v3", episodes=50, seed=0, controller_name="heuristic", csv_path=tmp_path / "h.csv"
    )
    assert heuristic.mean() > random.mean() + 10 and task["landmarks_covered"] > 0.8


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_export_takes_the_agents_as_an_input_dimension(mappo_run, fmt, tmp_path, trusted_code):
    result = export_run(mappo_run.path, fmt, tmp_path / "out")
    signature = json.loads(result.signature.read_text())
    assert signature["inputs"][0]["shape"] == ["batch", 3, 18] and signature["outputs"][0]["shape"] == ["batch", 3]
    assert result.max_abs_diff == 0 and signature["parity"]["rule"] == "identical actions"
    act, _ = load_artifact(result.artifact)
    for batch in (1, 7):
        actions = act(np.random.default_rng(0).normal(size=(batch, 3, 18)).astype(np.float32))
        assert actions.shape == (batch, 3) and actions.dtype == np.int64
    per_agent, _, _, _ = evaluate_group(str(result.artifact), episodes=4, seed=0, csv_path=tmp_path / "a.csv")
    live, _, _, _ = evaluate_group(str(mappo_run.path), episodes=4, seed=0, csv_path=tmp_path / "l.csv")
    assert np.allclose(per_agent, live)


def test_cli_check_eval_doctor_on_a_group(mappo_run):
    check = run_cli("check", "mpe2.simple_spread_v3", "--episodes", "20")
    assert check.returncode == 0, check.stderr
    for text in ("agent: 3 agents", "agent/observation", "[time, agent, feature]", "joint action space", "heuristic"):
        assert text in check.stdout
    ev = run_cli("eval", mappo_run.path, "--episodes", "3")
    assert ev.returncode == 0 and "agent 2" in ev.stdout, ev.stderr
    doctor = run_cli("doctor", mappo_run.path)
    assert doctor.returncode == 0, doctor.stderr


def test_cli_bad_multiagent_input_is_one_line():
    typo = run_cli("train", "mappo", "mpe2.simple_sprad_v3")
    assert typo.returncode == 2 and "unknown multi-agent environment" in typo.stderr and "Traceback" not in typo.stderr
    wrong = run_cli("train", "mappo", "CartPole-v1")
    assert wrong.returncode == 2 and "PettingZoo env module" in wrong.stderr
    env_id = run_cli("eval", "mpe2.simple_spread_v3")
    assert env_id.returncode == 2 and "--controller" in env_id.stderr


def test_sweep_runs_group_presets_and_tables_them(tmp_path):
    from rlpilot.sweep import run_sweep

    frames = 8 * 25 * 2
    tiny = TINY + [f"train.total_frames={frames}", f"train.eval_every_frames={frames}"]
    result = run_sweep(
        "ippo-spread", seeds=2, grid=["marl.share_parameters=true,false"], out=tmp_path, workers=2, overrides=tiny
    )
    assert [r["point"] for r in result["rows"]] == ["marl.share_parameters=true", "marl.share_parameters=false"]
    assert all(r["runs"] == 2 for r in result["rows"])
    unshared = load_run(tmp_path / "marl.share_parameters-false" / "s1")
    state = torch.load(unshared.path / "checkpoints/last.pt", weights_only=True)["state"]["algo"]["actor"]
    assert any(key.startswith("nets.2.") for key in state)  # one network per agent
