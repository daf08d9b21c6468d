"""Property-based fuzzing of everything a user types before training starts: ``--set`` overrides, config
files, and the ``train --config FILE`` command line. Each either gives a config that validates or fails
with a :class:`UserError` (one line, exit 2), never another exception. Nothing trains here."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpilot import cli
from rlpilot.common.errors import UserError
from rlpilot.config import Config, all_keys, load_config

KEYS = sorted({key for algo in ("ppo", "dqn", "sac", "td3", "grpo") for key in all_keys(Config(algo=algo))})
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["auto", "cpu", "tanh", "linear", "CartPole-v1", "envs_for_tests:NoSuch", "csv"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
raw_values = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", ".nan", "1e309", "-1", "0", "[", "]", "{a: [}", "[64, 64]", "[[1]]", "~"]),
    st.text(max_size=20),
    values.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=16), st.sampled_from(["ppo.", ".lr", "algo", "env", "="]))


def valid_or_user_error(make) -> Config | None:
    """``make()``'s config, validated again, or None when it raised a UserError; any other exception fails."""
    try:
        config = make()
    except UserError as exc:
        assert str(exc)  # the CLI prints it as one line (test_train_config_file_on_the_command_line)
        return None
    return config.validate()


@FUZZ
@given(overrides=st.lists(st.tuples(keys, raw_values), min_size=1, max_size=3))
def test_any_override_validates_or_is_a_user_error(overrides):
    sets = [f"{key}={value}" for key, value in overrides]
    valid_or_user_error(lambda: load_config("ppo-cartpole", overrides=sets))


config_files = st.dictionaries(
    st.one_of(st.sampled_from(["algo", "env", "model", "ppo", "dqn", "train", "guard", "preset", "llm"]), scalars),
    st.one_of(
        values,
        st.fixed_dictionaries({}, optional={key.partition(".")[2]: values for key in KEYS if key.startswith("train.")}),
        st.fixed_dictionaries({}, optional={key.partition(".")[2]: values for key in KEYS if key.startswith("env.")}),
    ),
    max_size=5,
)


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as path:
        yield Path(path)


@FUZZ
@given(data=config_files)
def test_any_config_file_validates_or_is_a_user_error(folder, data):
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    valid_or_user_error(lambda: load_config(config_file=path))


class Reached(Exception):
    """Raised by the stand-in for training: the CLI got as far as training with this config."""


@FUZZ
@given(data=config_files, overrides=st.lists(st.tuples(keys, raw_values), max_size=2))
def test_train_config_file_on_the_command_line(folder, monkeypatch, data, overrides):
    import rlpilot.loop.trainer

    def record(config, **kwargs):
        raise Reached(config)

    monkeypatch.setattr(rlpilot.loop.trainer, "train", record)
    path = folder / "cli.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["train", "--config", str(path), "-q"]
    for key, value in overrides:
        args += ["--set", f"{key}={value}"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(args)
    except Reached as reached:
        reached.args[0].validate()
        return
    except SystemExit as exc:  # argparse: e.g. a --set value that starts like an option
        code = exc.code
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), err.getvalue()
