"""TorchRL's loss modules built over an rlpilot algorithm's own networks (the same Parameter objects):
the references rlpilot's plain-torch updates must equal (tests/unit/test_ppo.py, test_dqn.py) and the
baseline benchmarks/update_cost.py times them against. Never used at run time."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.data import Categorical
from torchrl.modules import OneHotCategorical, ProbabilisticActor, QValueModule, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss, DQNLoss
from torchrl.objectives.value import GAE

from rlpilot.control.algos.dqn import DQN
from rlpilot.control.algos.ppo import LOG_PROB_KEY, PPO


def ppo_reference(algo: PPO, clip_epsilon: float) -> tuple[ClipPPOLoss, GAE]:
    """TorchRL's ClipPPOLoss and GAE over the algorithm's own networks (the same Parameter objects)."""
    cfg = algo.config.ppo
    if algo.kind == "discrete":
        head = TensorDictModule(algo.actor_net, in_keys=["observation"], out_keys=["logits"])
        distribution, kwargs, params = (
            (OneHotCategorical if algo.one_hot else torch.distributions.Categorical),
            {},
            ["logits"],
        )
    else:
        head = TensorDictModule(algo.actor_net, in_keys=["observation"], out_keys=["loc", "scale"])
        distribution, params = TanhNormal, ["loc", "scale"]
        kwargs = {"low": algo.bounds[0], "high": algo.bounds[1]}
    actor = ProbabilisticActor(
        head, in_keys=params, distribution_class=distribution, distribution_kwargs=kwargs, return_log_prob=True
    )
    critic = ValueOperator(algo.critic_net, in_keys=["observation"])
    loss = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=clip_epsilon,
        entropy_bonus=True,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.value_coef,
        loss_critic_type=cfg.value_loss,
        normalize_advantage=cfg.normalize_advantage,
    )
    assert loss.tensor_keys.sample_log_prob == LOG_PROB_KEY
    return loss, GAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=critic)


def dqn_reference(algo: DQN) -> DQNLoss:
    """TorchRL's DQNLoss over the algorithm's online network, its target parameters copied from ours."""
    cfg = algo.config.dqn
    spec = Categorical(algo.num_actions)
    q_values = TensorDictModule(algo.q_net, in_keys=["observation"], out_keys=["action_value"])
    policy = TensorDictSequential(q_values, QValueModule(spec=spec, action_space="categorical"))
    loss = DQNLoss(
        policy,
        loss_function="smooth_l1" if cfg.loss == "huber" else "l2",
        delay_value=True,
        double_dqn=cfg.double_dqn,
        action_space=spec,
    )
    loss.make_value_estimator(gamma=cfg.gamma)
    with torch.no_grad():
        for name, parameter in algo.target_net.named_parameters():
            key = ("module", "0", "module", *name.split("."))
            loss.target_value_network_params[key].data.copy_(parameter)
    return loss
