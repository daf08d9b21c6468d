"""The per-frame paths made cheaper for the RL Zoo's one env (issue 38): each gives what the path it replaced gave."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from torch import nn

from rlpilot.config import load_config
from rlpilot.config.schema import ModelConfig
from rlpilot.control.algos import build
from rlpilot.control.collect import EpisodeTracker, HostEpisodeTracker, nested_tensordict
from rlpilot.control.models import acting_forward, mlp
from rlpilot.envs import make_env


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_acting_forward_is_the_mlps_forward_and_follows_loaded_weights(activation):
    torch.manual_seed(0)
    net = mlp(5, 3, ModelConfig(hidden_sizes=[16, 8], activation=activation))
    forward = acting_forward(net)
    assert forward is not net
    x = torch.randn(4, 5)
    assert torch.equal(forward(x), net(x))
    other = mlp(5, 3, ModelConfig(hidden_sizes=[16, 8], activation=activation))
    net.load_state_dict(other.state_dict())
    assert torch.equal(forward(x), other(x))
    assert not forward(x).requires_grad  # on a CPU: no autograd, whatever the grad mode


def test_acting_forward_leaves_other_networks_to_their_own_forward():
    net = nn.Sequential(nn.Linear(3, 4), nn.ELU(), nn.Linear(4, 2))
    assert acting_forward(net) is net
    conv = nn.Conv1d(1, 1, 1)
    assert acting_forward(conv) is conv


@settings(max_examples=40, deadline=None)
@given(
    envs=st.integers(1, 4),
    steps=st.lists(st.tuples(st.floats(-10, 10, width=32), st.integers(0, 15)), min_size=1, max_size=40),
)
def test_host_episode_tracker_reports_what_the_tensor_tracker_does(envs, steps):
    host, tensor = HostEpisodeTracker(envs), EpisodeTracker(envs)
    drained_host, drained_tensor = ([], []), ([], [])
    for index, (reward, done_bits) in enumerate(steps):
        rewards = np.full(envs, reward, dtype=np.float32) * (1 + np.arange(envs, dtype=np.float32))
        done = np.array([(done_bits >> env) & 1 == 1 for env in range(envs)])
        host.update(rewards, done)
        tensor.update(torch.from_numpy(rewards), torch.from_numpy(done))
        if index % 3 == 2:  # drained between batches, as the loop does
            for out, tracker in ((drained_host, host), (drained_tensor, tensor)):
                returns, lengths = tracker.drain()
                out[0].extend(returns)
                out[1].extend(lengths)
    for out, tracker in ((drained_host, host), (drained_tensor, tensor)):
        returns, lengths = tracker.drain()
        out[0].extend(returns)
        out[1].extend(lengths)
    assert drained_host == drained_tensor
    assert host.episodes == tensor.episodes == len(drained_host[0])


def test_nested_tensordict_is_what_the_constructor_builds():
    leaves = {
        ("observation",): torch.randn(2, 3, 4),
        ("action",): torch.randint(0, 2, (2, 3)),
        ("next", "reward"): torch.randn(2, 3, 1),
        ("next", "done"): torch.zeros(2, 3, 1, dtype=torch.bool),
    }
    built = nested_tensordict(leaves, [2, 3], torch.device("cpu"))
    expected = TensorDict(
        {
            "observation": leaves[("observation",)],
            "action": leaves[("action",)],
            "next": {"reward": leaves[("next", "reward")], "done": leaves[("next", "done")]},
        },
        batch_size=[2, 3],
        device="cpu",
    )
    assert built.batch_size == expected.batch_size and built.device == expected.device
    assert built["next"].batch_size == expected["next"].batch_size
    assert set(built.keys(True, True)) == set(expected.keys(True, True))
    assert (built == expected).all()


def test_dqn_acts_epsilon_greedy_from_one_draw_per_env_on_both_paths():
    """One uniform draw per env: it explores where ``u < epsilon``, taking ``floor(u * n / epsilon)``; else the greedy
    action. One observation on a CPU takes the host path, more take the batched one: the same draws, the same actions.
    At epsilon 1 the Q-network is not run."""
    config = load_config("dqn-cartpole", overrides=["env.num_envs=3"])
    env = make_env(config.env, seed=0)
    agent = build(config, env, torch.device("cpu"))
    assert getattr(agent.q_forward, "grad_free", False)
    observations = torch.randn(64, 4)
    with torch.no_grad():
        greedy = agent.q_net(observations).argmax(-1)
    explored_actions = set()
    for frames, epsilon in ((0, 1.0), (10**6, 0.5), (10**6, 0.1)):
        agent.frames, agent.epsilon = frames, epsilon
        eps = 1.0 if frames < config.dqn.learning_starts else epsilon
        torch.manual_seed(1)
        u = torch.rand(64).double()
        expected = torch.where(u < eps, (u * (2 / eps)).long(), greedy)
        torch.manual_seed(1)
        batched, _ = agent.act(observations)
        torch.manual_seed(1)
        one_by_one = torch.cat([agent.act(observations[i : i + 1])[0] for i in range(64)])
        assert torch.equal(batched, expected) and torch.equal(one_by_one, expected)
        assert not one_by_one.requires_grad
        explored_actions.update((u[u < eps] * (2 / eps)).long().tolist())
    assert explored_actions == {0, 1}
    assert torch.equal(agent.greedy_action(observations[:5]), agent.greedy_module(observations[:5]))
    agent.q_forward = lambda x: (_ for _ in ()).throw(AssertionError("the Q-network ran at epsilon 1"))
    agent.frames = 0
    agent.act(observations)
    agent.act(observations[:1])
    env.close()
