"""PPO (clipped objective) for discrete and bounded continuous actions, on TorchRL's GAE and ClipPPOLoss.

One collected batch of shape ``[num_envs, steps]``: GAE over the whole batch (once, before any
minibatch), then ``epochs`` passes of minibatches drawn without replacement, each a ClipPPOLoss
step with gradient clipping. LR and clip are annealed over the real number of updates
(``config.num_updates``), derived from the budget.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import OneHot
from torchrl.envs import EnvBase
from torchrl.envs.utils import ExplorationType
from torchrl.modules import OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE
from torchrl.objectives.value.functional import generalized_advantage_estimate

from rlpilot.config import Config
from rlpilot.models import GaussianHead, GreedyActor, action_kind, network
from rlpilot.monitor import Guard

# loss outputs averaged over the updates of a batch, and their metric names (grad norm last)
STEP_METRICS = ("loss_objective", "loss_critic", "entropy", "kl_approx", "clip_fraction", "grad_norm")
STEP_METRIC_NAMES = ("loss/objective", "loss/critic", "ppo/entropy", "ppo/kl", "ppo/clip_fraction", "opt/grad_norm")
LEAN_KEYS = ("observation", "action", "advantage", "value_target")


class PPO:
    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        self.config = config
        cfg = config.ppo
        self.device = device
        obs_spec = env.observation_spec
        spec = env.full_action_spec_unbatched["action"].to(device)
        self.kind = action_kind(spec)
        one_hot_spec = isinstance(spec, OneHot)
        if self.kind == "discrete":
            n = int(spec.space.n)
            actor_net = network(obs_spec, n, config.model, out_gain=0.01)
            param_keys = ["logits"]
            choice = (
                cfg.distribution
                if cfg.distribution != "auto"
                else ("one_hot_categorical" if one_hot_spec else "categorical")
            )
            self.distribution_class = (
                OneHotCategorical if choice == "one_hot_categorical" else torch.distributions.Categorical
            )
            self.distribution_kwargs: dict = {}
        else:
            action_dim = int(spec.shape[-1])
            actor_net = GaussianHead(
                network(obs_spec, action_dim, config.model, out_gain=0.01), action_dim, cfg.init_log_std
            )
            param_keys = ["loc", "scale"]
            self.distribution_class = TanhNormal
            # actions are squashed into exactly [low, high] of the Box: no clipping, no bias at the bounds
            self.distribution_kwargs = {"low": spec.space.low, "high": spec.space.high}
        self.actor_net = actor_net.to(device)
        self.critic_net = network(obs_spec, 1, config.model, out_gain=1.0).to(device)
        self.explore_policy = ProbabilisticActor(
            TensorDictModule(self.actor_net, in_keys=["observation"], out_keys=param_keys),
            in_keys=param_keys,
            distribution_class=self.distribution_class,
            distribution_kwargs=self.distribution_kwargs,
            return_log_prob=True,
            spec=spec,
            default_interaction_type=ExplorationType.RANDOM,
        )
        bounds = None if self.kind == "discrete" else (spec.space.low, spec.space.high)
        one_hot_out = n if self.kind == "discrete" and self.distribution_class is OneHotCategorical else 0
        self.greedy_module = GreedyActor(self.actor_net, bounds, one_hot=one_hot_out)
        self.greedy_policy = TensorDictModule(self.greedy_module, in_keys=["observation"], out_keys=["action"])
        self.critic = ValueOperator(self.critic_net, in_keys=["observation"])
        self.advantage = GAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=self.critic, device=device)
        self.loss = ClipPPOLoss(
            self.explore_policy,
            self.critic,
            clip_epsilon=cfg.clip_epsilon,
            entropy_bonus=True,  # also when the coefficient is 0: ppo/entropy is a key diagnostic
            entropy_coeff=cfg.entropy_coef,
            critic_coeff=cfg.value_coef,
            loss_critic_type=cfg.value_loss,
            normalize_advantage=cfg.normalize_advantage,
        )
        self.log_prob_key = self.loss.tensor_keys.sample_log_prob
        # fused Adam: 3x cheaper step than the default single-tensor loop on CPU (~55 vs ~165 us for 64-64 MLPs)
        self.parameters = list(self.loss.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=cfg.lr, eps=1e-5, fused=True)
        self.updates = 0
        self.guard = Guard(config.guard)

    # -- acting (hot path: plain tensors, no TensorDict per step) -------------------------------
    def _distribution(self, observation: torch.Tensor):
        params = self.actor_net(observation)
        if self.distribution_class is torch.distributions.Categorical:
            return torch.distributions.Categorical(logits=params, validate_args=False)
        if self.distribution_class is OneHotCategorical:
            return OneHotCategorical(logits=params)
        loc, scale = params
        return TanhNormal(loc, scale, **self.distribution_kwargs)

    @torch.inference_mode()
    def act(self, observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.distribution_class is torch.distributions.Categorical:
            # Gumbel-max sampling on plain tensors: exact Categorical samples at ~1/7 of the cost of
            # torch.distributions.Categorical (profile, 4096 envs x 2 actions: 1.3 ms -> 0.2 ms a step;
            # 8 envs: 120 us -> 15 us)
            log_probs = torch.log_softmax(self.actor_net(observation), -1)
            action = (log_probs - torch.empty_like(log_probs).exponential_().log()).argmax(-1)
            return action, {self.log_prob_key: log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)}
        dist = self._distribution(observation)
        if self.kind == "discrete":
            action = dist.sample()
            log_prob = dist.log_prob(action)
        else:
            action, log_prob = dist.sample_and_log_prob()
        return action, {self.log_prob_key: log_prob}

    @torch.inference_mode()
    def greedy_action(self, observation: torch.Tensor) -> torch.Tensor:
        return self.greedy_module(observation)

    # -- learning ----------------------------------------------------------------------------
    def _anneal(self, fraction: float = 1.0) -> float:
        """Share of the schedule still ahead (1 → 0 over ``fraction`` of the budget's updates)."""
        return max(0.0, 1.0 - self.updates / max(1.0, fraction * self.config.num_updates))

    def _lr_factor(self) -> float:
        cfg = self.config.ppo
        if cfg.lr_schedule == "linear":
            return self._anneal(cfg.lr_schedule_fraction)
        if cfg.lr_schedule == "cosine":
            t_max = max(1.0, cfg.lr_schedule_fraction * self.config.num_updates)
            return 0.5 * (1.0 + math.cos(math.pi * self.updates / t_max))
        return 1.0

    def learn(self, batch: TensorDict, frames: int) -> dict[str, float]:
        cfg = self.config.ppo
        with torch.no_grad():
            if cfg.loss_impl == "torchrl":
                self.advantage(batch)
            else:
                self.lean_advantage(batch)
        flat = batch.reshape(-1)
        size = cfg.minibatch_size
        n_minibatches = self.config.minibatches_per_epoch
        if cfg.loss_impl == "torchrl":
            loss_fn, take = self.loss, flat.__getitem__
        else:  # plain tensors: indexing a TensorDict per minibatch cost ~0.3 ms of a ~1.5 ms update
            columns = {key: flat.get(key) for key in LEAN_KEYS + (self.log_prob_key,)}
            loss_fn, take = self.lean_loss, lambda index: {k: v[index] for k, v in columns.items()}
        sums = torch.zeros(len(STEP_METRICS), device=self.device)
        skipped = 0
        for _ in range(cfg.epochs):
            if cfg.minibatch_replacement:
                order = torch.randint(flat.shape[0], (flat.shape[0],), device=self.device)
            else:
                order = torch.randperm(flat.shape[0], device=self.device)
            for index in order[: n_minibatches * size].view(n_minibatches, size):
                remaining = self._anneal()
                lr_left = self._lr_factor()
                lr = cfg.lr * lr_left * self.guard.lr_scale
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                if cfg.clip_schedule == "linear":
                    self.loss.clip_epsilon.fill_(max(cfg.clip_epsilon * remaining, 1e-3))
                out = loss_fn(take(index))
                loss = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                self.updates += 1
                grad_norm = self.guard.step(self.optimizer, self.parameters, loss, cfg.max_grad_norm, self.updates)
                if grad_norm is None:
                    skipped += 1
                    continue
                sums += torch.stack([out[key].detach() for key in STEP_METRICS[:-1]] + [grad_norm])
        means = (sums / max(1, cfg.epochs * n_minibatches - skipped)).tolist()
        metrics = {name: value for name, value in zip(STEP_METRIC_NAMES, means)}
        metrics["opt/lr"] = lr
        if skipped:
            metrics["guard/skipped_updates"] = float(skipped)
        metrics["ppo/clip_epsilon"] = float(self.loss.clip_epsilon)
        metrics["ppo/explained_variance"] = explained_variance(flat["state_value"], flat["value_target"])
        return metrics

    def lean_advantage(self, batch: TensorDict) -> None:
        """What ``self.advantage`` (TorchRL's GAE module) writes, computed on plain tensors.

        Same estimator as the module uses (TorchRL's ``generalized_advantage_estimate``), same keys. Why: the module
        runs the critic through vmap and TensorDict plumbing, ~24 ms a batch on a 256-transition
        CartPole batch (its first call also imported pandas when installed: 0.7 s) against ~1 ms
        here: 40% of a 4-second CartPole run went there. A test checks both write the same values.
        """
        cfg = self.config.ppo
        observation, next_observation = batch.get("observation"), batch.get(("next", "observation"))
        values = self.critic_net(torch.cat((observation, next_observation)))
        value, next_value = values.chunk(2)
        advantage, value_target = generalized_advantage_estimate(
            cfg.gamma,
            cfg.gae_lambda,
            value,
            next_value,
            batch.get(("next", "reward")),
            batch.get(("next", "done")),
            batch.get(("next", "terminated")),
            time_dim=-2,
        )
        batch.set("advantage", advantage)
        batch.set("value_target", value_target)
        batch.set("state_value", value)
        batch.set(("next", "state_value"), next_value)

    def lean_loss(self, minibatch) -> dict[str, torch.Tensor]:
        """The same clipped objective, value and entropy terms as ``self.loss`` (ClipPPOLoss) in plain torch.

        Why it exists: one PPO update (batch 256, 64-64 MLPs, one core) took 3.3 ms through
        ClipPPOLoss, 2.5 ms of it in its forward (TensorDict plumbing, ESS and ratio statistics,
        functional parameter handling), against ~1.2 ms for this version, and updates are most of a
        CartPole run's time (benchmarks/update_cost.py). ``tests/unit/test_ppo.py`` checks that both give
        the same losses and gradients on the same minibatch; ``ppo.loss_impl=torchrl`` selects ClipPPOLoss.
        """
        cfg = self.config.ppo
        observation = minibatch["observation"]
        advantage = minibatch["advantage"].squeeze(-1)
        if cfg.normalize_advantage:
            advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-4)
        dist = self._distribution(observation)
        log_prob = dist.log_prob(minibatch["action"])
        log_ratio = log_prob - minibatch[self.log_prob_key]
        epsilon = float(self.loss.clip_epsilon)
        clipped_log_ratio = log_ratio.clamp(math.log1p(-epsilon), math.log1p(epsilon))
        gain = torch.minimum(log_ratio.exp() * advantage, clipped_log_ratio.exp() * advantage)
        value = self.critic_net(observation)
        target = minibatch["value_target"]
        if cfg.value_loss == "l2":
            critic = nn.functional.mse_loss(value, target)
        else:
            critic = nn.functional.smooth_l1_loss(value, target)
        if self.kind == "discrete":
            entropy = dist.entropy()
        else:  # no closed form for a squashed Gaussian: one-sample estimate, as ClipPPOLoss does
            entropy = -dist.log_prob(dist.rsample())
        return {
            "loss_objective": -gain.mean(),
            "loss_critic": cfg.value_coef * critic,
            "loss_entropy": -cfg.entropy_coef * entropy.mean(),
            "entropy": entropy.detach().mean(),
            "kl_approx": (-log_ratio).detach().mean(),
            "clip_fraction": (clipped_log_ratio != log_ratio).float().mean(),
        }

    # -- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "actor": self.actor_net.state_dict(),
            "critic": self.critic_net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "guard": self.guard.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor_net.load_state_dict(state["actor"])
        self.critic_net.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        self.guard.load_state_dict(state["guard"])


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target): 1 is perfect, 0 is a constant guess, < 0 is worse."""
    variance = target.var()
    if variance <= 1e-12:
        return float("nan")
    return float(1.0 - (target - predicted).var() / variance)
