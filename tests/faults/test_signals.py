"""Faults: signals. SIGTERM inside a long update (1,000 PPO epochs of 2-transition minibatches: minutes a
batch) is honoured with a checkpoint and status ``interrupted``; SIGTERM during start-up stops it (exit 143, one
line) and leaves no run marked "running"; SIGINT or SIGTERM at any moment of a resume's start-up (imports
included), in a process started in the background (SIGINT inherited as ignored), stops it in one line and leaves
the run resumable. No wall clock is asserted: each process gets a generous timeout (a loaded machine is slow, not
wrong), and the outcome is what is checked."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cli_runner import TESTS, cli_command, cli_env, run_cli, start_cli

TIMEOUT_S = 300  # what a process gets to end after its signal: never reached unless the signal was ignored


def _wait_for(condition, timeout: float = TIMEOUT_S) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            pytest.fail("the condition never came true")
        time.sleep(0.05)


def _outcome(process: subprocess.Popen) -> str:
    """The process's stderr once it has ended (killed, and the test failed, if it outlives :data:`TIMEOUT_S`)."""
    try:
        return process.communicate(timeout=TIMEOUT_S)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a child left holding its pipes: not waited for
            process.communicate(timeout=30)
        pytest.fail("the process did not end after its signal")


def _catches(process: subprocess.Popen, *signals: int) -> bool:
    """Whether ``process`` has installed handlers for ``signals`` (``SigCgt`` in /proc), or has ended."""
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return True
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return process.poll() is not None or all(caught >> (sig - 1) & 1 for sig in signals)


def test_sigterm_inside_a_huge_update_and_during_start_up(tmp_path):
    path = tmp_path / "run"
    slow = ["--set", "ppo.epochs=1000", "--set", "ppo.minibatch_size=2", "--set", "train.loggers=[]"]
    process = start_cli("train", "ppo-cartpole", "--frames", 100_000, "--run-dir", path, "-q", *slow)
    meta = path / "meta.json"
    _wait_for(lambda: meta.exists() and "startup_s" in meta.read_text())  # the loop runs: inside the update
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _outcome(process)
    assert process.returncode == 143
    data = json.loads(meta.read_text())
    assert data["status"] == "interrupted" and "SIGTERM" in data["reason"]
    assert (path / "checkpoints" / "last.pt").exists()

    early = tmp_path / "early"
    process = start_cli("train", "ppo-cartpole", "--frames", 100_000, "--run-dir", early, "-q")
    _wait_for(lambda: early.exists())  # the run directory exists; envs and networks are being built
    process.send_signal(signal.SIGTERM)
    err = _outcome(process)
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
    # from rlpilot's first line (its handlers installed: before them, a background process ignores SIGINT and
    # SIGTERM ends it with nothing written) through the imports to the loop's first batch (a resume starts in
    # ~2-4 s here); on a loaded machine a later delay lands in the loop, which stops at its next batch
    for delay, sig in [(0.0, signal.SIGINT), (0.5, signal.SIGTERM), (1.1, signal.SIGINT), (2.2, signal.SIGTERM)]:
        process = _start_in_background("train", "--resume", path, "--frames", 10**9, "-q")
        _wait_for(lambda: _catches(process, signal.SIGINT, signal.SIGTERM))  # noqa: B023 (waited for here)
        time.sleep(delay)
        process.send_signal(sig)
        err = _outcome(process)
        expected = 143 if sig == signal.SIGTERM else 130
        assert process.returncode == expected, (delay, sig, process.returncode, err[-2000:])
        assert "Traceback" not in err, err[-2000:]
        meta = json.loads((path / "meta.json").read_text())
        assert meta["status"] != "running", (delay, sig, meta, err[-2000:])
    again = run_cli("train", "--resume", path, "--frames", 4096, *quiet)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((path / "meta.json").read_text())["status"] == "finished"


def test_a_signal_in_loggings_fork_hook_is_raised_after_it_not_lost():
    """A SIGINT that lands in logging's lock functions (the hooks Python runs around every fork, Ray's start-up
    forks many) is deferred like one inside an import: raised there, it was "Exception ignored" with a traceback
    on stderr. The frame of ``logging``'s real lock release is where the handler would be called."""
    import logging
    import sys

    from rlpilot.common import stopping

    release = getattr(logging, "_releaseLock", None) or logging._afterFork  # 3.13 renamed the fork hooks
    frames = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is release.__code__:
            frames.append(frame)

    acquire = getattr(logging, "_acquireLock", None) or logging._prepareFork
    acquire()
    sys.setprofile(profile)
    try:
        release()
    finally:
        sys.setprofile(None)
    assert frames and stopping._inside_an_import(frames[0])
    assert not stopping._inside_an_import(sys._getframe())  # an ordinary frame: the signal is raised at once


def test_a_signal_while_the_arguments_are_parsed_is_one_line(monkeypatch, capsys):
    """The handlers are installed before the arguments are parsed: a signal landing there (the parser built, an
    argument's type read) stops the command in one line with its exit code, as anywhere later in start-up."""
    import rlpilot.cli as cli
    from rlpilot.common.stopping import Interrupted

    def parser_interrupted():
        raise Interrupted("SIGTERM")

    monkeypatch.setattr(cli, "build_parser", parser_interrupted)
    assert cli.main(["presets"]) == 143
    assert capsys.readouterr().err.strip().splitlines() == ["rlpilot: interrupted (SIGTERM)"]
