"""DQN: double-DQN targets by hand, equality with TorchRL's DQNLoss (built here over the algorithm's own
networks: values and gradients), prioritised replay, n-step returns, exploration."""

import pytest
import torch
from tensordict import TensorDict

from rlpilot.common.errors import UserError
from rlpilot.config import load_config
from rlpilot.control.algos.dqn import DQN, dqn_loss, epsilon, n_step_transitions
from rlpilot.envs import make_env
from torchrl_references import dqn_reference


def make_dqn(*overrides):
    config = load_config("dqn-cartpole", overrides=["model.hidden_sizes=[]", *overrides])
    env = make_env(config.env, num_envs=2, seed=0)
    return DQN(config, env, torch.device("cpu"))


def set_linear(net, weight, bias):
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor(weight))
        net[0].bias.copy_(torch.tensor(bias))


def hand_batch():
    """Three transitions: ordinary, truncated (time limit: bootstrap), terminated (no bootstrap)."""
    obs = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])
    next_obs = torch.tensor([[0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    terminated = torch.tensor([[False], [False], [True]])
    truncated = torch.tensor([[False], [True], [False]])
    return TensorDict(
        {
            "observation": obs,
            "action": torch.tensor([0, 1, 0]),
            "discount": torch.full((3, 1), 0.5),
            "next": {
                "observation": next_obs,
                "reward": torch.tensor([[1.0], [2.0], [3.0]]),
                "terminated": terminated,
                "done": terminated | truncated,
            },
        },
        batch_size=[3],
    )


@pytest.mark.parametrize("impl", ["ours", "torchrl"])
def test_double_dqn_targets_by_hand(impl):
    algo = make_dqn("dqn.gamma=0.5", "dqn.loss=l2", "dqn.n_step=1")
    # online Q(s) = W s: row a is the value of action a per one-hot state
    set_linear(algo.q_net, [[1.0, 2.0, 3.0, 0.0], [0.0, 5.0, 1.0, 4.0]], [0.0, 0.0])
    # target Q: different numbers, so "select with online, value with target" is visible
    set_linear(algo.target_net, [[10.0, 20.0, 30.0, 40.0], [-1.0, -2.0, -3.0, -4.0]], [0.0, 0.0])
    # transition 0: s=e0, a=0, Q=1. next e1: online argmax = action 1 (5 > 2), target value -2.
    #   target = 1 + 0.5 * (-2) = 0
    # transition 1: s=e1, a=1, Q=5. truncated, next e2: online argmax = action 0 (3 > 1), target 30.
    #   target = 2 + 0.5 * 30 = 17 (bootstrapped: truncation is not termination)
    # transition 2: s=e2, a=0, Q=3. terminated: target = 3
    q_taken = torch.tensor([1.0, 5.0, 3.0])
    targets = torch.tensor([0.0, 17.0, 3.0])
    expected = ((q_taken - targets) ** 2).mean()
    if impl == "ours":
        out = dqn_loss(algo.q_net, algo.target_net, hand_batch(), algo.config.dqn)
        torch.testing.assert_close(out["td_error"], (q_taken - targets).abs())
    else:
        out = dqn_reference(algo)(hand_batch())
    torch.testing.assert_close(out["loss"], expected)


@pytest.mark.parametrize("loss", ["huber", "l2"])
@pytest.mark.parametrize("double", [True, False])
def test_loss_equals_dqn_loss_on_collected_data(loss, double):
    algo = make_dqn("model.hidden_sizes=[32, 32]", f"dqn.loss={loss}", f"dqn.double_dqn={str(double).lower()}")
    from rlpilot.control.collect import BatchCollector

    env = make_env(algo.config.env, num_envs=4, seed=1)
    batch = n_step_transitions(BatchCollector(env, algo.act, steps=64, seed=1).collect(), 1, algo.config.dqn.gamma)
    with torch.no_grad():  # make online and target differ
        for p in algo.q_net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    flat = batch.reshape(-1)
    reference = dqn_reference(algo)
    ours = dqn_loss(algo.q_net, algo.target_net, flat.clone(), algo.config.dqn)
    ref = reference(flat.clone())
    torch.testing.assert_close(ours["loss"], ref["loss"])
    our_grads = torch.autograd.grad(ours["loss"], algo.parameters)
    ref_grads = torch.autograd.grad(ref["loss"], algo.parameters)
    for mine, theirs in zip(our_grads, ref_grads):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_prioritised_sampling_follows_alpha():
    alpha, eps = 0.6, 1e-6
    algo = make_dqn("dqn.prioritized=true", f"dqn.alpha={alpha}", f"dqn.priority_eps={eps}", "dqn.buffer_size=16")
    transitions = hand_batch()[torch.tensor([0, 1, 2, 0])].set("index", torch.arange(4))
    algo.buffer.extend(transitions.exclude("index"))
    td_error = torch.tensor([1.0, 2.0, 4.0, 8.0])
    algo.buffer.update_tensordict_priority(transitions.set("td_error", td_error))
    counts = torch.zeros(4)
    for _ in range(100):
        counts += torch.bincount(algo.buffer.sample(400)["index"], minlength=4)
    observed = counts / counts.sum()
    predicted = (td_error + eps) ** alpha / ((td_error + eps) ** alpha).sum()
    # 40,000 draws: the standard error of each share is below 0.0025; 0.01 is 4 of them
    torch.testing.assert_close(observed, predicted, atol=0.01, rtol=0)
    assert observed[3] > observed[2] > observed[1] > observed[0]


def test_priorities_are_written_back_during_learning():
    """One update: the sampled transitions' leaves in the sum tree become (|td| + eps)^alpha, with |td| from
    the network as it was when the loss was computed; the others keep the initial max priority."""
    import copy

    algo = make_dqn(
        "dqn.prioritized=true",
        "dqn.learning_starts=0",
        "dqn.buffer_size=512",
        "train.total_frames=1000",
        "dqn.steps_per_env=64",
        "env.num_envs=2",
        "dqn.updates_per_frame=0.0078125",  # 2 envs x 64 steps = 128 frames a batch: exactly one update
        "dqn.batch_size=32",
    )
    from rlpilot.control.collect import BatchCollector

    env = make_env(algo.config.env, num_envs=2, seed=0)
    batch = BatchCollector(env, algo.act, steps=64, seed=0).collect()
    before = copy.deepcopy(algo.q_net)
    metrics = algo.learn(batch, frames=128)
    assert algo.updates == 1 and 0.4 < metrics["dqn/beta"] < 1.0
    cfg = algo.config.dqn
    td = dqn_loss(before, algo.target_net, algo.buffer[:], cfg)["td_error"]
    leaves = torch.tensor([algo.sampler._sum_tree[i] for i in range(len(algo.buffer))])
    initial = leaves.mode().values  # transitions never sampled keep the priority they were stored with
    written = ~torch.isclose(leaves, initial)
    assert 10 < written.sum() <= 32  # the distinct transitions of one 32-sample minibatch
    torch.testing.assert_close(leaves[written], (td[written] + cfg.priority_eps) ** cfg.alpha, rtol=1e-5, atol=1e-6)


def test_n_step_returns_stop_at_episode_ends():
    gamma = 0.5
    reward = torch.tensor([[1.0, 2.0, 4.0, 8.0]]).unsqueeze(-1)
    done = torch.tensor([[False, True, False, False]]).unsqueeze(-1)
    obs = torch.arange(4.0).view(1, 4, 1)
    batch = TensorDict(
        {
            "observation": obs,
            "action": torch.zeros(1, 4, dtype=torch.long),
            "next": {"observation": obs + 10, "reward": reward, "terminated": done, "done": done},
        },
        batch_size=[1, 4],
    )
    out = n_step_transitions(batch, 3, gamma)
    # t0: 1 + 0.5*2 (episode ends at t1), bootstraps from next obs of t1 with 0.5^2
    # t1: 2 (ends), t2: 4 + 0.5*8 (batch ends), t3: 8
    torch.testing.assert_close(out["next", "reward"].view(-1), torch.tensor([2.0, 2.0, 8.0, 8.0]))
    torch.testing.assert_close(out["discount"].view(-1), torch.tensor([0.25, 0.5, 0.25, 0.5]))
    torch.testing.assert_close(out["next", "observation"].view(-1), torch.tensor([11.0, 11.0, 13.0, 13.0]))
    assert out["next", "terminated"].view(-1).tolist() == [True, True, False, False]


def test_epsilon_anneals_with_frames():
    algo = make_dqn("train.total_frames=10000", "dqn.exploration_fraction=0.5", "dqn.eps_end=0.1")
    cfg, horizon = algo.config.dqn, algo.config.dqn.exploration_frames(algo.config.train.total_frames)
    assert horizon == 5000
    assert epsilon(cfg, 0, horizon) == pytest.approx(1.0)
    assert epsilon(cfg, 2500, horizon) == pytest.approx(1.0 - 0.9 * 2500 / 5000)
    assert epsilon(cfg, 10_000, horizon) == pytest.approx(0.1)


def test_dqn_on_continuous_actions_is_one_clear_error():
    config = load_config("dqn-cartpole", overrides=["env.id=Pendulum-v1"])
    env = make_env(config.env, num_envs=1)
    with pytest.raises(UserError, match="DQN needs a discrete action space.*ppo-pendulum"):
        DQN(config, env, torch.device("cpu"))


def test_prioritised_loss_uses_the_importance_weights():
    algo = make_dqn("dqn.loss=l2", "dqn.n_step=1")
    batch = hand_batch()
    plain = dqn_loss(algo.q_net, algo.target_net, batch.clone(), algo.config.dqn)
    weights = torch.tensor([0.0, 1.0, 0.5])
    weighted = dqn_loss(algo.q_net, algo.target_net, batch.clone().set("priority_weight", weights), algo.config.dqn)
    per_sample = plain["td_error"] ** 2
    torch.testing.assert_close(weighted["loss"], (weights * per_sample).mean())
    torch.testing.assert_close(plain["loss"], per_sample.mean())
