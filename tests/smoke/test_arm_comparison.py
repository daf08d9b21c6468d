"""``benchmarks/robot_arm_track.py``, the arm comparison, end to end on a tiny scale: a real residual SAC run on
the PD, the classical rows, the table generated from the result file, the path figure.

The run stops before its first update (``sac.learning_starts`` above its budget), so its actor's last layer is
still exactly zero: played through the benchmark's own path (the run's saved config and normalisation, each
condition's disturbances swapped in), the residual row must reproduce the nominal-gain PD row on every measure.
A benchmark that evaluated the residual on the wrong condition, dropped the base controller or mixed up rows
would fail here.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlpilot.config import load_config
from rlpilot.loop.trainer import train

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # the whole comparison command, ~25 s (make test-all; kept out of make test's 10 minutes)
def test_the_arm_comparison_runs_end_to_end(tmp_path):
    pytest.importorskip("mujoco")
    overrides = ["train.total_frames=64", "sac.learning_starts=1000", "train.eval_every_frames=64"]
    overrides += ["train.eval_episodes=2", "train.seed=3"]
    config = load_config("sac-reacher-track-residual", overrides=overrides)
    run = train(config, run_dir=str(tmp_path / "runs" / "res-s3"), show_progress=False)
    assert run.frames == 64
    out = tmp_path / "robot_arm_track-2099-01-01.json"
    figure = tmp_path / "paths.png"
    command = [sys.executable, "benchmarks/robot_arm_track.py", "--episodes", "3", "--conditions", "nominal,delay"]
    group = f"residual SAC on PD={tmp_path}/runs/res-s*"
    again = f"again={tmp_path}/runs/res-s*"  # the same run, a second group: measured again below
    done = subprocess.run(
        [*command, "--group", group, "--group", again, "--out", str(out)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert list(data["conditions"]) == ["nominal", "delay"]
    for condition, rows in data["conditions"].items():
        assert list(rows) == [
            "PD (nominal gains)",
            "PID (nominal gains)",
            "PD robust (gains for randomised dynamics)",
            "PID robust (gains for randomised dynamics)",
            "PD oracle (gains for this condition)",
            "PID oracle (gains for this condition)",
            "PD adaptive (online identification, adaptive-pd)",
            "residual SAC on PD",
            "again",
        ]
        pd, residual = rows["PD (nominal gains)"], rows["residual SAC on PD"]
        assert residual["runs"] == 1
        for measure in ("RMSE (mm)", "max (mm)", "final (mm)", "effort", "smoothness", "return"):
            assert residual[measure] == pytest.approx(pd[measure], rel=1e-6, abs=1e-9), (condition, measure)
    # the delay is there: the nominal PD tracks far worse under it than on the nominal arm
    assert (
        data["conditions"]["delay"]["PD (nominal gains)"]["RMSE (mm)"]
        > 10 * (data["conditions"]["nominal"]["PD (nominal gains)"]["RMSE (mm)"])
    )
    # the robust gains (kp 1) survive the delay that the nominal ones (kp 10) do not
    robust = data["conditions"]["delay"]["PD robust (gains for randomised dynamics)"]["RMSE (mm)"]
    assert robust < data["conditions"]["delay"]["PD (nominal gains)"]["RMSE (mm)"] / 10
    assert "**delay**" in done.stdout and "| residual SAC on PD (1 runs, IQM) |" in done.stdout
    assert data["stamp"], "the result file is stamped"
    # --reuse: an earlier file's groups are carried with their provenance; a group measured again is not reused
    out2 = tmp_path / "robot_arm_track-2099-01-02.json"
    redone = subprocess.run(
        [*command, "--reuse", str(out), "--group", again, "--out", str(out2)], cwd=ROOT, capture_output=True, text=True
    )
    assert redone.returncode == 0, redone.stderr[-3000:]
    data2 = json.loads(out2.read_text())
    assert set(data2["reused"]) == {"residual SAC on PD"}
    assert data2["reused"]["residual SAC on PD"]["file"] == str(out.resolve())  # outside the repository: its full path
    for condition, rows in data2["conditions"].items():
        assert list(rows)[-2:] == ["residual SAC on PD", "again"]
        assert rows["residual SAC on PD"] == data["conditions"][condition]["residual SAC on PD"]
        assert rows["again"]["RMSE (mm)"] == pytest.approx(data["conditions"][condition]["again"]["RMSE (mm)"])
    drawn = subprocess.run(
        [*command[:2], "--figure", str(run.path), "--figure-condition", "delay", "--figure-out", str(figure)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    assert figure.stat().st_size > 10_000
