"""The run configuration's schema: ``Config``, the whole of a run's settings, with its derived values and the rules
between fields; ``solved_threshold``, ``resolve_device``.

Only data lives here; values derived from it (frames per batch; an algorithm's number of updates and
annealing horizons, as methods of its section) are computed, never stored, so an override can never
leave them stale. The sections are dataclasses in :mod:`rlpilot.config.sections` (one docstring per field); each
field's valid values are declared where it is defined (``positive(...)``, ``fraction(...)``, ``one_of(...)``,
:mod:`rlpilot.config.fields`) and :meth:`Config.validate` checks them all from that metadata; only rules between
fields are written by hand. Each algorithm reads its own sections (``rlpilot.registry``): a DQN config has no
``ppo`` section, a GRPO config no ``env``. The sections and the field rules are importable from here too
(``__getattr__``), as they were before they had modules of their own.
This module imports no torch: the CLI answers ``--help``, ``presets`` and argument errors fast.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from rlpilot import registry
from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact_data
from rlpilot.config import fields, sections

if TYPE_CHECKING:
    import torch


@dataclass
class Config:
    algo: str = "ppo"
    """Algorithm: ``ppo``, ``dqn``, ``sac`` or ``td3`` (on ``env``), ``mappo`` or ``ippo`` (a group of agents
    on a multi-agent ``env``, with the ``ppo`` settings), or ``grpo`` (a language model on ``llm.task``).
    Each reads its own sections (``rlpilot.registry.ALGORITHMS``) plus ``guard`` and ``train``."""
    env: sections.EnvConfig = field(default_factory=sections.EnvConfig)
    model: sections.ModelConfig = field(default_factory=sections.ModelConfig)
    ppo: sections.PPOConfig = field(default_factory=sections.PPOConfig)
    dqn: sections.DQNConfig = field(default_factory=sections.DQNConfig)
    sac: sections.SACConfig = field(default_factory=sections.SACConfig)
    td3: sections.TD3Config = field(default_factory=sections.TD3Config)
    marl: sections.MultiAgentConfig = field(default_factory=sections.MultiAgentConfig)
    grpo: sections.GRPOConfig = field(default_factory=sections.GRPOConfig)
    llm: sections.LLMConfig = field(default_factory=sections.LLMConfig)
    collect: sections.CollectConfig = field(default_factory=sections.CollectConfig)
    guard: sections.GuardConfig = field(default_factory=sections.GuardConfig)
    train: sections.TrainConfig = field(default_factory=sections.TrainConfig)
    preset: str | None = None
    """The preset this config came from, if any (informational)."""

    # -- derived values (never stored) ---------------------------------------------------------
    @property
    def kind(self) -> str:
        """``control`` (an env), ``multiagent`` (a group of agents in an env) or ``llm`` (a language model)."""
        return registry.algorithm(self.algo).kind

    @property
    def sections(self) -> tuple[str, ...]:
        return registry.sections(self.algo)

    @property
    def algo_config(self) -> Any:
        """The section of the chosen algorithm's hyperparameters (``ppo`` for mappo and ippo)."""
        return getattr(self, registry.settings_section(self.algo))

    @property
    def subject(self) -> str:
        """What the run learns on, for names and messages: the env id, or the LLM task."""
        return self.llm.task if self.kind == "llm" else self.env.id

    @property
    def frames_per_batch(self) -> int:
        if self.algo == "grpo":  # a frame is one sampled response
            return self.grpo.prompts_per_step * self.grpo.group_size
        return self.env.num_envs * self.algo_config.steps_per_env

    @property
    def num_batches(self) -> int:
        return max(1, math.ceil(self.train.total_frames / self.frames_per_batch))

    def to_dict(self) -> dict:
        """The algorithm's sections only (what ``config.yaml`` holds)."""
        data = dataclasses.asdict(self)
        return {"algo": self.algo, **{name: data[name] for name in self.sections}, "preset": self.preset}

    def to_yaml(self) -> str:
        """A config file (``config.yaml``, ``best.yaml``), secrets as ``***`` (:func:`redact_data`)."""
        return yaml.safe_dump(redact_data(self.to_dict()), sort_keys=False)

    def validate(self) -> Config:
        registry.algorithm(self.algo)
        problems = []
        for name in self.sections:
            problems += fields.section_problems(getattr(self, name), name)
        problems += self._cross_field_problems()
        if problems:
            raise UserError("invalid config: " + "; ".join(problems))
        return self

    def _cross_field_problems(self) -> list[str]:
        problems = []
        if self.kind == "control" and self.env.base_controller != "none" and self.env.backend in ("native", "numpy"):
            problems.append(
                f"env.base_controller={self.env.base_controller} runs inside a gymnasium vector env: "
                f"use env.backend=sync or async (got {self.env.backend})"
            )
        residual_options = [
            name
            for name in ("residual_gate", "residual_penalty", "gain_average")
            if getattr(self.env, name) and self.kind == "control"
        ]
        if residual_options and self.env.base_controller == "none":
            problems.append(
                f"env.{residual_options[0]} acts on a residual policy: set env.base_controller (pd, pid or "
                f"package.module:Class), or "
                f"env.{residual_options[0]}=0"
            )
        if self.env.gain_average and self.kind == "control" and self.env.residual_mode != "gains":
            problems.append(
                "env.gain_average averages a gain schedule: set env.residual_mode=gains (with env.base_controller), "
                "or env.gain_average=0"
            )
        for name in ("gain_weights", "gain_excitation"):
            if getattr(self.env, name) and not self.env.gain_average and self.kind == "control":
                problems.append(f"env.{name} weighs the average of env.gain_average: set env.gain_average=STEPS too")
        if self.kind == "control" and (problem := self.env.gate_problem()):
            problems.append(problem)
        bad_layers = [
            layer
            for layer in self.model.cnn_layers
            if not (
                isinstance(layer, list)
                and len(layer) == 3
                and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in layer)
            )
        ]
        if self.kind == "control" and bad_layers:
            problems.append(
                f"model.cnn_layers: each layer is [out_channels, kernel, stride], positive integers "
                f"(got {bad_layers[0]!r})"
            )
        if self.kind == "control" and not self.env.id.strip():
            problems.append("env.id is empty: give a gymnasium id or package.module:Class")
        if self.kind == "control" and not all(isinstance(name, str) for name in self.env.kwargs):
            problems.append(f"env.kwargs: keys are argument names (got {list(self.env.kwargs)!r})")
        if self.model.actor_inputs and self.algo != "ppo":
            problems.append(
                f"model.actor_inputs selects what PPO's actor reads (its critic reads everything); {self.algo} has "
                "no separate actor for it: drop model.actor_inputs or train ppo"
            )
        if self.algo == "dqn" and self.env.action_encoding != "categorical":
            problems.append("dqn needs env.action_encoding=categorical (its Q-network indexes actions)")
        if self.kind == "multiagent" and not registry.is_multiagent_env(self.env.id):
            problems.append(
                f"{self.algo} trains a group of agents: env.id must be a PettingZoo env module such as "
                f"mpe2.simple_spread_v3 (got '{self.env.id}')"
            )
        if self.kind == "multiagent" and (problem := registry.env_kwargs_problem(self.env.id, self.env.kwargs)):
            problems.append(problem)
        if self.kind == "multiagent" and self.env.backend not in ("auto", "native", "pettingzoo", "vmas"):
            problems.append(
                f"env.backend for a multi-agent env: auto, native, pettingzoo or vmas (got {self.env.backend})"
            )
        if self.kind == "control" and self.env.backend in ("pettingzoo", "vmas"):
            problems.append(f"env.backend={self.env.backend} is for multi-agent envs (mappo, ippo)")
        if "ppo" in self.sections and self.ppo.minibatch_size > self.frames_per_batch:
            problems.append(
                f"ppo.minibatch_size ({self.ppo.minibatch_size}) is larger than a batch "
                f"(env.num_envs x ppo.steps_per_env = {self.frames_per_batch}): lower it or collect more"
            )
        target_entropy = self.sac.target_entropy
        if self.algo == "sac" and isinstance(target_entropy, str) and target_entropy != "auto":
            problems.append(f"sac.target_entropy must be auto or a number (got '{target_entropy}')")
        if self.algo in ("sac", "td3") and self.env.action_encoding != "categorical":
            problems.append(f"{self.algo} acts on continuous (Box) actions: env.action_encoding does not apply")
        if "collect" in self.sections and self.collect.workers > 0 and self.env.num_envs % self.collect.workers:
            multiple = self.collect.workers * max(1, self.env.num_envs // self.collect.workers)
            problems.append(
                f"env.num_envs ({self.env.num_envs}) is split evenly over collect.workers ({self.collect.workers}): "
                f"make it a multiple, e.g. env.num_envs={multiple}"
            )
        if "collect" in self.sections and (problem := remote_backend_problem(self, remote=self.collect.workers > 1)):
            problems.append(problem)
        unknown_loggers = {str(name) for name in self.train.loggers if name not in sections.LOGGERS}
        if unknown_loggers:
            problems.append(f"train.loggers: unknown {sorted(unknown_loggers)} ({', '.join(sections.LOGGERS)})")
        return problems


def remote_collection_problem(config: Config, ray: str | None) -> str | None:
    """What is wrong with collecting ``config``'s run on Ray (``ray``: the ``--ray`` address, or None), or None."""
    if ray is not None and config.kind != "control":
        return f"--ray with train runs collection actors for ppo, dqn, sac and td3; {config.algo} collects in-process"
    if ray is None and config.kind == "control" and config.collect.workers > 1:
        return (
            f"collect.workers={config.collect.workers} runs collection actors on Ray: add --ray local (a cluster on "
            "this machine) or --ray ADDRESS (one started with `ray start --head`)"
        )
    return remote_backend_problem(config, remote=ray is not None)


def remote_backend_problem(config: Config, *, remote: bool) -> str | None:
    """Why ``config``'s env cannot be collected on Ray actors (``remote``), or None."""
    if remote and config.env.backend == "native":
        return (
            "env.backend=native steps every env as one tensor batch in the training process (on train.device) and "
            "cannot run on Ray actors: use env.backend=auto, sync or async with --ray, or collect.workers=1 without it"
        )
    return None


def solved_threshold(config: Config) -> float | None:
    """The preset's ``train.solved_at``, else the env's registered ``reward_threshold`` (control runs)."""
    if config.train.solved_at is not None or config.kind != "control":
        return config.train.solved_at
    _, env_id = registry.resolve_env(config.env.id)
    return None if env_id is None else registry.registered_spec(env_id).reward_threshold


def resolve_device(name: str) -> torch.device:
    """``train.device`` as a torch device (``auto``: cuda when available); torch is imported here, when called."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is visible to torch; use --device cpu or auto")
    return torch.device(name)


def __getattr__(name: str) -> Any:
    """The sections and the field rules by their old address: ``from rlpilot.config.schema import EnvConfig`` (or
    ``positive``, ``field_problems``, ...) as before they had modules of their own (:mod:`rlpilot.config.sections`,
    :mod:`rlpilot.config.fields`)."""
    for module in (sections, fields):
        if not name.startswith("_") and name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
