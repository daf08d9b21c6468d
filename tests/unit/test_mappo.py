"""MAPPO/IPPO pieces: the per-agent networks, GAE over the time dimension of a group batch, the loss."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives.value.functional import generalized_advantage_estimate

from rlpilot.config import ModelConfig, load_config
from rlpilot.control.algos.ppo import gae
from rlpilot.multiagent.envs import make_vector
from rlpilot.multiagent.mappo import MAPPO, AgentMLP

N, OBS = 3, 18


def _mlp(**kwargs) -> AgentMLP:
    torch.manual_seed(0)
    return AgentMLP(N, OBS, 5, ModelConfig(hidden_sizes=[16, 16]), **kwargs)


def test_shared_mlp_is_one_network_over_the_agent_dimension():
    net = _mlp(share=True, agent_id=False)
    obs = torch.randn(7, N, OBS)
    assert net(obs).shape == (7, N, 5)
    assert torch.allclose(net(obs)[:, 1], net.nets[0](obs[:, 1]))


def test_agent_id_lets_a_shared_network_act_differently_on_the_same_observation():
    net = _mlp(share=True, agent_id=True)
    obs = torch.randn(1, 1, OBS).expand(4, N, OBS)  # every agent sees the same numbers
    out = net(obs)
    assert not torch.allclose(out[:, 0], out[:, 1])
    assert torch.allclose(out[:, 2], net.nets[0](torch.cat((obs[:, 2], torch.eye(N)[2].expand(4, N)), -1)))


def test_unshared_mlp_runs_each_agent_through_its_own_network():
    net = _mlp(share=False, agent_id=True)  # agent_id is ignored without sharing
    assert len(net.nets) == N
    obs = torch.randn(5, 2, N, OBS)  # any leading dims
    out = net(obs)
    for i in range(N):
        assert torch.allclose(out[..., i, :], net.nets[i](obs[..., i, :]))


@pytest.mark.parametrize("centralised", [True, False])
def test_only_a_centralised_critic_sees_the_other_agents(centralised):
    critic = AgentMLP(N, OBS, 1, ModelConfig(hidden_sizes=[16]), share=True, agent_id=True, centralised=centralised)
    obs = torch.randn(2, N, OBS, requires_grad=True)
    critic(obs)[:, 0].sum().backward()  # agent 0's value
    others = obs.grad[:, 1:].abs().sum()
    assert (others > 0) == centralised


def test_gae_over_time_of_a_group_batch_is_gae_per_agent():
    E, T = 4, 6
    torch.manual_seed(1)
    batch = TensorDict(
        {
            "observation": torch.randn(E, T, N, OBS),
            "next": {
                "observation": torch.randn(E, T, N, OBS),
                "reward": torch.randn(E, T, N, 1),
                "done": (torch.rand(E, T, 1, 1) < 0.2).expand(E, T, N, 1),
                "terminated": torch.zeros(E, T, N, 1, dtype=torch.bool),
            },
        },
        [E, T],
    )
    critic = _mlp(share=False, agent_id=False).nets[0]
    per_agent = lambda obs: critic(obs)[..., :1]  # noqa: E731 - a value per agent
    gae(batch, per_agent, 0.9, 0.8, time_dim=1)
    for i in range(N):
        value = per_agent(batch["observation"][:, :, i])
        next_value = per_agent(batch["next", "observation"][:, :, i])
        advantage, _ = generalized_advantage_estimate(
            0.9,
            0.8,
            value,
            next_value,
            batch["next", "reward"][:, :, i],
            batch["next", "done"][:, :, i],
            batch["next", "terminated"][:, :, i],
        )
        assert torch.allclose(batch["advantage"][:, :, i], advantage, atol=1e-6)


@pytest.mark.parametrize("algo", ["mappo", "ippo"])
def test_one_learning_phase_changes_the_policy_and_logs_each_agent(algo):
    config = load_config(
        algo=algo,
        env_id="mpe2.simple_spread_v3",
        overrides=["env.num_envs=4", "ppo.steps_per_env=25", "ppo.minibatch_size=50", "ppo.epochs=2"],
    )
    env = make_vector(config.env, 4, seed=0)
    agents = MAPPO(config, env, torch.device("cpu"))
    assert agents.centralised == (algo == "mappo")
    # built through PPO's own construction (MAPPO overrides build_networks only): the optimiser holds exactly
    # the group's actor and critic parameters, with PPO's settings
    assert "__init__" not in vars(MAPPO)
    optimised = agents.optimizer.param_groups[0]["params"]
    assert [id(p) for p in optimised] == [
        id(p) for p in (*agents.actor_net.parameters(), *agents.critic_net.parameters())
    ]
    assert agents.optimizer.param_groups[0]["lr"] == config.ppo.lr and agents.updates == 0
    from rlpilot.multiagent.trainable import AgentCollector

    batch = AgentCollector(env, agents.act, steps=25).collect()
    assert batch["observation"].shape == (4, 25, N, OBS)
    assert batch["action"].shape == batch["action_log_prob"].shape == (4, 25, N)
    assert batch["next", "done"].shape == (4, 25, N, 1)
    before = [p.detach().clone() for p in agents.actor_net.parameters()]
    metrics = agents.learn(batch, 100)
    assert any(not torch.equal(a, b) for a, b in zip(before, agents.actor_net.parameters()))
    assert {f"ppo/entropy_agent{i}" for i in range(N)} <= set(metrics)
    assert torch.isfinite(torch.tensor(list(metrics.values()))).all()
