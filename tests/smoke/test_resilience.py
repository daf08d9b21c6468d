"""Runs that survive: kills and resumes, guards, safe checkpoints, loggers, plots of the real data."""

import csv
import json
import os
import pickle
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from cli_runner import run_cli, start_cli
from rlpilot.config import load_config
from rlpilot.loop.trainer import train
from rlpilot.plot import curve_data, plot_runs, smoothing_window
from rlpilot.runs import load_run

rlpilot, start = run_cli, start_cli


def wait_for_training(run_dir: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (run_dir / "metrics.csv").exists():
            return
        time.sleep(0.05)
    raise AssertionError("training did not start")


def assert_run_files_intact(run_dir: Path, *, just_killed: bool = False) -> None:
    """Every run file parses. ``just_killed``: a SIGKILL that lands inside an atomic write leaves that write's
    hidden temporary file (``.NAME.XXXX.tmp``; the file it replaces is intact), and the next writer removes it
    when it takes the run's lock (tests/faults: test_stale_temp_files_are_removed_when_a_run_is_locked); at any
    other time there is none."""
    yaml.safe_load((run_dir / "config.yaml").read_text())
    json.loads((run_dir / "meta.json").read_text())
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        json.loads(line)
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(len(row) == len(rows[0]) and None not in row.values() for row in rows)
    for name in ("last.pt", "best.pt"):
        if (run_dir / "checkpoints" / name).exists():
            torch.load(run_dir / "checkpoints" / name, weights_only=True)
    temporary = list(run_dir.rglob("*.tmp"))
    if just_killed:
        assert all(p.name.startswith(".") for p in temporary), temporary  # what the lock's clean-up removes
    else:
        assert not temporary


@pytest.mark.slow  # one kill and resume per kind of run is in make test (test_lifecycle.py); five here
def test_sigkill_five_times_then_resume_to_solved(tmp_path):
    run_dir = tmp_path / "run"
    interval = 1024
    overrides = [
        "--set",
        f"train.checkpoint_every_frames={interval}",
        "--set",
        "ppo.lr=3e-4",  # slower than the preset (with its former 5 epochs and clip 0.2): the kills must land mid-run
        "--set",
        "ppo.epochs=5",
        "--set",
        "ppo.clip_epsilon=0.2",
        "--set",
        "train.log_every_frames=256",
        "--set",
        "train.total_frames=300000",
    ]
    rng = random.Random(0)
    for attempt in range(5):
        args = (
            ["train", "--resume", str(run_dir), "-q"]
            if attempt
            else ["train", "ppo-cartpole", "--run-dir", str(run_dir), "-q", *overrides]
        )
        process = start(*args)
        if attempt == 0:
            wait_for_training(run_dir)
        time.sleep(rng.uniform(1.0, 3.0) + (4.5 if attempt else 0.0))
        if process.poll() is not None:
            break  # solved before this kill: the remaining kills have nothing to interrupt
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert_run_files_intact(run_dir, just_killed=True)
    out = rlpilot("train", "--resume", str(run_dir), "-q", timeout=600)
    if "already ended" not in out.stderr:
        assert out.returncode == 0, out.stderr
    run = load_run(run_dir)
    assert run.status == "solved" and run.last_eval >= 475
    assert_run_files_intact(run_dir)
    frames = [row["frames"] for row in run.metrics()]
    assert frames == sorted(set(frames)), "a frame range was logged twice"
    gaps = np.diff([0.0] + frames)
    assert gaps.max() <= interval + 256 + 256, f"a gap of {gaps.max()} frames: more than one checkpoint interval"
    resumes = [e for e in run.events() if e["event"] == "resume"]
    assert len(resumes) >= 1 and run.meta()["resumes"] == len(resumes)


def test_sigterm_writes_a_checkpoint_and_exits_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    process = start(
        "train", "ppo-pendulum", "--run-dir", str(run_dir), "-q", "--set", "train.checkpoint_every_frames=1000000"
    )
    wait_for_training(run_dir)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and f"resume: rlpilot train --resume {run_dir}" in stdout
    run = load_run(run_dir)
    assert run.status == "interrupted" and "SIGTERM" in run.meta()["reason"]
    checkpoint = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    stopped_at = run.frames
    assert checkpoint["frames"] == stopped_at > 0
    out = rlpilot("train", "--resume", str(run_dir), "--frames", str(stopped_at + 4096), "-q")
    assert out.returncode == 0, out.stderr
    assert load_run(run_dir).frames >= stopped_at + 4096


def test_nan_observations_reset_the_env_with_an_event(tmp_path):
    config = load_config(
        algo="ppo",
        env_id="envs_for_tests:NaNAfterK",
        overrides=[
            "env.num_envs=4",
            "ppo.steps_per_env=32",
            "ppo.minibatch_size=64",
            "train.total_frames=1024",
            "train.eval_episodes=2",
            "train.solved_at=1000",
        ],
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    events = [e for e in run.events() if e["event"] == "nonfinite_observation"]
    assert events and events[0]["action"] == "reset" and events[0]["envs"]
    assert run.status == "finished" and run.frames == 1024  # the run continued
    for row in run.metrics():
        assert all(np.isfinite(v) for k, v in row.items() if k.startswith(("loss/", "ppo/")))


def test_nan_observations_can_stop_the_run(tmp_path):
    config = load_config(
        algo="ppo",
        env_id="envs_for_tests:NaNAfterK",
        overrides=[
            "env.num_envs=4",
            "ppo.steps_per_env=32",
            "ppo.minibatch_size=64",
            "train.total_frames=2048",
            "guard.on_nonfinite_obs=stop",
        ],
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert run.status == "failed"
    assert "non-finite observation from env(s)" in run.meta()["reason"]


def test_guard_skips_cuts_lr_and_rolls_back(tmp_path):
    config = load_config(
        "ppo-cartpole",
        overrides=[
            "guard.max_loss=1e-9",
            "guard.max_trips=5",
            "train.total_frames=2048",
            "train.checkpoint_every_frames=512",
        ],
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    events = run.events()
    skips = [e for e in events if e["event"] == "guard_skip"]
    assert skips and skips[0]["reason"].startswith("loss above")
    assert skips[-1]["lr_scale"] < skips[0]["lr_scale"] < 1
    assert any(e["event"] == "rollback" for e in events)
    assert run.meta()["guard_trips"] == len(skips)


def one_line_refusal(capsys, *args: str) -> str:
    """``rlpilot ARGS`` in this process (the CLI's ``main``, without a fresh interpreter per call: these six
    calls cost ~25 s as subprocesses): exit 2 and one line on stderr, which is returned."""
    from rlpilot.cli import main

    capsys.readouterr()
    code = main(list(args))
    stderr = capsys.readouterr().err
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    return stderr


def test_unsafe_checkpoints_are_refused_and_never_executed(tmp_path, capsys):
    config = load_config(
        "ppo-cartpole", overrides=["train.total_frames=512", "train.eval_every_frames=512", "train.eval_episodes=2"]
    )
    run = train(config, run_root=str(tmp_path / "a"), show_progress=False, run_dir=str(tmp_path / "ppo"))
    last = run.path / "checkpoints" / "last.pt"
    good = last.read_bytes()

    last.write_bytes(good[: len(good) // 2])  # truncated
    assert "cannot load checkpoint" in one_line_refusal(capsys, "eval", str(run.path))

    marker = tmp_path / "payload-ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with last.open("wb") as handle:
        pickle.dump({"state": Payload()}, handle)
    for args in (["eval", str(run.path)], ["train", "--resume", str(run.path)], ["export", str(run.path)]):
        one_line_refusal(capsys, *args)
    assert not marker.exists(), "loading a checkpoint executed code"

    other = train(
        load_config(
            "dqn-cartpole", overrides=["train.total_frames=512", "train.eval_every_frames=512", "train.eval_episodes=2"]
        ),
        run_root=str(tmp_path / "b"),
        show_progress=False,
    )
    last.write_bytes((other.path / "checkpoints" / "last.pt").read_bytes())  # a checkpoint from another preset
    for args in (["eval", str(run.path)], ["train", "--resume", str(run.path), "--frames", "4096"]):
        assert "dqn" in one_line_refusal(capsys, *args)


def test_tensorboard_events_match_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = load_config(
        "ppo-cartpole",
        overrides=[
            "train.total_frames=4096",
            "train.eval_every_frames=2048",
            "train.eval_episodes=3",
            "train.stop_when_solved=false",
        ],
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    accumulator = EventAccumulator(str(run.path / "tb"))
    accumulator.Reload()
    assert "eval/return_mean" in accumulator.Tags()["scalars"]
    logged = {e.step: e.value for e in accumulator.Scalars("eval/return_mean")}
    expected = {int(r["frames"]): r["eval/return_mean"] for r in run.metrics() if "eval/return_mean" in r}
    assert logged.keys() == expected.keys()
    for step, value in expected.items():
        assert logged[step] == pytest.approx(value, rel=1e-6)


def test_plot_data_is_the_runs_data(tmp_path):
    runs = [
        train(
            load_config(
                "ppo-cartpole",
                overrides=[
                    f"train.seed={s}",
                    "train.total_frames=6144",
                    "train.eval_every_frames=2048",
                    "train.eval_episodes=3",
                    "train.stop_when_solved=false",
                ],
            ),
            run_root=str(tmp_path),
            show_progress=False,
        )
        for s in range(3)
    ]
    single = plot_runs(runs[:1], tmp_path / "one.svg")
    rows = [r for r in runs[0].metrics() if "train/episode_return" in r]
    np.testing.assert_array_equal(single["train_y"], [r["train/episode_return"] for r in rows])
    assert single["window"] == smoothing_window(len(rows))
    np.testing.assert_allclose(single["rolling_mean"][-1], np.mean(single["train_y"][-single["window"] :]))
    assert (tmp_path / "one.svg").read_text().startswith("<?xml")
    multi = plot_runs(runs, tmp_path / "three.png", x="time")
    assert multi["n"] == 3 and (tmp_path / "three.png").stat().st_size > 1000
    frames = curve_data(runs, x="frames")
    evals = np.array([[r["eval/return_mean"] for r in run.metrics() if "eval/return_mean" in r] for run in runs])
    np.testing.assert_allclose(frames["mean"][-1], evals[:, -1].mean())
    assert (frames["low"] <= frames["mean"]).all() and (frames["mean"] <= frames["high"]).all()
    out = rlpilot("plot", *[str(r.path) for r in runs], "--out", str(tmp_path / "cli.png"))
    assert out.returncode == 0 and "runs: 3" in out.stdout
