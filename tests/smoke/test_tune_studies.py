"""``rlpilot tune`` end to end on real Optuna studies in SQLite: a killed study continues, two processes share
one, bad input is one line and leaves the study as it was."""

from __future__ import annotations

import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported: keeps it on loopback
import math
import signal
import sqlite3
import time

import pytest
from tests.cli_runner import run_cli, start_cli

from rlpilot.cli import main
from rlpilot.config import load_config
from rlpilot.runs import load_run

optuna = pytest.importorskip("optuna")

# CartPole PPO runs of a few seconds that never "solve" (threshold above the maximum return), so every
# trial trains its whole budget and a kill lands mid-run
TINY = [
    *("--set", "train.total_frames=16384", "--set", "train.eval_every_frames=4096", "--set", "train.eval_episodes=2"),
    *("--set", "train.solved_at=1000", "--set", "train.checkpoint_every_frames=4096"),
]


# the same, shorter, where nothing is killed mid-run
QUICK = [a if a != "train.total_frames=16384" else "train.total_frames=8192" for a in TINY]


def tune_args(out, *extra, trials=3, seeds=1, budget=TINY):
    return [
        "tune",
        "ppo-cartpole",
        "--trials",
        trials,
        "--seeds-per-trial",
        seeds,
        "--param",
        "ppo.lr=1e-4:3e-3:log",
        "--param",
        "ppo.epochs=2,4",
        *budget,
        "--check-seeds",
        "0",
        "--out",
        out,
        *extra,
    ]


def trials_of(out):
    study = optuna.load_study(study_name="rlpilot-ppo-cartpole", storage=f"sqlite:///{out / 'study.db'}")
    return study.get_trials(deepcopy=False)


def complete(trials):
    return [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]


def wait_for(path, timeout=120):
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:  # a deadline, not a speed bound: only a hang reaches it
            pytest.fail(f"{path} never appeared")
        time.sleep(0.1)


def test_killed_study_continues_and_reruns_nothing_finished(tmp_path):
    out = tmp_path / "study"
    process = start_cli(*tune_args(out))
    wait_for(out / "trials" / "t0001" / "s0" / "checkpoints" / "last.pt")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    first = load_run(out / "trials" / "t0000" / "s0")
    first_mtime = (first.path / "meta.json").stat().st_mtime
    assert [t.state.name for t in trials_of(out)] == ["COMPLETE", "RUNNING"]

    result = run_cli(*tune_args(out), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    trials = trials_of(out)
    done = complete(trials)
    assert len(done) == 3
    killed = trials[1]
    assert killed.state.name == "FAIL"  # failed at once: its process is gone (the trial lock was free)
    retry = next(t for t in done if t.user_attrs["run_key"] == "t0001")
    assert retry.number > 1 and retry.params == killed.params  # queued again with the same parameters
    resumed = load_run(out / "trials" / "t0001" / "s0")
    assert resumed.meta()["resumes"] == 1 and resumed.status == "finished"  # from its checkpoint
    assert (first.path / "meta.json").stat().st_mtime == first_mtime  # the finished trial was not run again
    assert len({t.user_attrs["run_key"] for t in done}) == 3
    # outputs: the table, the figure, a best configuration that `rlpilot train --config` takes
    summary = (out / "summary.md").read_text()
    assert summary.count("| complete |") == 3
    assert (out / "history.png").stat().st_size > 5000
    best = load_config(config_file=out / "best.yaml")
    assert best.ppo.epochs in (2, 4) and best.train.total_frames == 16384
    assert "rlpilot train ppo-cartpole --set train.total_frames=16384" in result.stdout
    # the same study with another search space: refused in one line, nothing of the study changed
    before = sqlite3.connect(out / "study.db").execute("select count(*) from trials").fetchone()[0]
    other = [a if a != "ppo.lr=1e-4:3e-3:log" else "ppo.lr=1e-5:1e-3:log" for a in tune_args(out, trials=4)]
    refused = run_cli(*other, timeout=120)
    assert refused.returncode == 2 and "was started with other settings (space)" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert sqlite3.connect(out / "study.db").execute("select count(*) from trials").fetchone()[0] == before


@pytest.mark.slow  # two processes, ~35 s (make test-all; kept out of make test's 10 minutes)
def test_two_processes_share_one_study_and_run_no_trial_twice(tmp_path):
    out = tmp_path / "study"
    run_cli(*tune_args(out, trials=1, budget=QUICK), timeout=300)  # creates the study (and its first trial)
    processes = [start_cli(*tune_args(out, trials=4, budget=QUICK)) for _ in range(2)]
    for process in processes:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
    trials = trials_of(out)
    done = complete(trials)
    assert 4 <= len(done) <= 5  # each process stops once 4 are done: at most one trial in flight past that
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials)
    keys = [t.user_attrs["run_key"] for t in done]
    assert len(set(keys)) == len(keys)  # one run directory per trial
    assert len({t.user_attrs["pid"] for t in done[1:]}) == 2  # both processes ran trials
    for key in keys:
        assert load_run(out / "trials" / key / "s0").meta()["resumes"] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--param", "ppo.lrr=1e-4:1e-3"], "unknown config key 'ppo.lrr'. Did you mean ppo.lr"),
        (["--param", "ppo.epochs=1.5:4"], "ppo.epochs is an integer setting"),
        (["--param", "ppo.lr=abc:1e-3"], "'abc' is not a number"),
        (["--param", "ppo.lr=1e-3:1e-4"], "must be below high"),
        (["--param", "ppo.lr=-1:1e-3"], "ppo.lr"),
        (["--param", "ppo.lr"], "--param expects key=low:high"),
        # unreachable (with psycopg installed) or its driver missing: one line either way
        (
            ["--storage", "postgresql://tuner:secret@127.0.0.1:9/none"],
            "--storage postgresql://tuner:***@127.0.0.1:9/none",
        ),
        (["--storage", "nosuchdb://x"], "--storage nosuchdb://x"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    """In this process (``rlpilot.cli.main``, what the command runs): a new interpreter for each case cost ~4 CPU-s of
    imports; tests/smoke/test_cli.py holds the CLI's one-line errors to the same rule in real subprocesses."""
    base = tune_args(tmp_path / "study", trials=1)
    if extra[0] == "--param":
        base = [a for a in base if a not in ("--param", "ppo.lr=1e-4:3e-3:log", "ppo.epochs=2,4")]
    code = main([str(arg) for arg in (*base, *extra)])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "secret" not in err  # a password in a storage URL is never printed
    assert not (tmp_path / "study").exists()  # refused before a study folder exists


@pytest.mark.skipif(not os.environ.get("RLPILOT_TEST_POSTGRES"), reason="set RLPILOT_TEST_POSTGRES=postgresql://...")
def test_two_processes_share_a_postgresql_study(tmp_path):
    """docs/tune.md shows how to start the server this test is pointed at."""
    url = os.environ["RLPILOT_TEST_POSTGRES"]
    name = f"rlpilot-test-{os.getpid()}-{time.time_ns()}"
    processes = [
        start_cli(*tune_args(tmp_path / f"host{i}", "--storage", url, "--study", name, trials=4)) for i in range(2)
    ]
    for process in processes:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
    trials = optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)
    done = complete(trials)
    assert 4 <= len(done) <= 5 and len({t.number for t in done}) == len(done)
    assert len({t.user_attrs["pid"] for t in done}) == 2
    # each process keeps the run directories of its own trials in its own --out (as two machines would)
    for trial in done:
        assert sum((tmp_path / f"host{i}" / "trials" / trial.user_attrs["run_key"]).exists() for i in range(2)) == 1


def test_mlflow_logger_of_a_run_and_trials_of_a_study(tmp_path, monkeypatch):
    """The `mlflow` train logger (TorchRL's get_logger) writes a local MLflow store an MLflow client reads back,
    and `tune --mlflow` logs each trial as an MLflow run."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # reading the run's file store, as rlpilot writes it
    run_dir = tmp_path / "run"
    result = run_cli(
        "train", "ppo-cartpole", "--frames", "4096", "--set", "train.loggers=[mlflow]", "--run-dir", run_dir, "-q"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    client = mlflow.MlflowClient(tracking_uri=(run_dir / "mlflow").as_uri())
    (experiment,) = [e for e in client.search_experiments() if e.name == "run"]
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.status == "FINISHED"
    history = client.get_metric_history(logged.info.run_id, "eval/return_mean")
    rows = [row for row in load_run(run_dir).metrics() if not math.isnan(row.get("eval/return_mean", math.nan))]
    assert [(m.step, m.value) for m in history] == [(int(r["frames"]), r["eval/return_mean"]) for r in rows]
    assert len(rows) >= 2

    out, uri = tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_cli(*tune_args(out, "--mlflow", uri, trials=1, budget=QUICK), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("rlpilot-ppo-cartpole")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["trial-0"]
    for logged, trial in zip(sorted(runs, key=lambda r: r.info.run_name), trials_of(out)):
        assert float(logged.data.params["ppo.lr"]) == pytest.approx(trial.params["ppo.lr"])
        assert logged.data.metrics["objective_frames"] == trial.value


@pytest.mark.xdist_group("ray")  # the test process of every Ray test: one loopback cluster (conftest)
def test_workers_as_ray_tasks_on_a_local_cluster(tmp_path, loopback_ray):
    """`--ray local`: two Ray tasks share the study through its SQLite storage (listeners on loopback)."""
    from rlpilot.tune import TuneSpec, parse_space, tune

    spec = TuneSpec(
        preset="ppo-cartpole",
        space=parse_space("ppo-cartpole", ["ppo.lr=1e-4:3e-3:log"], None),
        overrides=[value for value in QUICK if value != "--set"],
        seeds_per_trial=1,
    )
    result = tune(spec, trials=3, out=tmp_path / "study", workers=2, ray="local", check_seeds=0)
    trials = trials_of(tmp_path / "study")
    done = complete(trials)
    assert 3 <= len(done) <= 4 and len({t.user_attrs["run_key"] for t in done}) == len(done)
    assert len({t.user_attrs["pid"] for t in done}) == 2  # two Ray worker processes ran trials
    assert len(result["rows"]) == len(done)


def test_closing_check_is_paired_on_the_same_seeds_and_written_to_summary(tmp_path):
    """Both configurations train on the same check seeds; the check reports best - start seed by seed, its mean
    with the paired bootstrap interval and a verdict, in the result and in ``summary.md`` (issue 56)."""
    from rlpilot.stats import paired_difference
    from rlpilot.tune import TuneSpec, parse_space, run_score, tune

    budget = [a if a != "train.total_frames=8192" else "train.total_frames=4096" for a in QUICK if a != "--set"]
    spec = TuneSpec(
        preset="ppo-cartpole",
        space=parse_space("ppo-cartpole", ["ppo.lr=1e-4:3e-3:log"], None),
        overrides=budget,
        seeds_per_trial=1,
        objective="return",
    )
    out = tmp_path / "study"
    check = tune(spec, trials=1, out=out, check_seeds=3, check_seed_start=1000)["check"]
    seeds = [1000, 1001, 1002]
    runs = {arm: [load_run(out / "check" / arm / f"s{seed}") for seed in seeds] for arm in ("start", "best")}
    for arm in runs:  # the same seeds for both: the pairs are the seeds
        assert [run.config().train.seed for run in runs[arm]] == seeds
    scores = {arm: [run_score(run, "return") for run in runs[arm]] for arm in runs}
    paired = check["difference"]
    assert paired["differences"] == pytest.approx([b - s for b, s in zip(scores["best"], scores["start"])])
    mean, low, high = paired_difference(scores["best"], scores["start"])
    assert paired["mean"] == pytest.approx(mean) and paired["interval"] == pytest.approx([low, high])
    helped, none = low > 0, low <= 0 <= high
    assert paired["verdict"].startswith("tuning helped" if helped else "no significant" if none else "tuning hurt")
    summary = (out / "summary.md").read_text()
    assert "## Check: best against start on the same fresh seeds" in summary and paired["verdict"] in summary
    assert "| check seed | start: return | best: return | best - start |" in summary
    for seed in seeds:  # one row per check seed (a score of the trials table may also read "| 100.0")
        assert f"\n| {seed} | " in summary, seed
    assert "Best configuration: `" in summary
