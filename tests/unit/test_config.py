import dataclasses

import pytest
import yaml

from rlpilot.common.errors import UserError
from rlpilot.config import Config, apply_overrides, load_config, preset_names
from rlpilot.registry import ALGORITHMS, sections


def test_every_preset_loads_with_its_algorithms_sections_only():
    names = preset_names()
    assert {"ppo-cartpole", "ppo-acrobot", "ppo-pendulum", "dqn-cartpole", "grpo-reverse"} <= set(names)
    for name in names:
        config = load_config(name)
        assert config.preset == name
        saved = yaml.safe_load(config.to_yaml())
        assert set(saved) == {"algo", "preset", *sections(config.algo)}, name
    assert "env" not in yaml.safe_load(load_config("grpo-reverse").to_yaml())  # an LLM run has no env


def test_a_section_the_algorithm_does_not_read_is_refused():
    with pytest.raises(UserError, match="a grpo run has no 'env' section"):
        load_config("grpo-reverse", overrides=["env.num_envs=4"])
    with pytest.raises(UserError, match="a dqn run has no 'ppo' section"):
        load_config("dqn-cartpole", overrides=["ppo.lr=1e-3"])
    with pytest.raises(UserError, match="choose the algorithm"):
        load_config("dqn-cartpole", overrides=["algo=ppo"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ppo.lr=nan", "ppo.lr must be a finite number"),
        ("ppo.lr=1e309", "ppo.lr must be a finite number"),
        ("ppo.lr=0", "ppo.lr must be > 0"),
        ("ppo.gamma=1.5", "ppo.gamma must be within"),
        ("train.seed=-1", "train.seed must be within"),
        ("train.seed=99999999999999999999999", "train.seed must be within"),
        ("model.hidden_sizes=[0]", "model.hidden_sizes must be a list of positive integers"),
        ("model.hidden_sizes=[a]", "model.hidden_sizes must be a list of positive integers"),
        ("env.max_episode_steps=0", "env.max_episode_steps must be > 0"),
        ("env.backend=gpu", "env.backend must be one of"),
        ("train.max_seconds=-1", "train.max_seconds must be > 0"),
    ],
)
def test_declared_valid_values_are_checked(override, message):
    with pytest.raises(UserError, match=message):
        load_config("ppo-cartpole", overrides=[override])


def test_every_numeric_field_declares_its_valid_values():
    """Validation comes from field metadata: a new numeric field without a declared rule is caught here."""
    undeclared = []
    for name in {section for entry in ALGORITHMS.values() for section in entry.sections} | {"guard", "train"}:
        section = getattr(Config(), name)
        for f in dataclasses.fields(section):
            numeric = isinstance(getattr(section, f.name), (int, float)) and not isinstance(
                getattr(section, f.name), bool
            )
            if numeric and not f.metadata and f.name not in ALLOWED_WITHOUT_RULE:
                undeclared.append(f"{name}.{f.name}")
    assert undeclared == []


# any finite value is meaningful for these (a threshold, a return level, an initial log std)
ALLOWED_WITHOUT_RULE = {"solved_at", "milestone_return", "init_log_std"}


def test_overrides_parse_yaml_values_and_numbers():
    config = apply_overrides(
        Config(),
        [
            "ppo.lr=1e-3",
            "model.hidden_sizes=[32, 32]",
            "env.normalize_obs=true",
            "train.solved_at=null",
            "ppo.epochs=4",
        ],
    )
    assert config.ppo.lr == pytest.approx(1e-3)
    assert config.model.hidden_sizes == [32, 32]
    assert config.env.normalize_obs is True
    assert config.train.solved_at is None
    assert config.ppo.epochs == 4


def test_int_is_accepted_for_float_but_not_the_reverse():
    config = apply_overrides(Config(), ["ppo.clip_epsilon=1"])
    assert isinstance(config.ppo.clip_epsilon, float)
    with pytest.raises(UserError, match=r"ppo.epochs: expected int"):
        apply_overrides(Config(), ["ppo.epochs=2.5"])


def test_wrong_type_names_key_and_type():
    with pytest.raises(UserError) as info:
        load_config("ppo-cartpole", overrides=["ppo.clip_epsilon=abc"])
    message = str(info.value)
    assert "ppo.clip_epsilon" in message and "float" in message and "abc" in message


def test_typo_suggests_the_right_key():
    with pytest.raises(UserError, match=r"Did you mean ppo.clip_epsilon"):
        load_config("ppo-cartpole", overrides=["ppo.clip_epsilom=0.1"])


def test_unknown_section_and_missing_equals():
    with pytest.raises(UserError, match="unknown config key 'pop.lr'"):
        apply_overrides(Config(), ["pop.lr=1"])
    with pytest.raises(UserError, match="section.key=value"):
        apply_overrides(Config(), ["ppo.lr"])


def test_derived_values_follow_overrides():
    config = load_config(
        algo="ppo",
        env_id="CartPole-v1",
        overrides=[
            "env.num_envs=4",
            "ppo.steps_per_env=64",
            "ppo.minibatch_size=64",
            "ppo.epochs=3",
            "train.total_frames=2560",
        ],
    )
    assert config.frames_per_batch == 256
    assert config.num_batches == 10
    assert config.ppo.minibatches_per_epoch(config.frames_per_batch) == 4
    assert config.ppo.num_updates(config.frames_per_batch, config.num_batches) == 10 * 3 * 4


def test_validation_explains_the_fix():
    with pytest.raises(UserError, match="minibatch_size .* larger than a batch"):
        load_config(algo="ppo", env_id="CartPole-v1", overrides=["ppo.minibatch_size=100000"])
    with pytest.raises(UserError, match="gamma must be within"):
        load_config(algo="ppo", env_id="CartPole-v1", overrides=["ppo.gamma=1.5"])


def test_unknown_preset_suggests_close_names():
    with pytest.raises(UserError, match="Did you mean ppo-cartpole"):
        load_config("ppo-cartpol")


def test_yaml_round_trip(tmp_path):
    config = load_config("ppo-pendulum")
    path = tmp_path / "config.yaml"
    path.write_text(config.to_yaml())
    assert load_config(config_file=path).to_dict() == config.to_dict()


def test_a_checkpoint_from_before_a_new_field_still_loads_and_other_settings_do_not(tmp_path):
    """A field added since a run was trained (at its default) is not a different setting: the run's checkpoint
    still loads for eval, export and the benchmarks; a changed or unknown setting is refused."""
    from rlpilot.runs import CHECKPOINT_FORMAT, Run, check_compatible

    config = load_config("ppo-reacher-track-gains")
    run = Run(tmp_path)
    older = config.to_dict()
    del older["env"]["residual_penalty"]  # written before env.residual_penalty existed
    check_compatible({"format": CHECKPOINT_FORMAT, "config": older}, config, run)
    changed = config.to_dict()
    changed["ppo"]["lr"] = 0.5
    unknown = config.to_dict()
    unknown["env"]["a_later_field"] = 1
    for saved in (changed, unknown):
        with pytest.raises(UserError, match="other settings"):
            check_compatible({"format": CHECKPOINT_FORMAT, "config": saved}, config, run)
