"""``rlpilot check``: preflight of an env before training. ``env`` checks a single-agent env (specs in words,
rollout layout, random-policy statistics within a time budget, pitfalls as findings); ``group`` a
multi-agent one (the group layout, where the agent dimension sits, the pitfalls of multi-agent training).
"""

from __future__ import annotations

from rlpilot.common.errors import UserError
from rlpilot.config.load import apply_overrides, load_config, preset_names
from rlpilot.config.schema import Config
from rlpilot.config.sections import EnvConfig

FAMILIES = {
    "control": "trains a policy on an env",
    "multiagent": "trains a group of agents on a multi-agent env",
    "llm": "fine-tunes a language model",
}
"""What a preset of each training family (``Config.kind``) does, in the words ``check`` answers with."""


def family_problem(preset: str, config: Config) -> str | None:
    """Why ``rlpilot check PRESET`` cannot check this preset's env (one line naming its family), or None."""
    if config.kind == "llm":
        return f"{preset} {FAMILIES['llm']}: `rlpilot check` is for envs (docs/llm.md)"
    return None


def env_config(target: str, overrides: list[str]) -> EnvConfig:
    """``check`` accepts a preset name or an env id (with ``--set env.*`` overrides either way); a preset of any
    family with an env (control or multi-agent) gives its env section. Torch-free."""
    if target in preset_names():
        config = load_config(target, overrides=overrides)
        if problem := family_problem(target, config):
            raise UserError(problem)
        return config.env
    config = apply_overrides(Config(env=EnvConfig(id=target)), overrides)
    return config.env
