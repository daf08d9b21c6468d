"""Faults: signals. SIGTERM inside a long update (1,000 PPO epochs of 2-transition minibatches: minutes a
batch) is honoured within seconds, with a checkpoint and status ``interrupted``; SIGTERM during start-up
stops at once (exit 143, one line) and leaves no run marked "running"."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from cli_runner import start_cli


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
