"""The CLI as a user meets it: real subprocesses, exit codes and one-line errors."""

import json
import subprocess
import sys

import pytest

from cli_runner import run_cli

rlpilot = run_cli


def test_help_and_presets_do_not_import_torch():
    code = (
        "import sys; from rlpilot.cli import main\n"
        "try:\n    main(['presets'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'presets imported torch'\n"
        "assert 'torchrl' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ppo-cartpole" in out.stdout and "CartPole-v1" in out.stdout


def test_help_lists_the_verbs():
    out = rlpilot("--help")
    assert out.returncode == 0
    for verb in ("presets", "check", "train", "eval", "export", "plot"):
        assert verb in out.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["train", "ppo-cartpole", "--set", "ppo.clip_epsilon=abc"], "ppo.clip_epsilon: expected float"),
        (["train", "ppo-cartpole", "--set", "ppo.clip_epsilom=0.1"], "Did you mean ppo.clip_epsilon"),
        (["train", "ppo-cartpol"], "unknown preset 'ppo-cartpol'"),
        (["train", "ppo"], "needs an env too"),
        (["train", "ppo", "NoSuchEnv-v9"], "unknown environment 'NoSuchEnv-v9'"),
        (["check", "NoSuchEnv-v9"], "unknown environment 'NoSuchEnv-v9'"),
        (["check", "CartPol-v1"], "Did you mean CartPole-v1"),
        (["eval", "/nonexistent/run"], "is not a run directory"),
        (["bench", "--presets", "ppo-cartpole,nope"], "unknown preset(s) nope"),
        (["train", "ppo-cartpole", "--set", "env.backend=fast"], "env.backend must be one of"),
        (["train", "ppo", "LunarLander-v3", "--set", "env.backend=native"], "no native implementation"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    out = rlpilot(*args)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert needle in lines[0] and "Traceback" not in out.stderr


def test_debug_shows_the_traceback():
    out = rlpilot("--debug", "check", "NoSuchEnv-v9")
    assert out.returncode != 0 and "Traceback" in out.stderr


@pytest.mark.parametrize("target", ["CartPole-v1", "Pendulum-v1", "ppo-acrobot"])
def test_check_healthy_envs_exit_0(target):
    out = rlpilot("check", target)
    assert out.returncode == 0, out.stdout + out.stderr
    for section in (
        "Specs",
        "check_env_specs: passed",
        "Random policy",
        "Observation scale",
        "Pitfalls",
        "Verdict: healthy",
    ):
        assert section in out.stdout


def test_check_reports_broken_envs_with_exit_1():
    out = rlpilot("check", "envs_for_tests:UnseededEnv")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "[error] seeding does not reproduce" in out.stdout
    out = rlpilot("check", "envs_for_tests:IgnoresActionEnv")
    assert out.returncode == 1
    assert "[error] actions have no effect" in out.stdout
    assert "[warning] unnormalised observation scales" in out.stdout


# what a control run never loads: plotting (the curve is drawn by a helper process), language models,
# dataframes, export; and Ray and MuJoCo, which TorchRL imports when they are installed (rlpilot.common.torchrl_import)
NOT_ON_A_CONTROL_RUN = ("matplotlib", "transformers", "pandas", "onnx", "onnxruntime", "ray", "mujoco")


def _loaded_packages(importtime_stderr: str) -> set[str]:
    """Packages a process imported, from its ``PYTHONPROFILEIMPORTTIME`` lines: a package counts when a module
    inside it was imported (a hidden one logs only its refused top-level name)."""
    names = {
        line.rsplit("|", 1)[-1].strip() for line in importtime_stderr.splitlines() if line.startswith("import time:")
    }
    return {name.split(".")[0] for name in names if "." in name}


def test_train_and_eval_through_the_cli(tmp_path):
    run_dir = tmp_path / "run"
    out = rlpilot(
        "train",
        "ppo",
        "CartPole-v1",
        "--frames",
        "512",
        "--set",
        "train.eval_every_frames=512",
        "--set",
        "train.eval_episodes=2",
        "--run-dir",
        str(run_dir),
        "-q",
        env={"PYTHONPROFILEIMPORTTIME": "1"},  # every import the command made, on stderr
    )
    assert out.returncode == 0, out.stderr
    loaded = _loaded_packages(out.stderr)
    assert {"torchrl", "tensordict"} <= loaded  # the listing is real
    assert loaded.isdisjoint(NOT_ON_A_CONTROL_RUN), sorted(loaded & set(NOT_ON_A_CONTROL_RUN))
    assert f"run:    {run_dir}" in out.stdout and "curve:" in out.stdout
    # the command left through the quick exit (cli.entry): everything it wrote is complete and readable
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and (run_dir / "curve.png").stat().st_size > 0
    assert not list(run_dir.rglob(".*.tmp*"))
    # start-up: from the process start to the first frame, imports included (so never under half a second);
    # printed beside the wall time
    assert meta["startup_s"] > 0.5
    assert f"(after {meta['startup_s']:.1f} s of start-up)" in out.stdout
    out = rlpilot("eval", str(run_dir), "--episodes", "3", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert out.returncode == 0, out.stderr
    assert _loaded_packages(out.stderr).isdisjoint(NOT_ON_A_CONTROL_RUN)
    assert "3 greedy episodes: mean" in out.stdout and (run_dir / "eval.csv").is_file()
    out = rlpilot("train", "ppo", "CartPole-v1", "--frames", "512", "--run-dir", str(run_dir), "-q")
    assert out.returncode == 2 and "already exists" in out.stderr


def test_dqn_on_a_continuous_env_fails_at_once(tmp_path):
    out = rlpilot("train", "dqn-cartpole", "--set", "env.id=Pendulum-v1", "--runs", str(tmp_path))
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "DQN needs a discrete action space" in lines[0] and "ppo-pendulum" in lines[0]
    assert not list(tmp_path.iterdir()), "a failed start left a run directory behind"
