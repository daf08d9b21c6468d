"""Lost or silently wrong results: two sweeps on one folder, grids whose labels lie, an export over another
run's, writes onto devices and pipes or through links, NaN rewards and weights, env kwargs that are not
finite. Each either gives the right result or is one line with exit 2, and nothing outside the run (or
``--out``) is touched."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_faults import FAST, copy_of, error_line, files, train_small

from rlpilot.cli import main
from rlpilot.common.errors import RunWriteError, UserError
from rlpilot.common.files import append_line, atomic_write, dumps
from rlpilot.runs import Run
from rlpilot.sweep import run_member, sweep_lock


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A 256-frame PPO run on a 10-step env."""
    return train_small(tmp_path_factory, "Steps")


@pytest.fixture
def run(trained, tmp_path) -> Path:
    return copy_of(trained, tmp_path)


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in JSON")

    return json.loads(text, parse_constant=refuse)


# -- sweeps ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--grid", "ppo.lr=1e-3,2e-3", "--grid", "ppo.lr=5e-3"], "given twice"),
        (["--grid", "train.seed=5,6"], "train.seed"),
        (["--set", "train.seed=5"], "train.seed"),
        (["--grid", "ppo.lr=1e-3,2e-3", "--set", "ppo.lr=5e-3"], "conflicts"),
        (["--grid", "ppo.lr=1e-3,1e-3"], "twice"),
    ],
)
def test_a_grid_whose_labels_would_lie_is_refused(capsys, tmp_path, args, needle):
    assert needle in error_line(capsys, ["sweep", "ppo-cartpole", "--seeds", 1, "--out", tmp_path / "s", *args])
    assert not (tmp_path / "s").exists()


def test_a_second_sweep_on_a_folder_is_refused_and_members_are_taken_under_their_lock(capsys, tmp_path):
    out = tmp_path / "sweep"
    with sweep_lock(out):  # another sweep holds the folder
        line = error_line(capsys, ["sweep", "ppo-cartpole", "--seeds", 1, "--out", out])
    assert "in use by another sweep" in line
    overrides = ["train.total_frames=256", "train.loggers=[]", "train.eval_episodes=2"]
    member = out / "default" / "s0"
    member.mkdir(parents=True)
    (member / "meta.json").write_text('{"status": "running"}')
    holder = Run(member)
    holder.lock()  # a member another process writes: refused, and nothing of it removed
    try:
        with pytest.raises(UserError, match="being written"):
            run_member("ppo-cartpole", overrides, 0, member)
        assert (member / "meta.json").exists()
    finally:
        holder.unlock()
    # what the old race left: a member holding only its checkpoint; a rerun starts it over (it failed forever)
    (member / "meta.json").unlink()
    (member / "checkpoints").mkdir()
    (member / "checkpoints" / "last.pt").write_bytes(b"x")
    result = run_member("ppo-cartpole", overrides, 0, member)
    assert result.status in ("finished", "solved") and result.config().train.seed == 0
    # the same folder asked for other settings: the label would lie
    with pytest.raises(UserError, match="ppo.lr"):
        run_member("ppo-cartpole", [*overrides, "ppo.lr=0.002"], 0, member)


# -- export ------------------------------------------------------------------------------------------
def test_export_into_another_runs_export_is_refused_without_force(capsys, run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run, other)
    assert main(["export", "--trust-code", str(run), "--format", "torchscript"]) == 0
    before = files(run / "export")
    line = error_line(capsys, ["export", "--trust-code", other, "--format", "torchscript", "--out", run / "export"])
    assert "another run" in line and "--force" in line
    assert files(run / "export") == before
    assert (
        main(["export", "--trust-code", str(other), "--format", "torchscript", "--out", str(run / "export"), "--force"])
        == 0
    )
    assert str(other) in (run / "export" / "policy.ts.pt.json").read_text()


def test_non_finite_weights_are_neither_played_nor_exported(capsys, run):
    checkpoint = run / "checkpoints" / "last.pt"
    saved = torch.load(checkpoint, weights_only=True)
    for value in saved["state"]["algo"]["actor"].values():
        value.fill_(float("nan"))
    torch.save(saved, checkpoint)
    assert "non-finite weights" in error_line(capsys, ["eval", "--trust-code", run, "--episodes", 2])
    assert "non-finite weights" in error_line(capsys, ["export", "--trust-code", run, "--format", "torchscript"])
    assert not (run / "export").exists()


# -- devices, pipes and links --------------------------------------------------------------------------
def _fifo(tmp_path: Path) -> tuple[Path, list]:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    got: list = []
    thread = threading.Thread(target=lambda: got.append(path.read_bytes()), daemon=True)
    thread.start()
    return path, got


KINDS = ["regular", "missing", "fifo", "dev_null", "link_to_dev_null", "link_to_regular"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), data=st.binary(max_size=4096))
def test_a_target_keeps_its_kind_after_a_write(tmp_path_factory, kind, data):
    """A device or a pipe is written as a stream (never replaced by a regular file); a regular file is replaced
    whole; a link outside a run is followed to its target."""
    tmp = tmp_path_factory.mktemp("kind")
    got = None
    if kind == "regular":
        target = tmp / "file"
        target.write_bytes(b"old")
    elif kind == "missing":
        target = tmp / "new" / "file"
    elif kind == "fifo":
        target, got = _fifo(tmp)
    elif kind == "dev_null":
        target = Path(os.devnull)
    elif kind == "link_to_dev_null":
        target = tmp / "link"
        target.symlink_to(os.devnull)
    else:
        (tmp / "real").write_bytes(b"old")
        target = tmp / "link"
        target.symlink_to(tmp / "real")
    mode = os.stat(target).st_mode if target.exists() else None
    atomic_write(target, data)
    if mode is not None and not stat.S_ISREG(mode):
        assert os.stat(target).st_mode == mode  # still the device or the pipe
    if kind == "fifo":
        for _ in range(200):
            if got:
                break
            threading.Event().wait(0.01)
        assert got == [data]
    if kind in ("regular", "missing"):
        assert target.read_bytes() == data and not list(target.parent.glob(".*.tmp"))
    if kind == "link_to_regular":
        assert target.is_symlink() or target.read_bytes() == data


def test_eval_csv_onto_a_full_device_is_one_line(capsys, run):
    assert "No space left" in error_line(capsys, ["eval", "--trust-code", run, "--episodes", 2, "--csv", "/dev/full"])
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    with pytest.raises(RunWriteError):
        atomic_write(Path("/dev/full"), b"x")


@pytest.mark.parametrize("name", ["events.jsonl", "metrics.csv", "meta.json", "checkpoints", "tb", "curve.png"])
def test_a_resume_never_writes_through_a_link_in_the_run(capsys, run, tmp_path, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / name
    moved = run / name
    if moved.exists():
        shutil.move(str(moved), str(target))
    moved.symlink_to(target)
    before = {p.name: p.stat().st_mtime_ns for p in outside.rglob("*")}
    line = error_line(capsys, ["train", "--trust-code", "--resume", run, "--frames", 512, "-q"])
    assert "symbolic link" in line and name in line
    assert {p.name: p.stat().st_mtime_ns for p in outside.rglob("*")} == before


def test_an_appended_line_never_follows_a_link(tmp_path):
    (tmp_path / "events.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(UserError, match="symbolic link"):
        append_line(tmp_path / "events.jsonl", "x\n")
    assert not (tmp_path / "elsewhere.jsonl").exists()


# -- non-finite numbers --------------------------------------------------------------------------------
def test_nan_rewards_stop_the_run_and_are_named(capsys, tmp_path):
    path = tmp_path / "nan"
    args = ["train", "ppo", "envs_for_tests:NaNReward", "--frames", 512, "--run-dir", path, *FAST]
    assert main([str(a) for a in args]) == 1
    meta = strict_json((path / "meta.json").read_text())
    assert meta["status"] == "failed" and "non-finite rewards" in meta["reason"]
    for line in (path / "events.jsonl").read_text().splitlines():
        strict_json(line)
    capsys.readouterr()
    assert main(["doctor", str(path), "--json"]) == 1
    findings = strict_json(capsys.readouterr().out)["findings"]
    assert findings[0]["rule"] == "nonfinite_rewards"
    assert main(["check", "envs_for_tests:NaNReward", "--episodes", "2"]) == 1
    assert "NaN/inf rewards" in capsys.readouterr().out


finite_or_not = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.none(), st.text(max_size=5))
json_values = st.recursive(
    finite_or_not, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
)


@settings(max_examples=60, deadline=None)
@given(value=json_values)
def test_json_is_strict_whatever_the_numbers(value):
    text = dumps({"value": value})
    strict_json(text)
    if isinstance(value, float):
        assert strict_json(text)["value"] == (value if math.isfinite(value) else None)


# -- env kwargs ------------------------------------------------------------------------------------------
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=2),
    st.booleans(),
    st.text(max_size=3),
)


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(["payload", "friction", "damping", "gain", "obs_noise", "action_delay"]), spec=numbers)
def test_arm_disturbances_are_finite_and_in_range_or_refused(name, spec):
    from rlpilot.envs.arm.disturbances import LIMITS, disturbance_range

    try:
        low, high = disturbance_range(name, spec)
    except ValueError as exc:
        assert name in str(exc)
        return
    assert math.isfinite(low) and math.isfinite(high) and 0 <= low <= high <= LIMITS[name]


@settings(max_examples=80, deadline=None)
@given(
    kwargs=st.fixed_dictionaries(
        {},
        optional={
            "local_ratio": numbers,
            "max_cycles": st.one_of(st.integers(-5, 10**7), st.floats(allow_nan=True)),
            "effort": numbers,
        },
    )
)
def test_native_and_spread_kwargs_are_finite_or_refused(kwargs):
    from rlpilot.envs.native import finite_kwarg
    from rlpilot.multiagent.spread import SpreadVector

    spread = {key: value for key, value in kwargs.items() if key != "effort"}
    try:
        env = SpreadVector(2, **spread)
    except ValueError as exc:
        assert any(key in str(exc) for key in spread)
    else:
        assert 0 <= env.local_ratio <= 1 and isinstance(env.max_cycles, int) and env.max_cycles >= 1
    try:
        value = finite_kwarg("g", kwargs.get("effort", 1.0), 0.0, 100.0)
    except UserError as exc:
        assert "env.kwargs.g" in str(exc)
    else:
        assert 0.0 <= value <= 100.0


def test_arm_kwargs_that_are_not_finite_are_one_line(capsys, tmp_path):
    pytest.importorskip("mujoco")
    for kwarg in ("obs_noise: .nan", "payload: .nan", "gain: .inf", "effort_weight: .nan"):
        line = error_line(
            capsys,
            ["check", "rlpilot/ReacherTrack-v0", "--episodes", 1, "--set", f"env.kwargs={{{kwarg}}}"],
            progress=True,
        )
        assert kwarg.split(":")[0] in line


@pytest.mark.parametrize(
    "name, args", [("eval.csv", ["eval", "--trust-code", "{run}", "--episodes", "2"]), ("curve.png", ["plot", "{run}"])]
)
def test_default_outputs_in_a_run_never_write_through_a_link(capsys, run, tmp_path, name, args):
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(outside)
    line = error_line(capsys, [a.replace("{run}", str(run)) for a in args])
    assert "symbolic link" in line
    assert outside.read_text() == "keep" and (run / name).is_symlink()
