"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor and target updates.

Replay, random warm-up and the learning phase are SAC's (:class:`rlpilot.algos.sac.OffPolicyContinuous`).
One step (:meth:`TD3.losses`, plain torch; the same numbers and gradients as TorchRL's ``TD3Loss``,
tested in ``tests/unit/test_sac_td3.py``):

- critics, every step: ``sum over the twin Qs of mean (Q_i(s, a) - y)^2`` with
  ``y = r + gamma (1 - terminated) min_i Q'_i(s', clip(mu'(s') + clip(eps, -c, c)))``, ``eps`` Gaussian
  of std ``target_noise`` (noise and clip in units of the Box's half-width, clipped into the Box);
- actor, every ``policy_delay``-th step: ``-mean Q_1(s, mu(s))`` with the critics held fixed (only ``Q_1`` is
  evaluated: the second critic's forward would not reach the loss);
- targets: the target actor and critics move by Polyak averaging (``tau``) after every step, as SBX's TD3 does
  (``td3.delay_targets=true``: only after the actor's steps, as the paper and SB3).

Under ``train.compile`` the update is two compiled programs, the critics' alone and the critics' with the actor's
(every ``policy_delay``-th update): one graph each, no recompilation on the update count; under ``auto`` both compile
once ``AUTO_EAGER_UPDATES`` updates have run in all.

The actor is deterministic: an MLP whose output is squashed by tanh and scaled into the Box
(:class:`rlpilot.models.GreedyActor`, also the greedy and exported policy). Collecting adds Gaussian
noise of std ``exploration_noise`` half-widths and clips into the Box.
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.envs import EnvBase

from rlpilot.config.schema import Config
from rlpilot.control import compiled
from rlpilot.control.algos.offpolicy import OffPolicyContinuous, Polyak, TwinQ, frozen
from rlpilot.control.models import GreedyActor, acting_forward, actor_out_gain, mlp


class TD3(OffPolicyContinuous):
    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        super().__init__(config, env, device, config.td3)
        self.actor = GreedyActor(
            mlp(self.obs_dim, self.action_dim, config.model, out_gain=actor_out_gain(config)), (self.low, self.high)
        )
        self.actor = self.actor.to(device)
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.actor_forward = acting_forward(self.actor.net, config.train.cuda_graphs)
        self.noise_scale = self.cfg.exploration_noise * self.half_width
        self.critic = TwinQ(self.obs_dim, self.action_dim, config.model).to(device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.polyak = Polyak([(self.target_critic, self.critic), (self.target_actor, self.actor)], self.cfg.tau)
        self.greedy_module = self.actor
        groups = [self.actor.parameters(), self.critic.parameters()]
        self.optimizer = torch.optim.Adam([{"params": list(group)} for group in groups], lr=config.td3.lr, fused=True)
        self.parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        # two programs: a critic-only update leaves the actor's gradient (and so its Adam moments) untouched; the
        # eager updates before compiling are shared in the share each is called in (``Program.every``)
        targets = {"target_actor": self.target_actor, "target_critic": self.target_critic}
        critic = compiled.Program(
            "td3_critic", {"critic": self.critic}, self.critic_loss, {"actor": self.actor, **targets}
        )
        learned = {"actor": self.actor, "critic": self.critic}
        every = config.td3.policy_delay  # the actor's program: one update in ``policy_delay``
        both = compiled.Program("td3_critic_actor", learned, self.both_losses, targets, every=every)
        self.critic_gradients, self.both_gradients = compiled.build_updates(
            config, device, [critic, both], optimizer=self.optimizer, planned_updates=self.planned_updates
        )
        self.compiled_parts = (self.critic_gradients, self.both_gradients)

    def clip_to_box(self, action: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(action, self.high), self.low)

    def explore(self, observation: torch.Tensor) -> torch.Tensor:
        action = self.actor.finish(self.actor_forward(observation))  # self.actor's action (acting_forward's network)
        noise = torch.randn_like(action) * self.noise_scale
        return self.clip_to_box(action + noise)

    def actor_step(self) -> bool:
        """Whether the current update (``self.updates``, counted from 1) also steps actor and targets."""
        return self.updates % self.cfg.policy_delay == 0

    @property
    def gradients(self) -> compiled.Gradients:
        """This update's: the critics', or (every ``policy_delay``-th) the critics' and the actor's."""
        return self.both_gradients if self.actor_step() else self.critic_gradients

    def losses(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.both_losses(sample) if self.actor_step() else self.critic_loss(sample)

    def both_losses(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        critic_loss, stats = self.critic_loss(sample)
        actor_loss = self.actor_loss(sample["observation"])
        stats["loss/actor"] = actor_loss.detach()
        return critic_loss + actor_loss, stats

    def critic_loss(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.cfg
        observation, action = sample["observation"], sample["action"]
        with torch.no_grad():
            noise = (torch.randn_like(action) * cfg.target_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
            next_observation = sample["next", "observation"]
            next_action = self.clip_to_box(self.target_actor(next_observation) + noise * self.half_width)
            next_q = self.target_critic(next_observation, next_action).min(0).values
            target = self.bootstrap_target(sample, next_q)
        q = self.critic(observation, action)
        critic_loss = (q - target).pow(2).sum(0).mean()
        return critic_loss, {"loss/critic": critic_loss.detach(), "q/mean": q.detach().mean()}

    def actor_loss(self, observation: torch.Tensor) -> torch.Tensor:
        """``-mean Q_1(s, mu(s))`` (or the twins' minimum, ``td3.actor_q=min``), the critics' weights held fixed
        (the gradient reaches the actor only)."""
        action = self.actor(observation)
        if self.cfg.actor_q == "min":
            q = torch.func.functional_call(self.critic, frozen(self.critic), (observation, action))
            return -q.min(0).values.mean()
        first = self.critic.nets[0]
        q1 = torch.func.functional_call(first, frozen(first), (torch.cat([observation, action], -1),))
        return -q1.mean()

    def after_step(self) -> None:
        if self.actor_step() or not self.cfg.delay_targets:  # SBX's TD3: targets follow every critic update
            self.polyak()

    def networks(self) -> dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "target_actor": self.target_actor,
            "critic": self.critic,
            "target_critic": self.target_critic,
        }
