"""What `check` and `eval` take as a target: every preset's family is named right by `check`, and a baseline
controller evaluated on an env id writes its rows only where `--csv` says."""

import pytest

from rlpilot.check import FAMILIES, env_config, family_problem
from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.config import load_config, preset_names
from rlpilot.registry import is_multiagent_env


def rlpilot(capsys, *args) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_names_the_family_of_every_preset():
    """Every preset (`rlpilot presets`): one with an env gives that env to check (a multi-agent preset its
    group env, which `check` routes to the group check); an LLM preset is refused in one line naming its family."""
    kinds = set()
    for name in preset_names():
        config = load_config(name)
        kinds.add(config.kind)
        problem = family_problem(name, config)
        if config.kind == "llm":
            assert problem == f"{name} {FAMILIES['llm']}: `rlpilot check` is for envs (docs/llm.md)"
            with pytest.raises(UserError, match="fine-tunes a language model"):
                env_config(name, [])
        else:
            assert problem is None, name
            env = env_config(name, [])
            assert env.id == config.env.id
            assert is_multiagent_env(env.id) == (config.kind == "multiagent"), name
    assert kinds == set(FAMILIES)  # the loop met every family


def test_check_cli_on_a_multiagent_and_an_llm_preset(capsys):
    code, out, err = rlpilot(capsys, "check", "mappo-spread", "--episodes", "1")
    assert code in (0, 1), err
    assert "agent" in out
    code, out, err = rlpilot(capsys, "check", "grpo-arithmetic")
    assert code == 2
    assert err.strip().splitlines() == [
        "rlpilot: error: grpo-arithmetic fine-tunes a language model: `rlpilot check` is for envs (docs/llm.md)"
    ]


def test_eval_controller_on_an_env_id_writes_no_file_unless_asked(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = rlpilot(capsys, "eval", "CartPole-v1", "--controller", "random", "--episodes", "2")
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []
    assert not [line for line in out.splitlines() if line.startswith("episodes:")]  # no file named
    code, out, err = rlpilot(
        capsys, "eval", "CartPole-v1", "--controller", "random", "--episodes", "2", "--csv", "rows/r.csv"
    )
    assert code == 0, err
    assert (tmp_path / "rows" / "r.csv").read_text().count("\n") == 3  # header + 2 episodes
    assert "episodes: rows/r.csv" in out
