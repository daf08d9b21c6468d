"""Doctor rules for control runs (PPO, DQN on envs): rewards, replay buffer, actions, critics, exploration.

Thresholds and their reasoning are in docs/doctor.md.
"""

from __future__ import annotations

import math

import numpy as np

from rlpilot.common.findings import Finding
from rlpilot.doctor.common import (
    rule_loss_exploding,
    rule_no_progress,
    rule_nonfinite_metrics,
    rule_nonfinite_normalization,
    rule_nonfinite_observations,
    rule_nonfinite_rewards,
    rule_throughput,
)
from rlpilot.doctor.view import Rule, RunView, head, tail


def rule_loss_rising(v: RunView) -> list[Finding]:
    key = "loss/td" if v.config.algo == "dqn" else "loss/critic"  # DQN's TD loss; PPO's, SAC's, TD3's critics
    _, loss = v.present(key)
    if len(loss) < 8 or v.did_well:
        return []
    early, late = np.median(head(loss)), np.median(tail(loss))
    if late <= 10 * max(early, 1e-8) or late <= 1.0:
        return []
    return [
        Finding(
            rule="loss_rising",
            severity="warning",
            title=f"{key} rose tenfold over the run",
            evidence={"metric": key, "first_quarter_median": float(early), "last_quarter_median": float(late)},
            cause="value estimates are diverging (learning rate too high, or targets growing without bound)",
            fix=v.cmd_lower_lr(),
        )
    ]


def rule_rewards_zero(v: RunView) -> list[Finding]:
    _, std = v.present("train/reward_std")
    _, mean = v.present("train/reward_mean")
    # RewardScaling clamps its scale at 1e-6: a reward scaled by "0" arrives as 1e-6, hence 1e-4
    if len(std) < 2 or np.nanmax(std) > 0 or abs(mean[0]) >= 1e-4:
        return []
    scaled_away = v.config.env.reward_scale < 1e-3
    return [
        Finding(
            rule="rewards_zero",
            severity="error",
            title="the learner saw only zero rewards",
            evidence={"reward_mean": float(mean[0]), "reward_std_max": float(np.nanmax(std)), "batches": len(std)},
            cause="every reward the learner saw was 0"
            + (f": env.reward_scale is {v.config.env.reward_scale:g}" if scaled_away else ""),
            fix=v.cmd("env.reward_scale=1.0")
            if scaled_away
            else f"rlpilot check {v.config.env.id}  (the reward function returns 0)",
        )
    ]


def rule_rewards_constant(v: RunView) -> list[Finding]:
    _, std = v.present("train/reward_std")
    _, mean = v.present("train/reward_mean")
    _, lengths = v.present("train/episode_length")
    if len(std) < 2 or np.nanmax(std) > 0 or abs(mean[0]) < 1e-4 or v.did_well:
        return []
    if not len(lengths) or np.nanstd(lengths) > 0:
        return []
    return [
        Finding(
            rule="rewards_constant",
            severity="warning",
            title="rewards and episode lengths never varied",
            evidence={"reward": float(mean[0]), "episode_length": float(lengths[0])},
            cause="a constant reward with fixed-length episodes carries no learning signal",
            fix=f"rlpilot check {v.config.env.id}  (shape the reward)",
        )
    ]


def rule_horizon(v: RunView) -> list[Finding]:
    gamma = v.config.algo_config.gamma
    _, lengths = v.present("train/episode_length")
    if v.did_well or not len(lengths) or gamma >= 0.9:
        return []
    horizon = 1.0 / max(1e-6, 1.0 - gamma)
    mean_length = float(np.nanmean(lengths))
    if horizon >= 0.1 * mean_length:
        return []
    return [
        Finding(
            rule="horizon_too_short",
            severity="warning",
            title=f"gamma {gamma:g} looks {horizon:.3g} steps ahead; episodes last {mean_length:.0f}",
            evidence={
                f"{v.settings}.gamma": gamma,
                "effective_horizon_steps": horizon,
                "mean_episode_length": mean_length,
            },
            cause="with a discount this low the learner ignores everything but the next reward or so",
            fix=v.cmd(f"{v.settings}.gamma=0.99"),
        )
    ]


def rule_buffer(v: RunView) -> list[Finding]:
    """DQN only: a buffer smaller than a batch (error), else learning before the buffer holds one (warning)."""
    if v.config.algo != "dqn":
        return []
    cfg = v.config.dqn
    if cfg.buffer_size < cfg.batch_size:
        return [
            Finding(
                rule="buffer_smaller_than_batch",
                severity="error",
                title="the replay buffer is smaller than a batch",
                evidence={"dqn.buffer_size": cfg.buffer_size, "dqn.batch_size": cfg.batch_size},
                cause="every minibatch samples the same few transitions again and again",
                fix=v.cmd(f"dqn.buffer_size={max(100_000, 100 * cfg.batch_size)}"),
            )
        ]
    if cfg.learning_starts < cfg.batch_size:
        return [
            Finding(
                rule="learning_before_buffer_filled",
                severity="warning",
                title="learning started before the buffer held a batch of transitions",
                evidence={"dqn.learning_starts": cfg.learning_starts, "dqn.batch_size": cfg.batch_size},
                cause="the first updates fit a handful of transitions repeatedly",
                fix=v.cmd(f"dqn.learning_starts={10 * cfg.batch_size}"),
            )
        ]
    return []


def rule_exploration(v: RunView) -> list[Finding]:
    """PPO: entropy that never falls, or that collapses early; DQN: epsilon that anneals past the budget."""
    if v.did_well:
        return []
    return _ppo_exploration(v) if v.is_ppo else _dqn_exploration(v)


def _ppo_exploration(v: RunView) -> list[Finding]:
    _, entropy = v.present("ppo/entropy")
    action = v.meta.get("env_facts", {}).get("action", {})
    if len(entropy) < 4 or action.get("type") != "discrete":
        return []
    late, maximum = float(np.median(tail(entropy))), math.log(action["n"])
    evidence = {"entropy_last_quarter": late, "max_entropy": maximum}
    if late >= 0.9 * maximum and v.config.ppo.entropy_coef > 0:
        return [
            Finding(
                rule="exploration_not_decaying",
                severity="warning",
                title="the policy stayed (almost) uniformly random",
                evidence={**evidence, "ppo.entropy_coef": v.config.ppo.entropy_coef},
                cause="the entropy bonus outweighs the return signal, so the policy never commits",
                fix=v.cmd("ppo.entropy_coef=0.0"),
            )
        ]
    if late < 0.05 * maximum and len(v.evals) and v.evals[-1] < _half_way(v):
        return [
            Finding(
                rule="exploration_collapsed",
                severity="warning",
                title="the policy became deterministic while returns were still low",
                evidence={**evidence, "last_eval": float(v.evals[-1])},
                cause="premature convergence: too large steps or no entropy bonus",
                fix=v.cmd("ppo.entropy_coef=0.01"),
            )
        ]
    return []


def _half_way(v: RunView) -> float:
    """Half way from the first evaluation to the threshold (-inf without either)."""
    evals = v.evals
    if v.threshold is None or not len(evals):
        return -math.inf
    return float(evals[0] + 0.5 * (v.threshold - evals[0]))


def _dqn_exploration(v: RunView) -> list[Finding]:
    frames, eps = v.present("explore/epsilon")
    floor = v.config.dqn.eps_end
    if not len(eps) or eps[-1] <= floor + 1e-6 or frames[-1] < 0.5 * v.budget:
        return []
    return [
        Finding(
            rule="exploration_not_decaying",
            severity="warning",
            title="epsilon had not reached its floor by half the budget",
            evidence={"epsilon_last": float(eps[-1]), "dqn.eps_end": floor},
            cause="dqn.exploration_fraction is too large for the budget",
            fix=v.cmd("dqn.exploration_fraction=0.1"),
        )
    ]


def rule_ppo_steps(v: RunView) -> list[Finding]:
    if not v.is_ppo or v.did_well:
        return []
    _, kl = v.present("ppo/kl")
    _, clip = v.present("ppo/clip_fraction")
    if not len(kl):
        return []
    kl_med, kl_max = float(np.median(np.abs(kl))), float(np.max(np.abs(kl)))
    clip_med = float(np.median(clip)) if len(clip) else 0.0
    if kl_med <= 0.05 and clip_med <= 0.3 and kl_max <= 0.5:
        return []
    return [
        Finding(
            rule="ppo_steps_too_large",
            severity="warning",
            title="PPO updates move the policy too far",
            evidence={
                "median_approx_kl": kl_med,
                "max_approx_kl": kl_max,
                "median_clip_fraction": clip_med,
                "ppo.lr": v.config.ppo.lr,
            },
            cause="the learning rate (or epochs per batch) is too high: most samples hit the clip",
            fix=v.cmd_lower_lr(),
        )
    ]


def rule_value_dominates(v: RunView) -> list[Finding]:
    if not v.is_ppo or v.did_well:
        return []
    _, critic = v.present("loss/critic")
    _, objective = v.present("loss/objective")
    _, grad = v.present("opt/grad_norm")
    if not len(critic) or not len(objective) or not len(grad):
        return []
    ratio = float(np.median(critic) / max(np.median(np.abs(objective)), 1e-8))
    clipped = float(np.mean(grad > 5 * v.config.ppo.max_grad_norm))
    if ratio <= 1000 or clipped <= 0.5:
        return []
    return [
        Finding(
            rule="value_loss_dominates",
            severity="info",
            title="the value loss dwarfs the policy loss",
            evidence={"critic_to_policy_loss": ratio, "share_of_batches_clipped_5x": clipped},
            cause="large returns make value gradients dominate the shared gradient clip, shrinking policy steps",
            fix=v.cmd("env.reward_scale=0.1"),
        )
    ]


def rule_explained_variance(v: RunView) -> list[Finding]:
    if not v.is_ppo or v.did_well:
        return []
    _, explained = v.present("ppo/explained_variance")
    late = tail(explained)
    if len(late) < 2 or np.median(late) >= 0:
        return []
    return [
        Finding(
            rule="explained_variance_negative",
            severity="warning",
            title="the critic predicts returns worse than a constant",
            evidence={"median_explained_variance_last_quarter": float(np.median(late))},
            cause="value targets are too noisy or badly scaled for the critic",
            fix=v.cmd("env.reward_scale=0.1", "ppo.value_coef=1.0"),
        )
    ]


def rule_lr_schedule(v: RunView) -> list[Finding]:
    frames, lr = v.present("opt/lr")
    if not v.is_ppo or v.did_well or not len(lr) or v.config.ppo.lr_schedule == "constant":
        return []
    dead = frames[lr <= 1e-3 * v.config.ppo.lr]
    if not len(dead) or dead[0] >= 0.9 * v.budget or frames[-1] <= dead[0]:
        return []
    return [
        Finding(
            rule="lr_zero_before_budget",
            severity="warning",
            title="the learning rate reached zero long before the budget",
            evidence={
                "lr_zero_at_frames": int(dead[0]),
                "budget_frames": v.budget,
                "ppo.lr_schedule_fraction": v.config.ppo.lr_schedule_fraction,
            },
            cause="every frame after that point is collected but nothing is learned from it",
            fix=v.cmd("ppo.lr_schedule_fraction=1.0"),
        )
    ]


def rule_identical_actions(v: RunView) -> list[Finding]:
    evals = [event for event in v.events_of("eval") if event.get("actions_seen") is not None]
    action = v.meta.get("env_facts", {}).get("action", {})
    if len(evals) < 2 or action.get("type") != "discrete" or action.get("n", 1) < 2 or v.did_well:
        return []
    last = evals[-3:]
    if any(event["actions_seen"] != 1 for event in last):
        return []
    evidence = {
        "actions_seen": [event["actions_seen"] for event in last],
        "actions_available": action["n"],
        "frames": [event.get("frames") for event in last],
    }
    if _one_hot_mismatch(v):
        evidence.update({"env.action_encoding": "one_hot", "ppo.distribution": "categorical"})
        cause = (
            "a Categorical distribution over a OneHot action spec: each sampled index is decoded as a one-hot "
            "vector of length 1, so every action reaches the env as action 0"
        )
        fix = v.cmd("ppo.distribution=auto")
    else:
        cause = (
            "the policy ignores its input: a distribution that does not match the action spec (e.g. Categorical "
            "over a OneHot spec sends action 0), or a collapsed network"
        )
        fix = f"rlpilot check {v.config.env.id}  (then retrain: {v.cmd()})"
    return [
        Finding(
            rule="actions_identical",
            severity="error",
            title="every greedy action reaching the env was the same over the last evaluations",
            evidence=evidence,
            cause=cause,
            fix=fix,
        )
    ]


def _one_hot_mismatch(v: RunView) -> bool:
    """PPO forced to a Categorical distribution over one-hot actions: the classic silent bug."""
    return v.is_ppo and v.config.env.action_encoding == "one_hot" and v.config.ppo.distribution == "categorical"


def rule_truncation(v: RunView) -> list[Finding]:
    limit = v.meta.get("env_facts", {}).get("max_episode_steps")
    _, lengths = v.present("train/episode_length")
    if not limit or len(lengths) < 4 or np.any(np.abs(lengths - limit) >= 0.5):
        return []
    return [
        Finding(
            rule="always_truncated",
            severity="info",
            title="every training episode ended at the time limit",
            evidence={"episode_length": float(lengths[0]), "max_episode_steps": limit},
            cause="episodes are cut by the time limit, never terminated: the learner must bootstrap at the cut "
            "(rlpilot does: GAE and TD targets bootstrap on truncation, not on termination)",
            fix="nothing to change; see docs/pitfalls.md (truncation is not termination)",
        )
    ]


COLLECTION_BOUND_SHARE = 0.5
"""Median ``collect/wait_share`` at or above which collection, not learning, bounds a run on Ray actors."""
LEARNING_BOUND_SHARE = 0.1
"""Median ``collect/wait_share`` at or below which more actors would not help (the learner is the bound)."""


def rule_collection_bound(v: RunView) -> list[Finding]:
    """A run on Ray actors (docs/distributed.md): which side bounds it, from the learner's share of time waiting."""
    _, share = v.present("collect/wait_share")
    if len(share) < 4:
        return []
    workers, wait = v.config.collect.workers, float(np.median(tail(share)))
    _, total = v.present("collect/fps")
    _, actor = v.present("collect/actor_fps")
    evidence = {
        "wait_share_last_quarter_median": wait,
        "workers": workers,
        "fps_median": float(np.median(tail(total))) if len(total) else None,
        "actor_fps_median": float(np.median(tail(actor))) if len(actor) else None,
    }
    more = workers * 2
    if wait >= COLLECTION_BOUND_SHARE:
        return [
            Finding(
                rule="collection_bound",
                severity="info",
                title=f"collection bounds this run: the learner waited for data {wait:.0%} of the time",
                evidence=evidence,
                cause="the envs on the actors deliver frames slower than the learner uses them",
                fix=v.cmd(f"collect.workers={more}", f"env.num_envs={more * v.config.env.num_envs // workers}")
                + " --ray ADDRESS  (more actors on more CPUs)",
            )
        ]
    if wait <= LEARNING_BOUND_SHARE and workers > 1:
        return [
            Finding(
                rule="learning_bound",
                severity="info",
                title=f"learning bounds this run: the learner waited for data only {wait:.0%} of the time",
                evidence=evidence,
                cause="the learner's updates take longer than the actors' collection: more actors would not help",
                fix="fewer actors (collect.workers) cost nothing here; a faster learner (train.device=cuda) would help",
            )
        ]
    return []


RULES: list[Rule] = [
    rule_nonfinite_rewards,
    rule_nonfinite_observations,
    rule_nonfinite_normalization,
    rule_loss_exploding,
    rule_nonfinite_metrics,
    rule_rewards_zero,
    rule_rewards_constant,
    rule_buffer,
    rule_identical_actions,
    rule_loss_rising,
    rule_horizon,
    rule_exploration,
    rule_ppo_steps,
    rule_value_dominates,
    rule_explained_variance,
    rule_lr_schedule,
    rule_no_progress,
    rule_throughput,
    rule_truncation,
    rule_collection_bound,
]
"""Every rule a control run gets, in the order their findings are listed within a severity."""
