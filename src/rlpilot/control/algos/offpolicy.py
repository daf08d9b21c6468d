"""What SAC and TD3 share: the action Box, uniform replay, the random warm-up, the learning phase, checkpoints.

Off-policy algorithms extend their replay buffer inside ``learn`` (one collected batch at a time) and,
once ``learning_starts`` frames are in, run ``frames x updates_per_frame`` gradient steps on minibatches
drawn from it. Subclasses define their networks and the loss.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.envs import EnvBase

from rlpilot.common import stopping
from rlpilot.common.errors import UserError
from rlpilot.config.schema import Config
from rlpilot.config.sections import ModelConfig, SACConfig, TD3Config
from rlpilot.control import compiled
from rlpilot.control.collect import TRANSITION_KEYS, as_key, nested_tensordict
from rlpilot.control.models import action_kind, mlp, observation_size
from rlpilot.guard import Guard

AT_BOUND_SHARE_OF_WIDTH = 0.01
"""An action component this close to ``low`` or ``high`` (as a share of the Box's width) counts as at
a bound in ``action/at_bound``."""
AT_BOUND_EVERY_ROWS = 256
"""``action/at_bound`` is measured again each time the collected frames cross a multiple of this."""


class TwinQ(nn.Module):
    """Two independent critics ``Q_i(s, a)``: ``([B, obs], [B, act]) -> [2, B]``."""

    def __init__(self, obs_dim: int, action_dim: int, model: ModelConfig):
        super().__init__()
        self.nets = nn.ModuleList(mlp(obs_dim + action_dim, 1, model) for _ in range(2))

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([observation, action], -1)
        return torch.stack([net(x).squeeze(-1) for net in self.nets])


def frozen(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's parameters detached, for ``torch.func.functional_call``: a loss through them
    reaches its inputs (the actor's action) but not the module's weights."""
    return {name: p.detach() for name, p in module.named_parameters()}


WARMUP_BATCH_FRAMES = 1000
"""The longest batch of the random warm-up (:meth:`OffPolicyContinuous.batch_steps`), in frames."""

COLUMNS = tuple(as_key(key) for key in TRANSITION_KEYS)
"""The replay's columns: the transition keys as tuples (nested keys of a TensorDict, "."-joined in checkpoints)."""


class Replay:
    """Uniform replay: one preallocated tensor per transition key, written round robin, sampled with replacement.

    The same computation as TorchRL's ``TensorDictReplayBuffer`` + ``LazyTensorStorage`` + ``RandomSampler``, which
    SAC and TD3 used until 2026-12-03, replaced on this hot path only: its ``extend`` cost ~0.45 ms a call whatever
    the size (0.63 ms of a 1.1 ms frame in a profile of TD3's random warm-up at the Zoo's one env and one step per
    batch; here ~0.03 ms). Same draws: ``torch.randint(0, len, (n,))`` on the global generator, as the sampler's
    storage does; the same writer (cursor, write count); checkpoints keep TorchRL's state-dict layout, so a run
    checkpointed before the change resumes with its buffer. Storage is allocated at the first ``extend``, with
    the data's shapes and dtypes, as ``LazyTensorStorage`` does.
    """

    def __init__(self, capacity: int, device: torch.device):
        self.capacity = capacity
        self.device = device
        self.columns: dict[tuple[str, ...], torch.Tensor] = {}  # keyed by COLUMNS
        self.cursor = 0
        self.write_count = 0

    def __len__(self) -> int:
        return min(self.write_count, self.capacity)

    def extend(self, batch: TensorDict) -> None:
        rows = batch.numel()
        values = {key: batch.get(key).flatten(0, batch.ndim - 1) for key in COLUMNS}
        if not self.columns:
            for key, value in values.items():
                self.columns[key] = torch.zeros(
                    (self.capacity, *value.shape[1:]), dtype=value.dtype, device=self.device
                )
        if self.cursor + rows <= self.capacity:  # one slice per key (every write but the one that wraps)
            where: slice | torch.Tensor = slice(self.cursor, self.cursor + rows)
        else:
            where = (self.cursor + torch.arange(rows)) % self.capacity
        for key, value in values.items():
            self.columns[key][where] = value
        self.cursor = (self.cursor + rows) % self.capacity
        self.write_count += rows

    def sample(self, count: int) -> TensorDict:
        index = torch.randint(0, len(self), (count,), device=self.device)
        return nested_tensordict({key: column[index] for key, column in self.columns.items()}, [count], self.device)

    def minibatches(self, batch_size: int, count: int) -> Iterator[TensorDict]:
        """``count`` minibatches drawn in one ``sample`` call: the buffer does not change during a
        learning phase, so this is the same distribution as ``count`` calls."""
        if count == 1:  # the Zoo's one update per frame: no split (~30 us)
            yield self.sample(batch_size)
            return
        yield from self.sample(batch_size * count).split(batch_size)

    def state_dict(self) -> dict:
        """Contents and write cursor as plain tensors and numbers (loadable with ``weights_only=True``), in the
        layout of TorchRL's buffer state dict: ``_storage`` with "."-joined keys and the stored-row ``index``,
        ``_writer`` with the cursor. Only the rows written so far are saved (a 1M-transition replay of Ant-v5 is
        890 MB preallocated: a checkpoint early in the run would write it all); loading allocates the capacity."""
        stored = len(self)
        storage: dict[str, torch.Tensor] = {".".join(key): column[:stored] for key, column in self.columns.items()}
        if self.columns:
            storage["index"] = torch.arange(stored, device=self.device)
        return {
            "_storage": {"_storage": storage, "initialized": bool(self.columns), "_len": stored},
            "_writer": {"_cursor": self.cursor, "_write_count": self.write_count},
        }

    def load_state_dict(self, state: dict) -> None:
        """Either layout: the written rows only, or the whole capacity (checkpoints before 2026-12-06, and
        TorchRL's)."""
        storage = state["_storage"]
        self.columns = {}
        if storage.get("initialized"):
            for key in COLUMNS:
                saved = storage["_storage"][".".join(key)]
                column = torch.zeros((self.capacity, *saved.shape[1:]), dtype=saved.dtype, device=self.device)
                rows = min(len(saved), self.capacity)
                column[:rows] = saved[:rows]
                self.columns[key] = column
        self.cursor = int(state["_writer"]["_cursor"])
        self.write_count = int(state["_writer"].get("_write_count", storage.get("_len", 0)))


def planned_updates(total_frames: int, cfg) -> int:
    """An off-policy run's gradient updates over its budget: every frame after ``cfg.learning_starts``,
    ``cfg.updates_per_frame`` each (DQN, SAC and TD3 configs)."""
    return round(max(0, total_frames - cfg.learning_starts) * cfg.updates_per_frame)


class OffPolicyContinuous(ABC):
    """What SAC and TD3 share: the Box, replay, random warm-up, the learning phase, checkpoints.

    Subclasses build their networks and ``self.optimizer`` / ``self.parameters``, and define
    :meth:`explore` (an action to collect with), :meth:`losses` (the loss to step and its detached
    statistics), :meth:`after_step` (target updates) and :meth:`networks` (what checkpoints hold).
    ``gradients`` is what the learning phase calls (built once by :func:`rlpilot.control.compiled.build_update` from
    ``planned_updates``: the loss's clipped gradients, eager or one compiled program under ``train.compile``);
    ``compiled_parts`` are the programs whose first-call seconds are logged.
    """

    on_policy = False
    optimizer: torch.optim.Optimizer
    parameters: list[nn.Parameter]
    greedy_module: nn.Module

    def __init__(self, config: Config, env: EnvBase, device: torch.device, cfg: SACConfig | TD3Config):
        self.config = config
        self.cfg = cfg
        self.device = device
        spec = env.full_action_spec_unbatched["action"].to(device)
        if action_kind(spec, algo=config.algo) != "continuous":
            raise UserError(
                f"{config.algo.upper()} needs continuous (Box) actions, but this env's are discrete; "
                "use DQN or PPO (rlpilot train dqn ENV)"
            )
        self.action_spec = spec
        self.low = spec.space.low.float()
        self.high = spec.space.high.float()
        self.half_width = (self.high - self.low) / 2
        self.near_bound = AT_BOUND_SHARE_OF_WIDTH * (self.high - self.low)
        self.obs_dim = observation_size(env.observation_spec)
        self.action_dim = int(spec.shape[-1])
        self.replay = Replay(cfg.buffer_size, device)
        self.updates = 0
        self.frames = 0
        self.warmup_steps = 0
        self.held: torch.Tensor | None = None
        self.at_bound: torch.Tensor | None = None  # action/at_bound, measured every AT_BOUND_EVERY_ROWS frames
        self.guard = Guard(config.guard)
        self.planned_updates = planned_updates(config.train.total_frames, cfg)
        self.compiled_parts: tuple = ()

    def batch_steps(self, frames: int) -> int:
        """Env steps per env of the next batch collected in this process, ``frames`` collected so far: the run's
        ``steps_per_env``, except in the random warm-up, collected in batches of up to ``WARMUP_BATCH_FRAMES`` frames
        that end before ``learning_starts`` (nothing learns from them). Each is a whole number of the run's batches
        and ends no later than the run batch that reaches the loop's next evaluation, so every batch boundary that
        matters stays where it was: the same actions, frames, evaluations and first update. At the Zoo's one env and
        one step per batch, the loop's per-batch work made a warm-up frame cost ~0.6 ms (TD3 Pendulum: 10,000 frames,
        ~6 s)."""
        steps, every = self.cfg.steps_per_env, self.config.train.eval_every_frames
        batch = self.config.env.num_envs * steps
        next_eval = (frames // every + 1) * every
        end = min(self.cfg.learning_starts - 1, frames + WARMUP_BATCH_FRAMES, -(-next_eval // batch) * batch)
        return max(1, (end - frames) // batch) * steps

    # -- acting (hot path: plain tensors) -------------------------------------------------------
    @torch.inference_mode()
    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Uniform in the Box before ``learning_starts`` frames, then the algorithm's exploration."""
        if self.frames < self.cfg.learning_starts:
            return self.warmup_action(observation), {}
        return self.explore(observation), {}

    def warmup_action(self, observation: torch.Tensor) -> torch.Tensor:
        """Uniform in the Box, each drawn action held for ``warmup_hold`` env steps (all envs draw together)."""
        if (
            self.held is None
            or self.held.shape[0] != observation.shape[0]
            or self.warmup_steps % self.cfg.warmup_hold == 0
        ):
            uniform = torch.rand(observation.shape[0], self.action_dim, device=observation.device)
            self.held = self.low + (self.high - self.low) * uniform
        self.warmup_steps += 1
        return self.held

    @torch.inference_mode()
    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        return self.greedy_module(observation)

    @abstractmethod
    def explore(self, observation: torch.Tensor) -> torch.Tensor:
        """An action to collect with, for a batch of observations."""

    # -- learning ----------------------------------------------------------------------------
    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        cfg = self.cfg
        self.frames = frames
        steps = self.cfg.steps_per_env
        for piece in batch.split(steps, dim=1) if batch.shape[1] > steps else (batch,):  # a warm-up batch, written
            self.replay.extend(piece)  # as the run batches it holds: the replay's row order stays the same
        metrics = {"buffer/size": float(len(self.replay))}
        at_bound = self.at_bound_of(batch["observation"])
        if frames < cfg.learning_starts:
            return {**metrics, "action/at_bound": float(at_bound)}
        lr = cfg.lr * self.guard.lr_scale
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        updates = max(1, round(batch.numel() * cfg.updates_per_frame))
        sums: dict[str, torch.Tensor] = {"action/at_bound": at_bound}
        counts: dict[str, int] = {"action/at_bound": 1}
        skipped = 0
        for sample in self.replay.minibatches(cfg.batch_size, updates):
            if stopping.requested():  # SIGINT/SIGTERM: end the phase here; the loop checkpoints and stops
                break
            self.updates += 1
            grad_norm, stats = self.guard.update(self.optimizer, self.gradients, sample, update=self.updates)
            if grad_norm is None:
                skipped += 1
                continue
            self.after_step()
            stats["opt/grad_norm"] = grad_norm
            for name, value in stats.items():
                sums[name] = sums[name] + value if name in sums else value
                counts[name] = counts.get(name, 0) + 1
        if sums:  # one host sync for the whole phase (the collected batch's action statistic included)
            values = torch.stack([sums[name] / counts[name] for name in sums]).tolist()
            metrics.update(zip(sums, values))
        metrics.update(self.phase_metrics())
        metrics.update(compiled.compile_seconds(*self.compiled_parts))
        metrics["opt/lr"] = lr
        if skipped:
            metrics["guard/skipped_updates"] = float(skipped)
        return metrics

    def at_bound_of(self, observation: torch.Tensor) -> torch.Tensor:
        """:meth:`greedy_at_bound` of the batch whose frames cross a multiple of ``AT_BOUND_EVERY_ROWS`` (and of the
        first batch), repeated for the batches between: at the Zoo's one env and one step per batch, an actor forward
        for every batch cost ~1 ms of a 7.8 ms SAC frame. The last value is checkpointed, so a resumed run reports
        what the uninterrupted one does."""
        rows = observation.reshape(-1, observation.shape[-1]).shape[0]
        crossed = self.frames // AT_BOUND_EVERY_ROWS != (self.frames - rows) // AT_BOUND_EVERY_ROWS
        if self.at_bound is None or crossed:
            self.at_bound = self.greedy_at_bound(observation)
        return self.at_bound

    @torch.no_grad()
    def greedy_at_bound(self, observation: torch.Tensor) -> torch.Tensor:
        """Share of the greedy action components, on the collected batch's observations, within 1% of the
        Box's width from a bound: one actor forward per batch (not per env step), read in the phase's
        one host sync. Greedy, not collected, actions: SAC's samples crowd the bounds whenever its std
        is wide, and TD3's noise clipped into the Box hides a pinned actor half the time. A policy
        pinned at the bounds (a saturated tanh) shows here before its returns explain why."""
        action = self.greedy_module(observation.reshape(-1, observation.shape[-1]))
        return ((action - self.low <= self.near_bound) | (self.high - action <= self.near_bound)).float().mean()

    @abstractmethod
    def losses(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss to step and its detached statistics, for one minibatch."""

    @abstractmethod
    def after_step(self) -> None:
        """What follows an applied update (target networks)."""

    def phase_metrics(self) -> dict[str, float]:
        """Metrics read once per learning phase (after its updates)."""
        return {}

    def bootstrap_target(self, sample: TensorDict, next_value: torch.Tensor) -> torch.Tensor:
        """``r + gamma (1 - terminated) V(s')``: truncated episodes bootstrap, terminated ones do not."""
        not_terminated = (~sample["next", "terminated"]).squeeze(-1).float()
        return sample["next", "reward"].squeeze(-1) + self.cfg.gamma * not_terminated * next_value

    # -- persistence -------------------------------------------------------------------------
    @abstractmethod
    def networks(self) -> dict[str, nn.Module]:
        """The modules a checkpoint holds, by name."""

    def state_dict(self) -> dict:
        return {
            **{name: module.state_dict() for name, module in self.networks().items()},
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "frames": self.frames,
            "guard": self.guard.state_dict(),
            "buffer": self.replay.state_dict() if self.config.train.checkpoint_buffer else None,
            "warmup": {"steps": self.warmup_steps, "held": self.held},  # a resumed warm-up keeps its held actions
            "at_bound": self.at_bound,
        }

    def acting_state(self) -> dict:
        return {"actor": self.networks()["actor"].state_dict(), "frames": self.frames}

    def load_acting_state(self, state: dict) -> None:
        self.networks()["actor"].load_state_dict(state["actor"])
        self.frames = int(state["frames"])

    def load_state_dict(self, state: dict) -> None:
        for name, module in self.networks().items():
            module.load_state_dict(state[name])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        self.frames = int(state["frames"])
        self.guard.load_state_dict(state["guard"])
        if state.get("buffer") is not None:
            self.replay.load_state_dict(state["buffer"])
        warmup = state.get("warmup") or {"steps": 0, "held": None}  # checkpoints before warmup_hold have none
        self.warmup_steps, self.held = int(warmup["steps"]), warmup["held"]
        self.at_bound = state.get("at_bound")  # checkpoints before 2026-12-03 have none: measured anew


class Polyak:
    """``target += tau (online - target)`` for every parameter of each ``(target, online)`` pair (TorchRL's
    ``SoftUpdate``), one ``_foreach_lerp_`` for all pairs. The parameter lists are built once: walking the modules
    for them at each update (``Module.parameters``) cost ~60 us of a SAC frame at the Zoo's one update per frame,
    against ~20 us for the lerp itself (2-core machine, 2026-12-04). Loading a checkpoint or rolling back copies
    into the same parameters, so the lists stay valid."""

    def __init__(self, pairs: list[tuple[nn.Module, nn.Module]], tau: float):
        self.targets = [p for target, _ in pairs for p in target.parameters()]
        self.online = [p for _, online in pairs for p in online.parameters()]
        self.tau = tau

    def __call__(self) -> None:
        with torch.no_grad():
            torch._foreach_lerp_(self.targets, self.online, self.tau)
