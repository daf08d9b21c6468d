"""DQN with double-DQN targets, uniform or prioritised replay, hard or soft target updates.

Per collected batch (``learn``): anneal epsilon by the batch's frames (``EGreedyModule.step``),
write the batch's transitions (n-step returns when ``dqn.n_step > 1``) to a TorchRL
``TensorDictReplayBuffer`` on ``LazyTensorStorage``, and, once ``learning_starts`` frames are in,
run ``frames x updates_per_frame`` gradient steps. With prioritised replay each step writes |TD error|
back (``update_tensordict_priority``) and the loss is weighted by the sampler's importance weights.
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import LazyTensorStorage, PrioritizedSampler, RandomSampler, TensorDictReplayBuffer
from torchrl.envs import EnvBase
from torchrl.modules import EGreedyModule, QValueModule
from torchrl.objectives import DQNLoss, HardUpdate, SoftUpdate

from rlpilot.config import Config
from rlpilot.models import GreedyActor, action_kind, network
from rlpilot.monitor import Guard

STORED_KEYS = (
    "observation",
    "action",
    ("next", "observation"),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "done"),
    "discount",
)


class DQN:
    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        self.config = config
        cfg = config.dqn
        self.device = device
        spec = env.full_action_spec_unbatched["action"].to(device)
        action_kind(spec, algo="dqn")  # one clear error for continuous action spaces
        self.num_actions = int(spec.n)
        self.q_net = network(env.observation_spec, self.num_actions, config.model).to(device)
        self.target_net = copy.deepcopy(self.q_net).requires_grad_(False)
        self.greedy_module = GreedyActor(self.q_net)
        q_values = TensorDictModule(self.q_net, in_keys=["observation"], out_keys=["action_value"])
        self.greedy_policy = TensorDictSequential(q_values, QValueModule(spec=spec, action_space="categorical"))
        self.exploration = EGreedyModule(
            spec, eps_init=cfg.eps_init, eps_end=cfg.eps_end, annealing_num_steps=config.exploration_frames
        ).to(device)
        self.explore_policy = TensorDictSequential(self.greedy_policy, self.exploration)
        self.loss = DQNLoss(
            self.greedy_policy,
            loss_function="smooth_l1" if cfg.loss == "huber" else "l2",
            delay_value=True,
            double_dqn=cfg.double_dqn,
            action_space=spec,
        )
        self.loss.make_value_estimator(gamma=cfg.gamma)
        if cfg.loss_impl == "torchrl":
            self.target_updater = (
                HardUpdate(self.loss, value_network_update_interval=cfg.target_update_interval)
                if cfg.target_update == "hard"
                else SoftUpdate(self.loss, tau=cfg.tau)
            )
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
        self.guard = Guard(config.guard)

    # -- acting (hot path: plain tensors) -------------------------------------------------------
    @torch.inference_mode()
    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Epsilon-greedy with the EGreedyModule's current epsilon (uniform before learning starts)."""
        greedy = self.q_net(observation).argmax(-1)
        eps = 1.0 if self.frames < self.config.dqn.learning_starts else float(self.exploration.eps)
        explore = torch.rand(greedy.shape, device=greedy.device) < eps
        random_actions = torch.randint(0, self.num_actions, greedy.shape, device=greedy.device)
        return torch.where(explore, random_actions, greedy), {}

    @torch.inference_mode()
    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        return self.greedy_module(observation)

    # -- learning ----------------------------------------------------------------------------
    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        cfg = self.config.dqn
        self.exploration.step(batch.numel())
        self.frames = frames
        self.buffer.extend(n_step_transitions(batch, cfg.n_step, cfg.gamma).reshape(-1).select(*STORED_KEYS))
        metrics = {"explore/epsilon": float(self.exploration.eps), "buffer/size": float(len(self.buffer))}
        if frames < cfg.learning_starts:
            return metrics
        if cfg.prioritized:
            progress = min(1.0, frames / self.config.train.total_frames)
            self.sampler.beta = cfg.beta_init + (1.0 - cfg.beta_init) * progress
        loss_fn = self.lean_loss if cfg.loss_impl == "lean" else self._torchrl_loss
        updates = self.config.dqn_updates_per_batch
        sums = torch.zeros(4, device=self.device)
        skipped = 0
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.lr * self.guard.lr_scale
        for sample in self._samples(updates):
            out = loss_fn(sample)
            self.updates += 1
            grad_norm = self.guard.step(self.optimizer, self.parameters, out["loss"], cfg.max_grad_norm, self.updates)
            if grad_norm is None:
                skipped += 1
                continue
            if cfg.prioritized:
                sample.set("td_error", out["td_error"])
                self.buffer.update_tensordict_priority(sample)
            self._update_target()
            sums += torch.stack([out["loss"].detach(), out["q_mean"], out["td_error"].mean(), grad_norm])
        loss, q_mean, td_error, grad_norm = (sums / max(1, updates - skipped)).tolist()
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
        return metrics

    def _samples(self, updates: int):
        """Minibatches for this learning phase. Uniform replay draws them all in one call (the buffer
        does not change during the phase, so this is the same distribution; one ``sample`` call costs
        ~0.4 ms whatever its size). Prioritised replay samples each after the previous update's
        priorities are written."""
        batch_size = self.config.dqn.batch_size
        if self.config.dqn.prioritized:
            for _ in range(updates):
                yield self.buffer.sample(batch_size)
            return
        yield from self.buffer.sample(batch_size * updates).split(batch_size)

    def lean_loss(self, sample: TensorDict) -> dict[str, torch.Tensor]:
        """Double-DQN TD loss in plain torch: the same numbers as TorchRL's ``DQNLoss`` (tested).

        Why it exists: DQNLoss's forward builds and copies TensorDicts and swaps functional
        parameters in and out of the network three times per call; at RL Zoo's CartPole setting
        (0.5 updates per frame) the update is most of a run's time (benchmarks/update_cost.py).
        """
        cfg = self.config.dqn
        q_taken = self.q_net(sample["observation"]).gather(-1, sample["action"].unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            next_observation = sample["next", "observation"]
            next_target = self.target_net(next_observation)
            if cfg.double_dqn:
                next_action = self.q_net(next_observation).argmax(-1, keepdim=True)
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
        return {"loss": loss, "td_error": (q_taken - target).detach().abs(), "q_mean": q_taken.detach().mean()}

    def _torchrl_loss(self, sample: TensorDict) -> dict[str, torch.Tensor]:
        out = self.loss(sample)
        # DQNLoss writes the squared TD error; priorities follow the PER paper's |TD error|
        td_error = sample.get("td_error").squeeze(-1).sqrt()
        with torch.no_grad():
            q_mean = self.q_net(sample["observation"]).gather(-1, sample["action"].unsqueeze(-1)).mean()
        return {"loss": out["loss"], "td_error": td_error, "q_mean": q_mean}

    def _update_target(self) -> None:
        cfg = self.config.dqn
        if cfg.loss_impl == "torchrl":
            self.target_updater.step()
        elif cfg.target_update == "soft":
            with torch.no_grad():
                torch._foreach_lerp_(list(self.target_net.parameters()), self.parameters, cfg.tau)
        elif self.updates % cfg.target_update_interval == 0:
            self.target_net.load_state_dict(self.q_net.state_dict())

    # -- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "q_net": self.q_net.state_dict(),
            "target_net": self.target_net.state_dict(),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "exploration": self.exploration.state_dict(),
            "updates": self.updates,
            "frames": self.frames,
            "guard": self.guard.state_dict(),
            "buffer": self.buffer_state() if self.config.train.checkpoint_buffer else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.exploration.load_state_dict(state["exploration"])
        self.updates = int(state["updates"])
        self.frames = int(state["frames"])
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
