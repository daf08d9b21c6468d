"""SAC (Haarnoja et al. 2018, the version without a value network) for bounded continuous actions.

Per collected batch (``learn``): write its transitions to the uniform replay (:class:`offpolicy.Replay`, the
computation of TorchRL's ``TensorDictReplayBuffer`` on plain tensors) and, once ``learning_starts`` frames are in, run
``frames x updates_per_frame`` gradient steps on minibatches drawn from it. Before that, ``act``
draws actions uniformly from the env's Box.

One step (:meth:`SAC.losses`, plain torch; the same numbers and gradients as TorchRL's ``SACLoss``,
tested in ``tests/unit/test_sac_td3.py``), all three losses from the same pre-step parameters:

- critics: ``sum over the twin Qs of mean (Q_i(s, a) - y)^2`` with
  ``y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``, ``a' ~ pi(s')``
  from the current actor and ``Q'`` the Polyak-averaged target critics (truncated episodes bootstrap);
- actor: ``mean(alpha log pi(a~|s) - min_i Q_i(s, a~))`` with ``a~`` reparameterised and the critics
  held fixed;
- temperature: ``mean(-log_alpha (log pi(a~|s) + target_entropy))``, target entropy -dim(A) by default.

The policy is a Gaussian with state-dependent (clamped) log std, squashed by tanh and scaled into
the Box (TorchRL's ``TanhNormal(low, high)``), so ``log pi`` is the density of the action the env
receives. One Adam over three parameter groups steps once per update on the sum of the three
losses (each loss reaches only its own parameters), through :class:`rlpilot.guard.Guard`.

The parts TD3 shares (Box handling, twin critics, replay, the learning phase, checkpoints) are in
``offpolicy.py``.
"""

from __future__ import annotations

import copy
import math

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.envs import EnvBase

from rlpilot.config.schema import Config
from rlpilot.config.sections import ModelConfig
from rlpilot.control import compiled
from rlpilot.control.algos.offpolicy import OffPolicyContinuous, Polyak, TwinQ, frozen
from rlpilot.control.models import GreedyActor, acting_forward, actor_out_gain, mlp

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # SB3's clamp: std from ~2e-9 (near-deterministic) to ~7.4


class SquashedGaussianActor(nn.Module):
    """``observation -> (loc, scale)`` of the Gaussian before tanh; log std is state-dependent, clamped
    to ``[LOG_STD_MIN, LOG_STD_MAX]``. :class:`rlpilot.models.GreedyActor` reads ``loc`` as the mode."""

    def __init__(self, obs_dim: int, action_dim: int, model: ModelConfig, out_gain: float = 0.01):
        super().__init__()
        self.net = mlp(obs_dim, 2 * action_dim, model, out_gain=out_gain)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc, log_std = self.net(observation).chunk(2, -1)
        return loc, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()


class Temperature(nn.Module):
    """SAC's entropy temperature, learned as ``log_alpha`` (so alpha stays positive)."""

    def __init__(self, alpha_init: float):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha_init)))


class SAC(OffPolicyContinuous):
    def __init__(self, config: Config, env: EnvBase, device: torch.device):
        super().__init__(config, env, device, config.sac)
        cfg = config.sac
        self.actor = SquashedGaussianActor(
            self.obs_dim, self.action_dim, config.model, out_gain=actor_out_gain(config)
        ).to(device)
        self.actor_forward = acting_forward(self.actor.net, config.train.cuda_graphs)
        self.middle = (self.high + self.low) / 2  # of the Box, for squash
        self.critic = TwinQ(self.obs_dim, self.action_dim, config.model).to(device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.polyak = Polyak([(self.target_critic, self.critic)], self.cfg.tau)
        self.temperature = Temperature(cfg.alpha_init).to(device)
        self.target_entropy = target_entropy(cfg.target_entropy, self.action_dim)
        self.greedy_module = GreedyActor(self.actor, (self.low, self.high))
        groups = [self.actor.parameters(), self.critic.parameters(), self.temperature.parameters()]
        self.optimizer = torch.optim.Adam([{"params": list(group)} for group in groups], lr=cfg.lr, fused=True)
        self.parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        learned = {"actor": self.actor, "critic": self.critic, "temperature": self.temperature}
        update = compiled.Program("sac_update", learned, self.losses, {"target_critic": self.target_critic})
        self.gradients = compiled.build_update(
            config, device, update, optimizer=self.optimizer, planned_updates=self.planned_updates
        )
        self.compiled_parts = (self.gradients,)

    def sample_action(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action in the Box and its log density (TorchRL's ``TanhNormal(low, high)``
        ``rsample_and_log_prob``: the Normal's density at the pre-tanh value, less the log Jacobians
        of tanh and of the affine map onto the Box)."""
        loc, scale = self.actor(observation)
        pre_tanh = loc + scale * torch.randn_like(loc)
        normal_log_prob = -((pre_tanh - loc) ** 2) / (2 * scale**2) - scale.log() - 0.5 * math.log(2 * math.pi)
        tanh_log_jacobian = 2.0 * (math.log(2.0) - pre_tanh - nn.functional.softplus(-2.0 * pre_tanh))
        log_prob = (normal_log_prob - tanh_log_jacobian - self.half_width.log()).sum(-1)
        return self.squash(pre_tanh), log_prob

    def squash(self, pre_tanh: torch.Tensor) -> torch.Tensor:
        return self.middle + self.half_width * torch.tanh(pre_tanh)

    def explore(self, observation: torch.Tensor) -> torch.Tensor:
        """A sample of the policy, without its log density (not needed to collect); the actor's network run by
        :func:`acting_forward` (the same operations as ``self.actor``)."""
        loc, log_std = self.actor_forward(observation).chunk(2, -1)
        scale = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()
        return self.squash(loc + scale * torch.randn_like(loc))

    @property
    def alpha(self) -> torch.Tensor:
        return self.temperature.log_alpha.detach().exp()

    def losses(self, sample: TensorDict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The three SAC losses on one minibatch (draws the next actions first, then the actor's)."""
        observation, action = sample["observation"], sample["action"]
        alpha = self.alpha
        with torch.no_grad():
            next_observation = sample["next", "observation"]
            next_action, next_log_prob = self.sample_action(next_observation)
            next_q = self.target_critic(next_observation, next_action)
            target = self.bootstrap_target(sample, (next_q - alpha * next_log_prob).min(0).values)
        q = self.critic(observation, action)
        critic_loss = (q - target).pow(2).sum(0).mean()
        new_action, log_prob = self.sample_action(observation)
        new_q = torch.func.functional_call(self.critic, frozen(self.critic), (observation, new_action))
        actor_loss = (alpha * log_prob - new_q.min(0).values).mean()
        log_prob = log_prob.detach()
        alpha_loss = (-self.temperature.log_alpha * (log_prob + self.target_entropy)).mean()
        stats = {
            "loss/critic": critic_loss.detach(),
            "loss/actor": actor_loss.detach(),
            "loss/alpha": alpha_loss.detach(),
            "sac/entropy": -log_prob.mean(),
            "q/mean": q.detach().mean(),
        }
        return critic_loss + actor_loss + alpha_loss, stats

    def after_step(self) -> None:
        self.polyak()

    def phase_metrics(self) -> dict[str, float]:
        return {"sac/alpha": float(self.alpha), "sac/target_entropy": self.target_entropy}

    def networks(self) -> dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "critic": self.critic,
            "target_critic": self.target_critic,
            "temperature": self.temperature,
        }


def target_entropy(setting: str | float, action_dim: int) -> float:
    """``auto``: -dim(A), the number of action dimensions of one env (never of the batch of envs)."""
    return -float(action_dim) if setting == "auto" else float(setting)
