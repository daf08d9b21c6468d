"""rlpilot sweep: a 2 x 2-seed grid on the process pool; the table is the runs' data; a killed sweep resumes."""

import json
import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported: keeps it on loopback
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rlpilot.runs import load_run
from rlpilot.sweep import bootstrap, iqm, point_name, run_in_processes, run_sweep

TINY = ["train.total_frames=2048", "train.eval_every_frames=1024", "train.eval_episodes=4"]


def test_sweep_table_is_computed_from_the_runs(tmp_path):
    result = run_sweep("ppo-cartpole", seeds=2, grid=["ppo.epochs=2,4"], out=tmp_path, workers=2, overrides=TINY)
    rows = result["rows"]
    assert [r["point"] for r in rows] == ["ppo.epochs=2", "ppo.epochs=4"]
    for row, epochs in zip(rows, (2, 4)):
        runs = [load_run(tmp_path / point_name([f"ppo.epochs={epochs}"]) / f"s{seed}") for seed in range(2)]
        assert [run.config().ppo.epochs for run in runs] == [epochs, epochs]
        assert [run.config().train.seed for run in runs] == [0, 1]
        finals = np.array([run.last_eval for run in runs])
        assert row["runs"] == 2 and row["solved"] == sum(r.status == "solved" for r in runs)
        assert row["final_mean"] == pytest.approx(finals.mean())
        assert row["final_iqm"] == pytest.approx(iqm(finals))
        assert row["final_mean_ci"] == pytest.approx(bootstrap(finals, np.mean))
        low, high = row["final_mean_ci"]
        assert finals.min() <= low <= row["final_mean"] <= high <= finals.max()
    table = (tmp_path / "summary.md").read_text()
    assert table.count("\n| ppo.epochs=") == 2
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(rows))
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_iqm_and_bootstrap_by_hand():
    assert iqm(np.array([0.0, 1.0, 2.0, 100.0])) == pytest.approx(1.5)  # middle two of four
    low, high = bootstrap(np.array([1.0, 1.0, 1.0]), np.mean)
    assert low == high == 1.0


def test_killed_sweep_resumes_without_rerunning_finished_runs(tmp_path):
    out = tmp_path / "sweep"
    args = [
        sys.executable,
        "-m",
        "rlpilot.cli",
        "sweep",
        "ppo-cartpole",
        "--seeds",
        "1",
        "--grid",
        "ppo.epochs=2,4",
        "--workers",
        "1",
        "--out",
        str(out),
        *sum((["--set", o] for o in TINY), []),
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 180
    finished = []
    while time.time() < deadline and not finished:
        time.sleep(0.2)
        finished = [m for m in out.glob("*/s*/meta.json") if json.loads(m.read_text())["status"] == "finished"]
    assert finished, "no run finished before the deadline"
    os.killpg(process.pid, signal.SIGKILL)  # the sweep and its workers
    process.wait()
    before = {m: json.loads(m.read_text())["start_time"] for m in finished}
    assert len(list(out.glob("*/s*/meta.json"))) < 2 or not all(
        json.loads(m.read_text())["status"] == "finished" for m in out.glob("*/s*/meta.json")
    )
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for meta, start in before.items():
        assert json.loads(meta.read_text())["start_time"] == start, f"{meta} was run again"
    statuses = [json.loads(m.read_text())["status"] for m in out.glob("*/s*/meta.json")]
    assert len(statuses) == 2 and set(statuses) <= {"finished", "solved"}


@pytest.mark.xdist_group("ray")  # the test process of every Ray test: one loopback cluster (conftest)
def test_sweep_on_a_local_ray_cluster_stays_on_loopback(tmp_path, loopback_ray):
    result = run_sweep(
        "ppo-cartpole", seeds=2, grid=["ppo.epochs=2,4"], out=tmp_path, workers=2, overrides=TINY, ray="local"
    )  # runs on the loopback cluster (conftest's loopback_ray: every listener on 127.0.0.1)
    rows = result["rows"]
    assert [r["point"] for r in rows] == ["ppo.epochs=2", "ppo.epochs=4"] and all(r["runs"] == 2 for r in rows)
    for row, epochs in zip(rows, (2, 4)):
        finals = np.array(
            [load_run(tmp_path / point_name([f"ppo.epochs={epochs}"]) / f"s{s}").last_eval for s in range(2)]
        )
        assert row["final_mean"] == pytest.approx(finals.mean())


def test_bench_replaces_its_marked_block_and_takes_overrides(tmp_path):
    """The table between the markers of a results page (the rest kept), its seeds from 100, ``--set`` applied to
    every run and named in the table's command; one-batch runs (whether they solve: the slow test below)."""
    from rlpilot.sweep import run_bench

    results = tmp_path / "results.md"
    results.write_text("# Results\n\nkept\n\n<!-- bench:start -->\nold table\n<!-- bench:end -->\n\ntail kept\n")
    table = run_bench(
        seeds=1, out=tmp_path / "bench", workers=1, results=results, presets=["ppo-cartpole"],
        overrides=["train.total_frames=1"],
    )  # fmt: skip
    text = results.read_text()
    assert "old table" not in text and "kept" in text and "tail kept" in text and table in text
    run = load_run(tmp_path / "bench" / "ppo-cartpole" / "default" / "s100")
    assert run.meta()["seed"] == 100 and run.frames == run.config().frames_per_batch  # one batch: the override
    assert "| `ppo-cartpole` | CartPole-v1 | 1 |" in table and "--set train.total_frames=1" in table


@pytest.mark.slow  # ~30 s: two seeds trained until they solve (make test-all)
def test_bench_writes_its_table_between_markers(tmp_path):
    from rlpilot.sweep import run_bench

    results = tmp_path / "results.md"
    results.write_text("# Results\n\nkept\n\n<!-- bench:start -->\nold table\n<!-- bench:end -->\n\ntail kept\n")
    table = run_bench(
        seeds=2,
        out=tmp_path / "bench",
        workers=2,
        results=results,
        presets=["ppo-cartpole"],
    )
    text = results.read_text()
    assert "old table" not in text and "kept" in text and "tail kept" in text and table in text
    row = next(line for line in table.splitlines() if line.startswith("| `ppo-cartpole`"))
    # seeds from 100 (none tuned a preset), each run going on for 5 evaluations after its first solve
    runs = [load_run(tmp_path / "bench" / "ppo-cartpole" / "default" / f"s{s}") for s in (100, 101)]
    assert [r.meta()["seed"] for r in runs] == [100, 101] and "seeds 100-101" in table
    assert f"| {sum(r.status == 'solved' for r in runs)}/2 |" in row
    assert f"{np.mean([r.last_eval for r in runs]):.1f} [" in row
    solved = [r for r in runs if r.solved_at_frames is not None]
    assert solved and all(len(r.meta()["evals_after_solved"]) == 5 for r in solved)
    assert row.endswith(f"| {np.mean([r.meta()['stays_solved'] for r in solved]):.2f} |")


def test_bench_defaults_to_cpu_sized_control_presets():
    from rlpilot.sweep import bench_presets

    names = bench_presets()
    assert {"ppo-cartpole", "dqn-cartpole", "ppo-pendulum"} <= set(names)
    assert {"sac-pendulum", "td3-pendulum", "dqn-acrobot"} <= set(names)
    long = {"ppo-carracing", "ppo-lunarlander", "ppo-cartpole-gpu", "grpo-reverse", "sac-lunarlander-continuous"}
    assert not (long | {"sac-reacher", "ppo-minatar-breakout", "dqn-lunarlander"}) & set(names)


def _worker_view(name: str) -> tuple[str | None, int, bool, int]:
    """In a pool worker: the variable ``name`` as the worker sees it, its process, whether torch came preloaded
    from the fork server, and its torch threads after one parallel operation (the fork left no broken pool)."""
    already = "torch" in sys.modules
    import torch

    torch.set_num_threads(2)
    torch.ones(256, 256) @ torch.ones(256, 256)
    return os.environ.get(name), os.getpid(), already, torch.get_num_threads()


def test_pool_workers_see_the_environment_as_it_is_now_and_start_with_torch_imported(monkeypatch):
    """The pool's fork server starts with the first pool and keeps the environment of that moment; every worker
    takes the parent's environment as it is when its pool starts (a variable set or removed in between is seen
    so), starts with torch already imported, and runs torch's thread pool after the fork."""
    name = "RLPILOT_TEST_POOL_VARIABLE"
    views = []

    def pool(count: int) -> list[tuple]:
        results: dict[int, tuple] = {}
        run_in_processes([(_worker_view, (name,))] * count, count, results.__setitem__)
        views.extend(results.values())
        return [results[index][0] for index in range(count)]

    monkeypatch.setenv(name, "first")
    assert pool(1) == ["first"]
    monkeypatch.setenv(name, "second")
    assert pool(2) == ["second", "second"]
    monkeypatch.delenv(name)
    assert pool(1) == [None]
    assert all(view[1] != os.getpid() and view[2] and view[3] == 2 for view in views)
