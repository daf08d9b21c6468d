"""Tracebacks where one line was promised: user envs that break during ``check`` or a video, observations
rlpilot cannot read, and files that cannot be written (a read-only run, a file-size limit). Each is one
``rlpilot: error:`` line and exit 2."""

from __future__ import annotations

import errno
import os
import resource
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_faults import FAST, copy_of, error_line, files, train_small


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A 256-frame PPO run on an env whose render() returns None (its checkpoint ~30 kB)."""
    return train_small(tmp_path_factory, "RenderNone")


@pytest.fixture
def run(trained, tmp_path) -> Path:
    return copy_of(trained, tmp_path)


@pytest.mark.parametrize(
    "env, needle",
    [
        ("RaisesOnStep", "boom"),
        ("ShortStepTuple", "expected 5, got 4"),
        ("NestedDictObs", "flatten it"),
    ],
)
def test_check_of_an_env_that_breaks_is_one_line(capsys, env, needle):
    line = error_line(capsys, ["check", f"envs_for_tests:{env}", "--episodes", 2], progress=True)
    assert needle in line and f"envs_for_tests:{env}" in line


def test_training_on_nested_dict_observations_is_one_line(capsys, tmp_path):
    line = error_line(capsys, ["train", "ppo", "envs_for_tests:NestedDictObs", "--run-dir", tmp_path / "r", *FAST])
    assert "Dict inside it" in line
    assert not (tmp_path / "r").exists()


def swap_env(run: Path, env: str) -> None:
    """The run's env becomes ``envs_for_tests:<env>`` (same spaces), in its config and its checkpoint."""
    import torch

    (run / "config.yaml").write_text((run / "config.yaml").read_text().replace("RenderNone", env))
    checkpoint = run / "checkpoints" / "last.pt"
    saved = torch.load(checkpoint, weights_only=True)  # the checkpoint names its env too
    saved["subject"] = saved["subject"].replace("RenderNone", env)
    saved["config"]["env"]["id"] = saved["config"]["env"]["id"].replace("RenderNone", env)
    torch.save(saved, checkpoint)


@pytest.mark.parametrize("env, needle", [("RenderNone", "returned None"), ("RenderFlat", "shape (12,)")])
def test_a_video_of_an_env_that_renders_no_image_is_one_line(capsys, run, tmp_path, env, needle):
    swap_env(run, env)
    assert needle in error_line(capsys, ["eval", "--trust-code", run, "--episodes", 1, "--video", tmp_path / "v.gif"])
    assert not (tmp_path / "v.gif").exists()


@pytest.mark.parametrize("env, needle", [("RaisesOnStep", "boom"), ("ShortStepTuple", "step must return")])
def test_eval_of_an_env_that_breaks_is_one_line(capsys, run, env, needle):
    swap_env(run, env)
    line = error_line(capsys, ["eval", "--trust-code", run, "--episodes", 2])
    assert needle in line and f"envs_for_tests:{env}" in line
    assert not (run / "eval.csv").exists()


@contextmanager
def file_size_limit(limit: int):
    """RLIMIT_FSIZE for this process (what ``ulimit -f`` sets); the CLI ignores SIGXFSZ, so a write past it
    fails with EFBIG."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_file_size_limit_during_export_and_resume_is_one_line(capsys, run, tmp_path):
    with file_size_limit(4096):
        line = error_line(capsys, ["export", "--trust-code", run, "--format", "torchscript", "--out", tmp_path / "exp"])
        assert "File too large" in line
        assert not (tmp_path / "exp").exists() or not any((tmp_path / "exp").iterdir())
        before = (run / "checkpoints" / "last.pt").read_bytes()
        line = error_line(capsys, ["train", "--trust-code", "--resume", run, "--frames", 512, "-q"])
    assert "File too large" in line
    assert (run / "checkpoints" / "last.pt").read_bytes() == before  # the last good checkpoint stays


@contextmanager
def read_only(root: Path, monkeypatch):
    """Writes under ``root`` fail with EROFS, as on a read-only mount (the tests may run as root, for whom
    file modes do not stop a write)."""
    import builtins
    import tempfile

    root = str(root.resolve())

    def inside(path) -> bool:
        return str(Path(os.fspath(path)).resolve()).startswith(root)

    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    real_open, real_os_open, real_mkstemp, real_mkdtemp = builtins.open, os.open, tempfile.mkstemp, tempfile.mkdtemp

    def fake_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+") and inside(file):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and inside(path):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def fake_mkstemp(*args, dir=None, **kwargs):
        if dir is not None and inside(dir):
            refuse(dir)
        return real_mkstemp(*args, dir=dir, **kwargs)

    def fake_mkdtemp(*args, dir=None, **kwargs):
        if dir is not None and inside(dir):
            refuse(dir)
        return real_mkdtemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(tempfile, "mkstemp", fake_mkstemp)
    monkeypatch.setattr(tempfile, "mkdtemp", fake_mkdtemp)
    yield


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--trust-code", "--resume", "{run}", "--frames", "512", "-q"],
        ["plot", "{run}"],
        ["export", "--trust-code", "{run}", "--format", "torchscript"],
        ["eval", "--trust-code", "{run}", "--episodes", "1"],
    ],
)
def test_a_read_only_run_directory_is_one_line(capsys, run, monkeypatch, args):
    before = files(run)
    with read_only(run, monkeypatch):
        line = error_line(capsys, [a.replace("{run}", str(run)) for a in args])
    assert "Read-only file system" in line
    assert files(run) == before


@pytest.mark.parametrize("verb", [["plot"], ["doctor"], ["train", "--trust-code", "--resume"]])
def test_a_folder_where_a_run_file_belongs_is_one_line(capsys, run, verb):
    (run / "metrics.csv").unlink()
    (run / "metrics.csv").mkdir()
    before = files(run)
    line = error_line(capsys, [*verb, run])
    assert "metrics.csv" in line and "is a folder" in line and "move it away" in line
    assert files(run) == before


@pytest.mark.parametrize("kwargs", ["{local_ratio: .nan}", "{max_cycles: .inf}"])
def test_check_of_simple_spread_with_kwargs_out_of_range_is_one_line(capsys, kwargs):
    pytest.importorskip("mpe2")
    args = ["check", "mpe2.simple_spread_v3", "--episodes", 2, "--set", "env.backend=native", "--set"]
    line = error_line(capsys, [*args, f"env.kwargs={kwargs}"], progress=True)
    assert kwargs.strip("{}").split(":")[0] in line
