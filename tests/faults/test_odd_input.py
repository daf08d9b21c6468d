"""Faults: odd input (issue 55, class 6). A number on the command line (negative, inf, nan, huge, not a number) is
read by one argument type for every verb: a value within the argument's range, or one line and exit 2, never a
traceback from gymnasium or numpy deep inside a verb. A tune search space is one every sampler can draw from, or
one line, with no study left behind to block the next ``--out``. A run's files are read back as data: JSON nested
deeper than anything rlpilot writes is one line naming the file, for doctor, plot, export and ``train --resume``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpilot.arguments import Number, build_parser
from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.common.files import MAX_NESTING

FAST = ["--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q"]
PLANT, PID = "tests.controller_fixture:Axis", "tests.controller_fixture:AxisPID"

NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        ["inf", "-inf", "nan", "NaN", "Infinity", "1e400", "-1e400", "1e-400", "0x10", "1_000", "", " ", "5.", ".5"]
        + ["1e6", "2147483647", "2147483648", "-0", "+7", "9" * 5000, "\u0661\u0662", "1e3\n", "2.5e1"]
    ),
    st.text(max_size=12),
)
"""Strings a user (or a script) may put where a number belongs."""


def error_line(capfd, args) -> str:
    """``main(args)`` in-process: exit 2 and exactly one line on stderr (file-level capture: a library's own
    logging included), no traceback."""
    code = main([str(a) for a in args])
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), err[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("odd") / "run"
    assert main([str(a) for a in ["train", "ppo-cartpole", "--frames", 256, "--run-dir", path, *FAST]]) == 0
    return path


# -- numbers on the command line -------------------------------------------------------------------------
def numeric_options() -> list[tuple[list[str], str, Number]]:
    """(the verb and its positional arguments, the option, its type) for every numeric option of every verb."""
    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = []
    for verb, parser in verbs.items():
        positionals = ["x" for a in parser._actions if not a.option_strings and a.nargs in (None, "+")]
        required = [
            part for a in parser._actions if a.required and a.option_strings for part in (a.option_strings[0], "x")
        ]
        for action in parser._actions:
            if action.option_strings and action.type not in (None, str):
                found.append(([verb, *positionals, *required], action.option_strings[0], action.type))
    return found


def test_every_numeric_argument_is_read_by_the_one_number_type():
    options = numeric_options()
    assert len(options) >= 20 and all(isinstance(kind, Number) for _, _, kind in options), options
    assert {flag for _, flag, _ in options} >= {"--seed", "--episodes", "--seeds", "--trials", "--max-seconds"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=NUMBERS, which=st.integers(0, 10**6))
def test_any_string_for_any_numeric_argument_is_a_value_in_range_or_one_line(capsys, text, which):
    command, flag, kind = (options := numeric_options())[which % len(options)]
    try:
        args = build_parser().parse_args([*command, f"{flag}={text}"])
    except SystemExit as exc:
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert exc.code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error: argument"), lines
        assert flag in lines[0]
        return
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert isinstance(value, kind.kind) and math.isfinite(value) and value >= kind.low, (flag, text, value)
    assert kind.high is None or value <= kind.high, (flag, text, value)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["eval", "RUN", "--seed", "-5"], "--seed: '-5' is not a whole number within [0, 2,147,483,647]"),
        (["eval", "RUN", "--seed", "nan"], "--seed: 'nan'"),
        (["eval", "RUN", "--seed", "1e400"], "--seed: '1e400'"),
        (["eval", "RUN", "--episodes", "inf"], "--episodes: 'inf'"),
        (["eval", "RUN", "--episodes", "3", "--seed", "2147483646"], "reach seed 2147483648"),
        (["export", "RUN", "--seed", "-1"], "--seed: '-1'"),
        (["check", "CartPole-v1", "--max-seconds", "nan"], "--max-seconds: 'nan'"),
        (["check", "CartPole-v1", "--seed", "-3"], "--seed: '-3'"),
        (["sweep", "ppo-cartpole", "--seeds", "2", "--seed-start", "2147483647"], "reach seed 2147483648"),
        (["tune", "ppo-cartpole", "--seed-start", "2147483647", "--param", "ppo.lr=1e-4:1e-3"], "reach seed"),
    ],
)
def test_odd_numbers_are_one_line_before_the_verb_runs(capfd, trained, tmp_path, args, needle):
    """``eval RUN --seed -5`` was gymnasium's traceback; ``check --max-seconds nan`` ran as if it were given; a seed
    range past the largest seed failed in each run of a sweep."""
    args = [str(trained) if a == "RUN" else a for a in args]
    out = [] if args[0] in ("eval", "export", "check") else ["--out", tmp_path / "out"]
    assert needle in error_line(capfd, [*args, *out])
    assert not (tmp_path / "out").exists() and not (trained / "eval.csv").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        # parsed only: were the verb to run, it would play 10^10 episodes, start 10^5 processes, ...
        (["check", "CartPole-v1", "--episodes", "10000000000"], "--episodes: '10000000000'"),
        (["check", "CartPole-v1", "--max-seconds", "inf"], "--max-seconds: 'inf'"),
        (["check", "CartPole-v1", "--max-seconds", "0"], "--max-seconds: '0'"),
        (["train", "ppo-cartpole", "--frames", "1e400"], "--frames: '1e400'"),
        (["sweep", "ppo-cartpole", "--workers", "100000"], "--workers: '100000'"),
        (["tune", "ppo-cartpole", "--check-seeds", "-1"], "--check-seeds: '-1'"),
        (["tune", "x", "--controller", "m:C", "--episodes", "1e9"], "--episodes: '1e9'"),
        (["bench", "--seeds", "nan"], "--seeds: 'nan'"),
    ],
)
def test_odd_numbers_that_would_run_away_are_refused_where_they_are_read(capsys, args, needle):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and len(lines) == 1 and needle in lines[0], lines


# -- tune's search space -----------------------------------------------------------------------------------
def drawn(space, sampler) -> list[float]:
    """Values an Optuna sampler draws from ``space`` (an in-memory study, three trials)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=sampler)
    values = []
    for _ in range(3):
        trial = study.ask()
        values += [param.suggest(trial) for param in space]
        study.tell(trial, 0.0)
    return values


@settings(max_examples=150, deadline=None)
@given(low=NUMBERS, high=NUMBERS, log=st.booleans(), integer=st.booleans())
def test_any_range_is_one_every_sampler_draws_from_or_one_line(low, high, log, integer):
    """``--param k=1:inf`` was an OverflowError inside Optuna's sampler (and ``-1e308:1e308`` too)."""
    optuna = pytest.importorskip("optuna")
    from rlpilot.tune import controller_space, parse_param

    text = f"{low}:{high}" + (":log" if log else "")
    try:
        space = [parse_param("ppo-cartpole", f"ppo.epochs={text}")] if integer else controller_space([f"kp={text}"])
    except UserError:
        return  # one line on the command line (the CLI escapes a line break the value brought)
    (param,) = space
    if param.choices is not None:  # a list of choices (a ',' in the text): numbers or words, not a range
        return
    for sampler in (optuna.samplers.RandomSampler(seed=0), optuna.samplers.TPESampler(seed=0)):
        for value in drawn(space, sampler):
            assert math.isfinite(value) and param.low <= value <= param.high, (text, value)


def test_an_infinite_controller_range_is_one_line_and_leaves_no_study(capfd, tmp_path):
    """It was a traceback, and the study it left in --out refused the corrected command as another search."""
    pytest.importorskip("optuna")
    out = tmp_path / "tune"
    base = ["tune", PLANT, "--controller", PID, "--trials", 2, "--episodes", 2, "--check-episodes", 0, "--out", out]
    assert "--param kp: a range's bounds are finite numbers (got inf)" in error_line(
        capfd, [*base, "--param", "kp=1:inf"]
    )
    assert not out.exists()
    assert main([str(a) for a in [*base, "--param", "kp=1:2"]]) == 0
    assert json.loads((out / "tune.json").read_text())["trials"] == 2


def test_an_unknown_controller_argument_is_one_line_without_optunas_traceback(capfd, tmp_path):
    """Optuna logged the failed trial with its traceback before rlpilot's line; now the controller is built at
    the space's corners before a study exists."""
    pytest.importorskip("optuna")
    out = tmp_path / "tune"
    args = ["tune", PLANT, "--controller", PID, "--param", "nope=1:2", "--trials", 1, "--episodes", 2, "--out", out]
    line = error_line(capfd, args)
    assert "unexpected keyword argument 'nope'" in line
    assert not out.exists()


# -- a run's files, read as data -----------------------------------------------------------------------------
def depth(value) -> int:
    """How deep lists and objects nest (the test's own count; values here are shallow enough to recurse)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
)
NESTED = st.one_of(
    # (JSON text, its depth): a random value inside a chain of lists crossing the bound, or a chain far past it
    st.tuples(VALUES, st.integers(0, 2 * MAX_NESTING)).map(
        lambda t: ("[" * t[1] + json.dumps(t[0]) + "]" * t[1], t[1] + depth(t[0]))
    ),
    st.integers(MAX_NESTING, 200_000).map(lambda n: ('{"a": ' * n + "1" + "}" * n, n)),
)


def damage(run: Path, name: str, text: str) -> None:
    """``text`` (a JSON value) into the run's ``name``: a field of meta.json, or in an event of events.jsonl (one
    level deeper than ``text`` either way)."""
    path = run / name
    if name == "meta.json":
        path.write_text(path.read_text().rstrip()[:-1] + f', "extra": {text}}}\n')
    else:
        path.write_text(path.read_text() + f'{{"event": "note", "data": {text}}}\n')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nested=NESTED, name=st.sampled_from(["meta.json", "events.jsonl"]))
def test_doctor_reads_any_nesting_or_refuses_the_file_in_one_line(capfd, trained, nested, name):
    """20,000 nested lists in events.jsonl were a RecursionError traceback from doctor."""
    text, deepest = nested
    capfd.readouterr()
    with tempfile.TemporaryDirectory() as folder:
        run = Path(shutil.copytree(trained, Path(folder) / "run"))
        damage(run, name, text)
        if deepest + 1 <= MAX_NESTING:
            assert main(["doctor", str(run)]) in (0, 1)
            assert "rlpilot: error" not in capfd.readouterr().err
        else:
            line = error_line(capfd, ["doctor", run])
            assert f"{run / name} nests lists or objects deeper than {MAX_NESTING} levels" in line


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nested=NESTED, name=st.sampled_from(["meta.json", "events.jsonl"]))
def test_resume_reads_any_nesting_or_refuses_the_file_in_one_line_writing_nothing(capfd, trained, nested, name):
    text, deepest = nested
    capfd.readouterr()
    with tempfile.TemporaryDirectory() as folder:
        run = Path(shutil.copytree(trained, Path(folder) / "run"))
        damage(run, name, text)
        before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"}
        line = error_line(capfd, ["train", "--resume", run, "-q"])  # a finished run: nothing to resume either way
        if deepest + 1 > MAX_NESTING:
            assert f"{run / name} nests lists or objects deeper than {MAX_NESTING} levels" in line
        else:
            assert "already ended" in line, line
        assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"} == before


@pytest.mark.parametrize("verb", ["plot", "export"])
def test_plot_and_export_refuse_a_deeply_nested_meta_json_in_one_line(capfd, trained, tmp_path, verb):
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    damage(run, "meta.json", "[" * 100_000 + "]" * 100_000)
    extra = ["--out", tmp_path / ("curve.png" if verb == "plot" else "export")]
    assert "meta.json nests lists or objects deeper than" in error_line(capfd, [verb, run, *extra])
    assert not (tmp_path / "curve.png").exists() and not (tmp_path / "export").exists()
