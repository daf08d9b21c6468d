"""``train.compile``: every compiled update gives the eager update's values and gradients.

Each case builds a learner with ``train.compile=on`` and evaluates, on one minibatch from real collected
transitions, the compiled loss the learner trains with and the eager loss it replaces, over the same networks.
Randomness inside a loss (SAC's reparameterised actions, TD3's target smoothing, the squashed Gaussian's entropy
sample) is drawn from the same generator state on both sides (inductor's ``fallback_random``). Tolerances:
values within 1e-5 relative (+1e-6 absolute), gradients within 1e-4 relative (+1e-6 absolute): inductor reorders
float sums. Each case compiles (about 3-8 s on the 2-core machine); the TorchRL reference tests
(``tests/unit/test_ppo.py``, ``test_dqn.py``, ``test_sac_td3.py``) pin the eager losses, so the compiled ones meet
the references through these.
"""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor_config

from rlpilot.config import load_config
from rlpilot.control import compiled
from rlpilot.control.algos.dqn import DQN, dqn_loss, n_step_transitions
from rlpilot.control.algos.ppo import MINIBATCH_KEYS, PPO, gae, ppo_loss
from rlpilot.control.algos.sac import SAC
from rlpilot.control.algos.td3 import TD3
from rlpilot.control.collect import BatchCollector
from rlpilot.envs import make_env

VALUE_TOLERANCE = dict(rtol=1e-5, atol=1e-6)
GRADIENT_TOLERANCE = dict(rtol=1e-4, atol=1e-6)


@pytest.fixture(autouse=True)
def same_random_numbers_and_a_private_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    with inductor_config.patch(fallback_random=True):
        yield


def learner(preset: str, cls, *overrides: str):
    torch.manual_seed(0)
    config = load_config(preset, overrides=["train.compile=on", "model.hidden_sizes=[32, 32]", *overrides])
    env = make_env(config.env, seed=0)
    algo = cls(config, env, torch.device("cpu"))
    compiled_losses = [getattr(algo, name, None) for name in ("loss", "step_losses", "critic_loss", "actor_loss")]
    assert any(isinstance(fn, compiled.Compiled) for fn in compiled_losses), "train.compile=on compiled nothing"
    batch = BatchCollector.for_run(env, algo.act, config, seed=0).collect()
    return config, algo, batch


def values_and_gradients(loss_fn, parameters, seed: int = 1):
    torch.manual_seed(seed)
    out = loss_fn()
    total = out[0] if isinstance(out, tuple) else out
    gradients = torch.autograd.grad(total, parameters, allow_unused=True)
    return total.detach(), [torch.zeros(()) if g is None else g for g in gradients]


def assert_equal_updates(eager, compiled_fn, parameters) -> None:
    value, gradients = values_and_gradients(eager, parameters)
    value_c, gradients_c = values_and_gradients(compiled_fn, parameters)
    torch.testing.assert_close(value_c, value, **VALUE_TOLERANCE)
    for g_c, g in zip(gradients_c, gradients, strict=True):
        torch.testing.assert_close(g_c, g, **GRADIENT_TOLERANCE)


def test_dqn_compiled_update_equals_eager():
    config, algo, batch = learner("dqn-cartpole", DQN, "dqn.steps_per_env=64")
    sample = n_step_transitions(batch, 1, config.dqn.gamma).reshape(-1)[:32]
    assert_equal_updates(
        lambda: dqn_loss(algo.q_net, algo.target_net, sample, config.dqn)["loss"],
        lambda: algo.loss(sample)["loss"],
        algo.parameters,
    )


@pytest.mark.parametrize("actor_step", [False, True])
def test_td3_compiled_update_equals_eager(actor_step):
    config, algo, batch = learner("td3-pendulum", TD3, "td3.steps_per_env=32")
    algo.updates = 2 if actor_step else 1
    sample = batch.reshape(-1)

    def eager():
        loss, _ = algo._critic_loss(sample)
        return loss + algo._actor_loss(sample["observation"]) if actor_step else loss

    assert_equal_updates(eager, lambda: algo.step_losses(sample), algo.parameters)


def test_sac_compiled_update_equals_eager():
    config, algo, batch = learner("sac-pendulum", SAC, "sac.steps_per_env=32")
    sample = batch.reshape(-1)
    assert_equal_updates(lambda: algo.losses(sample), lambda: algo.step_losses(sample), algo.parameters)


@pytest.mark.parametrize("preset", ["ppo-cartpole", "ppo-pendulum"])
def test_ppo_compiled_update_equals_eager(preset):
    config, algo, batch = learner(preset, PPO)
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    flat = batch.reshape(-1)
    minibatch = {key: flat.get(key)[:64] for key in MINIBATCH_KEYS}

    def total(out):
        return out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]

    assert_equal_updates(
        lambda: total(ppo_loss(algo, minibatch, config.ppo, 0.2)),
        lambda: total(algo.loss(minibatch, *algo.log_ratio_range(0.2))),
        algo.parameters,
    )


def test_the_clip_schedule_does_not_recompile():
    """The clip range is an argument, not a constant of the graph: a new clip value reuses the compiled loss."""
    config, algo, batch = learner("ppo-cartpole", PPO)
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    flat = batch.reshape(-1)
    minibatch = {key: flat.get(key)[:64] for key in MINIBATCH_KEYS}
    torch._dynamo.utils.counters.clear()
    for clip in (0.2, 0.15, 0.1):
        algo.loss(minibatch, *algo.log_ratio_range(clip))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


def test_auto_is_eager_on_cpu_and_on_without_a_compiler_says_so(monkeypatch, capsys):
    cpu = torch.device("cpu")
    assert not compiled.wanted("auto", cpu)
    assert not compiled.wanted("off", cpu)
    assert compiled.wanted("on", cpu)
    monkeypatch.setenv("CXX", "no-such-c++-compiler")
    assert not compiled.wanted("on", cpu)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "C++ compiler" in lines[0] and "train.compile=off" in lines[0]


def test_yaml_booleans_read_as_the_setting():
    """``--set train.compile=off``: YAML 1.1 reads ``off`` as False; the setting still means off."""
    assert load_config("ppo-cartpole", overrides=["train.compile=off"]).train.compile == "off"
    assert load_config("ppo-cartpole", overrides=["train.compile=on"]).train.compile == "on"
