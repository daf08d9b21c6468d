"""Faults: bad input, damaged run files, broken artifacts and broken user envs. Each is one line on stderr
(``rlpilot: error: ...``), exit code 2, no traceback, and nothing half-written left behind.

In-process (``rlpilot.cli.main`` with ``capsys``) except where a real process matters: one subprocess
checks that the exit code and the single line survive a fresh interpreter.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from cli_runner import run_cli
from rlpilot.cli import main
from rlpilot.runs import Run, load_run

FAST = ["--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q"]


def error_line(capsys, args: list[str], *, progress: bool = False) -> str:
    """Runs the CLI in-process; asserts exit 2, one ``rlpilot: error:`` line, no traceback. ``progress``:
    ``check`` prints its phase lines before the error; the error is then the last line and the only one."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith("rlpilot:")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert progress or len(lines) == 1, err
    return errors[0]


def files(path: Path) -> dict[str, bytes]:
    """Every file of a run but its lock: what "not modified" compares."""
    kept = [p for p in sorted(path.rglob("*")) if p.is_file() and p.name != ".lock"]
    return {str(p.relative_to(path)): p.read_bytes() for p in kept}


def train_small(tmp_path_factory, env: str, frames: int = 256, *extra) -> Path:
    """A short PPO run on ``env`` (an ``envs_for_tests`` class), in-process, for a module's tests to copy."""
    path = tmp_path_factory.mktemp(env) / "run"
    args = ["train", "ppo", f"envs_for_tests:{env}", "--frames", frames, "--run-dir", path, *FAST, *extra]
    assert main([str(a) for a in args]) == 0
    return path


def copy_of(path: Path, tmp_path: Path) -> Path:
    """A test's own copy of a module's run: what it breaks stays its own."""
    copy = tmp_path / "run"
    shutil.copytree(path, copy)
    return copy


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished 512-frame PPO CartPole run with a checkpoint at 256 and 512 frames, exported to ONNX."""
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("trained") / "run"
    args = ["train", "ppo-cartpole", "--frames", 512, "--run-dir", path, *FAST]
    assert main([str(a) for a in [*args, "--set", "train.checkpoint_every_frames=256"]]) == 0
    pytest.importorskip("onnxruntime")
    assert main(["export", str(path)]) == 0
    return path


@pytest.fixture
def run(trained, tmp_path) -> Path:
    return copy_of(trained, tmp_path)


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["train", "../../etc/passwd"], "unknown preset"),
        (["train", "ppo-cartpole", "--set", "ppo.lr=nan"], "finite"),
        (["train", "ppo-cartpole", "--set", "ppo.lr=1e309"], "finite"),
        (["train", "ppo-cartpole", "--set", "train.seed=-1"], "train.seed"),
        (["train", "ppo-cartpole", "--set", "train.seed=99999999999999999999"], "train.seed"),
        (["train", "ppo-cartpole", "--set", "model.hidden_sizes=[a]"], "hidden_sizes"),
        (["train", "ppo-cartpole", "--set", "model.hidden_sizes=[0]"], "hidden_sizes"),
        (["train", "ppo-cartpole", "--set", "env.max_episode_steps=0"], "max_episode_steps"),
        (["train", "ppo-cartpole", "--set", "env.num_envs=10000000"], "GiB"),
        (["train", "dqn-cartpole", "--set", "dqn.buffer_size=100000000000"], "replay buffer"),
        (["train", "ppo", "envs_for_tests:InitRaises"], "cannot open the simulator"),
        (["train", "ppo", "envs_for_tests:WrongShapeReset"], "shape (3,)"),
        (["train", "ppo", "envs_for_tests:MultiBinaryEnv"], "MultiBinary"),
        (["train", "ppo", "envs_for_tests:RaisesOnStep"], "boom"),
        (["sweep", "ppo-cartpole", "--workers", "0"], "--workers"),
        (["sweep", "ppo-cartpole", "--seeds", "0"], "--seeds"),
    ],
)
def test_bad_input_is_one_line_and_leaves_no_run(capsys, tmp_path, args, needle):
    runs = tmp_path / "runs"
    extra = ["--runs", runs, "--frames", 512, *FAST] if args[0] == "train" else []
    assert needle in error_line(capsys, [*args, *extra])
    assert not runs.exists() or not any(runs.iterdir())  # no half-written run directory


@pytest.mark.parametrize("env", ["InitRaises", "WrongShapeReset", "MultiBinaryEnv"])
def test_check_of_a_broken_user_env_is_one_line(capsys, env):
    line = error_line(capsys, ["check", f"envs_for_tests:{env}", "--episodes", 2], progress=True)
    assert f"envs_for_tests:{env}" in line


def test_run_dir_that_is_a_file_and_malformed_config(capsys, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    assert "is a file" in error_line(capsys, ["train", "ppo-cartpole", "--run-dir", target, *FAST])
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo: [1,\n")
    assert "not valid YAML" in error_line(capsys, ["train", "--config", bad])
    assert target.read_text() == "x"


def test_run_dir_in_a_folder_that_cannot_be_written(capsys, tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)  # what a read-only folder does (the tests may run as root)
    line = error_line(capsys, ["train", "ppo-cartpole", "--run-dir", tmp_path / "ro" / "run", *FAST])
    assert "cannot create run directory" in line and "Permission denied" in line
    assert not (tmp_path / "ro").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_run_dir_in_a_read_only_folder(capsys, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    assert "run directory" in error_line(capsys, ["train", "ppo-cartpole", "--run-dir", folder / "run", *FAST])


# -- damaged runs --------------------------------------------------------------------------------------
def _random_metrics(path: Path) -> None:
    (path / "metrics.csv").write_bytes(bytes(range(256)) * 2)


def _truncated_meta(path: Path) -> None:
    (path / "meta.json").write_text((path / "meta.json").read_text()[:40])


def _deleted_meta(path: Path) -> None:
    (path / "meta.json").unlink()


def _old_checkpoint(path: Path) -> None:
    target = path / "checkpoints" / "last.pt"
    saved = torch.load(target, weights_only=True)
    torch.save({**saved, "format": 1}, target)


DAMAGE = {
    "random-metrics": (_random_metrics, "metrics.csv"),
    "truncated-meta": (_truncated_meta, "meta.json"),
    "deleted-meta": (_deleted_meta, "meta.json"),
    "old-checkpoint": (_old_checkpoint, "format 1"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_resume_of_a_damaged_run_is_one_line_and_writes_nothing(capsys, run, damage):
    damage_fn, needle = DAMAGE[damage]
    damage_fn(run)
    before = files(run)
    assert needle in error_line(capsys, ["train", "--resume", run, "--frames", 1024, "-q"])
    assert files(run) == before


@pytest.mark.parametrize("verb", ["doctor", "plot"])
@pytest.mark.parametrize("damage", ["random-metrics", "deleted-meta"])
def test_reading_a_damaged_run_is_one_line(capsys, run, verb, damage):
    """One line, not a finding: doctor's rules quote the run's files; with one unreadable there is no
    evidence to quote, and exit 2 (bad input) keeps "cannot read" apart from "read, found errors" (1)."""
    damage_fn, needle = DAMAGE[damage]
    damage_fn(run)
    before = files(run)
    assert needle in error_line(capsys, [verb, run])
    assert files(run) == before


def test_reading_a_run_never_imports_its_env_module(capsys, run):
    config = (run / "config.yaml").read_text().replace("id: CartPole-v1", "id: fault_marker_module:Env")
    (run / "config.yaml").write_text(config)
    assert main(["plot", str(run)]) == 0 and main(["doctor", str(run)]) in (0, 1)
    assert "fault_marker_module" not in sys.modules


def test_a_second_writer_is_refused(capsys, run):
    holder = Run(run)
    holder.lock()
    try:
        assert "being written by" in error_line(capsys, ["train", "--resume", run, "--frames", 1024, "-q"])
    finally:
        holder.unlock()


def test_stale_temp_files_are_removed_when_a_run_is_locked(run):
    stale = run / "checkpoints" / ".last.pt.x1y2.tmp"
    stale.write_bytes(b"half")
    holder = Run(run)
    holder.lock()
    holder.unlock()
    assert not stale.exists()


def test_resume_drops_events_of_frames_it_collects_again(capsys, run):
    """The run ended at 512 frames; events at 100,000 (as from a killed run past its checkpoint) go."""
    late = [{"event": kind, "frames": 100_000} for kind in ("eval", "solved", "milestone")]
    with (run / "events.jsonl").open("a") as handle:
        for event in [*late, {"event": "end", "frames": 100_000}, {"event": "time_limit", "seconds": 1.0}]:
            handle.write(json.dumps(event) + "\n")
    assert main(["train", "--resume", str(run), "--frames", "768", "-q"]) == 0
    events = load_run(run).events()
    assert not [e for e in events if e["event"] in ("eval", "solved", "milestone") and e["frames"] > 768]
    assert {"event": "end", "frames": 100_000} in events and {"event": "time_limit", "seconds": 1.0} in events
    assert [e["frames"] for e in events if e["event"] == "resume"] == [512]
    assert load_run(run).meta()["frames"] == 768


def test_user_env_that_raises_mid_run_is_recorded(capsys, tmp_path):
    path = tmp_path / "run"
    args = ["train", "ppo", "envs_for_tests:RaisesLater", "--frames", 20_000, "--run-dir", path, *FAST]
    line = error_line(capsys, [*args, "--set", "train.checkpoint_every_frames=512"])
    assert "raised during step" in line and "boom" in line
    meta = load_run(path).meta()
    assert meta["status"] == "failed" and "boom" in meta["reason"]
    assert (path / "checkpoints" / "last.pt").exists()


def test_disk_full_on_the_final_checkpoint_is_recorded(capsys, tmp_path, monkeypatch):
    save = Run.save_checkpoint

    def full_at_the_end(self, name, state):
        if name == "last" and state["frames"] >= 512:
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(self, name, state)

    monkeypatch.setattr(Run, "save_checkpoint", full_at_the_end)
    path = tmp_path / "run"
    args = ["train", "ppo-cartpole", "--frames", 512, "--run-dir", path, *FAST]
    line = error_line(capsys, [*args, "--set", "train.checkpoint_every_frames=256"])
    assert "could not be written" in line
    meta = load_run(path).meta()
    assert meta["status"] == "failed" and "No space left" in meta["reason"]
    assert torch.load(path / "checkpoints" / "last.pt", weights_only=True)["frames"] == 256


# -- exported artifacts and eval -----------------------------------------------------------------------
def _garbage_artifact(path: Path) -> None:
    (path / "export" / "policy.onnx").write_bytes(bytes(range(200)))


def _signature(change):
    def apply(path: Path) -> None:
        target = path / "export" / "policy.onnx.json"
        signature = json.loads(target.read_text())
        change(signature)
        target.write_text(json.dumps(signature))

    return apply


def _truncated_signature(path: Path) -> None:
    target = path / "export" / "policy.onnx.json"
    target.write_text(target.read_text()[:30])


ARTIFACT_DAMAGE = {
    "garbage-onnx": (_garbage_artifact, "cannot be loaded as a onnx policy"),
    "other-env": (_signature(lambda s: s["env"].update(id="Pendulum-v1")), "does not belong"),
    "unknown-env": (_signature(lambda s: s["env"].update(id="NoSuchEnv-v9")), "NoSuchEnv-v9"),
    "truncated-signature": (_truncated_signature, "not valid JSON"),
    "foreign-signature": (_signature(lambda s: s.pop("env")), "not an rlpilot export signature"),
}


@pytest.mark.parametrize("damage", sorted(ARTIFACT_DAMAGE))
def test_eval_of_a_broken_artifact_is_one_line(capsys, run, damage):
    damage_fn, needle = ARTIFACT_DAMAGE[damage]
    damage_fn(run)
    assert needle in error_line(capsys, ["eval", run / "export" / "policy.onnx", "--episodes", 2])


def test_eval_with_no_episodes(capsys, run):
    line = error_line(capsys, ["eval", run, "--episodes", 0])
    assert "--episodes: '0' is not a whole number within [1," in line


def test_a_fresh_process_prints_one_line_and_exits_2(run):
    _random_metrics(run)
    result = run_cli("train", "--resume", run, "--frames", 1024, "-q")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "metrics.csv" in result.stderr


def _resume_with_file_size_limit(path: Path, limit: int, frames: int):
    """``train --resume`` in a fresh process whose files may not grow past ``limit`` bytes (RLIMIT_FSIZE, what
    `ulimit -f` sets): a write past it fails with EFBIG."""
    import resource
    import subprocess

    from cli_runner import TESTS, cli_command, cli_env

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        cli_command(["train", "--resume", path, "--frames", str(frames), "-q"]),
        capture_output=True,
        text=True,
        cwd=TESTS,
        env=cli_env(),
        preexec_fn=small_files,
        timeout=300,
    )


def test_a_real_write_error_while_resuming_is_one_line(tmp_path):
    """A file-size limit below the size of the run's files: the resume's first write fails with EFBIG. Found by
    benchmarks/fault_soak.py, where it was a traceback (exit 1)."""
    path = tmp_path / "run"
    assert main(["train", "ppo-cartpole", "--frames", "512", "--run-dir", str(path), *FAST]) == 0
    before = (path / "metrics.csv").read_bytes()
    out = _resume_with_file_size_limit(path, (path / "events.jsonl").stat().st_size - 1, 1024)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "cannot write" in lines[0], out.stderr
    assert str(path) in lines[0] and (path / "metrics.csv").read_bytes() == before  # names the file; nothing lost
    load_run(path).config()  # config.yaml intact (written atomically)
    assert load_run(path).meta()["status"] == "finished"  # its first write failed: the record is untouched

    # a limit that lets the small config.yaml and meta.json be written (the resume marks itself running) but not
    # the metrics: the run must not stay marked "running" after the process has exited (the 60-minute soak found
    # it so)
    more_rows = ["--set", "train.log_every_frames=32", "-q"]
    assert main(["train", "--resume", str(path), "--frames", "3072", *more_rows]) == 0
    limit = max((path / name).stat().st_size for name in ("meta.json", "config.yaml")) + 400
    assert (path / "metrics.csv").stat().st_size > limit
    out = _resume_with_file_size_limit(path, limit, 4096)
    assert out.returncode == 2 and "cannot write" in out.stderr, out.stderr
    meta = load_run(path).meta()
    assert meta["status"] == "failed" and "could not start" in meta["reason"] and "cannot write" in meta["reason"], (
        out.stderr,
        meta,
    )
    assert main(["train", "--resume", str(path), "--frames", "4096", "-q"]) == 0  # the limit gone, it resumes
    assert load_run(path).meta()["status"] == "finished"
