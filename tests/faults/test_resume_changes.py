"""What a resume may change: the budget, the stop rule, the solve rule and the intervals; a solved run can be
extended (``--frames N`` trains on to N); anything else is refused in one line, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_faults import copy_of, error_line, files, train_small

from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.config import Config, all_keys, load_config
from rlpilot.loop.lifecycle import RESUMABLE, resume_changes
from rlpilot.runs import load_run

FAST = ["--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q"]


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    """A PPO run on a 10-step env whose threshold (0) every evaluation reaches: solved at its first one (256)."""
    sets = ["train.solved_at=0", "train.eval_every_frames=256", "train.checkpoint_every_frames=256"]
    path = train_small(tmp_path_factory, "Steps", 2048, *[x for s in sets for x in ("--set", s)])
    assert load_run(path).status == "solved" and load_run(path).frames < 2048
    return path


@pytest.fixture
def run(solved, tmp_path) -> Path:
    return copy_of(solved, tmp_path)


def test_a_solved_run_extended_with_frames_trains_on_to_them(run, capsys):
    solved_at = load_run(run).solved_at_frames
    assert main(["train", "--trust-code", "--resume", str(run), "--frames", "768", "-q"]) == 0
    out = capsys.readouterr().out
    record = load_run(run)
    assert record.frames == 768 and record.status == "solved" and record.solved_at_frames == solved_at, out
    assert "training on to 768 frames" in out
    config = record.config()
    assert config.train.total_frames == 768 and config.train.stop_when_solved is False
    change = [e for e in record.events() if e["event"] == "resume_changes"][-1]
    assert change["changes"]["train.stop_when_solved"] == [True, False]


def test_a_new_solve_rule_judges_the_run_again(run, capsys):
    """A threshold no evaluation reaches: the solve is forgotten and the run goes on to its budget."""
    args = ["train", "--trust-code", "--resume", str(run), "--frames", "768", "--set", "train.solved_at=1000", "-q"]
    assert main(args) == 0
    record = load_run(run)
    assert record.status == "finished" and record.frames == 768 and record.solved_at_frames is None


def test_a_solved_run_without_changes_says_how_to_extend_it(run, capsys):
    before = files(run)
    line = error_line(capsys, ["train", "--trust-code", "--resume", run])
    assert "already ended (solved" in line and "--frames N" in line
    line = error_line(capsys, ["train", "--trust-code", "--resume", run, "--set", "train.log_every_frames=512"])
    assert "--frames N" in line
    assert files(run) == before


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--set", "ppo.lr=0.5"], "ppo.lr"),
        (["--set", "env.num_envs=3"], "env.num_envs"),
        (["--set", "train.seed=9"], "train.seed"),
        (["--seed", "9"], "--seed"),
        (["--set", "train.bogus=1"], "bogus"),
    ],
)
def test_other_changes_are_refused_and_nothing_is_written(run, capsys, extra, needle):
    before = files(run)
    line = error_line(capsys, ["train", "--trust-code", "--resume", run, "--frames", 4096, *extra])
    assert needle in line
    assert files(run) == before


KEYS = sorted(key for key in all_keys(Config(algo="ppo")) if key.count(".") == 1)


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(KEYS), data=st.data())
def test_only_the_resumable_keys_may_change(key, data):
    """Any key set to another valid value: accepted (and reported) when resumable, a UserError naming it when
    not. A value that does not validate is a UserError either way."""
    config = load_config("ppo-cartpole")
    current = getattr(getattr(config, key.split(".")[0]), key.split(".")[1])
    candidates = {
        bool: [not current] if isinstance(current, bool) else [],
        int: [current + 1, current * 2 + 1] if isinstance(current, int) and not isinstance(current, bool) else [],
        float: [current * 0.5 + 0.01] if isinstance(current, float) else [],
    }
    values = [v for vs in candidates.values() for v in vs] or ["[]" if isinstance(current, list) else "7"]
    value = data.draw(st.sampled_from(values))
    text = json.dumps(value) if not isinstance(value, str) else value
    try:
        changes = resume_changes(config, [f"{key}={text}"], None)
    except UserError as exc:
        assert key in str(exc) or "invalid config" in str(exc)
        return
    assert set(changes) <= set(RESUMABLE)
    assert not changes or key in changes
