"""PPO (clipped objective) for discrete and bounded continuous actions.

One collected batch of shape ``[num_envs, steps]``: GAE over the whole batch (once, before any
minibatch), then ``epochs`` passes of minibatches drawn without replacement, each a clipped-loss step
with gradient clipping. LR and clip are annealed over the real number of updates (``config.ppo.num_updates``),
derived from the budget.

One implementation, owning its networks and optimiser: :func:`gae` and :func:`ppo_loss` are plain
functions on tensors. Why not TorchRL's ``GAE`` and ``ClipPPOLoss`` modules at run time: the GAE module
runs the critic through vmap and TensorDict plumbing (~24 ms a batch on a 256-transition CartPole batch,
against ~1 ms here; its first call also imported pandas, 0.7 s), and one update through ClipPPOLoss
took 3.3 ms against ~1.2 ms (benchmarks/update_cost.py): updates are most of a CartPole run's time.
Both modules live on in ``tests/unit/test_ppo.py`` as the references these functions must equal
(values and gradients). The estimator itself is TorchRL's ``generalized_advantage_estimate``.
"""

from __future__ import annotations

import copy
import math

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import OneHot
from torchrl.envs import EnvBase
from torchrl.modules import TanhNormal
from torchrl.objectives.value.functional import generalized_advantage_estimate

from rlpilot.common import stopping
from rlpilot.config.schema import Config
from rlpilot.config.sections import PPOConfig
from rlpilot.control import compiled
from rlpilot.control.compiled.cuda_graph import graphed
from rlpilot.control.models import (
    Envelope,
    GaussianHead,
    GreedyActor,
    action_kind,
    actor_out_gain,
    network,
    observation_size,
)
from rlpilot.guard import Guard

LOG_PROB_KEY = "action_log_prob"  # the key TorchRL's PPO losses read the sampling log-probability from
# loss outputs averaged over the updates of a batch, and their metric names (grad norm last)
STEP_METRICS = ("loss_objective", "loss_critic", "entropy", "kl_approx", "clip_fraction", "grad_norm")
STEP_METRIC_NAMES = ("loss/objective", "loss/critic", "ppo/entropy", "ppo/kl", "ppo/clip_fraction", "opt/grad_norm")
MINIBATCH_KEYS = ("observation", "action", "advantage", "value_target", LOG_PROB_KEY)


class PPO:
    on_policy = True
    time_dim = -2
    """Where time runs in a collected batch (``[num_envs, steps, ...]`` with per-step values ``[..., 1]``)."""

    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        self.config = config
        self.device = device
        self.build_networks(env)
        self.greedy_module = GreedyActor(self.actor_net, self.bounds, one_hot=self.num_actions if self.one_hot else 0)
        # the policy step; on CUDA one graph replay (``train.cuda_graphs``)
        self.graphed_sample = graphed(self.sample, self.actor_net, config.train.cuda_graphs, "PPO policy step")
        self.parameters = [*self.actor_net.parameters(), *self.critic_net.parameters()]
        # fused Adam: 3x cheaper step than the default single-tensor loop on CPU (~55 vs ~165 us for 64-64 MLPs)
        self.optimizer = torch.optim.Adam(self.parameters, lr=config.ppo.lr, eps=1e-5, fused=True)
        self.updates = 0
        self.guard = Guard(config.guard)
        # the behaviour-cloning anchor (ppo.anchor_coef): the actor as it is at the first PPO update of the run
        self.anchor_net = copy.deepcopy(self.actor_net).requires_grad_(False) if self.anchored() else None
        self.anchor_set = False
        fixed = {"anchor": self.anchor_net} if self.anchor_net is not None else {}
        learned = {"actor": self.actor_net, "critic": self.critic_net}
        update = compiled.Program("ppo_update", learned, self.loss, fixed)
        self.gradients = compiled.build_update(
            config, device, update, optimizer=self.optimizer, planned_updates=self.num_updates()
        )
        self.compile = self.gradients.compiled

    def anchored(self) -> bool:
        """A behaviour-cloning anchor (``ppo.anchor_coef > 0``): continuous actions only (the mean it holds to)."""
        return self.config.ppo.anchor_coef > 0 and self.kind == "continuous"

    def build_networks(self, env: EnvBase) -> None:
        """``actor_net`` and ``critic_net`` sized from ``env``'s specs, on ``device``, and what the action
        is (``kind``, ``num_actions``, ``one_hot``, ``bounds``). A variant (MAPPO) overrides this only."""
        config, cfg, device = self.config, self.config.ppo, self.device
        obs_spec = env.observation_spec
        spec = env.full_action_spec_unbatched["action"].to(device)
        self.kind = action_kind(spec)
        inputs = config.model.actor_inputs  # the entries the actor reads (the critic reads all)
        if self.kind == "discrete":
            self.num_actions = int(spec.space.n)
            self.actor_net = network(obs_spec, self.num_actions, config.model, out_gain=0.01, inputs=inputs).to(device)
            choice = cfg.distribution if cfg.distribution != "auto" else "auto"
            # one-hot actions when the spec is one-hot (auto) or when asked; a Categorical index over a
            # OneHot spec is the classic silent bug, kept selectable so doctor can be shown to catch it
            self.one_hot = choice == "one_hot_categorical" or (choice == "auto" and isinstance(spec, OneHot))
            self.bounds = None
        else:
            action_dim = int(spec.shape[-1])
            body = network(obs_spec, action_dim, config.model, out_gain=actor_out_gain(config), inputs=inputs)
            if config.model.fallback_margin:  # the safe fallback off the training distribution
                body = Envelope(body, observation_size(obs_spec), config.model.fallback_margin)
            self.actor_net = GaussianHead(body, action_dim, cfg.init_log_std).to(device)
            self.one_hot = False
            # actions are squashed into exactly [low, high] of the Box: no clipping, no bias at the bounds
            self.bounds = (spec.space.low, spec.space.high)
        self.critic_net = network(obs_spec, 1, config.model, out_gain=1.0).to(device)

    # -- acting (hot path: plain tensors, no TensorDict per step) -------------------------------
    def distribution(self, observation: torch.Tensor) -> TanhNormal:
        """The continuous policy: a Gaussian squashed by tanh into the action box."""
        loc, scale = self.actor_net(observation)
        return TanhNormal(loc, scale, low=self.bounds[0], high=self.bounds[1])

    @torch.inference_mode()
    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        sample = self.graphed_sample if isinstance(observation, torch.Tensor) else self.sample
        action, log_prob = sample(observation)
        return action, {LOG_PROB_KEY: log_prob}

    def sample(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """An action of the policy and its log-probability."""
        if self.kind == "discrete":
            # Gumbel-max on plain tensors: exact Categorical samples at ~1/7 of the cost of
            # torch.distributions.Categorical (profile, 4096 envs x 2 actions: 1.3 ms -> 0.2 ms a step;
            # 8 envs: 120 us -> 15 us)
            log_probs = torch.log_softmax(self.actor_net(observation), -1)
            index = (log_probs - torch.empty_like(log_probs).exponential_().log()).argmax(-1)
            log_prob = log_probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)
            action = nn.functional.one_hot(index, self.num_actions) if self.one_hot else index
            return action, log_prob
        return self.distribution(observation).sample_and_log_prob()

    @torch.inference_mode()
    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        return self.greedy_module(observation)

    def log_prob_and_entropy(self, observation: torch.Tensor, action: torch.Tensor):
        """Log-probability of ``action`` under the current policy, and the policy's entropy (a one-sample
        estimate for the squashed Gaussian, which has no closed form: what ClipPPOLoss uses too)."""
        if self.kind == "discrete":
            log_probs = torch.log_softmax(self.actor_net(observation), -1)
            index = action.argmax(-1) if self.one_hot else action
            entropy = -(log_probs.exp() * log_probs).sum(-1)
            return log_probs.gather(-1, index.long().unsqueeze(-1)).squeeze(-1), entropy
        dist = self.distribution(observation)
        return dist.log_prob(action), -dist.log_prob(dist.rsample())

    # -- learning ----------------------------------------------------------------------------
    def loss(
        self, minibatch: dict[str, torch.Tensor], low: float | torch.Tensor, high: float | torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:func:`clipped_loss` on one minibatch, as ``(total loss, its terms and statistics)``."""
        out = clipped_loss(self, minibatch, low, high, cfg=self.config.ppo)
        total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
        if self.anchor_net is not None:
            observation = minibatch["observation"]
            distance = (self.actor_net(observation)[0] - self.anchor_net(observation)[0]).pow(2).sum(-1).mean()
            out["anchor_distance"] = distance.detach()
            total = total + self.config.ppo.anchor_coef * distance
        return total, out

    def num_updates(self) -> int:
        """Gradient steps over the whole budget: the horizon of LR and clip schedules."""
        return self.config.ppo.num_updates(self.config.frames_per_batch, self.config.num_batches)

    def _anneal(self, fraction: float = 1.0) -> float:
        """Share of the schedule still ahead (1 -> 0 over ``fraction`` of the budget's updates)."""
        return max(0.0, 1.0 - self.updates / max(1.0, fraction * self.num_updates()))

    def lr(self) -> float:
        cfg = self.config.ppo
        if cfg.lr_schedule == "linear":
            factor = self._anneal(cfg.lr_schedule_fraction)
        elif cfg.lr_schedule == "cosine":
            t_max = max(1.0, cfg.lr_schedule_fraction * self.num_updates())
            factor = 0.5 * (1.0 + math.cos(math.pi * self.updates / t_max))
        else:
            factor = 1.0
        return cfg.lr * factor * self.guard.lr_scale

    def log_ratio_range(self, clip_epsilon: float) -> tuple[float, float] | tuple[torch.Tensor, torch.Tensor]:
        """``log(1 -+ clip_epsilon)``: floats, or 0-d tensors for the compiled loss (a float argument would be
        compiled in as a constant, and the clip schedule would recompile it at every update)."""
        low, high = math.log1p(-clip_epsilon), math.log1p(clip_epsilon)
        if not self.compile:
            return low, high
        return torch.tensor(low, device=self.device), torch.tensor(high, device=self.device)

    def clip_epsilon(self) -> float:
        cfg = self.config.ppo
        if cfg.clip_schedule == "linear":
            return max(cfg.clip_epsilon * self._anneal(), 1e-3)
        return cfg.clip_epsilon

    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        cfg = self.config.ppo
        # the run's first PPO update (a resumed student's): the anchor holds on to this actor
        if self.anchor_net is not None and not self.anchor_set:
            self.anchor_net.load_state_dict(self.actor_net.state_dict())
            self.anchor_set = True
        with torch.no_grad():
            gae(batch, self.critic_net, cfg.gamma, cfg.gae_lambda, time_dim=self.time_dim)
        flat = batch.reshape(-1)
        size, n_minibatches = cfg.minibatch_size, cfg.minibatches_per_epoch(self.config.frames_per_batch)
        # plain tensors: indexing a TensorDict per minibatch cost ~0.3 ms of a ~1.5 ms update
        columns = {key: flat.get(key) for key in MINIBATCH_KEYS}
        sums = torch.zeros(len(STEP_METRICS), device=self.device)
        anchor_sum = torch.zeros((), device=self.device)
        skipped = steps = 0
        lr, clip = self.lr(), self.clip_epsilon()  # what is logged if a signal ends the update before its first step
        for _ in range(cfg.epochs):
            if stopping.requested():  # SIGINT/SIGTERM: end the update here; the loop checkpoints and stops
                break
            if cfg.minibatch_replacement:
                order = torch.randint(flat.shape[0], (flat.shape[0],), device=self.device)
            else:
                order = torch.randperm(flat.shape[0], device=self.device)
            for index in order[: n_minibatches * size].view(n_minibatches, size):
                if stopping.requested():
                    break
                steps += 1
                lr, clip = self.lr(), self.clip_epsilon()
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                minibatch = {key: value[index] for key, value in columns.items()}
                self.updates += 1
                grad_norm, out = self.guard.update(
                    self.optimizer, self.gradients, minibatch, *self.log_ratio_range(clip), update=self.updates
                )
                if grad_norm is None:
                    skipped += 1
                    continue
                sums += torch.stack([out[key].detach() for key in STEP_METRICS[:-1]] + [grad_norm])
                if "anchor_distance" in out:
                    anchor_sum += out["anchor_distance"]
        means = (sums / max(1, steps - skipped)).tolist()
        metrics = dict(zip(STEP_METRIC_NAMES, means))
        if self.anchor_net is not None:
            metrics["ppo/anchor_distance"] = float(anchor_sum) / max(1, steps - skipped)
        metrics["opt/lr"] = lr
        if skipped:
            metrics["guard/skipped_updates"] = float(skipped)
        metrics["ppo/clip_epsilon"] = clip
        metrics.update(compiled.compile_seconds(self.gradients))
        metrics["ppo/explained_variance"] = explained_variance(flat["state_value"], flat["value_target"])
        return metrics

    # -- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "actor": self.actor_net.state_dict(),
            "critic": self.critic_net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "guard": self.guard.state_dict(),
            **({"anchor": self.anchor_net.state_dict()} if self.anchor_net is not None and self.anchor_set else {}),
        }

    def acting_state(self) -> dict:
        return {"actor": self.actor_net.state_dict()}

    def load_acting_state(self, state: dict) -> None:
        self.actor_net.load_state_dict(state["actor"])

    def load_state_dict(self, state: dict) -> None:
        self.actor_net.load_state_dict(state["actor"])
        self.critic_net.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        self.guard.load_state_dict(state["guard"])
        if self.anchor_net is not None and "anchor" in state:  # a resumed refinement keeps its anchor
            self.anchor_net.load_state_dict(state["anchor"])
            self.anchor_set = True


def gae(batch: TensorDict, critic: nn.Module, gamma: float, lmbda: float, *, time_dim: int = -2) -> None:
    """Writes what TorchRL's ``GAE`` module writes (``advantage``, ``value_target``, ``state_value``,
    ``("next", "state_value")``) into a ``[num_envs, steps]`` batch, with the same estimator
    (``generalized_advantage_estimate``): truncation bootstraps, termination does not. ``time_dim``: 1 for
    multi-agent batches ``[E, T, n_agents, 1]``."""
    observation, next_observation = batch.get("observation"), batch.get(("next", "observation"))
    value, next_value = critic(torch.cat((observation, next_observation))).chunk(2)
    advantage, value_target = generalized_advantage_estimate(
        gamma,
        lmbda,
        value,
        next_value,
        batch.get(("next", "reward")),
        batch.get(("next", "done")),
        batch.get(("next", "terminated")),
        time_dim=time_dim,
    )
    batch.set("advantage", advantage)
    batch.set("value_target", value_target)
    batch.set("state_value", value)
    batch.set(("next", "state_value"), next_value)


def ppo_loss(algo: PPO, minibatch: dict[str, torch.Tensor], cfg: PPOConfig, clip_epsilon: float) -> dict:
    """The clipped objective, value and entropy terms that ClipPPOLoss computes (same values and
    gradients, tested), plus its diagnostics (approximate KL, clip fraction)."""
    return clipped_loss(algo, minibatch, math.log1p(-clip_epsilon), math.log1p(clip_epsilon), cfg=cfg)


def clipped_loss(
    algo: PPO,
    minibatch: dict[str, torch.Tensor],
    low: float | torch.Tensor,
    high: float | torch.Tensor,
    *,
    cfg: PPOConfig,
) -> dict:
    """:func:`ppo_loss` with the log-ratio clipped to ``[low, high]`` (``log(1 -+ clip_epsilon)``)."""
    observation = minibatch["observation"]
    advantage = minibatch["advantage"].squeeze(-1)
    if cfg.normalize_advantage:
        advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-4)
    log_prob, entropy = algo.log_prob_and_entropy(observation, minibatch["action"])
    log_ratio = log_prob - minibatch[LOG_PROB_KEY]
    clipped_log_ratio = log_ratio.clamp(low, high)
    gain = torch.minimum(log_ratio.exp() * advantage, clipped_log_ratio.exp() * advantage)
    value = algo.critic_net(observation)
    target = minibatch["value_target"]
    if cfg.value_loss == "l2":
        critic = nn.functional.mse_loss(value, target)
    else:
        critic = nn.functional.smooth_l1_loss(value, target)
    return {
        "loss_objective": -gain.mean(),
        "loss_critic": cfg.value_coef * critic,
        "loss_entropy": -cfg.entropy_coef * entropy.mean(),
        "entropy": entropy.detach().mean(),
        "kl_approx": (-log_ratio).detach().mean(),
        "clip_fraction": (clipped_log_ratio != log_ratio).float().mean(),
    }


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target): 1 is perfect, 0 is a constant guess, < 0 is worse."""
    variance = target.var()
    if variance <= 1e-12:
        return float("nan")
    return float(1.0 - (target - predicted).var() / variance)
