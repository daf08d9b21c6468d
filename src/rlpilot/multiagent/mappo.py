"""MAPPO and IPPO: PPO on a group of agents, the agent dimension kept as a tensor dimension.

A collected batch is ``[num_envs, steps]`` with one more dimension for the agents: observations
``[E, T, n_agents, obs]``, actions and log-probabilities ``[E, T, n_agents]``, rewards and done flags
``[E, T, n_agents, 1]`` (an env's done is repeated for each of its agents, so the value estimator sees
one trajectory per agent). Nothing is flattened into "one big action": each agent samples its own
categorical action from its own observation (what the tutorial this project grew from calls the
exploding action spec is the joint action space, which no one needs to enumerate).

- **IPPO**: each agent's critic sees that agent's observation only.
- **MAPPO**: the critic is centralised: it sees every agent's observation (concatenated), and gives
  a value per agent (agent id appended when parameters are shared), as in Yu et al. 2022.
- ``marl.share_parameters``: one actor and one critic for the group (an agent's one-hot id appended
  to its input with ``marl.agent_id``), or one of each per agent.

The update is the control PPO's (:class:`rlpilot.control.algos.ppo.PPO`): GAE per agent over the
time dimension, then clipped-objective minibatches drawn over env steps (each minibatch holds every
agent of its env steps, which the centralised critic needs). Same settings (``ppo.*``), same metrics,
plus per-agent entropies (``ppo/entropy_agent<i>``) for doctor.
"""

from __future__ import annotations

import torch
from torch import nn

from rlpilot.config.sections import ModelConfig
from rlpilot.control.algos.ppo import PPO
from rlpilot.control.models import mlp


class AgentMLP(nn.Module):
    """``[..., n_agents, obs] -> [..., n_agents, out]``: an MLP per agent, or one shared by all.

    ``centralised``: each agent's input is every agent's observation (concatenated, the same for all
    agents of an env step). ``agent_id`` (shared weights only): a one-hot agent index is appended.
    No vmap and no TensorDict: plain layers, so the module exports to ONNX / torch.export / TorchScript
    with the agents as an input dimension.
    """

    def __init__(
        self,
        n_agents: int,
        obs_size: int,
        out_features: int,
        cfg: ModelConfig,
        *,
        share: bool,
        agent_id: bool,
        centralised: bool = False,
        out_gain: float = 1.0,
    ):
        super().__init__()
        self.n_agents = n_agents
        self.centralised = centralised
        self.agent_id = share and agent_id
        in_features = obs_size * (n_agents if centralised else 1) + (n_agents if self.agent_id else 0)
        count = 1 if share else n_agents
        self.nets = nn.ModuleList(mlp(in_features, out_features, cfg, out_gain=out_gain) for _ in range(count))
        self.register_buffer("ids", torch.eye(n_agents))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        x = observation
        if self.centralised:  # every agent sees the whole group: [..., n, obs] -> [..., n, n * obs]
            joint = observation.flatten(-2)
            x = joint.unsqueeze(-2).expand(*joint.shape[:-1], self.n_agents, joint.shape[-1])
        if self.agent_id:
            x = torch.cat((x, self.ids.expand(*x.shape[:-2], self.n_agents, self.n_agents)), -1)
        if len(self.nets) == 1:
            return self.nets[0](x)
        return torch.stack([net(x[..., i, :]) for i, net in enumerate(self.nets)], -2)


class MAPPO(PPO):
    """PPO over a group of agents with discrete actions (``mappo``: centralised critic; ``ippo``: per-agent)."""

    time_dim = 1  # batches are [E, T, n_agents, ...]: time is the second dimension, not the second to last

    def build_networks(self, env) -> None:
        """Per-agent (or shared) actor and critic over ``[..., n_agents, obs]``; the rest is PPO's construction."""
        config, marl, device = self.config, self.config.marl, self.device
        self.n_agents, obs_size, self.num_actions = env.n_agents, env.obs_dim, env.num_actions
        self.kind, self.one_hot, self.bounds = "discrete", False, None
        self.centralised = config.algo == "mappo"
        share = dict(share=marl.share_parameters, agent_id=marl.agent_id)
        self.actor_net = AgentMLP(self.n_agents, obs_size, self.num_actions, config.model, **share, out_gain=0.01).to(
            device
        )
        self.critic_net = AgentMLP(self.n_agents, obs_size, 1, config.model, **share, centralised=self.centralised).to(
            device
        )

    def learn(self, batch, frames: int) -> dict[str, float]:
        metrics = super().learn(batch, frames)
        with torch.no_grad():  # per-agent policy entropy on the batch: doctor's "one agent collapsed" rule
            log_probs = torch.log_softmax(self.actor_net(batch.get("observation")), -1)
            entropy = -(log_probs.exp() * log_probs).sum(-1).flatten(0, 1).mean(0)
        metrics.update({f"ppo/entropy_agent{i}": float(value) for i, value in enumerate(entropy)})
        return metrics
