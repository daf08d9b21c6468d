"""LunarLander and Reacher from the command line: baseline controllers in `rlpilot eval`, missing extras."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rlpilot as package
from rlpilot.cli import main
from rlpilot.config import load_config
from rlpilot.loop.trainer import train

pytest.importorskip("mujoco")
pytest.importorskip("Box2D")


def rlpilot(capsys, *args) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _table(stdout: str) -> dict[str, float]:
    """`name mean X` lines of the eval printout, plus the return mean."""
    values = {"return": float(stdout.split("mean ")[1].split()[0])}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "mean":
            values[parts[0]] = float(parts[2])
    return values


def test_eval_controllers_on_an_env_id(tmp_path, capsys):
    pid = rlpilot(
        capsys, "eval", "Reacher-v5", "--controller", "pid", "--episodes", "10", "--csv", str(tmp_path / "p.csv")
    )
    rnd = rlpilot(
        capsys, "eval", "Reacher-v5", "--controller", "random", "--episodes", "10", "--csv", str(tmp_path / "r")
    )
    assert pid[0] == 0 and rnd[0] == 0, pid[2] + rnd[2]
    pid_table, random_table = _table(pid[1]), _table(rnd[1])
    assert pid_table["return"] > random_table["return"] + 20  # random: about -42, the PD baseline: about -4
    assert pid_table["final_distance"] < 0.01 < random_table["final_distance"]
    assert pid_table["action_smoothness"] < random_table["action_smoothness"]
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert len(rows) == 10 and {"return", "final_distance", "action_effort", "action_smoothness"} <= set(rows[0])


def test_eval_pid_on_a_trained_run_uses_the_runs_env(tmp_path, capsys):
    overrides = ["train.total_frames=1024", "train.eval_every_frames=1024", "train.eval_episodes=2"]
    run = train(load_config("ppo-reacher", overrides=overrides), run_root=str(tmp_path), show_progress=False)
    capsys.readouterr()
    policy = rlpilot(capsys, "eval", str(run.path), "--episodes", "4")
    pid = rlpilot(capsys, "eval", str(run.path), "--controller", "pid", "--episodes", "4")
    assert policy[0] == 0 and pid[0] == 0, policy[2] + pid[2]
    assert "final_distance" in policy[1] and "controller pid" in pid[1]
    assert (run.path / "eval-pid.csv").is_file() and (run.path / "eval.csv").is_file()  # neither overwrites the other


@pytest.mark.parametrize(
    "args, needle",
    [
        (["eval", "CartPole-v1", "--controller", "pid"], "--controller random"),  # pid is Reacher's
        (["eval", "Reacher-v5"], "add --controller random"),  # an env id is not a run
    ],
)
def test_misused_controller_is_one_line(capsys, args, needle):
    code, _, err = rlpilot(capsys, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err


def test_missing_extras_are_one_line_naming_them():
    # a fresh process with the packages made unimportable, as on an install without the extras
    code = (
        "import sys\nsys.modules['Box2D'] = sys.modules['mujoco'] = None\nfrom rlpilot.cli import main\n"
        "codes = [main(['check', 'LunarLander-v3']), main(['check', 'Reacher-v5'])]\nprint(codes)\n"
    )
    src = str(Path(package.__file__).resolve().parents[1])  # the rlpilot under test
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": src}
    )
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.stdout.strip() == "[2, 2]" and len(lines) == 2, out.stdout + out.stderr
    assert "LunarLander-v3" in lines[0] and "pip install 'rlpilot[box2d]'" in lines[0]
    assert "Reacher-v5" in lines[1] and "pip install 'rlpilot[mujoco]'" in lines[1]
