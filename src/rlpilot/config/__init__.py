"""Typed run configuration. ``sections`` holds the sections (dataclasses, one docstring per field, valid values
declared with each field by ``fields``), ``schema`` holds ``Config`` with its derived values and rules between
fields; ``load`` builds one from a preset, a YAML file or ``--set`` overrides (``load_config``). Their public names
are re-exported here, so ``from rlpilot.config import Config, load_config`` is the public face. No torch is imported.
"""

from rlpilot.config.fields import at_least, between, field_problems, fraction, one_of, positive, positive_items
from rlpilot.config.load import (
    all_keys,
    apply_overrides,
    field_type,
    from_dict,
    load_config,
    load_preset_data,
    preset_adapt,
    preset_names,
    read_config_file,
    set_value,
)
from rlpilot.config.schema import Config, resolve_device, solved_threshold
from rlpilot.config.sections import (
    BACKENDS,
    LOGGERS,
    MAX_SEED,
    DQNConfig,
    EnvConfig,
    GRPOConfig,
    GuardConfig,
    LLMConfig,
    ModelConfig,
    MultiAgentConfig,
    OffPolicyConfig,
    PPOConfig,
    SACConfig,
    TD3Config,
    TrainConfig,
)

__all__ = [
    "BACKENDS",
    "LOGGERS",
    "MAX_SEED",
    "Config",
    "DQNConfig",
    "EnvConfig",
    "GRPOConfig",
    "GuardConfig",
    "LLMConfig",
    "ModelConfig",
    "MultiAgentConfig",
    "OffPolicyConfig",
    "PPOConfig",
    "SACConfig",
    "TD3Config",
    "TrainConfig",
    "all_keys",
    "apply_overrides",
    "at_least",
    "between",
    "field_problems",
    "field_type",
    "fraction",
    "from_dict",
    "load_config",
    "load_preset_data",
    "preset_adapt",
    "one_of",
    "positive",
    "positive_items",
    "preset_names",
    "read_config_file",
    "resolve_device",
    "set_value",
    "solved_threshold",
]
