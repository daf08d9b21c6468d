import pytest

from rlpilot.config import Config, apply_overrides, load_config, preset_names
from rlpilot.errors import UserError


def test_every_preset_loads_and_validates():
    names = preset_names()
    assert {"ppo-cartpole", "ppo-acrobot", "ppo-pendulum"} <= set(names)
    for name in names:
        config = load_config(name)
        assert config.preset == name
        assert config.train.total_frames > 0


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
    assert config.minibatches_per_epoch == 4
    assert config.num_updates == 10 * 3 * 4


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
