"""benchmarks/seed_runs.py keeps long runs under --root and resumes the ones a sitting left unfinished."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import seed_runs  # noqa: E402


def _run(root: Path, seed: int, status: str | None) -> None:
    folder = root / f"s{seed}"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("frames,eval/return_mean\n10000,12.5\n")
    if status:
        (folder / "meta.json").write_text(json.dumps({"status": status, "frames": 10000, "elapsed_s": 3.0}))


def test_a_new_seed_trains_an_unfinished_one_resumes_a_finished_one_is_only_read(tmp_path, monkeypatch):
    commands = []

    def fake_run(cmd, **_):
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(seed_runs.subprocess, "run", fake_run)
    _run(tmp_path, 101, "interrupted")
    _run(tmp_path, 102, "finished")
    rows = [
        seed_runs.run_seed("sac-halfcheetah", seed, tmp_path, ["train.eval_episodes=2"], 1, [])
        for seed in (100, 101, 102)
    ]
    assert commands[0][3:5] == ["train", "sac-halfcheetah"] and "--set=train.eval_episodes=2" in commands[0]
    assert commands[1][3:] == ["train", "--resume", str(tmp_path / "s101"), "-q"]
    assert len(commands) == 2  # the finished seed ran nothing
    assert rows[0]["status"] == "crashed"  # the fake wrote no run
    assert rows[2]["status"] == "finished" and rows[2]["curve"] == [{"frames": 10000, "eval": 12.5}]
