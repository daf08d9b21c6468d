"""Typed run configuration: dataclasses (one docstring per field), YAML presets, ``--set`` overrides.

Only data lives here; values derived from it (frames per batch, number of updates, annealing
horizons) are properties, never stored, so an override can never leave them stale.
This module imports no torch: the CLI answers ``--help``, ``presets`` and argument errors fast.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlpilot.errors import UserError

BACKENDS = ("auto", "numpy", "sync", "native", "async")


@dataclass
class EnvConfig:
    id: str = "CartPole-v1"
    """gymnasium id (``CartPole-v1``), a user's class (``package.module:Class``) or an id registered
    by a module (``package.module:Env-v0`` imports ``package.module`` first)."""
    num_envs: int = 8
    """Environments stepped together as one batch during training. More envs: more frames per
    policy call (faster collection) but fewer updates per frame."""
    backend: str = "auto"
    """``auto``: gymnasium's numpy-vectorised env where one exists (CartPole), else a gymnasium
    ``SyncVectorEnv``; ``numpy`` or ``sync`` force one. ``native``: rlpilot's batched torch
    implementation (CartPole, Acrobot, Pendulum, MountainCar, MountainCarContinuous; same dynamics,
    tested against gymnasium), stepped as tensors on ``train.device``: fastest, and the way to run
    envs on a GPU. ``async``: gymnasium's ``AsyncVectorEnv``, one process per env (worth it when a
    step is slow, e.g. CarRacing's ~1 ms, and there are cores to spare)."""
    normalize_obs: bool = False
    """Standardise observations with TorchRL's ``ObservationNorm`` (loc/scale measured once from
    random-policy rollouts, then fixed and saved with the run). Off for CartPole, whose scales are
    already close to 1."""
    obs_norm_frames: int = 4096
    """Random-policy frames used to measure the normalisation statistics."""
    action_encoding: str = "categorical"
    """Discrete actions as a categorical index (``categorical``), or as a one-hot vector
    (``one_hot``, TorchRL ``GymEnv``'s default; PPO then samples from ``OneHotCategorical``)."""
    reward_scale: float = 1.0
    """Training rewards are multiplied by this (TorchRL's ``RewardScaling``); episode returns are
    reported unscaled. Keeps value targets near unit scale (Pendulum: rewards down to -16 a step)."""
    max_episode_steps: int | None = None
    """Override of the env's time limit (episodes are truncated there); ``None`` keeps gymnasium's."""
    kwargs: dict = field(default_factory=dict)
    """Keyword arguments passed to the environment's constructor."""
    frame_stack: int = 1
    """Image observations: frames stacked along channels (TorchRL's ``CatFrames``), so a CNN sees
    motion; after a reset the first frame fills the stack. 1: no stacking. Ignored for vector observations."""
    frame_size: int | None = None
    """Image observations: resize frames to this many pixels square (TorchRL's ``Resize``);
    ``None`` keeps the env's size."""
    grayscale: bool = False
    """Image observations: RGB frames to one gray channel (TorchRL's ``GrayScale``)."""
    frame_skip: int = 1
    """Repeat each action this many env frames, summing rewards (gymnasium's ``MaxAndSkipObservation``,
    which also max-pools the last two frames against flicker). Budgets count agent steps, not env frames."""


@dataclass
class ModelConfig:
    hidden_sizes: list = field(default_factory=lambda: [64, 64])
    """Units per hidden layer, for actor and critic alike (separate networks)."""
    activation: str = "tanh"
    """``tanh`` (the PPO default in CleanRL, SB3 and the Zoo) or ``relu``."""
    encoder: str = "auto"
    """``auto``: a CNN for image observations (``[H, W, C]`` per env), else none; ``cnn`` or ``mlp`` force
    one. The CNN feeds ``hidden_sizes`` (the MLP head) with its flattened features."""
    cnn_layers: list = field(default_factory=list)
    """CNN conv layers as ``[out_channels, kernel, stride]`` triples (ReLU after each). Empty: derived
    from the frame size: Nature-DQN's ``[[32, 8, 4], [64, 4, 2], [64, 3, 1]]`` for frames of 36 px and
    more, MinAtar's ``[[16, 3, 1]]`` for smaller ones."""


@dataclass
class PPOConfig:
    steps_per_env: int = 32
    """Steps collected per env before each update; frames per batch = this x ``env.num_envs``."""
    epochs: int = 10
    """Passes over each batch. High values squeeze more learning out of each frame."""
    minibatch_size: int = 256
    """Transitions per gradient step, drawn without replacement within each epoch."""
    lr: float = 3e-4
    """Adam learning rate at the start of training."""
    lr_schedule: str = "linear"
    """``linear`` decays to 0 over the real number of updates of the budget; ``cosine`` follows
    torch's ``CosineAnnealingLR`` with T_max = ``lr_schedule_fraction`` of the updates (periodic: past
    T_max the LR rises again); ``constant`` does not change."""
    lr_schedule_fraction: float = 1.0
    """Share of the budget's updates over which the linear schedule reaches 0 (then stays there), or
    the cosine schedule's T_max."""
    minibatch_replacement: bool = False
    """Draw minibatch indices with replacement (some transitions twice, some never in an epoch)
    instead of a permutation of the batch."""
    gamma: float = 0.99
    """Discount per step."""
    gae_lambda: float = 0.95
    """GAE lambda: 0 is one-step TD (low variance, biased), 1 is Monte Carlo."""
    clip_epsilon: float = 0.2
    """PPO ratio clip at the start of training."""
    clip_schedule: str = "constant"
    """``linear`` anneals the clip to 0 over the budget (RL Zoo's CartPole setting), or ``constant``."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus. 0 suits CartPole; continuous tasks often want ~1e-3."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient clipping by global norm."""
    normalize_advantage: bool = True
    """Standardise advantages per minibatch."""
    value_loss: str = "l2"
    """``l2`` or ``smooth_l1`` (TorchRL's default; l2 matches SB3 and CleanRL)."""
    distribution: str = "auto"
    """Discrete actions: ``auto`` matches the action spec (Categorical for an index, OneHotCategorical
    for one-hot); ``categorical`` / ``one_hot_categorical`` force one (a mismatch is the classic silent
    bug: kept selectable so ``doctor`` can be shown to catch it)."""
    loss_impl: str = "lean"
    """``lean``: the clipped loss in plain torch (2.7x faster per update, same numbers, tested);
    ``torchrl``: TorchRL's ``ClipPPOLoss``."""
    init_log_std: float = 0.0
    """Continuous actions: initial log standard deviation of the Gaussian before squashing."""


@dataclass
class TrainConfig:
    total_frames: int = 200_000
    """Budget: environment frames (transitions) to collect before stopping."""
    eval_every_frames: int = 5_000
    """Frames between greedy evaluations (evaluation time counts in wall time)."""
    eval_episodes: int = 20
    """Greedy episodes per evaluation, run as one vectorised batch (one episode per env)."""
    solved_at: float | None = None
    """Greedy evaluation mean return at or above which the run is solved and stops; ``None``: the
    env's registered ``reward_threshold`` if any, else run the whole budget."""
    stop_when_solved: bool = True
    """Stop at the first solved evaluation."""
    seed: int = 0
    """Seeds torch, the training envs (seed, seed+1, ...) and the evaluation envs (seed + 10000 ...)."""
    device: str = "auto"
    """``auto`` (cuda when available), ``cpu`` or ``cuda``: policy, data and losses all live there."""
    num_threads: int = 1
    """torch intra-op threads. Small MLPs are fastest on one thread (thread sync costs more than it saves)."""
    log_every_frames: int = 2_048
    """Frames between rows of ``metrics.csv``."""
    max_seconds: float | None = None
    """Wall-clock budget in seconds (evaluation included): the run stops (status ``finished``) at the
    first batch boundary past it. ``None``: frames alone bound the run."""
    solved_consecutive: int = 1
    """Evaluations in a row at or above the threshold that make the run solved."""
    milestone_return: float | None = None
    """Training-episode return whose first crossing is recorded as a milestone event (``None``: none)."""
    milestone_every_frames: int = 20_000
    """Frames between status lines (frames, fps, episodes, mean/best training return, last eval) with ``-v``."""
    checkpoint_every_frames: int = 20_000
    """Frames between ``checkpoints/last.pt`` writes (also written at the end and on SIGINT/SIGTERM);
    a killed run resumes from the last one, losing at most this many frames."""
    checkpoint_buffer: bool = True
    """Replay-based algorithms: include the replay buffer in checkpoints (CartPole: ~66 bytes a
    transition), so a resumed run does not restart from an empty buffer."""
    loggers: list = field(default_factory=lambda: ["tensorboard"])
    """TorchRL loggers fed alongside ``metrics.csv``: any of ``tensorboard`` (``RUN/tb``), ``csv``,
    ``wandb``, ``mlflow`` (the last two when installed)."""


@dataclass
class GuardConfig:
    enabled: bool = True
    """Skip updates whose loss or gradient norm is non-finite or above ``max_loss``."""
    max_loss: float = 1e6
    """A loss above this is treated like a non-finite one (an exploding update)."""
    lr_cut: float = 0.5
    """Each skipped update multiplies the learning rate by this."""
    max_trips: int = 10
    """Skipped updates since the last checkpoint that trigger a rollback to it."""
    on_nonfinite_obs: str = "reset"
    """A NaN/inf observation from the env: ``reset`` that env (the transition is dropped from
    bootstrapping) and record an event, or ``stop`` the run with the reason in ``meta.json``."""


@dataclass
class DQNConfig:
    steps_per_env: int = 32
    """Steps collected per env between learning phases; frames per batch = this x ``env.num_envs``."""
    buffer_size: int = 100_000
    """Replay capacity in transitions. CartPole transitions are ~66 bytes: 100k is ~7 MB."""
    batch_size: int = 64
    """Transitions per gradient step."""
    lr: float = 1e-3
    """Adam learning rate (constant)."""
    gamma: float = 0.99
    """Discount per step."""
    updates_per_frame: float = 0.5
    """Gradient steps per collected frame (update-to-data ratio); RL Zoo's CartPole setting is 128 per 256."""
    learning_starts: int = 1_000
    """Frames collected with uniformly random actions before the first update, so early updates do not
    overfit a handful of transitions."""
    eps_init: float = 1.0
    """Epsilon-greedy: exploration probability at the start."""
    eps_end: float = 0.05
    """Exploration probability after annealing."""
    exploration_fraction: float = 0.1
    """Share of ``train.total_frames`` over which epsilon anneals linearly (the horizon is derived)."""
    target_update: str = "hard"
    """``hard``: copy the online network every ``target_update_interval`` updates; ``soft``: Polyak
    averaging with ``tau`` after every update."""
    target_update_interval: int = 10
    """Updates between hard target copies."""
    tau: float = 0.005
    """Soft target update rate."""
    double_dqn: bool = True
    """Select the next action with the online network, value it with the target network (less
    overestimation than max over the target)."""
    loss: str = "huber"
    """``huber`` (smooth L1: robust to large TD errors, SB3's default) or ``l2``."""
    max_grad_norm: float = 10.0
    """Gradient clipping by global norm."""
    n_step: int = 1
    """n-step returns (within a collected batch, never across episode ends)."""
    prioritized: bool = False
    """Prioritised replay: sample transitions with probability proportional to (|TD error| + eps)^alpha."""
    alpha: float = 0.6
    """Prioritisation strength (0 is uniform)."""
    beta_init: float = 0.4
    """Importance-weight exponent at the start, annealed linearly to 1 over the budget."""
    priority_eps: float = 1e-6
    """Added to |TD error| so no transition gets zero probability."""
    loss_impl: str = "lean"
    """``lean``: the double-DQN loss in plain torch (same numbers as TorchRL's ``DQNLoss``, tested);
    ``torchrl``: ``DQNLoss`` (n_step 1 only)."""


@dataclass
class LLMConfig:
    model: str = "tiny"
    """``tiny``: a 2-layer Qwen2 and a character tokenizer built in code (no download), trained from
    scratch by the SFT warm-up; otherwise a local Hugging Face model directory (``save_pretrained``
    output: config.json, weights, tokenizer files). Nothing is fetched from the hub."""
    task: str = "arithmetic"
    """Prompt set and reward (``rlpilot.llm.tasks``): ``arithmetic`` (exact sum of two digits) or
    ``length`` (N lowercase letters)."""
    tiny_hidden_size: int = 64
    """Width of the tiny model (``llm.model=tiny``)."""
    tiny_layers: int = 2
    """Transformer layers of the tiny model."""
    dtype: str = "float32"
    """Weights, optimiser state and activations: ``float32`` or ``bfloat16``. bfloat16 halves memory, but Adam
    on bfloat16 weights drops updates smaller than ~1/256 of a weight: at a pretrained model's usual
    learning rate (~1e-6) nothing changes. Keep float32 to train unless memory forces otherwise."""
    max_new_tokens: int = 4
    """Tokens generated per response at most; a response without end-of-sequence by then is unfinished
    (rewarded 0 by the tasks here)."""
    temperature: float = 1.0
    """Sampling temperature of the training groups (evaluation is greedy)."""
    sft_steps: int = 60
    """Supervised warm-up steps before RL (0: none). Short on purpose: it teaches the answer format,
    RL has to find the right answers."""
    sft_lr: float = 0.003
    """Adam learning rate of the warm-up."""
    sft_batch_size: int = 32
    """Prompt + answer examples per warm-up step."""


@dataclass
class GRPOConfig:
    prompts_per_step: int = 16
    """Training prompts sampled per step; frames per batch = this x ``group_size`` (one frame = one response)."""
    group_size: int = 8
    """Responses sampled per prompt. GRPO's advantage is a response's reward standardised within its
    group, so a group where every response scores the same teaches nothing."""
    lr: float = 0.001
    """Adam learning rate of the policy (constant)."""
    epochs: int = 2
    """Gradient steps on each sampled batch (the clip keeps later ones near the sampling policy)."""
    clip_epsilon: float = 0.2
    """Clip of the per-token importance ratio, as in PPO."""
    kl_coef: float = 0.02
    """Weight of the KL penalty to the frozen reference model (the model after SFT, or as loaded)."""
    entropy_coef: float = 0.0
    """Weight of the token-entropy bonus (0: none)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm."""
    eval_prompts: int = 0
    """Held-out prompts per evaluation; 0 takes all of the task's held-out prompts."""


ALGOS = ("ppo", "dqn", "grpo")


@dataclass
class Config:
    algo: str = "ppo"
    """Algorithm: ``ppo`` or ``dqn`` (``rlpilot.algos``, on ``env``), or ``grpo`` (a language model on
    ``llm.task``, ``rlpilot.llm``)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    preset: str | None = None
    """The preset this config came from, if any (informational)."""

    # -- derived values (never stored) ---------------------------------------------------------
    @property
    def algo_config(self) -> PPOConfig | DQNConfig | GRPOConfig:
        """The section of the chosen algorithm."""
        return getattr(self, self.algo)

    @property
    def subject(self) -> str:
        """What the run learns on, for names and messages: the env id, or the LLM task."""
        return f"{self.llm.task}" if self.algo == "grpo" else self.env.id

    @property
    def frames_per_batch(self) -> int:
        if self.algo == "grpo":  # a frame is one sampled response
            return self.grpo.prompts_per_step * self.grpo.group_size
        return self.env.num_envs * self.algo_config.steps_per_env

    @property
    def num_batches(self) -> int:
        return max(1, math.ceil(self.train.total_frames / self.frames_per_batch))

    @property
    def minibatches_per_epoch(self) -> int:
        return max(1, self.frames_per_batch // self.ppo.minibatch_size)

    @property
    def num_updates(self) -> int:
        """PPO gradient steps over the whole budget: the horizon of LR and clip schedules."""
        return self.num_batches * self.ppo.epochs * self.minibatches_per_epoch

    @property
    def dqn_updates_per_batch(self) -> int:
        return max(1, round(self.frames_per_batch * self.dqn.updates_per_frame))

    @property
    def exploration_frames(self) -> int:
        """Frames over which DQN's epsilon anneals."""
        return max(1, int(self.train.total_frames * self.dqn.exploration_fraction))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def validate(self) -> Config:
        problems = []
        if self.algo not in ALGOS:
            problems.append(f"algo '{self.algo}' is unknown (choose from {', '.join(ALGOS)})")
        positives = {
            "env.num_envs": self.env.num_envs,
            "train.total_frames": self.train.total_frames,
            "train.eval_every_frames": self.train.eval_every_frames,
            "train.eval_episodes": self.train.eval_episodes,
            "train.num_threads": self.train.num_threads,
            "ppo.steps_per_env": self.ppo.steps_per_env,
            "ppo.epochs": self.ppo.epochs,
            "ppo.minibatch_size": self.ppo.minibatch_size,
            "ppo.lr": self.ppo.lr,
            "dqn.steps_per_env": self.dqn.steps_per_env,
            "dqn.buffer_size": self.dqn.buffer_size,
            "dqn.batch_size": self.dqn.batch_size,
            "dqn.lr": self.dqn.lr,
            "dqn.n_step": self.dqn.n_step,
            "dqn.target_update_interval": self.dqn.target_update_interval,
            "train.solved_consecutive": self.train.solved_consecutive,
            "train.checkpoint_every_frames": self.train.checkpoint_every_frames,
            "train.milestone_every_frames": self.train.milestone_every_frames,
            "guard.max_trips": self.guard.max_trips,
            "env.frame_stack": self.env.frame_stack,
            "env.frame_skip": self.env.frame_skip,
        }
        if self.env.frame_size is not None and self.env.frame_size <= 0:
            problems.append(f"env.frame_size must be > 0 (got {self.env.frame_size}); null keeps the env's size")
        bad_layers = [layer for layer in self.model.cnn_layers if not (isinstance(layer, list) and len(layer) == 3)]
        if bad_layers:
            problems.append(f"model.cnn_layers: each layer is [out_channels, kernel, stride] (got {bad_layers[0]!r})")
        if self.algo == "grpo":
            positives.update(
                {
                    "grpo.prompts_per_step": self.grpo.prompts_per_step,
                    "grpo.group_size": self.grpo.group_size,
                    "grpo.lr": self.grpo.lr,
                    "grpo.epochs": self.grpo.epochs,
                    "llm.max_new_tokens": self.llm.max_new_tokens,
                    "llm.temperature": self.llm.temperature,
                    "llm.tiny_hidden_size": self.llm.tiny_hidden_size,
                    "llm.tiny_layers": self.llm.tiny_layers,
                }
            )
            if self.grpo.group_size < 2:
                problems.append("grpo.group_size must be >= 2 (advantages compare responses within a group)")
        problems += [f"{key} must be > 0 (got {value})" for key, value in positives.items() if value <= 0]
        choices = {
            "env.backend": (self.env.backend, BACKENDS),
            "ppo.lr_schedule": (self.ppo.lr_schedule, ("linear", "cosine", "constant")),
            "ppo.clip_schedule": (self.ppo.clip_schedule, ("linear", "constant")),
            "ppo.value_loss": (self.ppo.value_loss, ("l2", "smooth_l1")),
            "ppo.loss_impl": (self.ppo.loss_impl, ("lean", "torchrl")),
            "ppo.distribution": (self.ppo.distribution, ("auto", "categorical", "one_hot_categorical")),
            "env.action_encoding": (self.env.action_encoding, ("categorical", "one_hot")),
            "dqn.loss_impl": (self.dqn.loss_impl, ("lean", "torchrl")),
            "dqn.target_update": (self.dqn.target_update, ("hard", "soft")),
            "dqn.loss": (self.dqn.loss, ("huber", "l2")),
            "guard.on_nonfinite_obs": (self.guard.on_nonfinite_obs, ("reset", "stop")),
            "model.activation": (self.model.activation, ("tanh", "relu")),
            "model.encoder": (self.model.encoder, ("auto", "mlp", "cnn")),
            "train.device": (self.train.device, ("auto", "cpu", "cuda")),
            "llm.dtype": (self.llm.dtype, ("float32", "bfloat16")),
        }
        problems += [
            f"{key} must be one of {', '.join(allowed)} (got '{value}')"
            for key, (value, allowed) in choices.items()
            if value not in allowed
        ]
        if self.train.max_seconds is not None and self.train.max_seconds <= 0:
            problems.append(f"train.max_seconds must be > 0 (got {self.train.max_seconds}); null for no limit")
        if self.env.reward_scale < 0:
            problems.append(f"env.reward_scale must be >= 0 (got {self.env.reward_scale}); 0 silences rewards")
        unit_interval = (
            ("ppo.gamma", self.ppo.gamma),
            ("ppo.gae_lambda", self.ppo.gae_lambda),
            ("dqn.gamma", self.dqn.gamma),
            ("dqn.eps_init", self.dqn.eps_init),
            ("dqn.eps_end", self.dqn.eps_end),
            ("dqn.exploration_fraction", self.dqn.exploration_fraction),
            ("dqn.beta_init", self.dqn.beta_init),
            ("dqn.tau", self.dqn.tau),
        )
        for key, value in unit_interval:
            if not 0.0 <= value <= 1.0:
                problems.append(f"{key} must be within [0, 1] (got {value})")
        if self.algo == "dqn" and self.env.action_encoding != "categorical":
            problems.append("dqn needs env.action_encoding=categorical (its Q-network indexes actions)")
        if self.algo == "dqn" and self.dqn.n_step > 1 and self.dqn.loss_impl == "torchrl":
            problems.append("dqn.n_step > 1 needs dqn.loss_impl=lean (TorchRL's DQNLoss bootstraps one step)")
        if self.algo == "ppo" and self.ppo.minibatch_size > self.frames_per_batch:
            problems.append(
                f"ppo.minibatch_size ({self.ppo.minibatch_size}) is larger than a batch "
                f"(env.num_envs x ppo.steps_per_env = {self.frames_per_batch}): lower it or collect more"
            )
        unknown_loggers = set(self.train.loggers) - {"tensorboard", "csv", "wandb", "mlflow"}
        if unknown_loggers:
            problems.append(f"train.loggers: unknown {sorted(unknown_loggers)} (tensorboard, csv, wandb, mlflow)")
        if problems:
            raise UserError("invalid config: " + "; ".join(problems))
        return self


# -- building from data ------------------------------------------------------------------------
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Checks ``value`` against the field type ``tp``; ints are accepted where floats are expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(key, value, arg)
            except UserError:
                pass
        raise UserError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (bool, str, list, dict) and isinstance(value, tp):
        return value
    raise UserError(f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})")


def _unknown_key(key: str, known: list[str]) -> UserError:
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else f" Known keys: {', '.join(known)}."
    return UserError(f"unknown config key '{key}'.{hint}")


def _all_keys() -> list[str]:
    keys = []
    for name, tp in _field_types(Config).items():
        if dataclasses.is_dataclass(tp):
            keys += [f"{name}.{sub}" for sub in _field_types(tp)]
        else:
            keys.append(name)
    return keys


def from_dict(data: dict) -> Config:
    """Builds a Config from nested plain data, strictly: unknown keys and wrong types are errors."""
    config = Config()
    for name, value in data.items():
        set_value(config, name, value)
    return config


def set_value(config: Config, key: str, value: Any) -> None:
    """Sets ``section.field`` (or a top-level field, or a whole section from a dict) with checks."""
    types_ = _field_types(Config)
    section, _, sub = key.partition(".")
    if section not in types_:
        raise _unknown_key(key, _all_keys())
    section_type = types_[section]
    if not dataclasses.is_dataclass(section_type):
        if sub:
            raise _unknown_key(key, _all_keys())
        setattr(config, section, _coerce(key, value, section_type))
        return
    target = getattr(config, section)
    if not sub:
        if not isinstance(value, dict):
            raise UserError(f"{key}: expected a mapping of {section}.* keys, got {value!r}")
        for name, item in value.items():
            set_value(config, f"{section}.{name}", item)
        return
    sub_types = _field_types(section_type)
    if sub not in sub_types:
        raise _unknown_key(key, _all_keys())
    setattr(target, sub, _coerce(key, value, sub_types[sub]))


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """Applies ``section.key=value`` strings; values are parsed as YAML (``1e-3``, ``true``, ``[64,64]``)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects section.key=value, got '{item}'")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str) and _looks_numeric(value):
            value = float(value)
        set_value(config, key.strip(), value)
    return config


def _looks_numeric(text: str) -> bool:
    # YAML 1.1 reads "1e-3" as a string (it wants "1.0e-3"); users mean a number.
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- presets ---------------------------------------------------------------------------------
def preset_names() -> list[str]:
    folder = resources.files("rlpilot") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_preset_data(name: str) -> dict:
    path = resources.files("rlpilot") / "presets" / f"{name}.yaml"
    if not path.is_file():
        close = difflib.get_close_matches(name, preset_names(), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UserError(
            f"unknown preset '{name}'.{hint} `rlpilot presets` lists them; "
            "`rlpilot train ALGO ENV` runs an algorithm on any env."
        )
    return _parse_yaml(path.read_text(), source=f"preset {name}")


def _parse_yaml(text: str, *, source: str) -> dict:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{source} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source} must be a mapping of config sections")
    return data


def load_config(
    preset: str | None = None,
    *,
    algo: str | None = None,
    env_id: str | None = None,
    overrides: list[str] | None = None,
    config_file: str | Path | None = None,
) -> Config:
    """The one way a Config is made: a preset, or ``algo`` + ``env_id``, or a saved ``config.yaml``;
    then ``--set`` overrides; then validation."""
    if config_file is not None:
        config = from_dict(_parse_yaml(Path(config_file).read_text(), source=str(config_file)))
    elif preset is not None:
        config = from_dict(load_preset_data(preset))
        config.preset = preset
    else:
        if algo not in ALGOS:
            raise UserError(f"unknown algorithm '{algo}' (choose from {', '.join(ALGOS)})")
        config = Config(algo=algo, env=EnvConfig(id=env_id or "CartPole-v1"))
    apply_overrides(config, overrides or [])
    return config.validate()
