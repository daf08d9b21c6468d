"""DQN with double-DQN targets, uniform or prioritised replay, hard or soft target updates, n-step returns.

Per collected batch (``learn``): epsilon follows the frames collected (linear to ``eps_end`` over
``exploration_frames``), the batch's transitions (n-step returns when ``dqn.n_step > 1``) go to a TorchRL
``TensorDictReplayBuffer`` on ``LazyTensorStorage``, and, once ``learning_starts`` frames are in,
``frames x updates_per_frame`` gradient steps run. With prioritised replay each step writes |TD error|
back (``update_tensordict_priority``) and the loss is weighted by the sampler's importance weights.

One implementation, owning its networks: :func:`dqn_loss` is the double-DQN TD loss in plain torch.
Why not TorchRL's ``DQNLoss`` at run time: its forward builds and copies TensorDicts and swaps functional
parameters in and out of the network three times per call; at RL Zoo's CartPole setting (0.5 updates
per frame) the update is most of a run's time (benchmarks/update_cost.py). ``DQNLoss`` lives on in
``tests/unit/test_dqn.py`` as the reference this loss must equal (values and gradients).
"""

from __future__ import annotations

import copy
import math

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import LazyTensorStorage, PrioritizedSampler, RandomSampler, TensorDictReplayBuffer
from torchrl.envs import EnvBase

from rlpilot.common import stopping
from rlpilot.config.schema import Config
from rlpilot.config.sections import DQNConfig
from rlpilot.control import compiled
from rlpilot.control.algos.offpolicy import Polyak, planned_updates
from rlpilot.control.collect import TRANSITION_KEYS, as_key, nested_tensordict
from rlpilot.control.models import GreedyActor, acting_forward, action_kind, network
from rlpilot.guard import Guard

STORED_KEYS = (*TRANSITION_KEYS, "discount")  # n-step returns bootstrap with gamma^k


class DQN:
    on_policy = False

    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        self.config = config
        cfg = config.dqn
        self.device = device
        spec = env.full_action_spec_unbatched["action"].to(device)
        action_kind(spec, algo="dqn")  # one clear error for continuous action spaces
        self.num_actions = int(spec.n)
        self.q_net = network(env.observation_spec, self.num_actions, config.model).to(device)
        self.target_net = copy.deepcopy(self.q_net).requires_grad_(False)
        self.polyak = Polyak([(self.target_net, self.q_net)], cfg.tau)
        self.greedy_module = GreedyActor(self.q_net)
        self.q_forward = acting_forward(self.q_net, config.train.cuda_graphs)
        self.sampler = (
            PrioritizedSampler(cfg.buffer_size, alpha=cfg.alpha, beta=cfg.beta_init, eps=cfg.priority_eps)
            if cfg.prioritized
            else RandomSampler()
        )
        self.buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(cfg.buffer_size, device=device),
            sampler=self.sampler,
            priority_key="td_error",
        )
        self.parameters = list(self.q_net.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=cfg.lr, fused=True)
        self.updates = 0
        self.frames = 0
        self.epsilon = cfg.eps_init
        self.guard = Guard(config.guard)
        update = compiled.Program("dqn_update", {"q_net": self.q_net}, self.loss, {"target_net": self.target_net})
        planned = planned_updates(config.train.total_frames, cfg)
        self.gradients = compiled.build_update(
            config, device, update, optimizer=self.optimizer, planned_updates=planned
        )

    # -- acting (hot path: plain tensors) -------------------------------------------------------
    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Epsilon-greedy (uniform before learning starts), from one uniform draw ``u`` per env: an env explores where
        ``u < epsilon`` and then takes action ``floor(u * (num_actions / epsilon))`` (uniform, given that it explores).
        Epsilon is a float: nothing waits on the device. At epsilon 1 the Q-network is not run.

        One observation on a CPU (the RL Zoo's one env): the draw is read on the host and the Q-network runs only
        when the env does not explore, as SB3 does, with no grad-mode context (:func:`acting_forward` needs none
        there): 128 -> 80 us a frame of collection for the Zoo's DQN CartPole (a 256-256 network), on this
        project's 2-core machine, 2026-12-05. The same draws give the same actions as the batched path."""
        eps = 1.0 if self.frames < self.config.dqn.learning_starts else self.epsilon
        if observation.shape[0] == 1 and getattr(self.q_forward, "grad_free", False):
            u = torch.rand(()).item()
            if u < eps:
                return torch.tensor([min(int(u * (self.num_actions / eps)), self.num_actions - 1)]), {}
            return self.q_forward(observation).argmax(-1), {}
        return self._act_batch(observation, eps), {}

    @torch.inference_mode()
    def _act_batch(self, observation: torch.Tensor, eps: float) -> torch.Tensor:
        # in float64, as the host's arithmetic in ``act``: the same draw, the same action
        u = torch.rand(observation.shape[:1], device=observation.device).double()
        random_actions = (u * (self.num_actions / eps)).long().clamp_(max=self.num_actions - 1)
        if eps >= 1.0:
            return random_actions
        return torch.where(u < eps, random_actions, self.q_forward(observation).argmax(-1))

    @torch.inference_mode()
    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        return self.greedy_module.finish(self.q_forward(observation))  # greedy_module's action, acting_forward's net

    # -- learning ----------------------------------------------------------------------------
    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        cfg = self.config.dqn
        self.frames = frames
        self.epsilon = epsilon(cfg, frames, cfg.exploration_frames(self.config.train.total_frames))
        self.buffer.extend(n_step_transitions(batch, cfg.n_step, cfg.gamma).reshape(-1).select(*STORED_KEYS))
        metrics = {"explore/epsilon": self.epsilon, "buffer/size": float(len(self.buffer))}
        if frames < cfg.learning_starts:
            return metrics
        if cfg.prioritized:
            progress = min(1.0, frames / self.config.train.total_frames)
            self.sampler.beta = cfg.beta_init + (1.0 - cfg.beta_init) * progress
        updates = cfg.updates_per_batch(batch.numel())  # a batch from one of several actors is smaller
        rows: list[torch.Tensor] = []  # each applied update's loss, mean Q, mean |TD error| and grad norm
        skipped = steps = 0
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.lr * self.guard.lr_scale
        stacked = None if cfg.prioritized else self._stacked(updates)
        done = 0
        read: list[list[float]] = []  # the same four for updates made by a phase program, already on the host
        if stacked is not None and cfg.target_update == "hard":
            # the phase in as few program calls as the target copies allow (one at the RL Zoo's settings): each call
            # makes the updates up to the next copy, as the loop below would (CompiledStep.steps)
            while done < updates and not stopping.requested():
                stop = min(updates, done + cfg.target_update_interval - self.updates % cfg.target_update_interval)
                made = self.guard.updates(self.gradients, (stacked,), done, stop, update=self.updates + 1)
                if made is None:
                    break
                steps += len(made)
                self.updates += len(made)
                skipped += made.count(None)
                read += [[row[key] for key in ("loss", "q_mean", "td_error_mean", "grad_norm")] for row in made if row]
                if made[-1] is not None:
                    self._update_target()
                done = stop
        samples = self._samples(updates) if stacked is None else self._split(stacked, done)
        for sample in samples:
            if stopping.requested():  # SIGINT/SIGTERM: end the phase here; the loop checkpoints and stops
                break
            steps += 1
            self.updates += 1
            grad_norm, out = self.guard.update(self.optimizer, self.gradients, sample, update=self.updates)
            if grad_norm is None:
                skipped += 1
                continue
            if cfg.prioritized:
                sample.set("td_error", out["td_error"])
                self.buffer.update_tensordict_priority(sample)
            self._update_target()
            rows += (out["loss"].detach(), out["q_mean"], out["td_error_mean"], grad_norm)
        # one reduction and one host sync for the phase
        table = torch.cat(
            [torch.stack(rows).view(-1, 4) if rows else torch.zeros(0, 4), torch.tensor(read).view(-1, 4)]
        )
        means = table.mean(0).tolist() if len(table) else [math.nan] * 4
        loss, q_mean, td_error, grad_norm = means
        metrics.update(
            {
                "loss/td": loss,
                "dqn/q_mean": q_mean,
                "dqn/td_error": td_error,
                "opt/grad_norm": grad_norm,
                "opt/lr": cfg.lr * self.guard.lr_scale,
            }
        )
        if skipped:
            metrics["guard/skipped_updates"] = float(skipped)
        if cfg.prioritized:
            metrics["dqn/beta"] = float(self.sampler.beta)
        return metrics | compiled.compile_seconds(self.gradients)

    def loss(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:func:`dqn_loss` on one minibatch, as ``(loss, statistics)``."""
        out = dqn_loss(self.q_net, self.target_net, sample, self.config.dqn)
        return out["loss"], out

    def _samples(self, updates: int):
        """Prioritised replay's minibatches for this learning phase, each sampled after the previous update's
        priorities are written."""
        for _ in range(updates):
            yield self.buffer.sample(self.config.dqn.batch_size)

    def _stacked(self, updates: int) -> TensorDict:
        """Uniform replay's minibatches for this learning phase, ``[updates, batch_size]``, drawn in one call (the
        buffer does not change during the phase, so this is the same distribution; one ``sample`` call costs ~0.4 ms
        whatever its size)."""
        batch_size = self.config.dqn.batch_size
        drawn = self.buffer.sample(batch_size * updates)
        leaves = {as_key(key): value.unflatten(0, (updates, batch_size)) for key, value in drawn.items(True, True)}
        return nested_tensordict(leaves, [updates, batch_size], drawn.device)

    def _split(self, stacked: TensorDict, start: int):
        """Minibatches ``start ..`` of :meth:`_stacked`'s draw, each a view, built without TensorDict's indexing and
        per-piece checks (~20 -> ~8 us an update; 128 updates a phase at the RL Zoo's settings)."""
        leaves = {as_key(key): value for key, value in stacked.items(True, True)}
        for index in range(start, stacked.shape[0]):
            yield nested_tensordict(
                {key: value[index] for key, value in leaves.items()}, stacked.shape[1:], stacked.device
            )

    def _update_target(self) -> None:
        cfg = self.config.dqn
        if cfg.target_update == "soft":
            self.polyak()
        elif self.updates % cfg.target_update_interval == 0:
            self.target_net.load_state_dict(self.q_net.state_dict())

    # -- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "q_net": self.q_net.state_dict(),
            "target_net": self.target_net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "frames": self.frames,
            "guard": self.guard.state_dict(),
            "buffer": self.buffer_state() if self.config.train.checkpoint_buffer else None,
        }

    def acting_state(self) -> dict:
        return {"q_net": self.q_net.state_dict(), "frames": self.frames, "epsilon": self.epsilon}

    def load_acting_state(self, state: dict) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.frames, self.epsilon = int(state["frames"]), float(state["epsilon"])

    def load_state_dict(self, state: dict) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        self.frames = int(state["frames"])
        cfg = self.config.dqn
        self.epsilon = epsilon(cfg, self.frames, cfg.exploration_frames(self.config.train.total_frames))
        self.guard.load_state_dict(state["guard"])
        if state.get("buffer") is not None:
            self.load_buffer_state(state["buffer"])

    def buffer_state(self) -> dict:
        """Replay contents as plain tensors (loadable with ``weights_only=True``).

        TorchRL's ``state_dict`` holds the prioritised sampler's C++ segment trees, which a safe loader
        refuses; their per-slot values (``(|td| + eps)^alpha``) are saved as one tensor instead.
        """
        state = self.buffer.state_dict()
        sampler = state.pop("_sampler")
        if self.config.dqn.prioritized:
            stored = torch.arange(len(self.buffer))
            state["priorities"] = self.sampler._sum_tree[stored] if len(stored) else torch.zeros(0)
            state["max_priority"] = list(sampler["_max_priority"])
        return state

    def load_buffer_state(self, state: dict) -> None:
        state = dict(state)
        priorities = state.pop("priorities", None)
        max_priority = state.pop("max_priority", None)
        state["_sampler"] = self.buffer.state_dict()["_sampler"]
        self.buffer.load_state_dict(state)
        if priorities is not None and len(priorities):
            stored = torch.arange(len(priorities))
            self.sampler._sum_tree[stored] = priorities
            self.sampler._min_tree[stored] = priorities
            self.sampler._max_priority = tuple(max_priority)


def n_step_transitions(batch: TensorDict, n: int, gamma: float) -> TensorDict:
    """Adds ``discount`` (gamma^k) and, for n > 1, k-step returns within ``[num_envs, steps]``.

    Transition t sums rewards t..t+k-1 with k = n, fewer where an episode ends (no return crosses an
    episode end) or the batch ends; ``("next", ...)`` then holds step t+k-1's next observation and
    termination flag, and bootstrapping uses gamma^k.
    """
    reward = batch["next", "reward"]
    discount = torch.full_like(reward, gamma)
    if n == 1:
        return batch.set("discount", discount)
    steps = batch.shape[-1]
    done = batch["next", "done"]
    ret = reward.clone()
    last = torch.arange(steps, device=reward.device).view(1, steps, 1).expand_as(reward).clone()
    alive = ~done  # transition t's episode continues past step t + k - 1
    for k in range(1, n):
        shifted = torch.zeros_like(reward)
        shifted[:, :-k] = reward[:, k:]
        valid = alive.clone()
        valid[:, -k:] = False
        ret = ret + (gamma**k) * shifted * valid
        last = torch.where(valid, last + 1, last)
        discount = torch.where(valid, discount * gamma, discount)
        next_done = torch.zeros_like(done)
        next_done[:, :-k] = done[:, k:]
        alive = valid & ~next_done
    index = last.squeeze(-1)
    out = batch.clone()
    for key in (("next", "observation"), ("next", "terminated"), ("next", "done")):
        value = batch[key]
        gather_index = index.view(*index.shape, *([1] * (value.ndim - 2))).expand_as(value)
        out.set(key, value.gather(1, gather_index))
    out.set(("next", "reward"), ret)
    return out.set("discount", discount)


def epsilon(cfg: DQNConfig, frames: int, exploration_frames: int) -> float:
    """Exploration probability after ``frames``: linear from ``eps_init`` to ``eps_end`` over ``exploration_frames``."""
    return max(cfg.eps_end, cfg.eps_init - (cfg.eps_init - cfg.eps_end) * frames / exploration_frames)


def dqn_loss(q_net: nn.Module, target_net: nn.Module, sample: TensorDict, cfg: DQNConfig) -> dict[str, torch.Tensor]:
    """Double-DQN TD loss (or plain max over the target when ``dqn.double_dqn`` is off), weighted by the
    prioritised sampler's importance weights when present; bootstraps with ``discount`` (gamma^k for
    k-step returns) unless the transition terminated. Same numbers as TorchRL's ``DQNLoss`` (tested)."""
    q_taken = q_net(sample["observation"]).gather(-1, sample["action"].unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        next_observation = sample["next", "observation"]
        next_target = target_net(next_observation)
        if cfg.double_dqn:
            next_action = q_net(next_observation).argmax(-1, keepdim=True)
            next_value = next_target.gather(-1, next_action).squeeze(-1)
        else:
            next_value = next_target.max(-1).values
        not_terminated = (~sample["next", "terminated"]).squeeze(-1).float()
        discount = sample["discount"].squeeze(-1) if "discount" in sample.keys() else cfg.gamma
        target = sample["next", "reward"].squeeze(-1) + discount * not_terminated * next_value
    if cfg.loss == "huber":
        elementwise = nn.functional.smooth_l1_loss(q_taken, target, reduction="none")
    else:
        elementwise = nn.functional.mse_loss(q_taken, target, reduction="none")
    weight = sample.get("priority_weight", None)
    loss = (elementwise * weight).mean() if weight is not None else elementwise.mean()
    td_error = (q_taken - target).detach().abs()
    return {"loss": loss, "td_error": td_error, "td_error_mean": td_error.mean(), "q_mean": q_taken.detach().mean()}
