"""The VMAS backend (GPL-3: the vmas extra): navigation through TorchRL's VmasEnv trains, evaluates,
checks and exports like the other group envs; references; bad ids are one line."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vmas")

from cli_runner import run_cli  # noqa: E402
from rlpilot.config import load_config  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402
from rlpilot.multiagent.envs import make_vector  # noqa: E402
from rlpilot.multiagent.trainable import greedy_episodes  # noqa: E402
from rlpilot.play.export import export_run  # noqa: E402
from rlpilot.play.group import controller, evaluate_group  # noqa: E402
from rlpilot.runs import load_run  # noqa: E402

TINY = ["env.num_envs=8", "ppo.steps_per_env=25", "ppo.minibatch_size=100", "train.eval_episodes=4"]


def test_navigation_batch_api_and_masked_reset():
    env = make_vector(load_config("mappo-navigation").env, 4, seed=0)
    obs = env.reset(seed=1)
    assert obs.shape == (4, env.n_agents, env.obs_dim) and env.num_actions == 9
    obs2, reward, terminated, truncated = env.step(torch.zeros(4, env.n_agents, dtype=torch.long))
    assert reward.shape == (4, env.n_agents) and terminated.shape == truncated.shape == (4,)
    mask = torch.tensor([True, False, False, True])
    after = env.reset(mask=mask)
    assert torch.equal(after[1], obs2[1]) and not torch.equal(after[0], obs2[0])


def test_heuristic_beats_random_on_navigation():
    env = make_vector(load_config("mappo-navigation").env, 32, seed=0)
    random, _ = greedy_episodes(env, controller("random", env), seed=0)
    heuristic, _ = greedy_episodes(env, controller("heuristic", env), seed=0)
    assert heuristic.mean() > random.mean() + 0.5


def test_mappo_on_vmas_trains_exports_and_evaluates(tmp_path):
    frames = 8 * 25 * 2
    config = load_config(
        "mappo-navigation", overrides=TINY + [f"train.total_frames={frames}", f"train.eval_every_frames={frames}"]
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert load_run(run.path).metrics()[-1]["frames"] == frames
    result = export_run(run.path, "onnx", tmp_path / "out")
    assert result.max_abs_diff == 0
    per_agent, _, _, _ = evaluate_group(str(run.path), episodes=3, seed=0, csv_path=tmp_path / "e.csv")
    assert per_agent.shape[0] == 3


def test_cli_check_and_bad_scenario():
    check = run_cli("check", "vmas.navigation", "--episodes", "8")
    assert check.returncode == 0, check.stderr
    assert "agents/observation" in check.stdout and "[time, agent, feature]" in check.stdout
    typo = run_cli("train", "mappo", "vmas.navigaton")
    assert typo.returncode == 2 and "vmas.navigation" in typo.stderr and "Traceback" not in typo.stderr
