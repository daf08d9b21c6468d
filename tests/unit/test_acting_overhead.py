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


def test_dqn_acts_as_before_with_and_without_exploring_everywhere():
    """The epsilon-greedy draws come first; at epsilon 1 the Q-network is skipped. Same draws, same actions as the
    greedy-first order: the network draws nothing."""
    config = load_config("dqn-cartpole", overrides=["env.num_envs=3"])
    env = make_env(config.env, seed=0)
    agent = build(config, env, torch.device("cpu"))
    observation = torch.randn(3, 4)
    for frames, epsilon in ((0, 1.0), (10**6, 0.5)):
        agent.frames, agent.epsilon = frames, epsilon
        torch.manual_seed(1)
        action, _ = agent.act(observation)
        torch.manual_seed(1)
        with torch.no_grad():
            greedy = agent.q_net(observation).argmax(-1)
        eps = 1.0 if frames < config.dqn.learning_starts else epsilon
        explore = torch.rand(greedy.shape) < eps
        expected = torch.where(explore, torch.randint(0, 2, greedy.shape), greedy)
        assert torch.equal(action, expected)
    assert torch.equal(agent.greedy_action(observation), agent.greedy_module(observation))
    env.close()
