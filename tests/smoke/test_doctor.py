"""doctor on real, deliberately broken short runs: the right finding with the right fix; no false alarms."""

import json
import subprocess
import sys

import pytest

from rlpilot.config import load_config
from rlpilot.doctor import diagnose
from rlpilot.loop.trainer import train

BROKEN = {
    # name: (preset, overrides, expected rule, text the fix must contain)
    "learning rate 1.0": (
        "ppo-cartpole",
        ["ppo.lr=1.0", "train.total_frames=20480"],
        "ppo_steps_too_large",
        "--set ppo.lr=0.1",
    ),
    "entropy coefficient 1.0": (
        "ppo-cartpole",
        # 20 epochs at LR 1e-3 (the preset's earlier setting): with the preset's current 5 epochs at 3e-3
        # the greedy argmax of a near-uniform policy still solves CartPole, and doctor rightly stays quiet
        ["ppo.entropy_coef=1.0", "train.total_frames=20480", "ppo.epochs=20", "ppo.minibatch_size=256", "ppo.lr=0.001"],
        "exploration_not_decaying",
        "--set ppo.entropy_coef=0.0",
    ),
    "reward scaled by 0": (
        "ppo-cartpole",
        ["env.reward_scale=0", "train.total_frames=10240"],
        "rewards_zero",
        "--set env.reward_scale=1.0",
    ),
    "gamma 0": (
        "ppo-cartpole",
        ["ppo.gamma=0", "train.total_frames=20480"],
        "horizon_too_short",
        "--set ppo.gamma=0.99",
    ),
    "buffer smaller than the batch": (
        "dqn-cartpole",
        ["dqn.buffer_size=32", "train.total_frames=8192"],
        "buffer_smaller_than_batch",
        "--set dqn.buffer_size=100000",
    ),
    "Categorical distribution over a one-hot action spec": (
        "ppo-cartpole",
        ["env.action_encoding=one_hot", "ppo.distribution=categorical", "train.total_frames=10240"],
        "actions_identical",
        "--set ppo.distribution=auto",
    ),
    "LR schedule ending at 10% of the budget": (
        "ppo-cartpole",
        ["ppo.lr_schedule_fraction=0.1", "ppo.lr=3e-4", "train.total_frames=40960"],
        "lr_zero_before_budget",
        "--set ppo.lr_schedule_fraction=1.0",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_run_is_diagnosed(case, tmp_path):
    preset, overrides, rule, fix = BROKEN[case]
    run = train(load_config(preset, overrides=overrides), run_root=str(tmp_path), show_progress=False)
    diagnosis = diagnose(run.path)
    found = {f.rule: f for f in diagnosis.findings}
    assert rule in found, diagnosis.render()
    finding = found[rule]
    assert finding.severity in ("error", "warning") and finding.evidence and fix in finding.fix
    assert preset in finding.fix


@pytest.mark.parametrize(
    "preset, seed",
    [("ppo-cartpole", 0), ("dqn-cartpole", 2), pytest.param("dqn-acrobot", 0, marks=pytest.mark.slow)],  # ~27 s
)
def test_healthy_runs_get_no_warning(preset, seed, tmp_path):
    run = train(load_config(preset, overrides=[f"train.seed={seed}"]), run_root=str(tmp_path), show_progress=False)
    assert run.status == "solved"
    diagnosis = diagnose(run.path)
    assert diagnosis.errors == 0 and diagnosis.warnings == 0, diagnosis.render()


def test_json_schema_and_cli(tmp_path):
    run = train(
        load_config("dqn-cartpole", overrides=["dqn.buffer_size=32", "train.total_frames=2048"]),
        run_root=str(tmp_path),
        show_progress=False,
    )
    out = subprocess.run(
        [sys.executable, "-m", "rlpilot.cli", "doctor", str(run.path), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 1  # an error-level finding
    report = json.loads(out.stdout)
    assert report["schema_version"] == 1 and report["run"] == str(run.path) and report["status"] == "finished"
    assert set(report["summary"]) == {"errors", "warnings", "infos"} and report["summary"]["errors"] >= 1
    for finding in report["findings"]:
        assert set(finding) == {"rule", "severity", "title", "evidence", "cause", "fix"}
        assert finding["severity"] in ("error", "warning", "info") and finding["evidence"]
    text = subprocess.run(
        [sys.executable, "-m", "rlpilot.cli", "doctor", str(run.path)], capture_output=True, text=True
    )
    assert "[error] the replay buffer is smaller than a batch" in text.stdout and "fix:" in text.stdout


def test_fix_of_a_config_file_run_keeps_the_config_file(tmp_path, capsys):
    """A run trained from ``--config FILE`` gets fixes that train that file again, with its ``--set`` overrides
    (issue 56: the fix dropped ``--config`` and would have trained plain DQN)."""
    from rlpilot.cli import main

    config = load_config("dqn-cartpole", overrides=["dqn.buffer_size=32"])
    config.preset = None  # a user's own file: nothing but the file says what it trains
    path = tmp_path / "mine.yaml"
    path.write_text(config.to_yaml())
    run_dir = tmp_path / "run"
    args = ["train", "--config", str(path), "--frames", "2048", "--set", "train.seed=1", "--run-dir", str(run_dir)]
    assert main([*args, "-q"]) == 0
    capsys.readouterr()
    assert main(["doctor", str(run_dir)]) == 1
    fix = next(line for line in capsys.readouterr().out.splitlines() if "dqn.buffer_size=100000" in line)
    expected = f"rlpilot train --config {path} --set train.seed=1 --set train.total_frames=2048"
    assert expected in fix and fix.endswith("--set dqn.buffer_size=100000")
