"""Faults: input that would hang or crash the parser. A YAML alias bomb, 20,000 nested brackets or a number
of 5,000 digits, in a config file or a ``--set`` value, and settings that would run for days (10^8 PPO
epochs, 1,000 agents): each is one line, exit 2, naming the setting and its bound, before any run exists, and
every error line is short."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpilot.cli import MAX_ERROR_CHARS, main
from rlpilot.common.errors import UserError
from rlpilot.config import safe_yaml

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)
DEEP = "[" * 20_000 + "]" * 20_000
DIGITS = "1" * 5_000


def one_line(capsys, args) -> str:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), err[:2000]
    assert len(lines[0]) <= len("rlpilot: error: ") + MAX_ERROR_CHARS + 40  # argparse adds "(see ... --help)"
    return lines[0]


@pytest.mark.parametrize(
    "text, needle",
    [(BOMB, "aliases"), (DEEP, "nested"), (f"ppo: {{lr: {DIGITS}}}", "digits"), ("x" * 2_000_000, "long")],
)
def test_hostile_yaml_in_a_config_file_or_set_value(capsys, tmp_path, text, needle):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    assert needle in one_line(capsys, ["train", "--config", config])
    value = text if needle != "digits" else DIGITS
    if len(value) < 100_000:  # an argv that long is refused by the OS before rlpilot sees it
        one_line(capsys, ["train", "ppo-cartpole", "--set", f"model.hidden_sizes={value}", "--runs", tmp_path])


@pytest.mark.parametrize(
    "args, needle, bound",
    [
        (["train", "ppo-cartpole", "--set", "ppo.epochs=100000000"], "ppo.epochs", "[1, 1000]"),
        (["train", "dqn-cartpole", "--set", "dqn.updates_per_frame=1e9"], "dqn.updates_per_frame", "1e-06, 64]"),
        (["train", "mappo-spread", "--set", "env.kwargs={N: 1000}"], "env.kwargs.N", "[2, 64]"),
        (["train", "mappo-spread", "--set", "env.kwargs={N: 0}"], "env.kwargs.N", "[2, 64]"),
        (["check", "mpe2.simple_spread_v3", "--set", "env.kwargs={N: 1000}"], "env.kwargs.N", "[2, 64]"),
        (["check", "mpe2.simple_spread_v3", "--set", "env.kwargs={N: 0}"], "env.kwargs.N", "[2, 64]"),
        (["tune", "ppo-cartpole", "--param", "ppo.epochs=1:1e9", "--trials", "1"], "ppo.epochs", "[1, 1000]"),
        (["train", "ppo-cartpole", "--set", "model.hidden_sizes=[" + "a," * 5000 + "]"], "hidden_sizes", "positive"),
    ],
)
def test_runaway_settings_are_one_line(capsys, tmp_path, args, needle, bound):
    """Refused where the setting is read, naming it and its bound, before a run, a study or an env exists: the
    runaway value is never acted on (no run folder, no study folder)."""
    extra = ["--runs", tmp_path] if args[0] == "train" else (["--out", tmp_path / "t"] if args[0] == "tune" else [])
    line = one_line(capsys, [*args, *extra])
    assert needle in line and bound in line, line
    assert not any(tmp_path.iterdir())


nested = st.recursive(
    st.sampled_from(["1", "x", "&a 1", "*a", "1e3", "~", DIGITS[:50]]),
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(inner, max_size=3).map(lambda xs: "{" + ", ".join(f"k{i}: {x}" for i, x in enumerate(xs)) + "}")
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=2000)
@given(text=st.one_of(nested, nested.map(lambda t: "[" * 60 + t + "]" * 60), st.text(max_size=200)))
def test_any_yaml_loads_within_bounds_or_is_one_error(text):
    try:
        safe_yaml.load(text, source="x")
    except (UserError, yaml.YAMLError):
        pass
