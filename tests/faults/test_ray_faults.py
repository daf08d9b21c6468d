"""Faults of Ray collection (issue 55, class 1): an address that answers but is not Ray, a signal while Ray
starts, and Ray's processes after rlpilot exits, whatever the exit. Real processes and a real loopback cluster;
no assertion on wall time: a hang is a subprocess that never ends within a generous limit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cli_runner import SRC, TESTS, cli_command, cli_env, start_cli
from rlpilot.cli import main
from rlpilot.cluster import owned_processes

RAY_RUN = [
    "--set", "collect.workers=2", "--set", "env.num_envs=2", "--set", "ppo.minibatch_size=64",
    "--set", "env.id=rlpilot/SlowCartPole-v0", "--set", "env.kwargs={step_ms: 5}",
    "--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q",
]  # fmt: skip
GENEROUS_S = 300  # a limit only a hang reaches, on a machine as busy as it gets


def _wait_for(condition, timeout: float = GENEROUS_S, step: float = 0.02) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:  # a deadline, not a speed bound: only a hang reaches it
            pytest.fail("timed out")
        time.sleep(step)


class _Listener:
    """A loopback port that accepts connections and answers like something other than Ray: silence, or an
    HTTP/1 reply, or bytes that are no protocol at all."""

    def __init__(self, reply: bytes):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.reply = reply
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.open.append(conn)
            if self.reply:
                try:
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self):
        for conn in self.open:
            conn.close()
        self.socket.close()


@pytest.mark.parametrize(
    "reply", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"\x00\xff" * 64], ids=["silent", "http", "junk"]
)
def test_a_port_that_answers_but_is_not_ray_is_one_line(tmp_path, capsys, reply):
    listener = _Listener(reply)
    try:
        address = f"127.0.0.1:{listener.port}"
        args = ["train", "ppo", "CartPole-v1", "--runs", str(tmp_path), "--ray", address, *RAY_RUN]
        code = main(args)
    finally:
        listener.close()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "does not answer as a Ray cluster" in lines[0] and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # refused before a run directory exists


def _ray_children(pid: int) -> bool:
    return bool(owned_processes(pid))


@pytest.mark.parametrize("delay", [0.0, 1.0])
def test_sigterm_while_ray_starts_is_one_line_and_leaves_no_ray_process(tmp_path, delay):
    """SIGTERM at moments of a local cluster's start-up (its first process started, then later): the run stops
    with rlpilot's line and exit 143, never Ray's silent exit, and every process of the cluster is gone."""
    process = start_cli("train", "ppo", "CartPole-v1", "--frames", 100_000, "--run-dir", tmp_path / "run",
                        "--ray", "local", *RAY_RUN)  # fmt: skip
    try:
        _wait_for(lambda: _ray_children(process.pid) or process.poll() is not None)
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=GENEROUS_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err
    assert "rlpilot: interrupted (SIGTERM)" in err or "interrupted" in (tmp_path / "run" / "meta.json").read_text()
    assert "Traceback" not in err
    _wait_for(lambda: not owned_processes(process.pid), timeout=30)  # Ray's processes go with their learner


def test_a_simulator_that_crashes_in_an_actor_is_one_line_and_leaves_no_ray_process(tmp_path):
    """A run collecting on a local cluster whose env raises inside an actor: one line naming what it raised, exit 2,
    and no process of its cluster (GCS, raylet, agents, actors) left. SIGTERM and SIGKILL mid-run:
    tests/smoke/test_distributed.py. ``--ray local`` starts a cluster of its own even where Ray would join another
    (``RAY_ADDRESS`` set, or a cluster that ``ray start`` left on the machine): here a dead address."""
    args = ["train", "ppo", "CartPole-v1", "--frames", 100_000, "--run-dir", tmp_path / "run", "--ray", "local",
            *RAY_RUN, "--set", "env.kwargs={step_ms: 5, fail_after: 40}"]  # fmt: skip
    process = subprocess.Popen(
        cli_command(args), stderr=subprocess.PIPE, text=True, cwd=TESTS, env=cli_env(RAY_ADDRESS="127.0.0.1:1")
    )
    try:
        _, err = process.communicate(timeout=GENEROUS_S)
    finally:
        if process.poll() is None:
            process.kill()
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == 2 and len(lines) == 1 and "fail_after=40" in lines[0], err
    _wait_for(lambda: not owned_processes(process.pid), timeout=60)


def test_an_actor_on_the_learners_machine_exits_with_the_learner(tmp_path):
    """The watch an actor keeps on a learner of its own machine: Ray notices a dead driver's actors only after
    its timeouts (on a cluster the learner joined, ~20 s). A stand-in learner (a sleeping process) is killed;
    the process watching it exits by itself (it would otherwise sleep for an hour)."""
    learner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    code = (
        "import sys, time; from rlpilot.control.distributed import _exit_with_the_learner; "
        f"_exit_with_the_learner({learner.pid}); print('watching', flush=True); time.sleep(3600)"
    )
    watcher = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}
    )
    try:
        assert watcher.stdout.readline().strip() == "watching"
        assert watcher.poll() is None  # the learner runs: the actor too
        learner.kill()
        learner.wait()
        assert watcher.wait(timeout=GENEROUS_S) == 1
    finally:
        for process in (learner, watcher):
            if process.poll() is None:
                process.kill()


def test_the_learner_watch_names_one_process_not_a_reused_pid():
    from rlpilot.control.distributed import _start_time

    assert _start_time(os.getpid()) == _start_time(os.getpid()) is not None
    assert _start_time(2**22 + 12345) is None  # above pid_max: no such process
    assert Path(f"/proc/{os.getpid()}/stat").exists()


def test_ray_installs_its_sigterm_handler_only_through_the_function_rlpilot_holds_back():
    """rlpilot keeps its own SIGTERM handler through ``ray.init`` by making ``ray._private.utils.set_sigterm_handler``
    a no-op meanwhile (:func:`rlpilot.cluster._init`). That holds while Ray's driver and node install theirs through
    that module attribute and nowhere else: a Ray upgrade that calls ``signal.signal(SIGTERM, ...)`` directly, or
    imports the function by name, fails here instead of silently ending runs on SIGTERM without a checkpoint."""
    import inspect
    import re

    import ray._private.node
    import ray._private.utils
    import ray._private.worker

    assert callable(ray._private.utils.set_sigterm_handler)
    for module in (ray._private.node, ray._private.worker):
        source = inspect.getsource(module)
        assert "ray._private.utils.set_sigterm_handler(" in source, module.__name__
        assert not re.search(r"signal\.signal\(\s*signal\.SIGTERM", source), module.__name__
        assert not re.search(r"from ray\._private\.utils import[^\n]*set_sigterm_handler", source), module.__name__
