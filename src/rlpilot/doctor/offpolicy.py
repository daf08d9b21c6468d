"""Doctor rules for SAC and TD3 runs: temperature, critics against the returns, saturated actions.

They read the metrics ``rlpilot.control.algos.offpolicy`` logs (``sac/alpha``, ``sac/entropy``,
``q/mean``, ``loss/critic``, ``action/at_bound``) and the reward metrics every control run logs.
The yardstick for the critics is :func:`return_bound`; thresholds are documented where they are
defined below, and the real broken runs that show each rule are in docs/sac-td3.md. SAC and TD3 runs
get these and the control rules (:data:`RULES`).
"""

from __future__ import annotations

import math

import numpy as np

from rlpilot.common.findings import Finding
from rlpilot.doctor import control
from rlpilot.doctor.view import Rule, RunView, tail

ALPHA_COLLAPSED = 1e-4
"""``sac/alpha`` below this: the entropy term is gone (SAC has become a noisy DDPG). Healthy runs end at
1e-3 to 0.2 (Pendulum ~0.05); a target entropy out of reach drives log alpha down by ~lr per update,
so a collapse passes 1e-4 within ~10k updates."""
ALPHA_EXPLODED = 10.0
"""``sac/alpha`` above this (and 10x its first value): entropy outweighs any per-step reward of order 1."""
Q_OVER_BOUND = 3.0
"""``|q/mean|`` this many times :func:`return_bound`: the critic values what the rewards cannot pay."""
TD_ERROR_OVER_BOUND = 0.25
"""RMS TD error per critic above this share of :func:`return_bound`: healthy runs sit near 0.1-1% of it
(Pendulum: ~1.4 against ~1,000). Not higher: the guard skips updates whose loss passes
``guard.max_loss`` (1e6, an RMS TD error of ~700), so a blow-up past the bound itself is mostly
skipped rather than logged."""
MIN_ROWS = 3
"""Rows with a critic metric before the critic rules read them (Pendulum presets log every 1,000 frames)."""
AT_BOUND_SHARE = 0.9
"""Median share of greedy action components at a bound (``action/at_bound``) in the last quarter."""


def return_bound(v: RunView) -> tuple[float, dict[str, float]] | None:
    """The largest discounted return the observed rewards can pay, and its parts (evidence).

    Per-step reward magnitude ``R``: the largest ``|mean reward per step|`` seen in training, over the
    collected batches (``train/reward_mean``) and the finished episodes (``train/episode_return`` /
    ``train/episode_length``). SAC's soft Q also carries the entropy bonus ``alpha x entropy`` per
    step (largest seen). Truncated episodes bootstrap, so the critic's targets are infinite-horizon:
    an episode paying ``R`` every step for ever is worth ``R / (1 - gamma)``, and no discounted return
    of these rewards (as batch and episode means) is larger. ``q/mean`` is a minibatch mean, so it
    is compared with means. ``None`` without reward metrics.
    """
    _, reward = v.present("train/reward_mean")
    _, returns = v.present("train/episode_return")
    _, lengths = v.present("train/episode_length")
    per_step = list(np.abs(reward))
    if len(returns) == len(lengths):
        per_step += list(np.abs(returns / np.maximum(lengths, 1)))
    per_step = [x for x in per_step if math.isfinite(x)]
    if not per_step:
        return None
    _, alpha = v.present("sac/alpha")
    _, entropy = v.present("sac/entropy")
    bonus = alpha * np.abs(entropy) if len(alpha) == len(entropy) and len(alpha) else np.zeros(1)
    bonus = bonus[np.isfinite(bonus)]
    gamma = v.config.algo_config.gamma
    horizon = 1.0 / (1.0 - gamma) if gamma < 1 else float(v.meta.get("env_facts", {}).get("max_episode_steps") or 1000)
    reward_scale, entropy_bonus = float(max(per_step)), float(bonus.max()) if len(bonus) else 0.0
    bound = horizon * (reward_scale + entropy_bonus)
    return max(bound, 1e-6), {
        "reward_per_step_max_abs": reward_scale,
        "entropy_bonus_per_step_max": entropy_bonus,
        "horizon_steps": horizon,
        "discounted_return_bound": bound,
    }


def critic_fix(v: RunView) -> str:
    """What to change for a diverging critic: an undiscounted target or targets that do not lag first
    (each alone lets Q grow without bound), else the learning rate."""
    algo, cfg = v.config.algo, v.config.algo_config
    changes = ([f"{algo}.gamma=0.99"] if cfg.gamma > 0.999 else []) + ([f"{algo}.tau=0.005"] if cfg.tau > 0.1 else [])
    return v.cmd(*changes) if changes else v.cmd_lower_lr()


def rule_temperature(v: RunView) -> list[Finding]:
    """SAC: ``sac/alpha`` collapsed to ~0 or exploded (the temperature chases an unreachable entropy)."""
    _, alpha = v.present("sac/alpha")
    if v.config.algo != "sac" or len(alpha) < 4 or v.did_well:
        return []
    _, entropy = v.present("sac/entropy")
    cfg = v.config.sac
    evidence = {
        "alpha_first": float(alpha[0]),
        "alpha_last": float(alpha[-1]),
        "entropy_last": float(entropy[-1]) if len(entropy) else None,
        "sac.target_entropy": cfg.target_entropy,
        "sac.alpha_init": cfg.alpha_init,
    }
    fix_target = v.cmd("sac.target_entropy=auto", f"sac.alpha_init={max(cfg.alpha_init, 0.1):g}")
    fix = fix_target if cfg.target_entropy != "auto" or cfg.alpha_init < 0.01 else v.cmd_lower_lr()
    if alpha[-1] < ALPHA_COLLAPSED:
        return [
            Finding(
                rule="temperature_collapsed",
                severity="warning",
                title=f"the SAC temperature collapsed to {alpha[-1]:.2g}",
                evidence=evidence,
                cause="the policy's entropy stays above the target entropy, so alpha is driven to 0 and the "
                "policy stops exploring (a target entropy far below -dim(A), or a tiny alpha_init)",
                fix=fix,
            )
        ]
    if alpha[-1] > ALPHA_EXPLODED and alpha[-1] > 10 * alpha[0]:
        return [
            Finding(
                rule="temperature_exploding",
                severity="warning",
                title=f"the SAC temperature grew to {alpha[-1]:.3g}",
                evidence=evidence,
                cause="the policy cannot reach the target entropy (above what the Box allows), so alpha grows "
                "without bound and the entropy bonus drowns the reward: the policy stays random",
                fix=fix,
            )
        ]
    return []


def rule_q_diverging(v: RunView) -> list[Finding]:
    """The critics' mean Q far outside what the discounted training returns can be (:func:`return_bound`)."""
    _, q = v.present("q/mean")
    bounded = return_bound(v)
    if len(q) < MIN_ROWS or bounded is None or v.did_well:
        return []
    bound, parts = bounded
    late = float(np.median(tail(q)))
    if abs(late) <= Q_OVER_BOUND * bound:
        return []
    return [
        Finding(
            rule="q_diverging",
            severity="warning",
            title=f"the critics' mean Q ({late:.3g}) is {abs(late) / bound:.0f}x any discounted return of the rewards",
            evidence={"q_mean_last_quarter_median": late, **parts, "ratio": abs(late) / bound},
            cause="the critics bootstrap on their own overestimates and diverge (learning rate too high, "
            "targets moving too fast, or gamma too close to 1)",
            fix=critic_fix(v),
        )
    ]


def rule_critic_loss_blowup(v: RunView) -> list[Finding]:
    """RMS TD error per critic (``sqrt(loss/critic / 2)``) a quarter of the largest discounted return."""
    _, loss = v.present("loss/critic")
    bounded = return_bound(v)
    if len(loss) < MIN_ROWS or bounded is None or v.did_well:
        return []
    bound, parts = bounded
    td_rms = math.sqrt(max(float(np.median(tail(loss))), 0.0) / 2)  # the loss sums the two critics' MSEs
    if td_rms <= TD_ERROR_OVER_BOUND * bound:
        return []
    return [
        Finding(
            rule="critic_loss_blowup",
            severity="warning",
            title=f"the critics miss their targets by {td_rms:.3g} (RMS), {td_rms / bound:.0%} of the largest "
            "discounted return",
            evidence={
                "td_error_rms_last_quarter": td_rms,
                "loss_critic_last_quarter_median": td_rms**2 * 2,
                **parts,
                "ratio": td_rms / bound,
            },
            cause="the critic loss blew up: Q targets chase the critics' own growing errors (learning rate too "
            "high, targets moving too fast, gamma too close to 1, or rewards too large for the network: scale them)",
            fix=critic_fix(v),
        )
    ]


def rule_actions_at_bounds(v: RunView) -> list[Finding]:
    """Most greedy action components pinned within 1% of the Box's bounds (``action/at_bound``)."""
    _, share = v.present("action/at_bound")
    if len(share) < 4 or v.did_well:
        return []
    late = float(np.median(tail(share)))
    if late <= AT_BOUND_SHARE:
        return []
    algo = v.config.algo
    return [
        Finding(
            rule="actions_at_bounds",
            severity="warning",
            title=f"{late:.0%} of the greedy action components sit at a bound of the Box",
            evidence={"at_bound_share_last_quarter": late, f"{algo}.lr": v.config.algo_config.lr},
            cause="the actor's tanh saturated: its pre-tanh output ran far out (large steps, or a critic "
            "whose gradient always points outwards), and tanh's gradient there is ~0, so it cannot come back",
            fix=v.cmd_lower_lr(),
        )
    ]


OWN_RULES: list[Rule] = [rule_critic_loss_blowup, rule_q_diverging, rule_temperature, rule_actions_at_bounds]
RULES: list[Rule] = control.RULES + OWN_RULES
"""What a SAC or TD3 run gets: every control rule (those written for PPO or DQN return nothing), then these."""
