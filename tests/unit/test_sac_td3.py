"""SAC and TD3: the lean updates equal TorchRL's SACLoss / TD3Loss (values and gradients) on the same
minibatch with the same random draws; target entropy; greedy and warm-up actions in the Box;
checkpoints (replay buffer included) that continue identically."""

import io
import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import SACLoss, TD3Loss

from rlpilot.config import load_config
from rlpilot.control.algos import build
from rlpilot.control.collect import BatchCollector
from rlpilot.envs import make_env

CPU = torch.device("cpu")


def make_algo(algo: str, *overrides: str, env_id: str = "Pendulum-v1", num_envs: int = 2):
    config = load_config(
        algo=algo, env_id=env_id, overrides=["model.hidden_sizes=[32, 32]", "model.activation=relu", *overrides]
    )
    env = make_env(config.env, num_envs=num_envs, seed=0)
    return build(config, env, CPU), env


def minibatch(algo, size: int = 64) -> TensorDict:
    """Random transitions; some terminated (no bootstrap), some truncated (bootstrap)."""
    generator = torch.Generator().manual_seed(3)
    terminated = torch.rand(size, 1, generator=generator) < 0.25
    truncated = (torch.rand(size, 1, generator=generator) < 0.25) & ~terminated
    action = algo.low + (algo.high - algo.low) * torch.rand(size, algo.action_dim, generator=generator)
    return TensorDict(
        {
            "observation": torch.randn(size, algo.obs_dim, generator=generator),
            "action": action,
            "next": {
                "observation": torch.randn(size, algo.obs_dim, generator=generator),
                "reward": torch.randn(size, 1, generator=generator),
                "terminated": terminated,
                "truncated": truncated,
                "done": terminated | truncated,
            },
        },
        batch_size=[size],
    )


def perturb(module: nn.Module, scale: float = 0.05) -> None:
    """Targets that differ from the online nets, so a test catches one used in place of the other."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn_like(p))


class QInput(nn.Module):
    """One of the algorithm's critic MLPs as TorchRL's ``ValueOperator`` calls it: ``(obs, action)``."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([observation, action], -1))


def q_operator(net: nn.Module) -> ValueOperator:
    return ValueOperator(QInput(net), in_keys=["observation", "action"])


def twin_params(twin: nn.Module) -> TensorDict:
    """The two critics' parameters stacked as TorchRL's ``qvalue_network_params`` ([2, ...])."""
    return torch.stack([TensorDict.from_module(q_operator(net)).data for net in twin.nets])


def grads(module: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in module.parameters()]


def assert_twin_grads(ours: list[torch.Tensor], twin: nn.Module, reference: TensorDict) -> None:
    """Our critics' gradients (``grads(twin)``, net 0 then net 1) against TorchRL's ``[2, ...]`` ones."""
    names = [name for name, _ in twin.nets[0].named_parameters()]
    for i in range(2):
        for name, grad in zip(names, ours[i * len(names) : (i + 1) * len(names)]):
            assert_close(grad, reference[i][("module", "net", *name.split("."))])


def assert_close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)


# -- SAC ----------------------------------------------------------------------------------------
def sac_loss_over(sac) -> SACLoss:
    """TorchRL's SACLoss over the algorithm's own actor, critic architecture and current parameters."""
    actor = ProbabilisticActor(
        TensorDictModule(sac.actor, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": sac.low, "high": sac.high},
        return_log_prob=True,
    )
    loss = SACLoss(
        actor,
        q_operator(sac.critic.nets[0]),
        num_qvalue_nets=2,
        loss_function="l2",
        alpha_init=float(sac.alpha),
        action_spec=sac.action_spec,
        target_entropy="auto",
    )
    loss.make_value_estimator(gamma=sac.cfg.gamma)
    loss.qvalue_network_params.data.copy_(twin_params(sac.critic))
    loss.target_qvalue_network_params.data.copy_(twin_params(sac.target_critic))
    with torch.no_grad():
        loss.log_alpha.copy_(sac.temperature.log_alpha)
    return loss


def test_sac_update_equals_torchrl_sac_loss():
    sac, _ = make_algo("sac", "sac.alpha_init=0.3", "sac.gamma=0.9")
    perturb(sac.target_critic)
    sample = minibatch(sac)

    torch.manual_seed(7)  # both draw the next-state actions first, then the actor's actions
    loss, stats = sac.losses(sample)
    sac.optimizer.zero_grad()
    loss.backward()
    actor_grads, critic_grads = grads(sac.actor), grads(sac.critic)
    alpha_grad = sac.temperature.log_alpha.grad.clone()
    sac.optimizer.zero_grad(set_to_none=True)

    reference = sac_loss_over(sac)
    torch.manual_seed(7)
    out = reference(sample.clone())
    assert_close(stats["loss/critic"], out["loss_qvalue"].detach())
    assert_close(stats["loss/actor"], out["loss_actor"].detach())
    assert_close(stats["loss/alpha"], out["loss_alpha"].detach())
    assert_close(stats["sac/entropy"], out["entropy"])
    assert_close(sac.alpha, out["alpha"])
    assert float(reference.target_entropy) == sac.target_entropy == -1.0

    (out["loss_qvalue"] + out["loss_actor"] + out["loss_alpha"]).backward()
    # SACLoss holds the actor's own parameters, a [2, ...] copy of the critics' and its own log_alpha
    assert_twin_grads(critic_grads, sac.critic, reference.qvalue_network_params.grad)
    for ours, theirs in zip(actor_grads, grads(sac.actor)):
        assert_close(ours, theirs)
    assert_close(alpha_grad, reference.log_alpha.grad)


def test_sac_critic_loss_by_hand():
    """The bootstrap target with given next actions: truncated transitions bootstrap, terminated ones do not."""
    sac, _ = make_algo("sac", "sac.alpha_init=0.5", "sac.gamma=0.9")
    sample = minibatch(sac, size=8)
    next_action = sac.low + (sac.high - sac.low) * torch.rand(8, sac.action_dim)
    next_log_prob = torch.randn(8)
    with torch.no_grad():
        next_q = sac.target_critic(sample["next", "observation"], next_action)
        value = torch.minimum(next_q[0], next_q[1]) - 0.5 * next_log_prob
        target = sac.bootstrap_target(sample, value)
    reward = sample["next", "reward"].squeeze(-1)
    terminated = sample["next", "terminated"].squeeze(-1)
    for i in range(8):
        expected = reward[i] if terminated[i] else reward[i] + 0.9 * value[i]
        assert math.isclose(float(target[i]), float(expected), rel_tol=1e-6, abs_tol=1e-6)


def test_target_entropy_is_minus_action_dims():
    """``auto`` is -dim(A) of one env's action, whatever the number of envs (pytorch/rl #3291 had -1)."""
    sac, _ = make_algo("sac", env_id="LunarLanderContinuous-v3", num_envs=4)
    assert sac.action_dim == 2
    assert sac.target_entropy == -2.0
    sac, _ = make_algo("sac", "sac.target_entropy=-0.5")
    assert sac.target_entropy == -0.5


# -- TD3 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("actor_step", [True, False])
def test_td3_update_equals_torchrl_td3_loss(actor_step):
    td3, _ = make_algo("td3", "td3.gamma=0.9", "td3.target_noise=0.3", "td3.target_noise_clip=0.4")
    perturb(td3.target_critic)
    perturb(td3.target_actor)
    td3.updates = td3.cfg.policy_delay if actor_step else 1  # learn() counts the update before its losses
    sample = minibatch(td3)

    torch.manual_seed(7)  # the target-smoothing noise is the one random draw of both
    loss, stats = td3.losses(sample)
    td3.optimizer.zero_grad()
    loss.backward()
    critic_grads = grads(td3.critic)
    actor_grads = grads(td3.actor) if actor_step else None
    assert ("loss/actor" in stats) == actor_step
    if not actor_step:
        assert all(p.grad is None for p in td3.actor.parameters())
    td3.optimizer.zero_grad(set_to_none=True)

    half_width = float(td3.half_width)  # Pendulum: one action dim; TD3Loss takes scalar noise and clip
    reference = TD3Loss(
        TensorDictModule(td3.actor, in_keys=["observation"], out_keys=["action"]),
        q_operator(td3.critic.nets[0]),
        action_spec=td3.action_spec,
        num_qvalue_nets=2,
        policy_noise=td3.cfg.target_noise * half_width,
        noise_clip=td3.cfg.target_noise_clip * half_width,
        loss_function="l2",
    )
    reference.make_value_estimator(gamma=td3.cfg.gamma)
    reference.qvalue_network_params.data.copy_(twin_params(td3.critic))
    reference.target_qvalue_network_params.data.copy_(twin_params(td3.target_critic))
    target_actor = TensorDictModule(td3.target_actor, in_keys=["observation"], out_keys=["action"])
    reference.target_actor_network_params.data.copy_(TensorDict.from_module(target_actor).data)
    torch.manual_seed(7)
    out = reference(sample.clone())
    assert_close(stats["loss/critic"], out["loss_qvalue"].detach())
    out["loss_qvalue"].backward(retain_graph=True)
    assert_twin_grads(critic_grads, td3.critic, reference.qvalue_network_params.grad)
    if actor_step:
        assert_close(stats["loss/actor"], out["loss_actor"].detach())
        out["loss_actor"].backward()
        for ours, theirs in zip(actor_grads, grads(td3.actor)):
            assert_close(ours, theirs)


# -- both ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_greedy_action_inside_the_box(algo):
    agent, _ = make_algo(algo)
    with torch.no_grad():
        for p in agent.greedy_module.parameters():
            p.mul_(1e3)  # saturate tanh
    action = agent.greedy_action(100 * torch.randn(256, agent.obs_dim))
    assert action.shape == (256, agent.action_dim)
    assert bool(((action >= agent.low) & (action <= agent.high)).all())
    assert float(action.abs().max()) == pytest.approx(2.0)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_warm_up_actions_are_uniform_in_the_box(algo):
    agent, _ = make_algo(algo, f"{algo}.learning_starts=1000")
    torch.manual_seed(0)
    action, extra = agent.act(torch.randn(20_000, agent.obs_dim))
    assert extra == {}
    assert bool(((action >= -2.0) & (action <= 2.0)).all())
    # Uniform(-2, 2): mean 0, std 4 / sqrt(12), a tenth of the mass in each tenth of the range
    assert float(action.mean()) == pytest.approx(0.0, abs=0.03)
    assert float(action.std()) == pytest.approx(4 / math.sqrt(12), abs=0.02)
    counts = torch.histc(action, bins=10, min=-2.0, max=2.0)
    assert bool(((counts / 20_000 - 0.1).abs() < 0.01).all())
    agent.frames = 1000  # past the warm-up: the policy's own exploration, still in the Box
    observation = torch.randn(512, agent.obs_dim)
    torch.manual_seed(1)
    action, _ = agent.act(observation)
    assert bool(((action >= -2.0) & (action <= 2.0)).all())
    torch.manual_seed(1)
    with torch.no_grad():
        assert torch.equal(action, agent.explore(observation))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_warm_up_actions_held_for_warmup_hold_steps(algo):
    observation = torch.randn(4, 3)
    fresh, _ = make_algo(algo, f"{algo}.learning_starts=1000")
    steps = [fresh.act(observation)[0] for _ in range(3)]
    assert not torch.equal(steps[0], steps[1]) and not torch.equal(steps[1], steps[2])  # default: a new draw a step
    held, _ = make_algo(algo, f"{algo}.learning_starts=1000", f"{algo}.warmup_hold=3")
    steps = [held.act(observation)[0] for _ in range(7)]
    assert torch.equal(steps[0], steps[1]) and torch.equal(steps[1], steps[2])
    assert not torch.equal(steps[2], steps[3])  # a new draw every 3rd step, for every env at once
    assert torch.equal(steps[3], steps[5]) and not torch.equal(steps[5], steps[6])
    assert len({tuple(step[:, 0].tolist()) for step in steps}) == 3
    assert len(set(steps[0][:, 0].tolist())) == 4  # each env draws its own action
    # a checkpoint taken mid-hold resumes the same held actions (loaded as a resumed run loads it)
    saved = io.BytesIO()
    torch.save(held.state_dict(), saved)
    saved.seek(0)
    restored, _ = make_algo(algo, f"{algo}.learning_starts=1000", f"{algo}.warmup_hold=3")
    restored.load_state_dict(torch.load(saved, weights_only=True))
    assert torch.equal(restored.act(observation)[0], held.act(observation)[0])  # step 7: still step 6's draw
    assert torch.equal(restored.act(observation)[0], steps[6])


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_checkpoint_round_trip_continues_identically(algo):
    overrides = [f"{algo}.learning_starts=16", f"{algo}.steps_per_env=8", f"{algo}.batch_size=16"]
    agent, env = make_algo(algo, *overrides)
    collector = BatchCollector(env, agent.act, steps=8, seed=0)
    frames = 0
    for _ in range(3):
        batch = collector.collect()
        frames += batch.numel()
        agent.learn(batch, frames)
    assert agent.updates > 0
    saved = io.BytesIO()
    torch.save(agent.state_dict(), saved)
    saved.seek(0)
    state = torch.load(saved, weights_only=True)

    torch.manual_seed(123)  # a fresh agent with other initial weights and an empty buffer
    restored, _ = make_algo(algo, *overrides)
    restored.load_state_dict(state)
    assert len(restored.replay) == len(agent.replay) == frames
    next_batch = collector.collect()
    results = []
    for copy in (agent, restored):
        torch.manual_seed(5)
        metrics = copy.learn(next_batch.clone(), frames + next_batch.numel())
        torch.manual_seed(6)
        action, _ = copy.act(next_batch["observation"][:, 0])
        results.append((metrics, action, [p.detach().clone() for p in copy.parameters]))
    (metrics_a, action_a, params_a), (metrics_b, action_b, params_b) = results
    assert metrics_a == metrics_b
    assert torch.equal(action_a, action_b)
    for a, b in zip(params_a, params_b):
        assert torch.equal(a, b)


def transitions(rows: int, seed: int) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        {
            "observation": torch.randn(rows, 3, generator=g),
            "action": torch.rand(rows, 1, generator=g),
            ("next", "observation"): torch.randn(rows, 3, generator=g),
            ("next", "reward"): torch.randn(rows, 1, generator=g),
            ("next", "terminated"): torch.rand(rows, 1, generator=g) < 0.1,
            ("next", "done"): torch.rand(rows, 1, generator=g) < 0.2,
        },
        batch_size=[rows],
    )


def test_replay_is_torchrls_buffer_row_for_row_and_loads_its_checkpoints():
    """The plain-tensor replay (the hot path's) against TorchRL's TensorDictReplayBuffer + LazyTensorStorage +
    RandomSampler it replaced: the same rows written round robin (the capacity wraps), the same minibatches drawn
    from the same generator state, and a checkpoint of TorchRL's buffer loaded and continued."""
    from torchrl.data import LazyTensorStorage, RandomSampler, TensorDictReplayBuffer

    from rlpilot.control.algos.offpolicy import Replay
    from rlpilot.control.collect import TRANSITION_KEYS

    theirs = TensorDictReplayBuffer(storage=LazyTensorStorage(50), sampler=RandomSampler())
    ours = Replay(50, torch.device("cpu"))
    for step, rows in enumerate((1, 7, 30, 1, 25, 3)):  # 67 rows: the write wraps
        batch = transitions(rows, step)
        theirs.extend(batch.select(*TRANSITION_KEYS))
        ours.extend(batch)
        assert len(ours) == len(theirs)
    torch.manual_seed(3)
    expected = theirs.sample(64)
    torch.manual_seed(3)
    drawn = torch.cat(list(ours.minibatches(16, 4)))
    for key in TRANSITION_KEYS:
        assert torch.equal(drawn[key], expected[key])
    state = theirs.state_dict()
    state.pop("_sampler")
    resumed = Replay(50, torch.device("cpu"))
    resumed.load_state_dict(torch.load(io.BytesIO(_saved(state)), weights_only=True))
    assert resumed.state_dict()["_writer"] == ours.state_dict()["_writer"]
    for key, value in ours.state_dict()["_storage"]["_storage"].items():
        assert torch.equal(resumed.state_dict()["_storage"]["_storage"][key], value)
    assert torch.equal(ours.state_dict()["_storage"]["_storage"]["index"], state["_storage"]["_storage"]["index"])


def _saved(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def test_td3_sbx_variant_moves_targets_every_update_and_ascends_the_smaller_twin():
    """``td3.delay_targets=false`` (the default, SBX's) and ``td3.actor_q=min`` (SBX's TD3): targets move after a
    critic-only update too, and the actor's loss is ``-mean min_i Q_i(s, mu(s))``; ``delay_targets=true`` (the
    paper's) keeps them still until the actor's update."""
    algo, _ = make_algo("td3", "td3.delay_targets=false", "td3.actor_q=min")
    perturb(algo.critic)
    sample = minibatch(algo)
    observation = sample["observation"]
    with torch.no_grad():
        expected = -algo.critic(observation, algo.actor(observation)).min(0).values.mean()
        assert not torch.allclose(expected, -algo.critic(observation, algo.actor(observation))[0].mean())
    torch.testing.assert_close(algo.actor_loss(observation).detach(), expected)
    before = [p.clone() for p in algo.target_critic.parameters()]
    algo.updates = 1  # a critic-only update (policy_delay 2)
    assert not algo.actor_step()
    algo.after_step()
    assert any(not torch.equal(b, p) for b, p in zip(before, algo.target_critic.parameters()))
    delayed, _ = make_algo("td3", "td3.delay_targets=true")  # the paper's and SB3's schedule
    perturb(delayed.critic)
    before = [p.clone() for p in delayed.target_critic.parameters()]
    delayed.updates = 1
    delayed.after_step()
    assert all(torch.equal(b, p) for b, p in zip(before, delayed.target_critic.parameters()))


def test_lecun_init_is_flaxs_default():
    """``model.init=lecun``: every linear layer's weights truncated normal at 2 std with variance 1/fan-in (Flax's
    ``lecun_normal``), biases zero; the default stays orthogonal."""
    from rlpilot.control.models import mlp

    torch.manual_seed(0)
    config = load_config("sac-pendulum", overrides=["model.init=lecun", "model.hidden_sizes=[400, 300]"])
    layers = [m for m in mlp(300, 200, config.model) if isinstance(m, nn.Linear)]
    for layer in layers:
        fan_in = layer.weight.shape[1]
        assert torch.equal(layer.bias, torch.zeros_like(layer.bias))
        assert abs(layer.weight.var().item() * fan_in - 1.0) < 0.05
        assert layer.weight.abs().max().item() <= 2.0 / 0.87962566103423978 / fan_in**0.5 + 1e-6
    orthogonal = mlp(300, 200, load_config("sac-pendulum").model)[0].weight
    product = orthogonal @ orthogonal.T  # rows orthogonal, scaled by the hidden gain sqrt(2)
    torch.testing.assert_close(product, 2 * torch.eye(product.shape[0]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("envs,steps", [(1, 1), (2, 3)])
def test_warm_up_in_long_batches_trains_exactly_as_one_frame_batches(tmp_path, monkeypatch, envs, steps):
    """The random warm-up is collected in batches of up to WARMUP_BATCH_FRAMES frames (the loop's per-batch work
    was most of a warm-up frame's cost at the Zoo's one env and one step per batch), each a whole number of the
    run's batches: the same actions, replay, updates and evaluation frames, so the same weights, as a warm-up
    collected one run batch at a time."""
    from rlpilot.control.algos import offpolicy
    from rlpilot.loop.trainer import train

    overrides = [
        "model.hidden_sizes=[32, 32]",
        f"env.num_envs={envs}",
        f"td3.steps_per_env={steps}",
        "td3.learning_starts=300",
        "td3.batch_size=16",
        "train.total_frames=340",
        "train.eval_every_frames=100",
        "train.eval_episodes=2",
        "train.seed=3",
    ]
    results = {}
    for longest in (1, offpolicy.WARMUP_BATCH_FRAMES):
        monkeypatch.setattr(offpolicy, "WARMUP_BATCH_FRAMES", longest)
        config = load_config(algo="td3", env_id="Pendulum-v1", overrides=overrides)
        run = train(config, run_dir=tmp_path / f"warmup{longest}", show_progress=False)
        state = torch.load(run.path / "checkpoints" / "last.pt", weights_only=True)
        evals = [event["frames"] for event in run.events() if event["event"] == "eval"]
        results[longest] = (state, len(run.metrics()), evals)
    (one, one_rows, one_evals), (long, long_rows, long_evals) = results[1], results[offpolicy.WARMUP_BATCH_FRAMES]
    batch = envs * steps
    assert one_evals == long_evals and one["frames"] == long["frames"] == -(-340 // batch) * batch
    flat_one, flat_long = _tensors(one), _tensors(long)
    assert flat_one.keys() == flat_long.keys() and any("replay" in key or "buffer" in key for key in flat_one)
    differ = [key for key in flat_one if not torch.equal(flat_one[key], flat_long[key])]
    assert differ == []
    assert long_rows < one_rows  # fewer batches (and log rows) in the long-batch warm-up


def _tensors(state, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a nested checkpoint, keyed by its path."""
    if isinstance(state, torch.Tensor):
        return {prefix: state}
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else ()
    return {k: v for key, value in items for k, v in _tensors(value, f"{prefix}/{key}").items()}


def test_a_partly_filled_replay_saves_only_its_rows_and_resumes_the_same():
    """A checkpoint early in a run holds the rows written, not the preallocated capacity; loaded, the replay has
    its capacity back and draws and writes on as the one saved."""
    from rlpilot.control.algos.offpolicy import Replay

    ours = Replay(1000, torch.device("cpu"))
    for step, rows in enumerate((7, 30)):
        ours.extend(transitions(rows, step))
    state = torch.load(io.BytesIO(_saved(ours.state_dict())), weights_only=True)
    assert all(len(column) == 37 for column in state["_storage"]["_storage"].values())
    resumed = Replay(1000, torch.device("cpu"))
    resumed.load_state_dict(state)
    for replay in (ours, resumed):
        replay.extend(transitions(5, 9))
    assert len(resumed) == len(ours) == 42 and all(len(c) == 1000 for c in resumed.columns.values())
    torch.manual_seed(0)
    expected = ours.sample(64)
    torch.manual_seed(0)
    drawn = resumed.sample(64)
    assert all(torch.equal(drawn[key], expected[key]) for key in expected.keys(True, True))
