"""Faults: signals. SIGTERM inside a long update (1,000 PPO epochs of 2-transition minibatches: minutes a
batch) is honoured within seconds, with a checkpoint and status ``interrupted``; SIGTERM during start-up
stops at once (exit 143, one line) and leaves no run marked "running"; SIGINT or SIGTERM at any moment of a
resume's start-up (imports included), in a process started in the background (SIGINT inherited as ignored),
stops it in one line and leaves the run resumable."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from cli_runner import TESTS, cli_command, cli_env, run_cli, start_cli


def _wait_for(condition, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end
        time.sleep(0.05)


def test_sigterm_inside_a_huge_update_and_during_start_up(tmp_path):
    path = tmp_path / "run"
    slow = ["--set", "ppo.epochs=1000", "--set", "ppo.minibatch_size=2", "--set", "train.loggers=[]"]
    process = start_cli("train", "ppo-cartpole", "--frames", 100_000, "--run-dir", path, "-q", *slow)
    meta = path / "meta.json"
    _wait_for(lambda: meta.exists() and "startup_s" in meta.read_text())  # the loop runs: inside the update
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    start = time.monotonic()
    process.communicate(timeout=60)
    assert process.returncode == 143 and time.monotonic() - start < 15
    data = json.loads(meta.read_text())
    assert data["status"] == "interrupted" and "SIGTERM" in data["reason"]
    assert (path / "checkpoints" / "last.pt").exists()

    early = tmp_path / "early"
    process = start_cli("train", "ppo-cartpole", "--frames", 100_000, "--run-dir", early, "-q")
    _wait_for(lambda: early.exists())  # the run directory exists; envs and networks are being built
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["rlpilot: interrupted (SIGTERM)"], err
    assert not early.exists() or json.loads((early / "meta.json").read_text())["status"] != "running"
    assert not Path(early, "checkpoints", "last.pt").exists()


def _start_in_background(*args) -> subprocess.Popen:
    """As a shell's ``cmd &`` (or a supervisor) starts it: SIGINT ignored from the first instruction."""
    return subprocess.Popen(
        cli_command(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
        env=cli_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )


def test_a_signal_at_any_moment_of_a_resume_start_up_stops_it(tmp_path):
    path = tmp_path / "run"
    quiet = ["-q", "--set", "train.loggers=[]", "--set", "train.stop_when_solved=false"]
    first = run_cli("train", "ppo-cartpole", "--frames", 2048, "--run-dir", path, *quiet)
    assert first.returncode == 0, first.stderr[-2000:]
    # from the CLI's first imports to the loop's first batch (a resume starts in ~2-4 s here; the ~0.1 s before
    # rlpilot's first line runs keep the default actions: SIGTERM ends the process, nothing written yet)
    for delay, sig in [(0.3, signal.SIGINT), (0.8, signal.SIGTERM), (1.4, signal.SIGINT), (2.5, signal.SIGTERM)]:
        process = _start_in_background("train", "--resume", path, "--frames", 10**9, "-q")
        time.sleep(delay)
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
        expected = 143 if sig == signal.SIGTERM else 130
        assert process.returncode == expected, (delay, sig, process.returncode, err[-2000:])
        assert "Traceback" not in err, err[-2000:]
        meta = json.loads((path / "meta.json").read_text())
        assert meta["status"] != "running", (delay, sig, meta, err[-2000:])
    again = run_cli("train", "--resume", path, "--frames", 4096, *quiet)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((path / "meta.json").read_text())["status"] == "finished"
