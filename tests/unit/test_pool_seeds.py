"""benchmarks/pool_seeds.py: seeds of one time-to-solve benchmark measured in separate runs pooled into one file,
the paired ratios recomputed over all of them, each seed keeping its own stamp; files that measured different
things refused in one line; and the generated table naming every run it pools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_results_tables import results_speed

from benchmark_loader import BENCHMARKS, load_benchmark

pool_seeds = load_benchmark(BENCHMARKS / "pool_seeds.py")
tts = load_benchmark(BENCHMARKS / "time_to_solve.py")

OURS, PEER = "rlpilot-sac-halfcheetah-preset", "sbx-sac-halfcheetah-zoo"


def measured(seeds: list[int], peer_s: list[float], commit: str, cores: int = 1) -> dict:
    """A result file's data as time_to_solve.py writes it: rlpilot at 100 s a seed, the peer at ``peer_s``."""
    runs = {OURS: [100.0] * len(seeds), PEER: peer_s}
    results = {
        name: [{"solved": True, "frames": 100_000, "train_s": s, "process_s": s + 5} for s in times]
        for name, times in runs.items()
    }
    task = {"algo": "sac", "env_id": "HalfCheetah-v5", "episodes": 10, "threshold": 5000.0, "budget": 300_000}
    task.update(eval_every=10_000, seeds=seeds, peers=[PEER], results=results)
    task["comparisons"] = {f"preset/{PEER}": tts.compare(results, OURS, PEER, seeds)}
    stamp = [f"# date: 2026-12-0{seeds[0] - 99} 10:00:00 +0000", f"# commit: {commit}", "# command: python t.py"]
    return {"tasks": {"sac-halfcheetah": task}, "cores": cores, "sbx_interpreter": "sbx 0.28", "stamp": stamp}


def test_pooled_seeds_are_compared_as_one_run_of_them_all_and_keep_their_stamps():
    first, second = measured([100], [150.0], "aaaa"), measured([101, 102], [200.0, 300.0], "bbbb")
    data = pool_seeds.pool([("a.json", first), ("b.json", second)])
    task = data["tasks"]["sac-halfcheetah"]
    assert task["seeds"] == [100, 101, 102]
    assert [r["train_s"] for r in task["results"][PEER]] == [150.0, 200.0, 300.0]
    comparison = task["comparisons"][f"preset/{PEER}"]
    assert comparison["both_solved"] == 3 and comparison["train_s"][0] == pytest.approx(2.0)  # median of 1.5, 2, 3
    assert comparison == tts.compare(task["results"], OURS, PEER, [100, 101, 102])
    assert [(e["from"], e["stamp"][1], e["seeds"]) for e in data["pooled"]] == [
        ("a.json", "# commit: aaaa", {"sac-halfcheetah": [100]}),
        ("b.json", "# commit: bbbb", {"sac-halfcheetah": [101, 102]}),
    ]
    assert data["cores"] == 1 and data["sbx_interpreter"] == "sbx 0.28"

    again = pool_seeds.pool(
        [("ab.json", {**data, "stamp": ["# commit: pool"]}), ("c.json", measured([103], [90.0], "c"))]
    )
    assert again["tasks"]["sac-halfcheetah"]["seeds"] == [100, 101, 102, 103]
    assert [e["from"] for e in again["pooled"]] == ["a.json", "b.json", "c.json"]  # each run, not the first pooling


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d.update(cores=2), "cores 2"),
        (lambda d: d.update(sbx_interpreter="sbx 0.29"), "sbx_interpreter"),
        (lambda d: d["tasks"]["sac-halfcheetah"].update(threshold=4000.0), "threshold 4000.0"),
        (lambda d: d["tasks"]["sac-halfcheetah"].update(seeds=[100]), "seed(s) [100] are already"),
        (lambda d: d["tasks"]["sac-halfcheetah"]["results"].pop(PEER), "rows"),
    ],
)
def test_files_that_measured_different_things_are_refused(change, needle):
    second = measured([101], [200.0], "bbbb")
    change(second)
    with pytest.raises(pool_seeds.Mismatch, match=None) as refused:
        pool_seeds.pool([("a.json", measured([100], [150.0], "aaaa")), ("b.json", second)])
    assert needle in str(refused.value) and str(refused.value).startswith("b.json: ")


def test_the_command_writes_a_stamped_pool_the_table_names_each_run_of_and_refuses_bad_input(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(measured([100], [150.0], "aaaa")))
    b.write_text(json.dumps(measured([101], [300.0], "bbbb")))
    out = tmp_path / "time_to_solve_mujoco-2026-12-08.txt"
    script = str(BENCHMARKS / "pool_seeds.py")
    done = subprocess.run([sys.executable, script, str(a), str(b), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "# pooled from" in out.read_text() and "seeds 100-101" in out.read_text()
    table = results_speed.time_to_solve_table(out.with_suffix(".json"))
    assert "2/2" in table and "2.25x [1.50-3.00]" in table and "seeds 100-101" in table
    assert "Seed(s) 100 measured in `a.json` (commit aaaa, 2026-12-01 10:00:00 +0000" in table
    assert "Seed(s) 101 measured in `b.json` (commit bbbb" in table

    b.write_text(json.dumps(measured([100], [300.0], "bbbb")))
    refused = subprocess.run([sys.executable, script, str(a), str(b), "--out", str(tmp_path / "c.txt")],
                             capture_output=True, text=True)  # fmt: skip
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and "seed(s) [100] are already in an earlier file" in lines[-1]
    assert "Traceback" not in refused.stderr and not (tmp_path / "c.txt").exists()
    missing = subprocess.run([sys.executable, script, str(a), str(tmp_path / "none.json"), "--out", str(out)],
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 2 and "not a readable result file" in missing.stderr
    assert Path(out).exists()  # the earlier pool is untouched
