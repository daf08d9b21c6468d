"""PPO: the one implementation (plain-torch GAE and clipped loss) equals TorchRL's GAE and ClipPPOLoss,
built here over the algorithm's own networks (values and gradients); GAE matches numbers worked out by hand."""

import pytest
import torch
from tensordict import TensorDict

from rlpilot.config import load_config
from rlpilot.control.algos.ppo import LOG_PROB_KEY, PPO, clipped_loss, gae, ppo_loss
from rlpilot.control.collect import BatchCollector
from rlpilot.envs import make_env
from torchrl_references import ppo_reference


def _algo_and_batch(preset, overrides=()):
    torch.manual_seed(0)
    config = load_config(
        preset,
        overrides=[
            "env.num_envs=4",
            "ppo.steps_per_env=16",
            "ppo.minibatch_size=64",
            "ppo.entropy_coef=0.01",
            *overrides,
        ],
    )
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    batch = BatchCollector(env, algo.act, steps=16, seed=0).collect()
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    # perturb the policy so ratios differ from 1 and clipping happens
    with torch.no_grad():
        for p in algo.actor_net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return algo, batch.reshape(-1)


@pytest.mark.parametrize("preset", ["ppo-cartpole", "ppo-pendulum"])
@pytest.mark.parametrize("normalize", [True, False])
def test_loss_matches_clip_ppo_loss(preset, normalize):
    algo, minibatch = _algo_and_batch(preset, [f"ppo.normalize_advantage={str(normalize).lower()}"])
    reference, _ = ppo_reference(algo, clip_epsilon=0.2)

    def run(fn, seed):
        torch.manual_seed(seed)  # same MC entropy sample for the squashed Gaussian
        out = fn(minibatch.clone())
        total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
        return out, torch.autograd.grad(total, algo.parameters, allow_unused=True)

    ours, our_grads = run(lambda mb: ppo_loss(algo, mb, algo.config.ppo, 0.2), 1)
    ref, ref_grads = run(reference, 1)
    assert float(ref["clip_fraction"]) > 0  # the comparison covers the clipped branch
    for key in ("loss_objective", "loss_critic", "loss_entropy", "entropy", "kl_approx", "clip_fraction"):
        torch.testing.assert_close(ours[key].float(), ref[key].float(), rtol=1e-4, atol=1e-5, msg=key)
    assert sum(g is not None for g in ref_grads) == len(algo.parameters)
    for mine, theirs in zip(our_grads, ref_grads):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_one_hot_actions_match_one_hot_categorical():
    algo, minibatch = _algo_and_batch("ppo-cartpole", ["env.action_encoding=one_hot"])
    assert algo.one_hot and minibatch["action"].shape[-1] == 2
    reference, _ = ppo_reference(algo, clip_epsilon=0.2)
    ours, ref = ppo_loss(algo, minibatch.clone(), algo.config.ppo, 0.2), reference(minibatch.clone())
    for key in ("loss_objective", "loss_entropy", "entropy", "kl_approx"):
        torch.testing.assert_close(ours[key].float(), ref[key].float(), rtol=1e-4, atol=1e-5, msg=key)


def test_gae_by_hand_terminated_vs_truncated():
    """One env, 3 steps, constant value 1: a truncation bootstraps, a termination does not."""
    config = load_config("ppo-cartpole", overrides=["ppo.gamma=0.5", "ppo.gae_lambda=0.5"])
    env = make_env(config.env, num_envs=1, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    with torch.no_grad():  # critic outputs exactly 1 everywhere
        last = algo.critic_net[-1]
        last.weight.zero_()
        last.bias.fill_(1.0)
    r = torch.tensor([1.0, 2.0, 3.0]).view(1, 3, 1)
    terminated = torch.tensor([False, False, True]).view(1, 3, 1)
    truncated = torch.tensor([False, True, False]).view(1, 3, 1)
    obs = torch.zeros(1, 3, 4)
    batch = TensorDict(
        {
            "observation": obs,
            "next": {
                "observation": obs,
                "reward": r,
                "terminated": terminated,
                "truncated": truncated,
                "done": terminated | truncated,
            },
        },
        batch_size=[1, 3],
    )
    ours = batch.clone()
    _, reference = ppo_reference(algo, 0.2)
    reference(batch)
    gae(ours, algo.critic_net, 0.5, 0.5)
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        torch.testing.assert_close(ours[key], batch[key])
    # step 2 (terminated): delta = 3 - 1 = 2;                       A2 = 2
    # step 1 (truncated): delta = 2 + 0.5*1 - 1 = 1.5, trace cut;   A1 = 1.5
    # step 0: delta = 1 + 0.5*1 - 1 = 0.5; A0 = 0.5 + 0.5*0.5*A1 = 0.875
    expected = torch.tensor([0.875, 1.5, 2.0]).view(1, 3, 1)
    torch.testing.assert_close(batch["advantage"], expected)
    torch.testing.assert_close(batch["value_target"], expected + 1.0)


def test_learn_updates_the_policy_used_for_acting():
    algo, _ = _algo_and_batch("ppo-cartpole")
    config = algo.config
    env = make_env(config.env, seed=1)
    batch = BatchCollector(env, algo.act, steps=config.ppo.steps_per_env, seed=1).collect()
    before = [p.detach().clone() for p in algo.actor_net.parameters()]
    metrics = algo.learn(batch, frames=batch.numel())
    assert any(not torch.equal(a, b) for a, b in zip(before, algo.actor_net.parameters()))
    assert {
        "loss/objective",
        "loss/critic",
        "ppo/kl",
        "ppo/clip_fraction",
        "ppo/entropy",
        "opt/lr",
        "opt/grad_norm",
        "ppo/explained_variance",
    } <= set(metrics)
    assert algo.updates == config.ppo.epochs * config.ppo.minibatches_per_epoch(config.frames_per_batch)


def test_a_signal_before_the_first_update_ends_learn_without_updates():
    """SIGTERM while the batch was being collected (in-process, or on Ray actors): learn returns at once."""
    from rlpilot.common import stopping

    algo, _ = _algo_and_batch("ppo-cartpole")
    env = make_env(algo.config.env, seed=1)
    batch = BatchCollector(env, algo.act, steps=algo.config.ppo.steps_per_env, seed=1).collect()
    stopping.request("SIGTERM")
    try:
        metrics = algo.learn(batch, frames=batch.numel())
    finally:
        stopping.clear()
    assert algo.updates == 0 and metrics["opt/lr"] == algo.config.ppo.lr


def test_acting_state_carries_the_policy():
    """What collection actors receive (rlpilot.control.distributed): the acting network, loaded into another PPO."""
    algo, _ = _algo_and_batch("ppo-cartpole")
    other, _ = _algo_and_batch("ppo-cartpole", ["train.seed=1"])
    for p in other.actor_net.parameters():
        torch.nn.init.zeros_(p)
    other.load_acting_state(algo.acting_state())
    observation = torch.randn(5, 4)
    assert torch.equal(other.greedy_action(observation), algo.greedy_action(observation))


def test_linear_schedules_reach_zero_at_the_budget():
    config = load_config(
        "ppo-cartpole", overrides=["train.total_frames=512", "env.num_envs=8", "ppo.steps_per_env=32", "ppo.epochs=2"]
    )
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    collector = BatchCollector(env, algo.act, steps=32, seed=0)
    for i in range(config.num_batches):
        metrics = algo.learn(collector.collect(), frames=(i + 1) * 256)
    assert algo.updates == algo.num_updates() == config.ppo.num_updates(config.frames_per_batch, config.num_batches)
    assert metrics["opt/lr"] == pytest.approx(config.ppo.lr / algo.num_updates())
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(metrics["opt/lr"])


def test_greedy_continuous_action_is_inside_the_box():
    algo, minibatch = _algo_and_batch("ppo-pendulum")
    action = algo.greedy_action(minibatch["observation"] * 100)
    assert action.abs().max() <= 2.0
    sampled, extra = algo.act(minibatch["observation"])
    assert sampled.abs().max() <= 2.0 and torch.isfinite(extra[LOG_PROB_KEY]).all()


def test_fast_discrete_sampling_is_the_categorical_distribution():
    """act() samples with Gumbel-max on plain tensors: same distribution and log-probs as Categorical."""
    config = load_config("ppo-acrobot")
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    with torch.no_grad():
        algo.actor_net[-1].weight.normal_(0, 1.0)  # a policy far from uniform
    torch.manual_seed(0)
    observation = torch.randn(1, 6).expand(40_000, 6)
    action, extra = algo.act(observation)
    with torch.no_grad():
        reference = torch.distributions.Categorical(logits=algo.actor_net(observation[:1]))
        log_prob = reference.log_prob(action.clone())
    frequencies = torch.bincount(action, minlength=3).double() / len(action)
    assert frequencies.tolist() == pytest.approx(reference.probs[0].tolist(), abs=0.01)
    assert torch.allclose(extra[LOG_PROB_KEY], log_prob, atol=1e-6)


def test_gae_equals_torchrl_gae_on_a_collected_batch():
    config = load_config("ppo-cartpole", overrides=["env.num_envs=8", "ppo.steps_per_env=64"])
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    batch = BatchCollector(env, algo.act, steps=64, seed=0).collect()
    assert batch.get(("next", "done")).any()
    ours = batch.clone()
    _, reference = ppo_reference(algo, 0.2)
    with torch.no_grad():
        reference(batch)
        gae(ours, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        torch.testing.assert_close(ours[key], batch[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preset", ["ppo-cartpole", "ppo-pendulum"])
def test_the_actor_reads_only_its_inputs_and_the_critic_reads_all(preset):
    """model.actor_inputs (an asymmetric actor-critic): entries the actor does not read change its output not
    at all, and the critic's; the loss still equals TorchRL's over these networks."""
    algo, batch = _algo_and_batch(preset, ["model.actor_inputs=[-1, 0]"])
    observation = batch["observation"][:8]
    changed = observation.clone()
    changed[:, 1:-1] += 5.0  # every entry but the first and the last
    actor = (lambda o: algo.actor_net(o)[0]) if algo.kind == "continuous" else algo.actor_net
    with torch.no_grad():
        assert torch.equal(actor(observation), actor(changed))
        assert not torch.equal(algo.critic_net(observation), algo.critic_net(changed))
        swapped = observation[:, [-1, *range(1, observation.shape[1] - 1), 0]]  # first and last trade places
        assert not torch.equal(actor(observation), actor(swapped))  # the order is [-1, 0], as named
    reference, _ = ppo_reference(algo, clip_epsilon=0.2)
    torch.manual_seed(1)
    ours = ppo_loss(algo, batch.clone(), algo.config.ppo, 0.2)
    torch.manual_seed(1)
    theirs = reference(batch.clone())
    for key in ("loss_objective", "loss_critic"):
        torch.testing.assert_close(ours[key].float(), theirs[key].float(), rtol=1e-4, atol=1e-5, msg=key)


def test_actor_inputs_out_of_range_or_for_another_algo_is_one_line():
    from rlpilot.common.errors import UserError

    with pytest.raises(UserError, match=r"model.actor_inputs \[7\]: the observation has 4 entries"):
        _algo_and_batch("ppo-cartpole", ["model.actor_inputs=[0, 7]"])
    with pytest.raises(UserError, match="what PPO's actor reads"):
        load_config("sac-pendulum", overrides=["model.actor_inputs=[0]"])
    with pytest.raises(UserError, match="names an entry twice"):
        load_config("ppo-cartpole", overrides=["model.actor_inputs=[0, 0]"])


def test_a_behaviour_cloning_anchor_holds_the_actor_to_itself_at_the_first_update_and_survives_a_resume():
    """``ppo.anchor_coef``: the anchor is the actor as the run's first PPO update finds it (a resumed run's loaded
    actor); its loss is ``coef x mean |mu - mu_0|^2`` and its gradient pulls the mean back towards it; the anchor
    rides in the checkpoint, so a resumed refinement keeps the same one."""
    algo, flat = _algo_and_batch("ppo-pendulum", ["ppo.anchor_coef=2.0", "train.compile=off"])
    config = algo.config
    env = make_env(config.env, seed=1)
    batch = BatchCollector(env, algo.act, steps=config.ppo.steps_per_env, seed=1).collect()
    start = {key: value.clone() for key, value in algo.actor_net.state_dict().items()}
    metrics = algo.learn(batch, frames=batch.numel())
    assert all(torch.equal(start[key], value) for key, value in algo.anchor_net.state_dict().items())
    assert metrics["ppo/anchor_distance"] > 0  # the actor moved off it during the updates
    minibatch = {key: flat.get(key)[:64] for key in ("observation", "action", "advantage", "value_target")}
    minibatch[LOG_PROB_KEY] = flat.get(LOG_PROB_KEY)[:64]
    params = [p for p in algo.actor_net.parameters() if p.requires_grad]
    torch.manual_seed(5)  # the entropy's sample
    total, out = algo.loss(minibatch, *algo.log_ratio_range(0.2))
    with_anchor = torch.autograd.grad(total, params, allow_unused=True)
    torch.manual_seed(5)
    plain = clipped_loss(algo, minibatch, *algo.log_ratio_range(0.2), cfg=config.ppo)
    plain = plain["loss_objective"] + plain["loss_critic"] + plain["loss_entropy"]
    mu0 = algo.anchor_net(minibatch["observation"])[0].detach()
    distance = (algo.actor_net(minibatch["observation"])[0] - mu0).pow(2).sum(-1).mean()
    torch.testing.assert_close(out["anchor_distance"], distance.detach())
    expected = torch.autograd.grad(plain + 2.0 * distance, params, allow_unused=True)
    for got, want in zip(with_anchor, expected):
        if want is not None:
            torch.testing.assert_close(got, want)
    resumed, _ = _algo_and_batch("ppo-pendulum", ["ppo.anchor_coef=2.0", "train.compile=off"])
    resumed.load_state_dict(algo.state_dict())
    assert resumed.anchor_set
    assert all(torch.equal(start[key], value) for key, value in resumed.anchor_net.state_dict().items())
    unanchored, _ = _algo_and_batch("ppo-pendulum")
    assert unanchored.anchor_net is None and "anchor" not in unanchored.state_dict()
