"""Faults: resources (issue 55, class 5). What a command asks for is bounded by what it would take: the memory a
run or a verb would allocate is refused before it is allocated, in one line saying how much and which setting to
lower; the runs a sweep, bench or tune would start are counted before they are listed; a signal stops a sweep and
its runs; an MLflow server that does not answer is one line before the study starts.

No wall clock is read. An allocation is checked by running the command under an address-space limit it would
exceed (refused before allocating: one line; allocating: a traceback), a hang by a subprocess with a generous
timeout whose outcome is asserted.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_runner import TESTS, cli_command, cli_env
from rlpilot.arguments import build_parser
from rlpilot.common.bounds import MAX_RUNS, available_memory

LIMIT_BYTES = 4 * 2**30
"""The address space a command gets here: training CartPole fits in it; what each refused command would have
allocated does not."""
TIMEOUT_S = 300  # never reached unless the command hangs


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def limited(args, *, cwd=TESTS) -> subprocess.CompletedProcess:
    """``rlpilot ARGS`` in a fresh process limited to :data:`LIMIT_BYTES` of address space."""
    return subprocess.run(
        cli_command(args), capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, env=cli_env(),
        preexec_fn=limit_memory,
    )  # fmt: skip


def started(*args, env: dict | None = None) -> subprocess.Popen:
    """``rlpilot ARGS`` in a fresh process of its own session: :func:`ended` can stop it and whatever it started."""
    return subprocess.Popen(
        cli_command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS,
        env=cli_env(**(env or {})), start_new_session=True,
    )  # fmt: skip


def ended(process: subprocess.Popen) -> subprocess.CompletedProcess:
    """The process's outcome once it has ended; if it outlives :data:`TIMEOUT_S` (it hangs, or ignores a signal)
    its whole session is killed (workers that hold its pipes too) and the test fails."""
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("the command did not end: it hung, or ignored its signal")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def refused(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), result.stderr[-3000:]
    return lines[0]


CASE_END = "@@ exit "
ONE_PROCESS = f"""import json, sys
from rlpilot.cli import main
for args in json.loads(sys.argv[1]):
    code = main(args)
    print("{CASE_END}" + str(code), file=sys.stderr, flush=True)
"""


def each_in_one_process(cases: list[list], **limits) -> list[tuple[int, list[str]]]:
    """``main(args)`` for each case, one after the other in one fresh process (one start-up for all; a case that
    hung or allocated instead of refusing fails there, never in the test process): (exit code, stderr lines) each."""
    process = subprocess.Popen(
        [sys.executable, "-c", ONE_PROCESS, json.dumps([[str(a) for a in args] for args in cases])],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=TESTS, env=cli_env(),
        start_new_session=True, **limits,
    )  # fmt: skip
    try:
        _, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the process and whatever it started
        process.communicate()
        pytest.fail("a case did not end: it ran what it should have refused")
    assert "Traceback" not in err, err[-3000:]
    results, lines = [], []
    for line in err.splitlines():
        if line.startswith(CASE_END):
            results.append((int(line.removeprefix(CASE_END)), lines))
            lines = []
        elif line.strip():
            lines.append(line)
    assert len(results) == len(cases), err[-3000:]
    return results


# -- memory --------------------------------------------------------------------------------------------------
ISSUE_MAPPO = ["train", "mappo-spread", "--set", "env.kwargs={N: 64}"]
"""N = 64 agents, the top of simple_spread's range, at the preset's 240 envs x 25 steps: each agent's centralised
critic reads all 64 observations, ~76 GiB over a batch."""


@pytest.mark.skipif((available_memory() or 0) > 80 * 2**30, reason="this machine has room for the issue's ~76 GiB run")
def test_the_issues_multi_agent_run_is_refused_before_it_allocates(tmp_path):
    line = refused(limited([*ISSUE_MAPPO, "--run-dir", tmp_path / "run", "-q"]))
    assert "GiB" in line and "critic's input" in line and "env.kwargs.N" in line and "env.num_envs" in line
    assert not (tmp_path / "run").exists()


CASES = [
    # (command, the setting the line names): each beyond any machine's memory, each factor within its own range
    (["train", "mappo-spread", "--set", "env.kwargs={N: 64}", "--set", "env.num_envs=100000"], "env.num_envs"),
    (["train", "ippo-spread", "--set", "env.kwargs={N: 64}", "--set", "env.num_envs=10000000"], "env.num_envs"),
    (["train", "ppo-cartpole", "--set", "model.hidden_sizes=[1000000, 1000000]"], "model.hidden_sizes"),
    (["train", "ppo-cartpole", "--set", "env.num_envs=100000000"], "env.num_envs"),
    (["train", "dqn-cartpole", "--set", "dqn.buffer_size=1000000000000"], "dqn.buffer_size"),
    (["train", "sac-pendulum", "--set", "train.eval_episodes=1000000000"], "train.eval_episodes"),
    (["train", "grpo-reverse", "--set", "llm.tiny_hidden_size=1000000"], "llm.tiny_hidden_size"),
    (
        ["train", "ppo-cartpole", "--set", "env.normalize_obs=true", "--set", "env.obs_norm_frames=1000000000000"],
        "env.obs_norm_frames",
    ),
    (["check", "mpe2.simple_spread_v3", "--set", "env.kwargs={N: 64}", "--episodes", "1000000"], "--episodes"),
]


def test_memory_a_command_would_take_is_refused_before_it_is_allocated(tmp_path):
    """Under the address-space limit: a case that allocated instead of refusing would fail there with a traceback,
    never take the machine's memory."""
    cases = [[*args, *(["--runs", tmp_path, "-q"] if args[0] == "train" else [])] for args, _ in CASES]
    for (args, setting), (code, lines) in zip(CASES, each_in_one_process(cases, preexec_fn=limit_memory)):
        assert code == 2 and len(lines) == 1, (args, lines)
        assert lines[0].startswith("rlpilot: error: this would allocate about") and "GiB" in lines[0], (args, lines)
        assert "is available: lower" in lines[0] and setting in lines[0], (args, lines)
    assert not any(tmp_path.iterdir())  # no run was started


# -- counts of runs ------------------------------------------------------------------------------------------
COUNTED = [("sweep", "--seeds"), ("tune", "--trials"), ("tune", "--seeds-per-trial"), ("bench", "--seeds")]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(MAX_RUNS + 1, 10**30), which=st.sampled_from(COUNTED))
def test_run_counts_beyond_the_bound_are_one_line_before_the_verb_runs(capsys, count, which):
    """``sweep --seeds 100000000`` listed 10^8 runs before starting the first: every count past the bound is refused
    where the command line is read (parsed only here: a verb that ran would start those runs)."""
    verb, flag = which
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([verb, *([] if verb == "bench" else ["ppo-cartpole"]), flag, str(count)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and len(lines) == 1 and flag in lines[0] and f"{MAX_RUNS:,}" in lines[0], lines


GRID = ",".join(map(str, range(1, 1001)))
PRODUCTS = [
    # each count within its range, their product not: counted before any run is listed, folder made or study opened
    (["sweep", "ppo-cartpole", "--seeds", 100, "--grid", f"ppo.epochs={GRID}"], "would start 100,000 runs"),
    (["sweep", "ppo-cartpole", "--grid", f"ppo.epochs={GRID}", "--grid", f"ppo.minibatch_size={GRID}"],
     "would start 5,000,000 runs"),
    (["tune", "ppo-cartpole", "--trials", 5000, "--seeds-per-trial", 5, "--param", "ppo.lr=1e-4:1e-3"],
     "would start 25,010 runs"),
    (["bench", "--seeds", 5000, "--presets", "ppo-cartpole,dqn-cartpole,ppo-acrobot"], "would start 15,000 runs"),
]  # fmt: skip


def test_products_of_counts_are_bounded_before_anything_starts(tmp_path):
    cases = [[*args, "--out", tmp_path / f"out{i}"] for i, (args, _) in enumerate(PRODUCTS)]
    for (args, needle), (code, lines) in zip(PRODUCTS, each_in_one_process(cases)):
        assert code == 2 and len(lines) == 1 and needle in lines[0], (args, lines)
    assert not any(tmp_path.iterdir())


# -- signals -------------------------------------------------------------------------------------------------
def _wait_for(condition) -> None:
    end = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > end:
            pytest.fail("the condition never came true")
        time.sleep(0.1)


def test_sigterm_stops_a_sweep_and_the_run_it_is_training(tmp_path):
    """Before, SIGTERM to ``rlpilot sweep`` waited for every queued run to train its whole budget."""
    out = tmp_path / "sweep"
    long = ["--set", "train.total_frames=10000000", "--set", "train.stop_when_solved=false"]
    process = started("sweep", "ppo-cartpole", "--seeds", 3, "--workers", 1, "--out", out, *long,
                      "--set", "train.loggers=[]")  # fmt: skip
    meta = out / "default" / "s0" / "meta.json"
    metrics = meta.parent / "metrics.csv"

    def training() -> bool:  # a first batch trained (a run stopped before any has nothing to checkpoint, by design)
        return metrics.exists() and len(metrics.read_text().splitlines()) > 1

    try:
        _wait_for(lambda: process.poll() is not None or training())
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    process.send_signal(signal.SIGTERM)  # to the sweep only, as a supervisor stops it
    err = ended(process).stderr
    assert process.returncode == 143, err[-3000:]
    assert [line for line in err.splitlines() if line.strip()] == ["rlpilot: interrupted (SIGTERM)"], err[-3000:]
    record = json.loads(meta.read_text())
    assert record["status"] == "interrupted" and (meta.parent / "checkpoints" / "last.pt").exists()
    assert not (out / "default" / "s1").exists() and not (out / "default" / "s2").exists()  # never started


# -- network endpoints ---------------------------------------------------------------------------------------
@pytest.fixture
def closed_port():
    """A local port where nothing listens (bound, never listening: connections are refused)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_an_mlflow_server_that_does_not_answer_is_one_line_before_the_study(tmp_path, closed_port):
    """Before, the first trial trained, then MLflow's client retried the dead server for minutes, silently."""
    pytest.importorskip("optuna")
    pytest.importorskip("mlflow")
    out = tmp_path / "tune"
    args = ["tune", "ppo-cartpole", "--param", "ppo.lr=1e-4:1e-3:log", "--trials", 1, "--seeds-per-trial", 1]
    args += ["--check-seeds", 0, "--set", "train.total_frames=2048", "--out", out]
    line = refused(ended(started(*args, "--mlflow", f"http://127.0.0.1:{closed_port}")))
    assert f"--mlflow http://127.0.0.1:{closed_port}: nothing answers there" in line
    assert not out.exists()
    line = refused(ended(started(*args, "--mlflow", "http://tuner:hunter2@[::1")))
    assert "not a URL with a host" in line and "hunter2" not in line


def test_the_mlflow_train_logger_writes_the_runs_own_store_whatever_the_environment_names(tmp_path, closed_port):
    """``train.loggers=[mlflow]`` logs to RUN/mlflow (TorchRL's file store): a tracking server named in the
    environment that does not answer is never contacted, so the run cannot hang on it."""
    pytest.importorskip("mlflow")
    run = tmp_path / "run"
    result = ended(
        started(
            *("train", "ppo-cartpole", "--frames", 1024, "--run-dir", run, "-q", "--set", "train.loggers=[mlflow]"),
            env={"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{closed_port}"},
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "mlflow").is_dir() and json.loads((run / "meta.json").read_text())["status"] == "finished"
